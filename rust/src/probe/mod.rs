//! Measurement probes: a small TCP/UDP server and clients that measure RTT,
//! fetch time (incl. TCP Fast Open), bulk goodput and UDP loss.
//!
//! Every client prints exactly one JSON object on stdout. Errors are returned
//! as `anyhow` errors (main.rs prints `pltlab-dp: error: ...`, exit 1).
//! Every client has `--timeout-s` (default 30): an internal deadline bounds all
//! socket operations, and a watchdog thread aborts the process shortly after
//! the deadline as a last resort.
use clap::Subcommand;
use std::net::SocketAddr;

pub(crate) mod bulk;
mod common;
pub(crate) mod fetch;
mod http;
pub(crate) mod ping;
mod server;
#[cfg(test)]
mod tests;
pub(crate) mod udp;

#[derive(Subcommand)]
pub enum Cmd {
    /// TCP (+UDP) probe server: GET <n> / STREAM / UDPSTAT <session>.
    Serve(server::Args),
    /// TCP round-trip times: N x (GET 1, read 1 byte) on one connection.
    Ping(ping::Args),
    /// K sequential fetches of B bytes, each on a new connection (optional TFO).
    Fetch(fetch::Args),
    /// Bulk goodput: STREAM, discard warmup, count bytes for S seconds.
    Bulk(bulk::Args),
    /// UDP loss: N paced numbered datagrams, then ask the server over TCP.
    Udp(udp::Args),
}

pub fn run(c: Cmd) -> anyhow::Result<()> {
    let v = match c {
        Cmd::Serve(a) => return server::run(a),
        Cmd::Ping(a) => {
            common::watchdog(a.timeout_s);
            serde_json::to_value(ping::run(&a)?)?
        }
        Cmd::Fetch(a) => {
            common::watchdog(a.timeout_s);
            serde_json::to_value(fetch::run(&a)?)?
        }
        Cmd::Bulk(a) => {
            common::watchdog(a.timeout_s);
            serde_json::to_value(bulk::run(&a)?)?
        }
        Cmd::Udp(a) => {
            common::watchdog(a.timeout_s);
            serde_json::to_value(udp::run(&a)?)?
        }
    };
    common::print_json(&v)
}

/// Parse "ADDR:PORT" (IPv4 or [IPv6]:port) for clap.
pub(crate) fn parse_addr(s: &str) -> Result<SocketAddr, String> {
    s.parse::<SocketAddr>().map_err(|e| format!("invalid address {s:?} (want ADDR:PORT): {e}"))
}
