//! reqwest as its users usually configure it: a `reqwest::Client` with the
//! scenario's bounds (`timeout` per request from attempt_timeout_ms,
//! `read_timeout`, `connect_timeout`; reqwest's defaults else: no timeout, a
//! 90 s pool idle timeout, ALPN), wrapped in reqwest-middleware with
//! reqwest-retry's `RetryTransientMiddleware` and
//! `ExponentialBackoff::builder().build_with_max_retries(3)`, as the crate's
//! README shows: its retries and its statuses are the middleware's
//! defaults, not the policy's, which is what the scenarios judge. Its delays
//! are the one change: no jitter, from 100 ms doubling to at most 1 s. The
//! default jitter draws each delay at random up to 1, 2 and 4 s, which put
//! h2/go-dark's call (four attempts) on either side of serve's guard from
//! run to run; fixed and short, a verdict is the same each run. CONNAUDIT_CA is added with `add_root_certificate`, and
//! `no_proxy()`, which a user on loopback needs. Without the bounds, every
//! scenario whose server stalls waits for the server's guard once per
//! attempt (4 of them, measured: over two minutes for
//! response-header-timeout alone).
//!
//! reqwest-retry's `DefaultRetryableStrategy` retries, whatever the method:
//! any 5xx, 408 and 429; a timeout, a connect error, and a request error
//! whose hyper cause is an incomplete message or a canceled request (a
//! connection lost before its response) or an I/O reset. The attempts are
//! counted by the strategy itself: it is asked once per attempt, so the
//! count is the retry layer's own.
//!
//! `Idempotency-Key` per attempt: the middleware sends a clone of the same
//! request, so W3 is not configurable.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use reqwest_middleware::{ClientBuilder, ClientWithMiddleware};
use reqwest_retry::policies::ExponentialBackoff;
use reqwest_retry::Jitter;
use reqwest_retry::{DefaultRetryableStrategy, RetryError, RetryTransientMiddleware, Retryable, RetryableStrategy};
use serde_json::Value;

use crate::kit::{message_of, read_body, Adapter, Call, CallError, CallFuture, Client, Got, Kind, Scenario};

/// The retries of the README's example.
pub const MAX_RETRIES: u32 = 3;
/// The shortest and longest delay between attempts (doubling, no jitter).
pub const MIN_DELAY: std::time::Duration = std::time::Duration::from_millis(100);
/// See [`MIN_DELAY`].
pub const MAX_DELAY: std::time::Duration = std::time::Duration::from_secs(1);

/// The usual configuration's adapter.
pub struct ReqwestRetry {
    ca: Option<crate::tls::Trust>,
}

impl ReqwestRetry {
    pub fn from_env() -> Result<ReqwestRetry, String> {
        Ok(ReqwestRetry {
            ca: crate::tls::Trust::from_env()?,
        })
    }

    pub fn new(ca: Option<crate::tls::Trust>) -> ReqwestRetry {
        ReqwestRetry { ca }
    }

    /// The client as usually configured, and the counter its strategy
    /// adds one to per attempt.
    pub fn client(&self, p: &crate::kit::Policy) -> Result<(ClientWithMiddleware, Arc<AtomicU32>), String> {
        let mut b = reqwest::Client::builder().no_proxy();
        if let Some(d) = crate::kit::ms(p.attempt_timeout_ms) {
            b = b.timeout(d);
        }
        if let Some(d) = crate::kit::ms(p.read_timeout_ms) {
            b = b.read_timeout(d);
        }
        if let Some(d) = crate::kit::ms(p.connect_timeout_ms.max(p.tls_timeout_ms)) {
            b = b.connect_timeout(d);
        }
        if let Some(ca) = &self.ca {
            b = b.add_root_certificate(ca.certificate()?);
        }
        let inner = b
            .build()
            .map_err(|e| format!("reqwest::ClientBuilder::build: {}", message_of(&e)))?;
        let attempts = Arc::new(AtomicU32::new(0));
        // Its delays fixed and short (see the module's doc): the same each run.
        let policy = ExponentialBackoff::builder()
            .retry_bounds(MIN_DELAY, MAX_DELAY)
            .jitter(Jitter::None)
            .build_with_max_retries(MAX_RETRIES);
        let strategy = Counting {
            attempts: attempts.clone(),
        };
        let c = ClientBuilder::new(inner)
            .with(RetryTransientMiddleware::new_with_policy_and_strategy(policy, strategy))
            .build();
        Ok((c, attempts))
    }
}

/// reqwest-retry's default strategy, counting the attempts it is asked
/// about.
struct Counting {
    attempts: Arc<AtomicU32>,
}

impl RetryableStrategy for Counting {
    fn handle(&self, res: &Result<reqwest::Response, reqwest_middleware::Error>) -> Option<Retryable> {
        self.attempts.fetch_add(1, Ordering::SeqCst);
        DefaultRetryableStrategy.handle(res)
    }
}

impl Adapter for ReqwestRetry {
    fn name(&self) -> String {
        "reqwest-retry".into()
    }
    fn version(&self) -> String {
        format!(
            "{} (reqwest {}, reqwest-middleware {})",
            crate::REQWEST_RETRY_VERSION,
            crate::REQWEST_VERSION,
            crate::REQWEST_MIDDLEWARE_VERSION
        )
    }
    fn config(&self) -> String {
        format!("reqwest::Client with the policy's bounds + RetryTransientMiddleware(ExponentialBackoff::builder().retry_bounds(100ms, 1s).jitter(None).build_with_max_retries({MAX_RETRIES}))")
    }
    fn protocols(&self) -> Vec<String> {
        vec!["http1".into(), "h2".into()]
    }
    fn idle_timeout_ms(&self) -> Option<f64> {
        Some(crate::reqwest_policy::POOL_IDLE_TIMEOUT.as_millis() as f64)
    }
    fn terms(&self) -> Value {
        crate::terms("reqwest-retry")
    }
    fn open(&self, sc: &Scenario) -> Result<Box<dyn Client>, String> {
        if sc.request.key_per_attempt.is_some() {
            return Err("RetryTransientMiddleware sends a clone of the same request: no new Idempotency-Key per attempt".into());
        }
        if sc.policy.pool_max_per_host > 0 || sc.policy.pool_acquire_timeout_ms > 0.0 {
            return Err(
                "reqwest has no limit on the connections per host: pool_max_idle_per_host(N) bounds only the idle \
                        connections it keeps, and a caller never waits for one"
                    .into(),
            );
        }
        let (client, attempts) = self.client(&sc.policy)?;
        let p = &sc.policy;
        let cfg = format!(
            "timeout {:?}, read_timeout {:?}, connect_timeout {:?}, RetryTransientMiddleware(ExponentialBackoff 100ms..1s, no jitter, max_retries {MAX_RETRIES})",
            crate::kit::ms(p.attempt_timeout_ms),
            crate::kit::ms(p.read_timeout_ms),
            crate::kit::ms(p.connect_timeout_ms.max(p.tls_timeout_ms))
        );
        Ok(Box::new(RetryClient { client, attempts, cfg }))
    }
}

struct RetryClient {
    client: ClientWithMiddleware,
    attempts: Arc<AtomicU32>,
    cfg: String,
}

impl Client for RetryClient {
    fn send(&self, call: Call) -> CallFuture {
        let client = self.client.clone();
        let attempts = self.attempts.clone();
        Box::pin(async move {
            attempts.store(0, Ordering::SeqCst);
            let method = reqwest::Method::from_bytes(call.method.as_bytes()).map_err(|_| CallError {
                kind: Kind::Other,
                message: format!("method {:?} is not a method", call.method),
                attempts: Some(0),
            })?;
            let mut rb = client.request(method, &call.url);
            for (k, v) in &call.headers {
                rb = rb.header(k.as_str(), v.as_str());
            }
            if !call.body.is_empty() {
                rb = rb.header("Content-Type", "application/json").body(call.body.clone());
            }
            let n = || Some(attempts.load(Ordering::SeqCst));
            let resp = match rb.send().await {
                Ok(r) => r,
                Err(e) => return Err(error_of(&e, n())),
            };
            let status = read_body(resp, call.read_bytes).await.map_err(|e| CallError::of(&e, n()))?;
            Ok(Got {
                status,
                attempts: n().unwrap_or(1),
            })
        })
    }
    fn config(&self) -> String {
        self.cfg.clone()
    }
}

/// A middleware error as the caller got it: its kind is the last attempt's
/// reqwest error's, as the `reqwest` column's. reqwest-retry wraps that
/// error in a `RetryError` inside `reqwest_middleware::Error::Middleware`
/// (an anyhow error): `WithRetries` after retries, `Error` when the first
/// attempt's error was fatal (an HTTP/2 connection's loss, a malformed
/// response). Both are transparent where they can be, so the source chain
/// of `Error` skips the reqwest error: the layers are unwrapped by
/// downcasting. Anything else has its source chain walked for a reqwest
/// error or an I/O error's kind.
pub fn error_of(e: &reqwest_middleware::Error, attempts: Option<u32>) -> CallError {
    CallError {
        kind: kind_of_middleware(e, 0),
        message: message_of(e),
        attempts,
    }
}

fn kind_of_middleware(e: &reqwest_middleware::Error, depth: u32) -> Kind {
    match e {
        reqwest_middleware::Error::Reqwest(r) => crate::kit::kind_of(r),
        reqwest_middleware::Error::Middleware(a) => {
            if let Some(RetryError::WithRetries { err, .. } | RetryError::Error(err)) = a.downcast_ref::<RetryError>() {
                if depth < 8 {
                    return kind_of_middleware(err, depth + 1);
                }
            }
            let inner: &(dyn std::error::Error + Send + Sync + 'static) = a.as_ref();
            kind_in_chain(inner)
        }
    }
}

/// The kind of the first reqwest error or telling I/O error in e's source
/// chain (e included, at most 16 deep); other when there is none.
fn kind_in_chain(e: &(dyn std::error::Error + 'static)) -> Kind {
    use std::io::ErrorKind as K;
    let mut cause = Some(e);
    for _ in 0..16 {
        let Some(c) = cause else { break };
        if let Some(r) = c.downcast_ref::<reqwest::Error>() {
            return crate::kit::kind_of(r);
        }
        if let Some(io) = c.downcast_ref::<std::io::Error>() {
            match io.kind() {
                K::TimedOut => return Kind::Timeout,
                K::ConnectionReset | K::ConnectionAborted | K::ConnectionRefused | K::BrokenPipe | K::UnexpectedEof | K::NotConnected => {
                    return Kind::Connection
                }
                _ => {}
            }
        }
        cause = c.source();
    }
    Kind::Other
}
