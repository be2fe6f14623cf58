//! reqwest on hyper, configured from each scenario's policy as closely as
//! reqwest allows:
//!
//! ```text
//! reqwest::Client::builder()
//!     .connect_timeout(max(connect, tls))   // a new connection's connect and TLS handshake
//!     .read_timeout(read)                   // each read: the headers' and each of the body's
//!     .pool_idle_timeout(90 s)              // reqwest's default, said as client.idle_timeout_ms
//!     .http2_keep_alive_interval(ping after).http2_keep_alive_timeout(ping timeout)
//!     .http1_only() for an HTTP/1.1 scenario, ALPN (h2, then http/1.1) for an h2 one
//!     .add_root_certificate(CONNAUDIT_CA)
//! RequestBuilder::timeout(attempt)          // each attempt, connect to the body's last byte
//! ```
//!
//! reqwest's own retry policy (`reqwest::retry`, in 0.12.23 and later) has no
//! delay between attempts and its `timeout` bounds all attempts as one, so the
//! policy's retries run in this adapter's own loop over `send`: at most
//! max_retries more attempts, delay_ms before each, the statuses of
//! retry_statuses and, when retry_errors, errors, for the methods the policy
//! lets be replayed; the loop under a `tokio::time::timeout` of
//! total_timeout_ms, its delays included. The loop counts the attempts it
//! makes. reqwest's default retry policy is left as it is (it sends a request
//! again on an HTTP/2 GOAWAY with NO_ERROR or a REFUSED_STREAM): the server's
//! count shows what it does.
//!
//! reqwest has no limit on the connections per host (pool_max_idle_per_host
//! bounds only the idle ones it keeps), so pool-acquire-timeout is not
//! configurable.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use crate::kit::{ms, read_body, Adapter, Call, CallError, CallFuture, Client, Got, Kind, Scenario};

/// reqwest's `pool_idle_timeout` default, kept: an idle connection is closed
/// after 90 s.
pub const POOL_IDLE_TIMEOUT: Duration = Duration::from_secs(90);

/// The policy-driven adapter.
pub struct Reqwest {
    ca: Option<crate::tls::Trust>,
}

impl Reqwest {
    /// An adapter trusting CONNAUDIT_CA; an unreadable CA is an error.
    pub fn from_env() -> Result<Reqwest, String> {
        Ok(Reqwest {
            ca: crate::tls::Trust::from_env()?,
        })
    }

    /// An adapter trusting ca.
    pub fn new(ca: Option<crate::tls::Trust>) -> Reqwest {
        Reqwest { ca }
    }

    /// The client for p over proto ("http1", "h2"), and its configuration as
    /// set, in reqwest's terms.
    pub fn client(&self, proto: &str, p: &crate::kit::Policy) -> Result<(reqwest::Client, String), String> {
        let mut b = reqwest::Client::builder().no_proxy().pool_idle_timeout(POOL_IDLE_TIMEOUT);
        let mut cfg = vec![format!("pool_idle_timeout({}s)", POOL_IDLE_TIMEOUT.as_secs())];
        if let Some(d) = ms(p.connect_timeout_ms.max(p.tls_timeout_ms)) {
            b = b.connect_timeout(d);
            cfg.push(format!("connect_timeout({d:?})"));
        }
        if let Some(d) = ms(p.read_timeout_ms) {
            b = b.read_timeout(d);
            cfg.push(format!("read_timeout({d:?})"));
        }
        if proto == "http1" {
            b = b.http1_only();
            cfg.push("http1_only()".into());
        }
        if let (Some(every), Some(wait)) = (ms(p.send_ping_timeout_ms), ms(p.ping_timeout_ms)) {
            b = b
                .http2_keep_alive_interval(every)
                .http2_keep_alive_timeout(wait)
                .http2_keep_alive_while_idle(true);
            cfg.push(format!(
                "http2_keep_alive_interval({every:?}), http2_keep_alive_timeout({wait:?}), http2_keep_alive_while_idle(true)"
            ));
        }
        if let Some(ca) = &self.ca {
            b = b.add_root_certificate(ca.certificate()?);
            cfg.push("add_root_certificate(CONNAUDIT_CA)".into());
        }
        let c = b
            .build()
            .map_err(|e| format!("reqwest::ClientBuilder::build: {}", crate::kit::message_of(&e)))?;
        Ok((c, cfg.join(", ")))
    }
}

impl Adapter for Reqwest {
    fn name(&self) -> String {
        "reqwest".into()
    }
    fn version(&self) -> String {
        format!(
            "{} (hyper {}, hyper-util {})",
            crate::REQWEST_VERSION,
            crate::HYPER_VERSION,
            crate::HYPER_UTIL_VERSION
        )
    }
    fn config(&self) -> String {
        "reqwest::Client::builder() from the policy (connect_timeout, read_timeout, RequestBuilder::timeout per attempt), the kit's retry loop".into()
    }
    fn protocols(&self) -> Vec<String> {
        vec!["http1".into(), "h2".into()]
    }
    fn idle_timeout_ms(&self) -> Option<f64> {
        Some(POOL_IDLE_TIMEOUT.as_millis() as f64)
    }
    fn terms(&self) -> Value {
        crate::terms("reqwest")
    }
    fn open(&self, sc: &Scenario) -> Result<Box<dyn Client>, String> {
        let p = &sc.policy;
        if p.pool_max_per_host > 0 || p.pool_acquire_timeout_ms > 0.0 {
            return Err(
                "reqwest has no limit on the connections per host: pool_max_idle_per_host(N) bounds only the idle \
                        connections it keeps, and a caller never waits for one"
                    .into(),
            );
        }
        let (client, mut cfg) = self.client(&sc.proto, p)?;
        let retry = Retry::of(sc);
        if let Some(d) = ms(p.attempt_timeout_ms) {
            cfg.push_str(&format!(", RequestBuilder::timeout({d:?}) per attempt"));
        }
        cfg.push_str(&format!("; {}", retry.said()));
        if p.send_ping_timeout_ms > 0.0 && p.ping_timeout_ms <= 0.0 {
            cfg.push_str("; no ping timeout given: no HTTP/2 keep-alive PING");
        }
        Ok(Box::new(PolicyClient {
            client,
            attempt: ms(p.attempt_timeout_ms),
            retry: Arc::new(retry),
            cfg,
        }))
    }
}

/// The policy's retries, as the kit's loop applies them.
#[derive(Debug, Clone)]
pub struct Retry {
    pub max_retries: u32,
    pub delay: Duration,
    pub total: Option<Duration>,
    pub statuses: Vec<u16>,
    pub errors: bool,
    /// Whether the scenario's request may be replayed.
    pub replayable: bool,
}

impl Retry {
    pub fn of(sc: &Scenario) -> Retry {
        let p = &sc.policy;
        let keyed = sc.request.key_per_attempt.is_some() || sc.request.headers.keys().any(|k| k.eq_ignore_ascii_case("idempotency-key"));
        let replayable = p.retry_any_method
            || p.retry_methods.iter().any(|m| m.eq_ignore_ascii_case(&sc.request.method))
            || (p.retry_with_idempotency_key && keyed);
        Retry {
            max_retries: p.max_retries.min(100),
            delay: ms(p.delay_ms).unwrap_or_default(),
            total: ms(p.total_timeout_ms),
            statuses: p.retry_statuses.clone(),
            errors: p.retry_errors,
            replayable,
        }
    }

    fn said(&self) -> String {
        if self.max_retries == 0 {
            return "no retries".into();
        }
        format!(
            "the kit's retry loop: {} retries, delay {:?}, statuses {:?}{}{}{}",
            self.max_retries,
            self.delay,
            self.statuses,
            if self.errors { ", errors" } else { "" },
            if self.replayable { "" } else { ", not this method" },
            self.total.map(|t| format!(", total {t:?}")).unwrap_or_default()
        )
    }
}

struct PolicyClient {
    client: reqwest::Client,
    attempt: Option<Duration>,
    retry: Arc<Retry>,
    cfg: String,
}

impl Client for PolicyClient {
    fn send(&self, call: Call) -> CallFuture {
        Box::pin(send(self.client.clone(), self.attempt, self.retry.clone(), call))
    }
    fn config(&self) -> String {
        self.cfg.clone()
    }
}

/// One attempt: the request, its body read, under the attempt's timeout.
pub async fn attempt(client: &reqwest::Client, timeout: Option<Duration>, call: &Call, n: u32) -> Result<u16, reqwest::Error> {
    let method = reqwest::Method::from_bytes(call.method.as_bytes()).unwrap_or(reqwest::Method::GET);
    let mut rb = client.request(method, &call.url);
    for (k, v) in &call.headers {
        rb = rb.header(k.as_str(), v.as_str());
    }
    if let Some(key) = &call.key_per_attempt {
        rb = rb.header("Idempotency-Key", format!("{key}-attempt-{n}"));
    }
    if !call.body.is_empty() {
        rb = rb.header("Content-Type", "application/json").body(call.body.clone());
    }
    if let Some(t) = timeout {
        rb = rb.timeout(t);
    }
    let resp = rb.send().await?;
    read_body(resp, call.read_bytes).await
}

/// The call: attempts as the policy retries them, under its total budget.
/// The scenario's method is checked by the kit before: a method reqwest
/// cannot send is an error of kind other.
pub async fn send(client: reqwest::Client, timeout: Option<Duration>, retry: Arc<Retry>, call: Call) -> Result<Got, CallError> {
    if reqwest::Method::from_bytes(call.method.as_bytes()).is_err() {
        return Err(CallError {
            kind: Kind::Other,
            message: format!("method {:?} is not a method", call.method),
            attempts: Some(0),
        });
    }
    let attempts = Arc::new(AtomicU32::new(0));
    let counted = attempts.clone();
    let total = retry.total;
    let looped = async move {
        loop {
            let n = counted.fetch_add(1, Ordering::SeqCst) + 1;
            let r = attempt(&client, timeout, &call, n).await;
            let again = n <= retry.max_retries
                && retry.replayable
                && match &r {
                    Ok(status) => retry.statuses.contains(status),
                    Err(_) => retry.errors,
                };
            if !again {
                return r.map(|status| Got { status, attempts: n }).map_err(|e| CallError::of(&e, Some(n)));
            }
            tokio::time::sleep(retry.delay).await;
        }
    };
    match total {
        None => looped.await,
        Some(total) => match tokio::time::timeout(total, looped).await {
            Ok(r) => r,
            Err(_) => {
                let n = attempts.load(Ordering::SeqCst);
                Err(CallError {
                    kind: Kind::Timeout,
                    message: format!("total_timeout_ms ({total:?}) spent after {n} attempts"),
                    attempts: Some(n),
                })
            }
        },
    }
}
