//! Loads for tests (replay's and the loader's): an object with every option at its default, a
//! plan around objects, a load run on a runtime of its own.
use anyhow::Result;
use std::net::SocketAddr;
use std::path::PathBuf;

use crate::loader::plan::{Object, Plan};
use crate::loader::{load_phased, Output};

/// An object of the plan with every option at its default (GET, http/1.1, no delay).
pub fn obj(url: &str, host: &str, addr: SocketAddr, tls: bool, parent: Option<usize>) -> Object {
    Object {
        url: url.into(),
        method: "GET".into(),
        host: host.into(),
        ip: addr.ip(),
        port: addr.port(),
        tls,
        parent,
        delay_ms: 0.0,
        at_first_byte: false,
        after: Vec::new(),
        delayable: false,
        tight_phase: None,
        protocol: "http/1.1".into(),
        priority: None,
    }
}

/// A plan around `objects`: every setting at its default but a 20 s timeout.
pub fn plan(objects: Vec<Object>, ca: Option<PathBuf>) -> Plan {
    Plan {
        objects,
        max_conns_per_host: 6,
        tfo: false,
        tfo_tls: true,
        dns_delay_ms: 0.0,
        ca,
        timeout_s: 20.0,
        delayable_limit: None,
        tight_limit: None,
        tight_until: Vec::new(),
        tight_delay_ms: 0.0,
        tight_phases: Vec::new(),
        tls_mode: "full".into(),
        quic_cc: None,
        quic_icw: None,
        conn_setup_delay_ms: 0.0,
    }
}

/// Runs a load on a fresh single-threaded runtime (no pause after a warm-up visit).
pub fn load(plan: Plan) -> Result<Output> {
    load_phased(plan, |_| Ok(()))
}
