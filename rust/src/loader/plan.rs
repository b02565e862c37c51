//! The loader's plan (JSON, docs/dataplane-interfaces.md): the objects, their prerequisites
//! (parent, `after`, `at_first_byte`) and delays, the connection limit, TFO and DNS settings,
//! and the Chromium model's delayable limits and tight phases; and its validation.
use anyhow::{bail, Result};
use schemars::JsonSchema;
use serde::Deserialize;
use std::net::IpAddr;
use std::path::PathBuf;

fn get() -> String {
    "GET".into()
}
fn six() -> usize {
    6
}
fn timeout_default() -> f64 {
    120.0
}
fn full() -> String {
    "full".into()
}
fn yes() -> bool {
    true
}

/// One object to fetch: where from, and when it becomes requestable.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Object {
    pub url: String,
    #[serde(default = "get")]
    pub method: String,
    pub host: String,
    pub ip: IpAddr,
    pub port: u16,
    #[serde(default)]
    pub tls: bool,
    /// The object whose arrival (last byte) makes this one requestable (null: the start).
    #[serde(default)]
    pub parent: Option<usize>,
    /// Compute delay after the parent (or the last prerequisite) arrived.
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub delay_ms: f64,
    /// Requestable at the parent's first response byte instead of its last (a browser's
    /// parser/preload scanner sees the references at the start of a document).
    #[serde(default)]
    pub at_first_byte: bool,
    /// Further objects that must all have arrived (last byte) before this one is requestable
    /// (script execution order, body reached).
    #[serde(default)]
    pub after: Vec<usize>,
    /// Low priority (Chromium: images): subject to `delayable_limit`/`tight_limit`, and behind
    /// every other queued request of its pool.
    #[serde(default)]
    pub delayable: bool,
    /// The tight phase (index into `tight_phases`) that limits this delayable request: its
    /// frame's (Chromium schedules per frame). None: the `tight_until` phase, if any.
    #[serde(default)]
    pub tight_phase: Option<usize>,
    /// "h2": offer ALPN h2 (and http/1.1) on this object's TLS connection and, if the server
    /// picks h2, multiplex its origin's requests on one connection; "h3": HTTP/3 over QUIC (UDP
    /// to the same address and port; needs `tls`), multiplexed, no fallback to TCP; "http/1.1"
    /// (default): neither.
    #[serde(default = "http11")]
    #[schemars(extend("enum" = PROTOCOLS))]
    pub protocol: String,
    /// Sent as the RFC 9218 `priority` request header (the Chromium model fills it for h2).
    #[serde(default)]
    pub priority: Option<String>,
}

fn http11() -> String {
    "http/1.1".into()
}

/// The protocols an object may ask for.
pub const PROTOCOLS: &[&str] = &["h2", "h3", "http/1.1"];
/// The plan's `quic_cc`s (QUIC congestion control of the loader's side).
pub const QUIC_CCS: &[&str] = &["cubic", "newreno", "bbr"];
/// The plan's `tls_mode`s.
pub const TLS_MODES: &[&str] = &["full", "resume", "0rtt"];

impl Object {
    /// This object's connection may speak h2 (TLS and protocol "h2").
    pub fn wants_h2(&self) -> bool {
        self.tls && self.protocol == "h2"
    }
    /// This object goes over HTTP/3 (QUIC).
    pub fn wants_h3(&self) -> bool {
        self.tls && self.protocol == "h3"
    }
    /// Its origin's requests may share one connection (h2 or h3).
    pub fn multiplexed(&self) -> bool {
        self.wants_h2() || self.wants_h3()
    }
}

/// One frame's tight mode: until every object of `until` has arrived, and `delay_ms` more, at
/// most `tight_limit` of its delayable requests are released at once.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TightPhase {
    pub until: Vec<usize>,
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub delay_ms: f64,
    /// The frame's document (an object index): not used by the loader, read back from the plan by
    /// the control plane's calibration (loaders/compute_model.py).
    #[serde(default)]
    pub doc: Option<usize>,
}

/// `pltlab-dp load --plan`: the page to load and how the loader schedules it.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    /// Object 0 is the main document.
    #[schemars(length(min = 1))]
    pub objects: Vec<Object>,
    #[serde(default = "six")]
    #[schemars(range(min = 1))]
    pub max_conns_per_host: usize,
    /// TCP_FASTOPEN_CONNECT on every socket (with `tfo_tls` false: on those without TLS).
    #[serde(default)]
    pub tfo: bool,
    /// With `tfo`: TFO on connections that carry TLS too (false: as a browser whose ClientHello
    /// is larger than a SYN carries, Chromium's post-quantum one, which saves no round trip).
    #[serde(default = "yes")]
    pub tfo_tls: bool,
    /// Paid once per pool before its first connection.
    #[serde(default)]
    pub dns_delay_ms: f64,
    /// The replay CA (PEM), required when an object has `"tls": true`.
    #[serde(default)]
    pub ca: Option<PathBuf>,
    /// The load fails after this long.
    #[serde(default = "timeout_default")]
    pub timeout_s: f64,
    /// At most this many delayable requests released (queued for or on a connection) at once;
    /// None = no limit.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub delayable_limit: Option<usize>,
    /// While some object of `tight_until` has not arrived: at most this many delayable
    /// requests released at once (None = only `delayable_limit`).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub tight_limit: Option<usize>,
    #[serde(default)]
    pub tight_until: Vec<usize>,
    /// Tight mode lasts this long after the last object of `tight_until` arrived (the
    /// renderer's time until its parser inserts <body>: Blink leaves tight mode then).
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub tight_delay_ms: f64,
    /// Further tight phases (per frame), chosen by each object's `tight_phase`.
    #[serde(default)]
    pub tight_phases: Vec<TightPhase>,
    /// TLS handshakes: "full" (no session kept: every handshake full), "resume" (a prior visit
    /// of the whole page left session tickets: connections resume, 1-RTT without certificate),
    /// "0rtt" (as resume, and each resumed connection's first request goes as early data).
    #[serde(default = "full")]
    #[schemars(extend("enum" = TLS_MODES))]
    pub tls_mode: String,
    /// Waited before each new connection is dialled (TCP or QUIC): a browser's network stack
    /// setting a connection up beyond the link's round trips (Chromium's, measured by a
    /// calibration: the control plane's knob network_stack).
    #[serde(default)]
    #[schemars(range(min = 0.0))]
    pub conn_setup_delay_ms: f64,
    /// QUIC (objects with protocol "h3"): the loader's congestion control (None: quinn's
    /// default, cubic).
    #[serde(default)]
    #[schemars(extend("enum" = QUIC_CCS))]
    pub quic_cc: Option<String>,
    /// QUIC: the loader's initial congestion window in packets of 1200 bytes (None: quinn's
    /// default, 12,000 bytes under cubic and newreno).
    #[serde(default)]
    #[schemars(range(min = 1, max = 1000))]
    pub quic_icw: Option<u32>,
}

impl Plan {
    /// The load is preceded by a visit that leaves session tickets (tls_mode resume/0rtt).
    pub fn warm_tls(&self) -> bool {
        self.tls_mode != "full"
    }

    pub fn validate(&self) -> Result<()> {
        let n = self.objects.len();
        if n == 0 {
            bail!("plan has no objects");
        }
        if self.max_conns_per_host == 0 {
            bail!("max_conns_per_host must be >= 1");
        }
        for (i, o) in self.objects.iter().enumerate() {
            if let Some(p) = o.parent {
                if p >= n || p == i {
                    bail!("object {i}: bad parent {p}");
                }
            }
            if !PROTOCOLS.contains(&o.protocol.as_str()) {
                bail!("object {i}: protocol {:?} is none of \"h2\", \"h3\", \"http/1.1\"", o.protocol);
            }
            if o.protocol == "h3" && !o.tls {
                bail!("object {i}: protocol \"h3\" needs \"tls\" (QUIC is TLS 1.3)");
            }
            if o.delay_ms.is_nan() || o.delay_ms < 0.0 {
                bail!("object {i}: delay_ms must be >= 0");
            }
            if let Some(&a) = o.after.iter().find(|&&a| a >= n || a == i) {
                bail!("object {i}: bad \"after\" index {a}");
            }
        }
        if let Some(&t) = self.tight_until.iter().find(|&&t| t >= n) {
            bail!("bad \"tight_until\" index {t}");
        }
        for (k, ph) in self.tight_phases.iter().enumerate() {
            if let Some(&t) = ph.until.iter().find(|&&t| t >= n) {
                bail!("tight phase {k}: bad \"until\" index {t}");
            }
            if !(ph.delay_ms >= 0.0 && ph.delay_ms.is_finite()) {
                bail!("tight phase {k}: delay_ms must be a number >= 0");
            }
            if ph.doc.is_some_and(|d| d >= n) {
                bail!("tight phase {k}: bad \"doc\" index");
            }
        }
        if let Some((i, _)) =
            self.objects.iter().enumerate().find(|(_, o)| o.tight_phase.is_some_and(|k| k >= self.tight_phases.len()))
        {
            bail!("object {i}: bad \"tight_phase\"");
        }
        if !(self.tight_delay_ms >= 0.0 && self.tight_delay_ms.is_finite()) {
            bail!("tight_delay_ms must be a number >= 0");
        }
        if !(self.conn_setup_delay_ms >= 0.0 && self.conn_setup_delay_ms <= 60_000.0) {
            bail!("conn_setup_delay_ms must be a number from 0 to 60000");
        }
        if self.delayable_limit == Some(0) || self.tight_limit == Some(0) {
            bail!("delayable_limit and tight_limit must be >= 1");
        }
        // acyclic over the parent and "after" edges (Kahn's algorithm)
        let mut indeg: Vec<usize> = self.objects.iter().map(|o| o.parent.is_some() as usize + o.after.len()).collect();
        let mut out = vec![Vec::new(); n];
        for (i, o) in self.objects.iter().enumerate() {
            for p in o.parent.iter().chain(o.after.iter()) {
                out[*p].push(i);
            }
        }
        let mut stack: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut seen = 0;
        while let Some(k) = stack.pop() {
            seen += 1;
            for &c in &out[k] {
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    stack.push(c);
                }
            }
        }
        if seen < n {
            bail!("parents and \"after\" lists form a cycle");
        }
        if !TLS_MODES.contains(&self.tls_mode.as_str()) {
            bail!("tls_mode {:?} is none of \"full\", \"resume\", \"0rtt\"", self.tls_mode);
        }
        if self.warm_tls() && !self.objects.iter().any(|o| o.tls) {
            bail!("tls_mode {:?} needs an https object (the page has none)", self.tls_mode);
        }
        if let Some(cc) = self.quic_cc.as_deref().filter(|cc| !QUIC_CCS.contains(cc)) {
            bail!("quic_cc {cc:?} is none of \"cubic\", \"newreno\", \"bbr\"");
        }
        if self.quic_icw.is_some_and(|w| !(1..=1000).contains(&w)) {
            bail!("quic_icw must be 1..1000 packets");
        }
        if self.objects.iter().any(|o| o.tls) && self.ca.is_none() {
            bail!("plan has https objects but no \"ca\"");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::loader::{obj, plan};
    use std::net::{Ipv4Addr, SocketAddr};

    fn err(p: &Plan) -> String {
        format!("{:#}", p.validate().unwrap_err())
    }

    #[test]
    fn plan_validation() {
        let a = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9);
        let mut p =
            plan(vec![obj("http://a/", "a", a, false, Some(1)), obj("http://a/b", "a", a, false, Some(0))], None);
        assert!(err(&p).contains("cycle"));
        p.objects[0].parent = Some(5);
        assert!(err(&p).contains("bad parent"));
        assert!(err(&plan(vec![obj("https://a/", "a", a, true, None)], None)).contains("no \"ca\""));
        assert!(err(&plan(vec![], None)).contains("no objects"));
        // "after" edges: bad index, cycle through parent + after; bad tight_until, zero limits
        let mut p = plan(vec![obj("http://a/", "a", a, false, None), obj("http://a/b", "a", a, false, Some(0))], None);
        p.objects[1].after = vec![7];
        assert!(err(&p).contains("bad \"after\""));
        p.objects.push(obj("http://a/c", "a", a, false, Some(1)));
        p.objects[1].after = vec![2];
        assert!(err(&p).contains("cycle"));
        p.objects[1].after.clear();
        p.tight_until = vec![3];
        assert!(err(&p).contains("tight_until"));
        p.tight_until.clear();
        p.delayable_limit = Some(0);
        assert!(err(&p).contains(">= 1"));
        p.delayable_limit = None;
        p.max_conns_per_host = 0;
        assert!(err(&p).contains("max_conns_per_host"));
        p.max_conns_per_host = 6;
        p.objects[2].delay_ms = f64::NAN;
        assert!(err(&p).contains("delay_ms"));
        p.objects[2].delay_ms = 0.0;
        assert!(p.validate().is_ok());
    }

    #[test]
    fn tight_phase_validation() {
        let a = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9);
        let mut p = plan(vec![obj("http://a/", "a", a, false, None), obj("http://a/b", "a", a, false, Some(0))], None);
        p.objects[1].delayable = true;
        p.objects[1].tight_phase = Some(1);
        p.tight_phases = vec![
            TightPhase { until: vec![0], delay_ms: 0.0, doc: None },
            TightPhase { until: vec![], delay_ms: 5.0, doc: Some(1) },
        ];
        assert!(p.validate().is_ok());
        let mut q = p.clone();
        q.objects[1].tight_phase = Some(2);
        assert!(err(&q).contains("tight_phase"));
        let mut q = p.clone();
        q.tight_phases[1].until = vec![99];
        assert!(err(&q).contains("tight phase 1: bad \"until\""));
        let mut q = p.clone();
        q.tight_phases[0].delay_ms = f64::NAN;
        assert!(err(&q).contains("tight phase 0: delay_ms"));
        let mut q = p.clone();
        q.tight_delay_ms = -1.0;
        assert!(err(&q).contains("tight_delay_ms"));
    }

    /// An unknown key of the plan, an object or a tight phase is refused, naming it.
    #[test]
    fn unknown_keys_are_refused_by_name() {
        let obj = r#"{"url": "http://a/", "host": "a", "ip": "10.0.0.1", "port": 80"#;
        for (bad, key) in [
            (format!(r#"{{"objects": [{obj}}}], "tfo_mode": true}}"#), "tfo_mode"),
            (format!(r#"{{"objects": [{obj}, "delayble": true}}]}}"#), "delayble"),
            (format!(r#"{{"objects": [{obj}}}], "tight_phases": [{{"until": [], "frame": 0}}]}}"#), "frame"),
        ] {
            let e = serde_json::from_str::<Plan>(&bad).unwrap_err().to_string();
            assert!(e.contains(&format!("unknown field `{key}`")), "{bad}: {e}");
        }
        let p: Plan =
            serde_json::from_str(&format!(r#"{{"objects": [{obj}}}], "tight_phases": [{{"until": [0], "doc": 0}}]}}"#))
                .unwrap();
        assert_eq!(p.tight_phases[0].doc, Some(0));
    }

    #[test]
    fn json_defaults() {
        let p: Plan =
            serde_json::from_str(r#"{"objects": [{"url": "http://a/", "host": "a", "ip": "10.0.0.1", "port": 80}]}"#)
                .unwrap();
        assert_eq!((p.max_conns_per_host, p.tfo, p.dns_delay_ms, p.timeout_s), (6, false, 0.0, 120.0));
        let o = &p.objects[0];
        assert_eq!((o.method.as_str(), o.tls, o.parent, o.delay_ms, o.delayable), ("GET", false, None, 0.0, false));
        assert!(p.delayable_limit.is_none() && p.tight_phases.is_empty() && p.validate().is_ok());
    }
}
