//! The truth of reqwest on hyper against raw-socket servers: a loop over
//! std::net's accept and read that answers, closes (FIN) or resets (RST) as
//! each test says, and counts the connections it accepted and the requests
//! it read. The clients are the examples' own (Reqwest::client,
//! reqwest_policy::send; ReqwestRetry::client). Every socket has a timeout,
//! every loop a bound; the tests wait on the server's events (a request
//! read, the client's close seen), never on sleeps.
//!
//!     cargo test --locked --test truth

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use ::reqwest_retry::RetryError;
use connaudit_kit_rust::kit::{self, Call, Kind, Policy};
use connaudit_kit_rust::reqwest_policy::{self, Reqwest, Retry};
use connaudit_kit_rust::reqwest_retry::{self, ReqwestRetry};

/// How long a server's socket waits for the client: past it, the test fails.
const WAIT: Duration = Duration::from_secs(5);

/// What the server does once it has read a request.
#[derive(Clone, Copy, Debug)]
enum Act {
    /// 200 with a body of 2 bytes, kept alive.
    Ok,
    /// 200 with Content-Length 100 and 10 bytes of it; then, once the test
    /// says go, 10 bytes more; then wait for the client's close.
    Long,
    /// Close (FIN) without answering.
    Fin,
    /// Reset (RST) without answering.
    Rst,
    /// 200 kept alive, then a FIN at once; then wait for the client's close.
    OkThenFin,
    /// Answer nothing; wait for the client's close.
    Hold,
    /// Answer what is not HTTP; wait for the client's close.
    Garbage,
}

/// What the server saw: per connection, the methods of the requests it read,
/// and whether the client closed it (EOF seen).
#[derive(Debug, Default, Clone)]
struct Seen {
    conns: Vec<Vec<String>>,
    client_closed: Vec<bool>,
}

impl Seen {
    fn requests(&self) -> usize {
        self.conns.iter().map(Vec::len).sum()
    }
}

/// An event of the server's: a request read (conn, index, method) or a
/// connection's end (conn, client closed).
#[derive(Debug)]
#[allow(dead_code)] // the method is shown when a test fails
enum Event {
    Read(usize, String),
    Closed(usize, bool),
}

/// A raw server: acts[i] is what it does with the i-th request it reads,
/// in order, whichever connection it comes on; it serves conns connections
/// one after another, then returns what it saw.
struct Raw {
    url: String,
    events: mpsc::Receiver<Event>,
    go: mpsc::Sender<()>,
    done: thread::JoinHandle<Seen>,
}

fn serve(acts: Vec<Act>, conns: usize) -> Raw {
    let l = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let url = format!("http://{}", l.local_addr().expect("addr"));
    let (tx, rx) = mpsc::channel();
    let (go, went) = mpsc::channel();
    let done = thread::spawn(move || {
        let mut seen = Seen::default();
        let mut next = 0;
        for c in 0..conns {
            let Ok((s, _)) = l.accept() else { break };
            s.set_read_timeout(Some(WAIT)).expect("timeout");
            seen.conns.push(vec![]);
            let closed = conn(s, c, &acts, &mut next, &mut seen, &tx, &went);
            seen.client_closed.push(closed);
            let _ = tx.send(Event::Closed(c, closed));
        }
        seen
    });
    Raw { url, events: rx, go, done }
}

/// Serves one connection; says whether the client closed it (EOF read).
fn conn(
    mut s: TcpStream,
    c: usize,
    acts: &[Act],
    next: &mut usize,
    seen: &mut Seen,
    tx: &mpsc::Sender<Event>,
    went: &mpsc::Receiver<()>,
) -> bool {
    let mut buf = Vec::new();
    for _ in 0..16 {
        let Some(method) = read_request(&mut s, &mut buf) else {
            return buf.is_empty() && eof(&mut s);
        };
        seen.conns[c].push(method.clone());
        let act = acts.get(*next).copied().unwrap_or(Act::Ok);
        *next += 1;
        let _ = tx.send(Event::Read(c, method));
        match act {
            Act::Ok => write(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"),
            Act::Long => {
                write(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nxxxxxxxxxx");
                if went.recv_timeout(WAIT).is_err() {
                    return false;
                }
                write(&mut s, &[b'x'; 10]);
                return eof(&mut s);
            }
            Act::Fin => {
                let _ = s.shutdown(Shutdown::Write);
                return eof(&mut s);
            }
            Act::Rst => {
                let _ = socket2::SockRef::from(&s).set_linger(Some(Duration::ZERO));
                return false;
            }
            Act::OkThenFin => {
                write(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                let _ = s.shutdown(Shutdown::Write);
                return eof(&mut s);
            }
            Act::Hold => return eof(&mut s),
            Act::Garbage => {
                write(&mut s, b"not HTTP at all\r\n\r\n");
                return eof(&mut s);
            }
        }
    }
    false
}

fn write(s: &mut TcpStream, b: &[u8]) {
    let _ = s.write_all(b);
}

/// Whether the client closes its side before WAIT (reads until EOF, at most
/// 64 KiB).
fn eof(s: &mut TcpStream) -> bool {
    let mut b = [0u8; 4096];
    for _ in 0..16 {
        match s.read(&mut b) {
            Ok(0) => return true,
            Ok(_) => continue,
            Err(e) => return e.kind() == std::io::ErrorKind::ConnectionReset,
        }
    }
    false
}

/// Reads one request (headers and a Content-Length body); its method, or
/// None at EOF or after WAIT.
fn read_request(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<String> {
    let mut b = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > 1 << 16 {
            return None;
        }
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_string();
    let len: usize = head
        .lines()
        .find_map(|l| {
            l.split_once(':')
                .filter(|(k, _)| k.eq_ignore_ascii_case("content-length"))
                .and_then(|(_, v)| v.trim().parse().ok())
        })
        .unwrap_or(0);
    while buf.len() < head_end + len {
        match s.read(&mut b) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&b[..n]),
        }
    }
    buf.drain(..head_end + len);
    head.split(' ').next().map(str::to_string)
}

/// The example's client for an HTTP/1.1 scenario with policy p, and a call
/// through it with its retry loop.
async fn call(client: &reqwest::Client, p: &Policy, method: &str, url: &str, read_bytes: Option<u64>) -> Result<(u16, u32), (Kind, u32)> {
    let sc_retry = Retry {
        max_retries: p.max_retries,
        delay: Duration::ZERO,
        total: None,
        statuses: p.retry_statuses.clone(),
        errors: p.retry_errors,
        replayable: true,
    };
    let c = Call {
        method: method.into(),
        url: url.into(),
        headers: Default::default(),
        body: if method == "POST" { "{}".into() } else { String::new() },
        read_bytes,
        key_per_attempt: None,
    };
    reqwest_policy::send(client.clone(), None, Arc::new(sc_retry), c)
        .await
        .map(|g| (g.status, g.attempts))
        .map_err(|e| (e.kind, e.attempts.unwrap_or(0)))
}

fn example(p: &Policy) -> reqwest::Client {
    Reqwest::new(None).client("http1", p).expect("client").0
}

/// Waits (bounded) for the server's next event.
#[track_caller]
fn next(r: &Raw) -> Event {
    match r.events.recv_timeout(WAIT * 2) {
        Ok(e) => e,
        Err(e) => panic!("no server event: {e}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fresh_connection_closed_before_response() {
    for (act, method) in [(Act::Fin, "GET"), (Act::Rst, "GET"), (Act::Fin, "POST")] {
        let srv = serve(vec![act], 2);
        let c = example(&Policy::default());
        let got = call(&c, &Policy::default(), method, &format!("{}/a", srv.url), None).await;
        drop(c);
        // hyper sends nothing again on a fresh connection: 1 request, 1
        // connection, the loss to the caller.
        assert_eq!(got, Err((Kind::Connection, 1)), "{act:?} {method}");
        drop(TcpStream::connect(srv.url.trim_start_matches("http://")));
        let seen = srv.done.join().expect("server");
        assert_eq!((seen.conns.len(), seen.requests()), (2, 1), "{act:?} {method}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kept_alive_connection_lost_after_the_request_is_read() {
    for (act, method) in [(Act::Fin, "GET"), (Act::Rst, "GET"), (Act::Fin, "POST"), (Act::Rst, "POST")] {
        let srv = serve(vec![Act::Ok, act], 2);
        let c = example(&Policy::default());
        let url = format!("{}/a", srv.url);
        assert_eq!(call(&c, &Policy::default(), "GET", &url, None).await, Ok((200, 1)));
        let got = call(&c, &Policy::default(), method, &url, None).await;
        // hyper's "connection closed before message completed" (FIN) or a
        // reset: neither a GET nor a POST is sent again once written.
        assert_eq!(got, Err((Kind::Connection, 1)), "{act:?} {method}");
        drop(c);
        drop(TcpStream::connect(srv.url.trim_start_matches("http://")));
        let seen = srv.done.join().expect("server");
        assert_eq!(seen.conns[0].len(), 2, "{act:?} {method}: {seen:?}");
        assert_eq!(seen.requests(), 2, "{act:?} {method}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fin_on_an_idle_connection_is_seen_before_reuse() {
    let srv = serve(vec![Act::OkThenFin, Act::Ok], 2);
    let c = example(&Policy::default());
    let url = format!("{}/a", srv.url);
    assert_eq!(call(&c, &Policy::default(), "GET", &url, None).await, Ok((200, 1)));
    // The server sent its FIN after the response: hyper's connection task
    // reads it while the connection is idle and closes its side, which the
    // server sees before the next request is sent.
    assert!(matches!(next(&srv), Event::Read(0, _)));
    match next(&srv) {
        Event::Closed(0, closed) => assert!(closed, "the client did not close the idle connection the server closed"),
        e => panic!("unexpected {e:?}"),
    }
    assert_eq!(call(&c, &Policy::default(), "GET", &url, None).await, Ok((200, 1)));
    drop(c);
    let seen = srv.done.join().expect("server");
    assert_eq!(seen.conns, vec![vec!["GET".to_string()], vec!["GET".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_left_unread_closes_its_connection() {
    let srv = serve(vec![Act::Long, Act::Ok], 2);
    let c = example(&Policy::default());
    let url = format!("{}/a", srv.url);
    assert_eq!(call(&c, &Policy::default(), "GET", &url, Some(10)).await, Ok((200, 1)));
    assert!(matches!(next(&srv), Event::Read(0, _)));
    // The response is dropped with 90 of its 100 bytes unread. While the
    // server sends nothing more the connection stays open (measured: no
    // close in 10 s); hyper closes it when it next reads from it, as the
    // body's next bytes arrive.
    srv.go.send(()).expect("go");
    match next(&srv) {
        Event::Closed(0, closed) => assert!(closed, "the response dropped unread did not close its connection"),
        e => panic!("unexpected {e:?}"),
    }
    assert_eq!(call(&c, &Policy::default(), "GET", &url, None).await, Ok((200, 1)));
    drop(c);
    let seen = srv.done.join().expect("server");
    assert_eq!((seen.conns.len(), seen.requests()), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_timeout_bounds_the_wait_for_the_headers() {
    let srv = serve(vec![Act::Hold], 1);
    let p = Policy {
        read_timeout_ms: 150.0,
        ..Policy::default()
    };
    let c = example(&p);
    let got = call(&c, &p, "GET", &format!("{}/a", srv.url), None).await;
    assert_eq!(got, Err((Kind::Timeout, 1)));
    // The timed-out connection is closed by the client.
    let seen = srv.done.join().expect("server");
    assert_eq!((seen.requests(), seen.client_closed.clone()), (1, vec![true]));
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pool_idle_timeout_closes_an_idle_connection() {
    let srv = serve(vec![Act::Ok], 1);
    // The term idle_timeout rests on this: pool_idle_timeout closes an idle
    // connection by itself (here 100 ms; the example keeps reqwest's 90 s).
    let c = reqwest::Client::builder()
        .no_proxy()
        .pool_idle_timeout(Duration::from_millis(100))
        .build()
        .expect("client");
    let r = c.get(format!("{}/a", srv.url)).send().await.expect("response");
    assert_eq!(r.bytes().await.expect("body").as_ref(), b"ok");
    assert!(matches!(next(&srv), Event::Read(0, _)));
    match next(&srv) {
        Event::Closed(0, closed) => assert!(closed, "the idle connection was not closed within {WAIT:?}"),
        e => panic!("unexpected {e:?}"),
    }
    drop(c);
    assert_eq!(srv.done.join().expect("server").requests(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_retry_sends_a_post_again_after_a_lost_connection() {
    // reqwest-retry's default strategy takes hyper's incomplete message (the
    // connection closed after the request was read) as transient, whatever
    // the method: the POST is read twice.
    let srv = serve(vec![Act::Fin, Act::Ok], 2);
    let (c, attempts) = ReqwestRetry::new(None).client(&Policy::default()).expect("client");
    let r = c.post(format!("{}/a", srv.url)).body("{}").send().await.expect("response");
    assert_eq!(r.status().as_u16(), 200);
    drop(r);
    drop(c);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);
    let seen = srv.done.join().expect("server");
    assert_eq!(seen.conns, vec![vec!["POST".to_string()], vec!["POST".to_string()]]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_retry_retries_a_500() {
    // Any 5xx is transient to reqwest-retry: a 500 is sent again.
    let l = TcpListener::bind("127.0.0.1:0").expect("listener");
    let url = format!("http://{}/a", l.local_addr().expect("addr"));
    let srv = thread::spawn(move || {
        let mut n = 0;
        if let Ok((mut s, _)) = l.accept() {
            s.set_read_timeout(Some(WAIT)).expect("timeout");
            let mut buf = Vec::new();
            for _ in 0..4 {
                if read_request(&mut s, &mut buf).is_none() {
                    break;
                }
                n += 1;
                let status = if n == 1 { "500 Internal Server Error" } else { "200 OK" };
                write(&mut s, format!("HTTP/1.1 {status}\r\nContent-Length: 2\r\n\r\nok").as_bytes());
            }
        }
        n
    });
    let (c, attempts) = ReqwestRetry::new(None).client(&Policy::default()).expect("client");
    let r = c.get(&url).send().await.expect("response");
    assert_eq!(r.status().as_u16(), 200);
    drop(r);
    drop(c);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 2);
    assert_eq!(srv.join().expect("server"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reqwest_retry_error_kind_is_reqwests() {
    // A response that is not HTTP is fatal to reqwest-retry's default
    // strategy: 1 attempt, and the error comes wrapped in RetryError::Error
    // (transparent: its source chain skips the reqwest error), as an HTTP/2
    // connection's loss does. Its kind is the reqwest column's for the same
    // fault, a connection error, and stays so wrapped after retries.
    let srv = serve(vec![Act::Garbage, Act::Garbage], 2);
    let plain = example(&Policy::default());
    let got = call(&plain, &Policy::default(), "GET", &format!("{}/a", srv.url), None).await;
    assert_eq!(got, Err((Kind::Connection, 1)), "reqwest's own kind");
    drop(plain);
    let (c, attempts) = ReqwestRetry::new(None).client(&Policy::default()).expect("client");
    let e = match c.get(format!("{}/a", srv.url)).send().await {
        Ok(r) => panic!("a response that is not HTTP answered {}", r.status()),
        Err(e) => e,
    };
    drop(c);
    assert_eq!(attempts.load(std::sync::atomic::Ordering::SeqCst), 1, "fatal: not retried");
    assert!(
        matches!(e, reqwest_middleware::Error::Middleware(_)),
        "wrapped by the middleware: {e:?}"
    );
    let got = reqwest_retry::error_of(&e, Some(1));
    assert_eq!(got.kind, Kind::Connection, "{}", got.message);
    let seen = srv.done.join().expect("server");
    assert_eq!(seen.requests(), 2);

    let reqwest_middleware::Error::Middleware(a) = e else {
        unreachable!()
    };
    let Some(RetryError::Error(reqwest_middleware::Error::Reqwest(r))) = a.downcast::<RetryError>().ok() else {
        panic!("not RetryError::Error(Reqwest)")
    };
    let retried = reqwest_middleware::Error::Middleware(RetryError::WithRetries { retries: 3, err: r.into() }.into());
    assert_eq!(reqwest_retry::error_of(&retried, Some(4)).kind, Kind::Connection);
    let other = reqwest_middleware::Error::Middleware(std::io::Error::from(std::io::ErrorKind::ConnectionReset).into());
    assert_eq!(reqwest_retry::error_of(&other, None).kind, Kind::Connection, "an I/O error's kind");
    let unknown = reqwest_middleware::Error::Middleware(std::io::Error::other("neither").into());
    assert_eq!(reqwest_retry::error_of(&unknown, None).kind, Kind::Other);
}

/// A server answering 200 (2 bytes, kept alive) to every request on every
/// connection, each on a thread of its own; accepts at most 64 connections,
/// and stops accepting once stop() connects. Counts the connections and the
/// requests.
struct Counting {
    url: String,
    addr: std::net::SocketAddr,
    stopped: Arc<std::sync::atomic::AtomicBool>,
    accepted: thread::JoinHandle<(usize, Vec<thread::JoinHandle<usize>>)>,
}

fn counting() -> Counting {
    let l = TcpListener::bind("127.0.0.1:0").expect("loopback listener");
    let addr = l.local_addr().expect("addr");
    let stopped = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = stopped.clone();
    let accepted = thread::spawn(move || {
        let mut conns = vec![];
        for _ in 0..64 {
            let Ok((mut s, _)) = l.accept() else { break };
            if stop.load(std::sync::atomic::Ordering::SeqCst) {
                break;
            }
            conns.push(thread::spawn(move || {
                s.set_read_timeout(Some(WAIT)).expect("timeout");
                let mut buf = Vec::new();
                let mut n = 0;
                for _ in 0..256 {
                    if read_request(&mut s, &mut buf).is_none() {
                        break;
                    }
                    n += 1;
                    write(&mut s, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
                }
                n
            }));
        }
        (conns.len(), conns)
    });
    Counting {
        url: format!("http://{addr}/a"),
        addr,
        stopped,
        accepted,
    }
}

impl Counting {
    /// The connections accepted and the requests read.
    fn stop(self) -> (usize, usize) {
        self.stopped.store(true, std::sync::atomic::Ordering::SeqCst);
        drop(TcpStream::connect(self.addr));
        let (n, conns) = self.accepted.join().expect("server");
        (n, conns.into_iter().map(|c| c.join().expect("connection")).sum())
    }
}

#[test]
fn back_to_back_calls_reuse_one_connection_on_the_kits_runtime() {
    // On the kit's runtime (one thread), hyper's return of a connection to
    // its pool runs before the next call looks for one: 50 calls, one after
    // another, on 1 connection, and no other started. (On two worker
    // threads under CPU load, 2 connections in 2 runs of 5.)
    let rt = kit::runtime().expect("the kit's runtime");
    let srv = counting();
    let url = srv.url.clone();
    rt.block_on(async move {
        let c = example(&Policy::default());
        for _ in 0..50 {
            assert_eq!(call(&c, &Policy::default(), "GET", &url, None).await, Ok((200, 1)));
        }
    });
    // The dropped client's tasks close its connections as the runtime ends.
    drop(rt);
    assert_eq!(srv.stop(), (1, 50), "(connections, requests)");
}
