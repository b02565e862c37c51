//! JSON configuration of the link emulator: parsing and validation.
//! See docs/dataplane-interfaces.md for the schema.
use anyhow::{bail, Context, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::Ipv4Addr;

use super::loss::{Gilbert, LossModel};
use super::trace;

/// One end of the link: a namespace and the TUN device in it.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Side {
    /// Network namespace file, e.g. /run/netns/plt-ab12cd-c.
    pub netns: String,
    /// Name of the existing (persistent) TUN device inside that namespace.
    pub tun: String,
}

/// One direction of the link (uplink: client -> server, downlink: server -> client).
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DirCfg {
    /// One-way propagation delay.
    #[serde(default)]
    #[schemars(range(max = MAX_DELAY_US))]
    pub delay_us: u64,
    /// Bottleneck rate in bit/s (null: unlimited, or the trace's).
    #[serde(default)]
    #[schemars(range(min = 1.0))]
    pub rate_bps: Option<f64>,
    /// Mahimahi delivery trace file instead of a rate.
    #[serde(default)]
    pub trace: Option<String>,
    /// Drop-tail limits of the bottleneck queue (null: unlimited).
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub queue_packets: Option<u64>,
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub queue_bytes: Option<u64>,
    /// Random loss probability before the queue.
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub loss: f64,
    /// ChaCha20 seed of the loss draws.
    #[serde(default)]
    pub seed: u64,
    /// Bursty loss instead of random (`loss` then 0): the Gilbert-Elliott model (link/loss.rs).
    #[serde(default)]
    pub gilbert: Option<GilbertCfg>,
}

/// Gilbert-Elliott loss (netem's `loss gemodel p r 1-h 1-k`): per packet, from the good state to
/// the bad with probability `p`, back with `r`; a packet is lost with `loss_bad` in the bad state
/// and `loss_good` in the good one. Mean burst length with loss_bad 1, loss_good 0: 1 / r.
#[derive(Debug, Clone, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct GilbertCfg {
    #[schemars(range(min = 0.0, max = 1.0))]
    pub p: f64,
    #[schemars(range(min = 0.0, max = 1.0))]
    pub r: f64,
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub loss_good: f64,
    #[serde(default = "d_one")]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub loss_bad: f64,
}

fn d_one() -> f64 {
    1.0
}

/// Per server-side address: its own delay and loss (null: the direction's).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// IPv4 address (destination on the uplink, source on the downlink).
    pub addr: String,
    #[serde(default)]
    #[schemars(range(max = MAX_DELAY_US))]
    pub delay_us_up: Option<u64>,
    #[serde(default)]
    #[schemars(range(max = MAX_DELAY_US))]
    pub delay_us_down: Option<u64>,
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub loss_up: Option<f64>,
    #[serde(default)]
    #[schemars(range(min = 0.0, max = 1.0))]
    pub loss_down: Option<f64>,
}

fn d_busy() -> u64 {
    300
}
fn d_true() -> bool {
    true
}
fn d_event() -> u64 {
    50
}

/// The largest busy-wait, linger, standby tick and injected stall, in us (the control plane's
/// limit is the same: tests/test_contracts.py).
pub const MAX_WAIT_US: u64 = 100_000;

/// `pltlab-dp link --config`: the emulator's configuration.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Config {
    pub client: Side,
    pub server: Side,
    #[serde(default)]
    pub uplink: DirCfg,
    #[serde(default)]
    pub downlink: DirCfg,
    #[serde(default)]
    pub overrides: Vec<Override>,
    /// Sleep until this long before a deadline, then busy-spin.
    #[serde(default = "d_busy")]
    #[schemars(range(max = MAX_WAIT_US))]
    pub busy_wait_us: u64,
    /// After any packet activity keep polling the TUNs for this long instead
    /// of sleeping, so replies (ACKs, responses) are read without a wake-up.
    #[serde(default)]
    #[schemars(range(max = MAX_WAIT_US))]
    pub linger_us: u64,
    /// Try SCHED_FIFO priority 10 (failure is reported in the statistics).
    #[serde(default)]
    pub sched_fifo: bool,
    /// Pin the emulator to this CPU (None: wherever the scheduler puts it).
    #[serde(default)]
    pub cpu: Option<usize>,
    /// mlockall(): no page fault in the packet path.
    #[serde(default)]
    pub mlock: bool,
    /// Keep every CPU polling instead of halting while the emulator runs (a PM QoS request of
    /// 0 us through /dev/cpu_dma_latency, dropped with the process): on a VM each wake-up of a
    /// halted vCPU for a packet is a hypervisor round trip, at each end (benches/notes.md
    /// "link"; the link's precision: benches/bench_precision.py).
    #[serde(default)]
    pub idle_poll: bool,
    /// A standby thread on another CPU looks at the TUNs and the queues every
    /// this many us and moves what the main loop has not (its CPU stalled);
    /// 0: none (also on a one-CPU machine).
    #[serde(default)]
    #[schemars(range(max = MAX_WAIT_US))]
    pub standby_us: u64,
    /// Fault injection (tests): the main loop stops for `stall_us` every `stall_every_ms`, as
    /// if its CPU stalled. 0: never.
    #[serde(default)]
    #[schemars(range(max = MAX_WAIT_US))]
    pub stall_us: u64,
    #[serde(default)]
    pub stall_every_ms: u64,
    /// Log every release or ingress delay of at least this many us (with its
    /// wall-clock time) in the final statistics' `late_events`.
    #[serde(default = "d_event")]
    pub late_event_us: u64,
    /// Nanosecond pcap of the client's interface.
    #[serde(default)]
    pub pcap: Option<String>,
    /// File receiving the statistics object.
    #[serde(default)]
    pub stats: Option<String>,
    /// IFF_VNET_HDR + TUNSETOFFLOAD on both TUNs (GSO super-packets segmented in software).
    #[serde(default = "d_true")]
    pub offload: bool,
}

/// Bandwidth model of one direction, validated.
#[derive(Debug, Clone, PartialEq)]
pub enum ShaperSpec {
    /// Fixed rate in bit/s.
    Rate(u64),
    /// Delivery opportunity offsets in ns (non-decreasing; last = period > 0).
    Trace(Vec<u64>),
}

/// Per-origin override for one direction.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct OriginOv {
    pub delay_ns: Option<u64>,
    pub loss: Option<f64>,
}

/// Validated parameters of one direction.
#[derive(Debug, Clone)]
pub struct DirParams {
    pub delay_ns: u64,
    pub loss: f64,
    pub seed: u64,
    /// Bursty loss instead of `loss` (per-origin overrides' losses stay random).
    pub gilbert: Option<GilbertCfg>,
    pub shaper: Option<ShaperSpec>,
    pub queue_packets: Option<u64>,
    pub queue_bytes: Option<u64>,
    /// Keyed by server-side IPv4 address (host order u32).
    pub overrides: HashMap<u32, OriginOv>,
}

impl DirParams {
    /// True when per-packet treatment is needed (rate/trace or any loss):
    /// GSO super-packets must then be segmented.
    pub fn needs_segmentation(&self) -> bool {
        self.shaper.is_some()
            || self.loss > 0.0
            || self.gilbert.as_ref().is_some_and(|g| LossModel::Gilbert(Gilbert::new(g)).lossy())
            || self.overrides.values().any(|o| o.loss.unwrap_or(0.0) > 0.0)
    }
}

fn check_loss(what: &str, p: f64) -> Result<()> {
    if !(p.is_finite() && (0.0..=1.0).contains(&p)) {
        bail!("{what} must be in [0, 1], got {p}");
    }
    Ok(())
}

/// The longest one-way delay, us (an hour).
pub const MAX_DELAY_US: u64 = 3_600_000_000;

fn dir_params(name: &str, d: &DirCfg) -> Result<DirParams> {
    check_loss(&format!("{name}.loss"), d.loss)?;
    if d.delay_us > MAX_DELAY_US {
        bail!("{name}.delay_us too large: {}", d.delay_us);
    }
    if let Some(g) = &d.gilbert {
        for (f, v) in [("p", g.p), ("r", g.r), ("loss_good", g.loss_good), ("loss_bad", g.loss_bad)] {
            check_loss(&format!("{name}.gilbert.{f}"), v)?;
        }
        if d.loss > 0.0 {
            bail!("{name}: loss and gilbert are both loss models: give one of them");
        }
    }
    let shaper = match (&d.rate_bps, &d.trace) {
        (Some(_), Some(_)) => bail!("{name}: rate_bps and trace are mutually exclusive"),
        (Some(r), None) => {
            if !r.is_finite() || *r < 1.0 {
                bail!("{name}.rate_bps must be a positive number of bit/s, got {r}");
            }
            Some(ShaperSpec::Rate(r.round() as u64))
        }
        (None, Some(path)) => Some(ShaperSpec::Trace(trace::load(path).with_context(|| format!("{name}.trace"))?)),
        (None, None) => None,
    };
    for (f, v) in [("queue_packets", d.queue_packets), ("queue_bytes", d.queue_bytes)] {
        if v == Some(0) {
            bail!("{name}.{f} must be > 0 (or null for unlimited)");
        }
    }
    Ok(DirParams {
        delay_ns: d.delay_us * 1000,
        loss: d.loss,
        seed: d.seed,
        gilbert: d.gilbert.clone(),
        shaper,
        queue_packets: d.queue_packets,
        queue_bytes: d.queue_bytes,
        overrides: HashMap::new(),
    })
}

fn check_side(name: &str, s: &Side) -> Result<()> {
    if s.netns.is_empty() {
        bail!("{name}.netns is empty");
    }
    if s.tun.is_empty() || s.tun.len() > 15 || s.tun.contains('/') || s.tun.contains(char::is_whitespace) {
        bail!("{name}.tun: invalid interface name {:?}", s.tun);
    }
    Ok(())
}

impl Config {
    pub fn parse(text: &str) -> Result<Config> {
        let c: Config = serde_json::from_str(text).context("invalid config JSON")?;
        Ok(c)
    }

    /// Validates everything that can be checked without touching the system
    /// (traces are read here) and returns (uplink, downlink) parameters.
    pub fn validate(&self) -> Result<(DirParams, DirParams)> {
        check_side("client", &self.client)?;
        check_side("server", &self.server)?;
        for (f, v) in
            [("busy_wait_us", self.busy_wait_us), ("linger_us", self.linger_us), ("standby_us", self.standby_us)]
        {
            if v > MAX_WAIT_US {
                bail!("{f} must be <= {MAX_WAIT_US}, got {v}");
            }
        }
        if self.stall_us > MAX_WAIT_US || (self.stall_us > 0 && self.stall_every_ms == 0) {
            bail!("stall_us must be <= {MAX_WAIT_US} and needs stall_every_ms > 0");
        }
        if self.cpu.is_some_and(|c| c >= libc::CPU_SETSIZE as usize) {
            bail!("cpu must be < {}, got {:?}", libc::CPU_SETSIZE, self.cpu);
        }
        let mut up = dir_params("uplink", &self.uplink)?;
        let mut down = dir_params("downlink", &self.downlink)?;
        for (i, o) in self.overrides.iter().enumerate() {
            let a: Ipv4Addr =
                o.addr.parse().with_context(|| format!("overrides[{i}].addr: not an IPv4 address: {:?}", o.addr))?;
            let key = u32::from(a);
            if up.overrides.contains_key(&key) {
                bail!("overrides[{i}].addr: duplicate address {a}");
            }
            for (f, l) in [("loss_up", o.loss_up), ("loss_down", o.loss_down)] {
                if let Some(p) = l {
                    check_loss(&format!("overrides[{i}].{f}"), p)?;
                }
            }
            for (f, d) in [("delay_us_up", o.delay_us_up), ("delay_us_down", o.delay_us_down)] {
                if d.unwrap_or(0) > MAX_DELAY_US {
                    bail!("overrides[{i}].{f} too large");
                }
            }
            up.overrides.insert(key, OriginOv { delay_ns: o.delay_us_up.map(|d| d * 1000), loss: o.loss_up });
            down.overrides.insert(key, OriginOv { delay_ns: o.delay_us_down.map(|d| d * 1000), loss: o.loss_down });
        }
        Ok((up, down))
    }
}

/// Reads the config from a file, or stdin for "-".
pub fn read(path: &str) -> Result<String> {
    if path == "-" {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut s).context("reading config from stdin")?;
        Ok(s)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read config {path}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASE: &str = r#"{"client":{"netns":"/run/netns/a","tun":"t0"},"server":{"netns":"/run/netns/b","tun":"t1"}"#;

    fn cfg(extra: &str) -> Result<(DirParams, DirParams)> {
        let text = format!("{BASE}{extra}}}");
        Config::parse(&text)?.validate()
    }

    fn err(extra: &str) -> String {
        format!("{:#}", cfg(extra).unwrap_err())
    }

    #[test]
    fn minimal_defaults() {
        let c = Config::parse(&format!("{BASE}}}")).unwrap();
        assert_eq!(c.busy_wait_us, 300);
        assert_eq!((c.cpu, c.mlock, c.idle_poll, c.late_event_us), (None, false, false, 50));
        assert!(c.offload);
        let (u, d) = c.validate().unwrap();
        assert!(u.shaper.is_none() && d.shaper.is_none());
        assert!(!u.needs_segmentation());
        assert_eq!(u.delay_ns, 0);
    }

    #[test]
    fn full_example() {
        let (u, d) = cfg(r#","uplink":{"delay_us":50000,"rate_bps":256000,"trace":null,"queue_packets":1000,
            "queue_bytes":null,"loss":0.0,"seed":1},
            "downlink":{"delay_us":50000,"rate_bps":4000000,"queue_packets":1000,"loss":0.01,"seed":2},
            "overrides":[{"addr":"198.19.0.7","delay_us_up":5000,"delay_us_down":6000,"loss_up":null,"loss_down":0.5}],
            "busy_wait_us":200,"sched_fifo":true,"pcap":null,"stats":"/tmp/x","offload":false"#)
        .unwrap();
        assert_eq!(u.shaper, Some(ShaperSpec::Rate(256000)));
        assert_eq!(u.delay_ns, 50_000_000);
        let key = u32::from(Ipv4Addr::new(198, 19, 0, 7));
        assert_eq!(u.overrides[&key], OriginOv { delay_ns: Some(5_000_000), loss: None });
        assert_eq!(d.overrides[&key], OriginOv { delay_ns: Some(6_000_000), loss: Some(0.5) });
        assert!(d.needs_segmentation());
    }

    #[test]
    fn gilbert_defaults_and_segmentation() {
        let (u, d) = cfg(r#","downlink":{"gilbert":{"p":0.1,"r":0.25}}"#).unwrap();
        assert_eq!(d.gilbert, Some(GilbertCfg { p: 0.1, r: 0.25, loss_good: 0.0, loss_bad: 1.0 }));
        assert!(d.needs_segmentation() && !u.needs_segmentation());
        let (_, d) = cfg(r#","downlink":{"gilbert":{"p":0.0,"r":0.25}}"#).unwrap();
        assert!(!d.needs_segmentation()); // never enters the bad state
    }

    #[test]
    fn lossless_override_makes_direction_lossy() {
        let (u, _) = cfg(r#","overrides":[{"addr":"198.19.0.7","loss_up":0.1}]"#).unwrap();
        assert!(u.needs_segmentation());
    }

    #[test]
    fn validation_errors() {
        assert!(err(r#","uplink":{"loss":1.5}"#).contains("uplink.loss must be in [0, 1]"));
        assert!(err(r#","downlink":{"loss":-0.1}"#).contains("downlink.loss"));
        assert!(err(r#","uplink":{"rate_bps":0}"#).contains("uplink.rate_bps must be a positive"));
        assert!(err(r#","uplink":{"rate_bps":-5}"#).contains("rate_bps"));
        assert!(err(r#","uplink":{"queue_packets":0,"rate_bps":1000}"#).contains("queue_packets must be > 0"));
        assert!(err(r#","uplink":{"rate_bps":1000,"trace":"/x"}"#).contains("mutually exclusive"));
        assert!(err(r#","downlink":{"trace":"/nonexistent/trace"}"#).contains("downlink.trace"));
        assert!(err(r#","overrides":[{"addr":"not-an-ip"}]"#).contains("overrides[0].addr"));
        assert!(err(r#","overrides":[{"addr":"1.2.3.4"},{"addr":"1.2.3.4"}]"#).contains("duplicate"));
        assert!(err(r#","overrides":[{"addr":"1.2.3.4","loss_down":2}]"#).contains("overrides[0].loss_down"));
        assert!(err(r#","downlink":{"gilbert":{"p":1.5,"r":0.5}}"#).contains("downlink.gilbert.p must be in [0, 1]"));
        assert!(err(r#","uplink":{"loss":0.1,"gilbert":{"p":0.1,"r":0.5}}"#).contains("uplink: loss and gilbert"));
        assert!(err(r#","uplink":{"gilbert":{"p":0.1,"r":0.5,"h":1}}"#).contains("unknown field `h`"));
        assert!(err(r#","uplink":{"gilbert":{"p":0.1}}"#).contains("missing field `r`"));
        assert!(err(r#","bogus":1"#).contains("unknown field `bogus`"));
        assert!(err(r#","uplink":{"delay":5}"#).contains("unknown field `delay`"));
        assert!(err(r#","overrides":[{"addr":"1.2.3.4","rtt_us":5}]"#).contains("unknown field `rtt_us`"));
        assert!(err(r#","uplink":{"delay_us":-1}"#).contains("invalid"));
        assert!(err(r#","busy_wait_us":1000000"#).contains("busy_wait_us"));
        assert!(err(r#","linger_us":1000000"#).contains("linger_us"));
        assert!(err(r#","cpu":100000"#).contains("cpu must be"));
        let e = format!("{:#}", Config::parse(r#"{"client":{"netns":"/a","tun":"x"}}"#).unwrap_err());
        assert!(e.contains("missing field `server`"), "{e}");
        let e = format!(
            "{:#}",
            Config::parse(
                r#"{"client":{"netns":"/a","tun":"waytoolonginterfacename"},"server":{"netns":"/b","tun":"x"}}"#
            )
            .unwrap()
            .validate()
            .unwrap_err()
        );
        assert!(e.contains("client.tun"), "{e}");
    }
}
