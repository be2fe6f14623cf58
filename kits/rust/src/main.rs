//! connaudit-kit-rust CLIENT: runs the Rust kit on CLIENT (reqwest, the
//! policy-driven configuration, or reqwest-retry, the usual one) under
//! connaudit serve, prints `connaudit kit: NAME: N passed, N failed, N not
//! configurable` and exits 0 when the session is ok, 1 when a verdict
//! failed, 2 on a usage error or an error of the kit's (a bad answer of the
//! server's, a malformed scenario).
//!
//!     connaudit serve -- kits/rust/target/release/connaudit-kit-rust reqwest

use std::process::ExitCode;

use connaudit_kit_rust::kit::{runtime, summary, Adapter, Kit};
use connaudit_kit_rust::reqwest_policy::Reqwest;
use connaudit_kit_rust::reqwest_retry::ReqwestRetry;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let adapter: Result<Box<dyn Adapter>, String> = match args.as_slice() {
        [c] if c == "reqwest" => Reqwest::from_env().map(|a| Box::new(a) as Box<dyn Adapter>),
        [c] if c == "reqwest-retry" => ReqwestRetry::from_env().map(|a| Box::new(a) as Box<dyn Adapter>),
        _ => {
            eprintln!("usage: connaudit-kit-rust reqwest|reqwest-retry (under connaudit serve -- CMD)");
            return ExitCode::from(2);
        }
    };
    let adapter = match adapter {
        Ok(a) => a,
        Err(e) => {
            eprintln!("connaudit kit: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match runtime() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("connaudit kit: a tokio runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let report = rt.block_on(async {
        let kit = Kit::from_env()?;
        kit.run(adapter.as_ref()).await
    });
    match report.and_then(|r| summary(&adapter.name(), &r)) {
        Ok((line, ok)) => {
            println!("{line}");
            if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Err(e) => {
            eprintln!("connaudit kit: {}: {e}", adapter.name());
            ExitCode::from(2)
        }
    }
}
