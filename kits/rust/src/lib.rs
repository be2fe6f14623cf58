//! The Rust kit of connaudit serve (docs/serve.md, docs/kits.md): reqwest on
//! hyper, audited through the protocol `connaudit.serve/v1`.
//!
//! - [`kit`]: the protocol and the steps, once for every client;
//! - [`reqwest_policy`]: reqwest configured from each scenario's policy, the
//!   policy's retries in the adapter's own loop;
//! - [`reqwest_retry`]: reqwest as its users usually configure it, the
//!   defaults with reqwest-retry's `ExponentialBackoff`.
//!
//! `tests/truth.rs` measures what reqwest and hyper really do against
//! raw-socket servers.

pub mod kit;
pub mod reqwest_policy;
pub mod reqwest_retry;
pub mod tls;

/// The versions Cargo.lock pins (tests/versions.rs checks them).
pub const REQWEST_VERSION: &str = "0.12.28";
pub const HYPER_VERSION: &str = "1.13.0";
pub const HYPER_UTIL_VERSION: &str = "0.1.21";
pub const REQWEST_RETRY_VERSION: &str = "0.7.0";
pub const REQWEST_MIDDLEWARE_VERSION: &str = "0.4.2";

/// The terms declaration of client name, NAME.terms.json beside Cargo.toml
/// (docs/serve.md: client.terms), built into the binary. A declaration that
/// does not parse is sent as none (tests/versions.rs checks each parses).
pub fn terms(name: &str) -> serde_json::Value {
    let text = match name {
        "reqwest" => include_str!("../reqwest.terms.json"),
        "reqwest-retry" => include_str!("../reqwest-retry.terms.json"),
        _ => "{}",
    };
    serde_json::from_str(text).unwrap_or(serde_json::Value::Null)
}
