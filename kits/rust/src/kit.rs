//! The protocol `connaudit.serve/v1` and the scenarios' steps, once for every
//! client (docs/serve.md, docs/kits.md).
//!
//! A kit is thin: it speaks the protocol, configures the client under test
//! from each scenario's policy (through an [`Adapter`]), runs the scenario's
//! steps and reports what the caller got. The server judges.
//!
//! The control requests go through a `reqwest::Client` of the kit's own,
//! never the one under test. Every scenario runs on the one tokio runtime
//! the caller's `main` started ([`runtime`], one thread): a client dropped at
//! a scenario's end closes its connections in the runtime's tasks, which go
//! on running.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{json, Value};

/// The protocol this kit speaks.
pub const PROTOCOL: &str = "connaudit.serve/v1";

/// What a boxed call of a client returns.
pub type CallFuture = Pin<Box<dyn Future<Output = Result<Got, CallError>> + Send + 'static>>;

/// A scenario as the server hands it out. Fields the kit needs are required:
/// a scenario without them is a malformed answer, an error.
#[derive(Debug, Clone, Deserialize)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub proto: String,
    pub steps: String,
    pub url: String,
    pub ok_url: String,
    pub request: Request,
    pub policy: Policy,
    pub expect: Expect,
    #[serde(default)]
    pub guard_ms: f64,
    #[serde(default)]
    pub warm_url: Option<String>,
    #[serde(default)]
    pub warm_requests: Option<u32>,
    #[serde(default)]
    pub close_url: Option<String>,
    #[serde(default)]
    pub settle_url: Option<String>,
    #[serde(default)]
    pub entered_url: Option<String>,
    #[serde(default)]
    pub hold_url: Option<String>,
    #[serde(default)]
    pub read_bytes: Option<u64>,
}

/// The faulted request.
#[derive(Debug, Clone, Deserialize)]
pub struct Request {
    pub method: String,
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    #[serde(default)]
    pub body: String,
    #[serde(default)]
    pub key_per_attempt: Option<String>,
}

/// The whole client configuration in plain numbers (0: not set).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Policy {
    pub attempt_timeout_ms: f64,
    pub total_timeout_ms: f64,
    pub max_retries: u32,
    pub delay_ms: f64,
    pub retry_statuses: Vec<u16>,
    pub retry_errors: bool,
    pub retry_methods: Vec<String>,
    pub retry_with_idempotency_key: bool,
    pub retry_any_method: bool,
    pub connect_timeout_ms: f64,
    pub read_timeout_ms: f64,
    pub tls_timeout_ms: f64,
    pub pool_max_per_host: u32,
    pub pool_acquire_timeout_ms: f64,
    pub send_ping_timeout_ms: f64,
    pub ping_timeout_ms: f64,
}

/// What the catalogue's client is expected to give (shown to help; the kit
/// never judges).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct Expect {
    pub attempts: u32,
}

/// One call the kit asks of a client: the scenario's request, a warm-up's
/// GET or /ok's.
#[derive(Debug, Clone)]
pub struct Call {
    pub method: String,
    pub url: String,
    pub headers: BTreeMap<String, String>,
    pub body: String,
    /// Read this many bytes of the body, then drop the response.
    pub read_bytes: Option<u64>,
    /// Give every attempt a new Idempotency-Key, KEY-attempt-N.
    pub key_per_attempt: Option<String>,
}

impl Call {
    /// A GET of url with no header and no body.
    pub fn get(url: &str) -> Call {
        Call {
            method: "GET".into(),
            url: url.into(),
            headers: BTreeMap::new(),
            body: String::new(),
            read_bytes: None,
            key_per_attempt: None,
        }
    }
}

/// A response the caller got, its body read.
#[derive(Debug, Clone, PartialEq)]
pub struct Got {
    pub status: u16,
    /// The attempts the client's retry layer says it made.
    pub attempts: u32,
}

/// The kinds of error of the protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Timeout,
    Connection,
    Canceled,
    Pool,
    Other,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Timeout => "timeout",
            Kind::Connection => "connection",
            Kind::Canceled => "canceled",
            Kind::Pool => "pool",
            Kind::Other => "other",
        }
    }
}

/// An error the caller got, with the attempts the call made when known.
#[derive(Debug, Clone)]
pub struct CallError {
    pub kind: Kind,
    pub message: String,
    pub attempts: Option<u32>,
}

/// The kind of a reqwest error, by its type, never its text: any bound of
/// the client's is a timeout; a refused, reset or lost connection, a body cut
/// short or a reply that is not HTTP is a connection error.
pub fn kind_of(e: &reqwest::Error) -> Kind {
    if e.is_timeout() {
        Kind::Timeout
    } else if e.is_connect() || e.is_request() || e.is_body() || e.is_decode() {
        Kind::Connection
    } else {
        Kind::Other
    }
}

/// The error's text with its causes, as `a: b: c`.
pub fn message_of(e: &(dyn std::error::Error + 'static)) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    let mut n = 0;
    while let Some(c) = cause {
        if n == 8 {
            break;
        }
        let t = c.to_string();
        if !s.ends_with(&t) {
            s.push_str(": ");
            s.push_str(&t);
        }
        cause = c.source();
        n += 1;
    }
    s
}

impl CallError {
    /// A reqwest error as the caller got it, after attempts.
    pub fn of(e: &reqwest::Error, attempts: Option<u32>) -> CallError {
        CallError {
            kind: kind_of(e),
            message: message_of(e),
            attempts,
        }
    }
}

/// A client configured for one scenario (its own pool). Dropping it closes
/// its pool.
pub trait Client: Send + Sync {
    /// Sends call through the client and its retry layer, reading the body
    /// (read_bytes of it when given). The future owns what it needs: the kit
    /// may run it in a task and abort it (cancel-when-entered).
    fn send(&self, call: Call) -> CallFuture;
    /// How the client was configured for the scenario, in its own terms.
    fn config(&self) -> String;
}

/// A client the kit audits: who it is, and a new client for a scenario.
pub trait Adapter {
    fn name(&self) -> String;
    fn version(&self) -> String;
    fn config(&self) -> String;
    fn protocols(&self) -> Vec<String>;
    /// How long the client keeps an idle connection (client.idle_timeout_ms);
    /// None when unknown.
    fn idle_timeout_ms(&self) -> Option<f64>;
    /// What fixes each failure in the client's terms (client.terms).
    fn terms(&self) -> Value;
    /// A new client for sc's policy, or Err(why) when the client has no
    /// equivalent of a setting the scenario needs (not configurable).
    fn open(&self, sc: &Scenario) -> Result<Box<dyn Client>, String>;
}

/// An error of the kit's own: the control API refused a request, or
/// answered what is not the protocol.
#[derive(Debug)]
pub struct KitError(pub String);

impl std::fmt::Display for KitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for KitError {}

/// The kit: the control URL (which holds the server's key: never printed
/// by the kit but in the server's own error answers) and its own client.
pub struct Kit {
    url: String,
    ctl: reqwest::Client,
}

/// The control URL without its key, for messages: scheme and host only.
fn masked(url: &str) -> String {
    match url.find("/k/") {
        Some(i) => format!(
            "{}/k/…{}",
            &url[..i],
            url[i + 3..].find('/').map(|j| &url[i + 3 + j..]).unwrap_or("")
        ),
        None => url.to_string(),
    }
}

impl Kit {
    /// A kit on CONNAUDIT_URL.
    pub fn from_env() -> Result<Kit, KitError> {
        let url =
            std::env::var("CONNAUDIT_URL").map_err(|_| KitError("CONNAUDIT_URL is not set: run under connaudit serve -- CMD".into()))?;
        Kit::new(&url)
    }

    pub fn new(url: &str) -> Result<Kit, KitError> {
        let ctl = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|e| KitError(format!("the control client: {}", message_of(&e))))?;
        Ok(Kit {
            url: url.trim_end_matches('/').to_string(),
            ctl,
        })
    }

    /// A control request; a non-2xx answer or one that is not a JSON object
    /// is an error saying what the server said.
    pub async fn ctl(&self, method: &str, url: &str, body: Option<Value>) -> Result<Value, KitError> {
        let m = reqwest::Method::from_bytes(method.as_bytes()).map_err(|_| KitError(format!("bad method {method}")))?;
        let mut rb = self.ctl.request(m, url);
        if let Some(b) = body {
            rb = rb.header("Content-Type", "application/json").body(b.to_string());
        }
        let what = format!("{method} {}", masked(url));
        let resp = rb.send().await.map_err(|e| KitError(format!("{what}: {}", message_of(&e))))?;
        let status = resp.status();
        let text = resp.text().await.map_err(|e| KitError(format!("{what}: {}", message_of(&e))))?;
        if !status.is_success() {
            return Err(KitError(format!(
                "{what}: {} {}",
                status.as_u16(),
                text.chars().take(1024).collect::<String>()
            )));
        }
        let v: Value = if text.is_empty() {
            json!({})
        } else {
            serde_json::from_str(&text).map_err(|e| KitError(format!("{what}: not JSON: {e}")))?
        };
        if !v.is_object() {
            return Err(KitError(format!("{what}: not a JSON object")));
        }
        Ok(v)
    }

    /// Audits adapter's client on every scenario offered; returns the
    /// session's report (its "ok" says whether every verdict passed).
    pub async fn run(&self, adapter: &dyn Adapter) -> Result<Value, KitError> {
        let mut client = json!({"name": adapter.name(), "version": adapter.version(), "config": adapter.config()});
        if let Some(ms) = adapter.idle_timeout_ms() {
            client["idle_timeout_ms"] = json!(ms);
        }
        let terms = adapter.terms();
        if terms.as_object().is_some_and(|o| !o.is_empty()) {
            client["terms"] = terms;
        }
        let opened = self
            .ctl(
                "POST",
                &format!("{}/v1/sessions", self.url),
                Some(json!({
                    "protocol": PROTOCOL, "kit": "rust", "client": client, "protocols": adapter.protocols(),
                    "run": std::env::var("CONNAUDIT_RUN").unwrap_or_default(),
                    "skip": std::env::var("CONNAUDIT_SKIP").unwrap_or_default(),
                })),
            )
            .await?;
        let url_of = |k: &str| -> Result<String, KitError> {
            opened
                .get(k)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| KitError(format!("the session's answer has no {k}")))
        };
        let (scenarios_url, report_url, done_url) = (url_of("scenarios_url")?, url_of("report_url")?, url_of("done_url")?);
        let got = self.ctl("GET", &scenarios_url, None).await?;
        let list = got
            .get("scenarios")
            .cloned()
            .ok_or_else(|| KitError("the scenarios' answer has no scenarios".into()))?;
        let scenarios: Vec<Scenario> = serde_json::from_value(list).map_err(|e| KitError(format!("a malformed scenario: {e}")))?;
        for sc in &scenarios {
            let report = self.scenario(adapter, sc).await?;
            self.ctl("POST", &report_url, Some(report)).await?;
        }
        self.ctl("POST", &done_url, Some(json!({}))).await
    }

    /// Runs call through client and says what the caller got: the outcome,
    /// its elapsed ms, the attempts when known.
    async fn outcome(client: &dyn Client, call: Call) -> (Value, f64, Option<u32>) {
        let start = Instant::now();
        let r = client.send(call).await;
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        match r {
            Ok(g) => (json!({"status": g.status}), ms, Some(g.attempts)),
            Err(e) => (error_json(&e), ms, e.attempts),
        }
    }

    /// One scenario's report.
    async fn scenario(&self, adapter: &dyn Adapter, sc: &Scenario) -> Result<Value, KitError> {
        let client = match adapter.open(sc) {
            Ok(c) => c,
            Err(why) => return Ok(json!({"scenario": sc.name, "not_configurable": why, "elapsed_ms": 0})),
        };
        let request = Call {
            method: sc.request.method.clone(),
            url: sc.url.clone(),
            headers: sc.request.headers.clone(),
            body: sc.request.body.clone(),
            read_bytes: None,
            key_per_attempt: sc.request.key_per_attempt.clone(),
        };
        let mut failed = None;
        if matches!(sc.steps.as_str(), "warm-then-request" | "warm-close-then-request") {
            let n = sc.warm_requests.unwrap_or(1).clamp(1, 100);
            let warm = sc.warm_url.clone().unwrap_or_else(|| sc.url.clone());
            for i in 0..n {
                let (mut out, ms, attempts) = Self::outcome(client.as_ref(), Call::get(&warm)).await;
                if let Some(e) = out.get_mut("error") {
                    let m = format!("warm-up {} of {n}: {}", i + 1, e["message"].as_str().unwrap_or(""));
                    e["message"] = json!(m);
                    failed = Some((out, ms, attempts));
                    break;
                }
            }
        }
        let (out, ms, attempts) = if let Some(f) = failed {
            f
        } else {
            match sc.steps.as_str() {
                "request" | "warm-then-request" => Self::outcome(client.as_ref(), request).await,
                "warm-close-then-request" => {
                    let close = sc
                        .close_url
                        .as_deref()
                        .ok_or_else(|| KitError(format!("{}: no close_url", sc.name)))?;
                    self.ctl("POST", close, Some(json!({}))).await?;
                    Self::outcome(client.as_ref(), request).await
                }
                "read-then-close" => {
                    let n = sc.read_bytes.ok_or_else(|| KitError(format!("{}: no read_bytes", sc.name)))?;
                    Self::outcome(
                        client.as_ref(),
                        Call {
                            read_bytes: Some(n),
                            ..request
                        },
                    )
                    .await
                }
                "cancel-when-entered" => self.cancel(client.as_ref(), sc, request).await?,
                other => {
                    return Ok(json!({"scenario": sc.name, "skipped": format!("steps {other} unknown to the Rust kit"), "elapsed_ms": 0}));
                }
            }
        };
        if let Some(settle) = &sc.settle_url {
            self.ctl("POST", settle, Some(json!({}))).await?;
        }
        let (mut ok, ok_ms, _) = Self::outcome(client.as_ref(), Call::get(&sc.ok_url)).await;
        ok["elapsed_ms"] = json!(ok_ms);
        let mut rep = json!({"scenario": sc.name, "outcome": out, "elapsed_ms": ms, "ok": ok, "config": client.config()});
        if let Some(a) = attempts {
            rep["attempts"] = json!(a);
        }
        drop(client);
        Ok(rep)
    }

    /// cancel-when-entered: the call runs in a task of its own; once the
    /// server's handler is entered the task is aborted, which drops the
    /// call's future: that is how a Rust caller cancels (a timeout of its own,
    /// a select!, a dropped JoinHandle's abort).
    async fn cancel(&self, client: &dyn Client, sc: &Scenario, call: Call) -> Result<(Value, f64, Option<u32>), KitError> {
        let entered = sc
            .entered_url
            .as_deref()
            .ok_or_else(|| KitError(format!("{}: no entered_url", sc.name)))?;
        let start = Instant::now();
        let task = tokio::spawn(client.send(call));
        let waited = self.ctl("GET", entered, None).await;
        task.abort();
        let r = task.await;
        let ms = start.elapsed().as_secs_f64() * 1000.0;
        waited?;
        Ok(match r {
            Ok(Ok(g)) => (json!({"status": g.status}), ms, Some(g.attempts)),
            Ok(Err(e)) => (error_json(&e), ms, e.attempts),
            Err(j) if j.is_cancelled() => (
                json!({"error": {"kind": "canceled", "message": "the kit aborted the call's task (its future dropped)"}}),
                ms,
                None,
            ),
            Err(j) => (
                json!({"error": {"kind": "other", "message": format!("the call's task failed: {j}")}}),
                ms,
                None,
            ),
        })
    }
}

/// The kit's runtime: tokio's, on one thread. hyper returns an HTTP/1
/// connection to its pool in a task of its own once the response's end is
/// read, and a call that finds no idle connection starts a new one, racing
/// the return (hyper-util's `connection_for`, hyperium/hyper#4134). On
/// several threads nothing orders the kit's next call after that task: the
/// next call came on a second connection in 1 run of serve's
/// request-limit-silent in 14 to 25 (a warm-up, the faulted request or /ok
/// on a connection of its own), a verdict that flipped. On one thread the
/// return runs first: 0 in 400 (tests/truth.rs pins it, 50 calls on 1
/// connection).
pub fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread().enable_all().build()
}

fn error_json(e: &CallError) -> Value {
    json!({"error": {"kind": e.kind.as_str(), "message": e.message.chars().take(1024).collect::<String>()}})
}

/// The session's line, `connaudit kit: NAME: N passed, N failed, N not
/// configurable`, and whether the session is ok. A report without the
/// counts is an error.
pub fn summary(name: &str, report: &Value) -> Result<(String, bool), KitError> {
    let n = |k: &str| {
        report
            .get(k)
            .and_then(Value::as_u64)
            .ok_or_else(|| KitError(format!("the done answer has no {k}")))
    };
    let ok = report
        .get("ok")
        .and_then(Value::as_bool)
        .ok_or_else(|| KitError("the done answer has no ok".into()))?;
    Ok((
        format!(
            "connaudit kit: {name}: {} passed, {} failed, {} not configurable",
            n("passed")?,
            n("failed")?,
            n("not_configurable")?
        ),
        ok,
    ))
}

/// Milliseconds of a policy as a Duration; None for 0 (not set) or a value
/// that is not a finite positive number.
pub fn ms(v: f64) -> Option<Duration> {
    (v.is_finite() && v > 0.0).then(|| Duration::from_secs_f64(v / 1000.0))
}

/// Reads the response's body to its end, or read_bytes of it, then drops
/// the response (an unread rest closes its connection).
pub async fn read_body(mut resp: reqwest::Response, read_bytes: Option<u64>) -> Result<u16, reqwest::Error> {
    let status = resp.status().as_u16();
    let mut n: u64 = 0;
    while let Some(chunk) = resp.chunk().await? {
        n += chunk.len() as u64;
        if read_bytes.is_some_and(|want| n >= want) {
            break;
        }
    }
    Ok(status)
}
