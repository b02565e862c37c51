//! `pltlab-dp load --plan FILE`: deterministic browser-like HTTP/1.1, HTTP/2 and HTTP/3 loader.
//!
//! * plan.rs: the plan (JSON) and its validation;
//! * scheduler.rs: a pure state machine (`now` and events in, actions out) deciding when
//!   each object is requested and on which connection: prerequisites and delays, pools of at
//!   most `max_conns_per_host` persistent connections per (scheme, host, port), late
//!   binding, the DNS delay once per pool; with policy.rs, the archive or Chromium model
//!   (delayable limits, tight phases, priorities); events.rs: their vocabulary (events,
//!   actions, timers);
//! * driver.rs: the driver, carrying out those actions with tokio tasks and feeding back what
//!   happened (msg.rs: what the tasks tell it), keeping the records (output.rs);
//! * transport/: the connection abstraction: a byte stream and the transport's own facts
//!   (tcp.rs: TCP, TFO via TCP_FASTOPEN_CONNECT, TCP_INFO; tls.rs: TLS over it);
//! * schedule.rs: `pltlab-dp schedule`, the same scheduler driven over JSON lines by a
//!   modelled network (`pltlab predict`) instead of sockets;
//! * h1.rs: an HTTP/1.1 connection (one request/response at a time, the shared codec
//!   crate::http), h2.rs: an h2 connection (streams), h3.rs: an HTTP/3 connection over QUIC
//!   (transport/quic.rs; plan protocol "h3", no fallback to TCP); decode.rs: Content-Encoding.
//!
//! Single-threaded tokio runtime; all times in ms since the load started (clock.rs: object 0
//! requested, before its DNS delay).
//!
//! TLS sessions (plan `tls_mode`): "full" keeps none; "resume"/"0rtt" first visit the whole
//! page once (no TFO: cookies are the runner's business), which leaves the session tickets
//! the measured load then resumes from. Between the two the loader prints
//! `{"event":"warmed",...}` and waits for a line on stdin (the runner starts its counts and
//! the replay server's new session then, so that neither includes the visit). QUIC keeps its
//! tickets in a store of its own (as Chromium), its client configuration made once per load
//! (`certs::quic::quic_client_tls`): the visit never offers early data, the measured load
//! offers it in "0rtt" only.
use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

pub mod clock;
pub mod decode;
pub mod driver;
pub mod events;
pub mod h1;
pub mod h2;
pub mod h3;
#[cfg(test)]
mod h3_replay_tests;
#[cfg(test)]
mod h3_tests;
#[cfg(test)]
mod load_tests;
pub mod msg;
pub mod output;
pub mod plan;
pub mod policy;
pub mod schedule;
pub mod scheduler;
#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;
pub mod transport;

use clock::Clock;
use driver::Ctx;
pub use output::Output;
pub use plan::Plan;
use transport::quic::Quic;
use transport::tcp::Tcp;
use transport::Dialer;

#[derive(clap::Args)]
pub struct Args {
    /// Plan (JSON, see docs/dataplane-interfaces.md).
    #[arg(long)]
    pub plan: PathBuf,
}

type Connectors = (Option<tokio_rustls::TlsConnector>, Option<tokio_rustls::TlsConnector>);

/// Client sessions kept for the visits of one load (rustls keeps 8 tickets per server name).
const CLIENT_SESSIONS: usize = 4096;

/// As `load`; with tls_mode resume/0rtt, `between(warmup_ms)` runs after the warm-up visit,
/// before the measured load.
pub fn load_phased(plan: Plan, between: impl FnOnce(f64) -> Result<()>) -> Result<Output> {
    plan.validate()?;
    // one client config, its variants cloned from it: rustls resumes a ticket only with the
    // certificate verifier (the same instance) of the connection that got it
    let base = match &plan.ca {
        Some(ca) if plan.objects.iter().any(|o| o.tls) => {
            let resumption = if plan.warm_tls() {
                let store = Arc::new(rustls::client::ClientSessionMemoryCache::new(CLIENT_SESSIONS));
                crate::certs::ClientResumption::Tickets { store, early_data: false }
            } else {
                crate::certs::ClientResumption::Off
            };
            Some(crate::certs::client_config_with(ca, &[], &resumption)?)
        }
        _ => None,
    };
    // (tls, tls_h2) connectors; `early`: 0-RTT for resumed connections
    let connectors = |early: bool| -> Connectors {
        let connector = |alpn: &[&str]| {
            base.as_ref().map(|b| {
                let mut cfg = (**b).clone();
                cfg.alpn_protocols = alpn.iter().map(|p| p.as_bytes().to_vec()).collect();
                cfg.enable_early_data = early;
                tokio_rustls::TlsConnector::from(Arc::new(cfg)).early_data(early)
            })
        };
        let tls_h2 = if plan.objects.iter().any(|o| o.wants_h2()) { connector(&["h2", "http/1.1"]) } else { None };
        (connector(&["http/1.1"]), tls_h2)
    };
    // the visit before the load never sends early data: an early-data connection the scheduler
    // ends up not using would spend a ticket without a handshake (and the new tickets it brings)
    let (tls, tls_h2) = connectors(plan.tls_mode == "0rtt");
    let warm = plan.warm_tls().then(|| connectors(false));
    let timeout = Duration::from_secs_f64(plan.timeout_s.max(0.001));
    // QUIC (h3 objects): one TLS configuration per load, its own ticket store ("full": none)
    let quic_tls = match &plan.ca {
        Some(ca) if plan.objects.iter().any(|o| o.wants_h3()) => {
            let store = Arc::new(rustls::client::ClientSessionMemoryCache::new(CLIENT_SESSIONS));
            let mut cfg = crate::certs::quic::quic_client_tls(ca, store)?;
            if !plan.warm_tls() {
                cfg.resumption = rustls::client::Resumption::disabled();
            }
            Some(cfg)
        }
        _ => None,
    };
    // the tokens the visit's connections get validate the load's (their Initials carry them)
    let tokens = transport::quic::tokens();
    let quic = |zero_rtt: bool| -> Result<Option<Quic>> {
        let hs = transport::quic::HANDSHAKE_TIMEOUT.min(timeout / 2);
        let (cc, icw) = (plan.quic_cc.as_deref(), plan.quic_icw);
        quic_tls.as_ref().map(|t| Quic::new(t, zero_rtt, cc, icw, hs, tokens.clone())).transpose()
    };
    let quic_load = quic(plan.tls_mode == "0rtt")?;
    let quic_warm = if plan.warm_tls() { quic(false)? } else { None };
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let plan = Rc::new(plan);
    let n = plan.objects.len();
    let res = local.block_on(&rt, async {
        let mut warmup_ms = None;
        if let Some((warm_tls, warm_tls_h2)) = warm {
            let clock = Clock::start();
            let dial = Dialer::new(Tcp::new(false, false), warm_tls, warm_tls_h2).with_quic(quic_warm);
            let ctx = Rc::new(Ctx { clock, dial });
            match tokio::time::timeout(timeout, driver::drive(plan.clone(), ctx)).await {
                Ok(r) => r.context("the visit before the load (for its TLS session tickets) failed")?,
                Err(_) => bail!("the visit before the load timed out after {:.1} s", timeout.as_secs_f64()),
            };
            // its connections close as their tasks see the driver gone
            for _ in 0..16 {
                tokio::task::yield_now().await;
            }
            let ms = clock.ms();
            warmup_ms = Some(ms);
            between(ms)?;
        }
        let dial = Dialer::new(Tcp::new(plan.tfo, plan.tfo_tls), tls, tls_h2).with_quic(quic_load);
        let ctx = Rc::new(Ctx { clock: Clock::start(), dial });
        let mut out = match tokio::time::timeout(timeout, driver::drive(plan.clone(), ctx)).await {
            Ok(r) => r?,
            Err(_) => bail!("load timed out after {:.1} s ({n} objects planned)", timeout.as_secs_f64()),
        };
        out.warmup_ms = warmup_ms;
        Ok(out)
    });
    drop(local);
    drop(rt);
    res
}

pub fn run(a: Args) -> Result<()> {
    let data = std::fs::read(&a.plan).with_context(|| format!("cannot read plan {}", a.plan.display()))?;
    let plan: Plan = serde_json::from_slice(&data).with_context(|| format!("bad plan {}", a.plan.display()))?;
    let out = load_phased(plan, |ms| {
        use std::io::{BufRead, Write};
        println!("{}", serde_json::json!({"event": "warmed", "warmup_ms": ms}));
        std::io::stdout().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        Ok(())
    })
    .context("load failed")?;
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
