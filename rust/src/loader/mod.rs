//! `pltlab-dp load --plan FILE`: deterministic browser-like HTTP/1.1 and HTTP/2 loader.
//!
//! * plan.rs: the plan (JSON) and its validation;
//! * scheduler.rs: a pure state machine (`now` and events in, actions out) deciding when
//!   each object is requested and on which connection: prerequisites and delays, pools of at
//!   most `max_conns_per_host` persistent connections per (scheme, host, port), late
//!   binding, the DNS delay once per pool; with policy.rs, the archive or Chromium model
//!   (delayable limits, tight phases, priorities);
//! * connections.rs: the driver, carrying out those actions with tokio tasks (TFO via
//!   TCP_FASTOPEN_CONNECT, TLS, TCP_INFO) and feeding back what happened; exchange.rs: one
//!   request/response with the shared HTTP/1.1 codec (crate::http), decode.rs:
//!   Content-Encoding; output.rs: the records printed; h2conn.rs: an h2 connection (streams).
//!
//! Single-threaded tokio runtime; all times in ms since the load started (object 0
//! requested, before its DNS delay).
use anyhow::{anyhow, Context, Result};
use std::cell::Cell;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

pub mod connections;
pub mod decode;
pub mod exchange;
pub mod h2conn;
#[cfg(test)]
mod load_tests;
pub mod output;
pub mod plan;
pub mod policy;
pub mod scheduler;
#[cfg(test)]
mod tests;

pub use output::Output;
pub use plan::Plan;

#[derive(clap::Args)]
pub struct Args {
    /// Plan (JSON, see docs/dataplane-interfaces.md).
    #[arg(long)]
    pub plan: PathBuf,
}

/// Runs a load on a fresh single-threaded runtime.
pub fn load(plan: Plan) -> Result<Output> {
    plan.validate()?;
    let connector = |alpn: &[&str]| -> Result<Option<tokio_rustls::TlsConnector>> {
        Ok(match &plan.ca {
            Some(ca) if plan.objects.iter().any(|o| o.tls) => {
                Some(tokio_rustls::TlsConnector::from(crate::certs::client_config(ca, alpn)?))
            }
            _ => None,
        })
    };
    let tls = connector(&["http/1.1"])?;
    let tls_h2 = if plan.objects.iter().any(|o| o.wants_h2()) { connector(&["h2", "http/1.1"])? } else { None };
    let timeout = Duration::from_secs_f64(plan.timeout_s.max(0.001));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let plan = Rc::new(plan);
    let n = plan.objects.len();
    let res = local.block_on(&rt, async {
        let ctx =
            Rc::new(connections::Ctx { t0: Instant::now(), tfo: plan.tfo, tfo_refused: Cell::new(None), tls, tls_h2 });
        match tokio::time::timeout(timeout, connections::drive(plan.clone(), ctx)).await {
            Ok(r) => r,
            Err(_) => Err(anyhow!("load timed out after {:.1} s ({n} objects planned)", timeout.as_secs_f64())),
        }
    });
    drop(local);
    drop(rt);
    res
}

pub fn run(a: Args) -> Result<()> {
    let data = std::fs::read(&a.plan).with_context(|| format!("cannot read plan {}", a.plan.display()))?;
    let plan: Plan = serde_json::from_slice(&data).with_context(|| format!("bad plan {}", a.plan.display()))?;
    let out = load(plan).context("load failed")?;
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
