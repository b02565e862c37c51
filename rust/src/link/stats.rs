//! Statistics: lateness histogram, drop log with digest, per-direction counters, and the
//! objects the emulator prints (typed: `pltlab-dp schema link-stats` / `link-snapshot`).
use schemars::JsonSchema;
use serde::Serialize;

/// Log-linear histogram of nanosecond values: exact below 512 ns, then 256
/// sub-buckets per power of two (relative resolution < 0.4 %).
pub struct Histogram {
    counts: Vec<u64>,
    n: u64,
    sum: u128,
    max: u64,
}

const SUB_BITS: u32 = 8;
const SUB: u64 = 1 << SUB_BITS;

fn bucket(v: u64) -> usize {
    if v < 2 * SUB {
        return v as usize;
    }
    let e = 63 - v.leading_zeros(); // >= SUB_BITS + 1
    let m = (v >> (e - SUB_BITS)) - SUB; // 0..SUB
    (2 * SUB + (e - SUB_BITS - 1) as u64 * SUB + m) as usize
}

/// Lower bound and width of bucket i.
fn bucket_range(i: usize) -> (u64, u64) {
    let i = i as u64;
    if i < 2 * SUB {
        return (i, 1);
    }
    let j = i - 2 * SUB;
    let e = j / SUB + SUB_BITS as u64 + 1;
    let m = j % SUB;
    let w = 1u64 << (e - SUB_BITS as u64);
    ((SUB + m) * w, w)
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram { counts: vec![0; bucket(u64::MAX) + 1], n: 0, sum: 0, max: 0 }
    }
}

impl Histogram {
    pub fn record(&mut self, v: u64) {
        self.counts[bucket(v)] += 1;
        self.n += 1;
        self.sum += v as u128;
        self.max = self.max.max(v);
    }
    /// Value (ns) at quantile q: midpoint of the bucket holding the
    /// ceil(q*n)-th smallest sample, never above the maximum.
    pub fn quantile(&self, q: f64) -> u64 {
        if self.n == 0 {
            return 0;
        }
        let rank = ((q * self.n as f64).ceil() as u64).clamp(1, self.n);
        let mut acc = 0;
        for (i, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= rank {
                let (lo, w) = bucket_range(i);
                return (lo + w / 2).min(self.max);
            }
        }
        self.max
    }
    pub fn mean(&self) -> f64 {
        if self.n == 0 {
            0.0
        } else {
            self.sum as f64 / self.n as f64
        }
    }
    /// Percentiles in microseconds (3 decimals).
    pub fn summary_us(&self) -> Lateness {
        let us = |ns: f64| (ns / 1000.0 * 1000.0).round() / 1000.0;
        Lateness {
            count: self.n,
            p50: us(self.quantile(0.5) as f64),
            p90: us(self.quantile(0.9) as f64),
            p99: us(self.quantile(0.99) as f64),
            p999: us(self.quantile(0.999) as f64),
            max: us(self.max as f64),
            mean: us(self.mean()),
        }
    }
}

/// A histogram's summary in microseconds (log-linear buckets, < 0.4 % relative resolution; max
/// and mean exact).
#[derive(Serialize, JsonSchema, Debug, Clone, PartialEq)]
pub struct Lateness {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
    pub mean: f64,
}

/// Dropped packet indices: FNV-1a 64 digest over all of them (each index as
/// 8 bytes little-endian, in drop order) plus the first `KEEP` indices.
pub struct DropLog {
    pub count: u64,
    pub digest: u64,
    pub first: Vec<u64>,
}

pub const KEEP: usize = 1000;
const FNV_OFFSET: u64 = 0xcbf29ce484222325;
const FNV_PRIME: u64 = 0x100000001b3;

impl Default for DropLog {
    fn default() -> Self {
        DropLog { count: 0, digest: FNV_OFFSET, first: Vec::new() }
    }
}

impl DropLog {
    pub fn add(&mut self, idx: u64) {
        self.count += 1;
        for b in idx.to_le_bytes() {
            self.digest ^= b as u64;
            self.digest = self.digest.wrapping_mul(FNV_PRIME);
        }
        if self.first.len() < KEEP {
            self.first.push(idx);
        }
    }
    pub fn digest_hex(&self) -> String {
        format!("{:016x}", self.digest)
    }
}

/// Counters of one direction.
#[derive(Default)]
pub struct DirStats {
    pub packets_in: u64,
    pub bytes_in: u64,
    pub packets_out: u64,
    pub bytes_out: u64,
    pub nonip_packets: u64,
    pub gso_segmented: u64,
    pub gso_passthrough: u64,
    pub write_errors: u64,
    pub max_queue_packets: u64,
    pub max_queue_bytes: u64,
    pub loss: DropLog,
    pub queue: DropLog,
    pub all: DropLog,
    pub lateness: Histogram,
    /// Lateness since the last snapshot (SIGUSR1), so a caller can scope it to one load.
    pub lateness_interval: Histogram,
    pub packets_out_interval: u64,
    /// Per packet read: how long it may have waited in the TUN before the
    /// emulator read it (bound: the emulator's wake-up delay, or the time
    /// since its previous look at the TUNs while it was running).
    pub ingress: Histogram,
    pub ingress_interval: Histogram,
    /// Since the last snapshot, per packet through the rate (or trace): how long it waited
    /// behind the packets queued before it, its own serialization not included.
    pub queue_wait_interval: Histogram,
    /// The drop counts (random loss, drop-tail) at the last snapshot: the interval's are the
    /// counts since (what a load's loss recovery had to act on).
    pub loss_at_snapshot: u64,
    pub queue_at_snapshot: u64,
}

impl DirStats {
    pub fn record_release(&mut self, late_ns: u64) {
        self.lateness.record(late_ns);
        self.lateness_interval.record(late_ns);
        self.packets_out_interval += 1;
    }
    pub fn record_ingress(&mut self, delay_ns: u64) {
        self.ingress.record(delay_ns);
        self.ingress_interval.record(delay_ns);
    }
    /// Figures since the previous snapshot; starts the next interval.
    pub fn take_interval(&mut self) -> DirInterval {
        let v = DirInterval {
            packets_out: self.packets_out_interval,
            lateness_us: self.lateness_interval.summary_us(),
            ingress_us: self.ingress_interval.summary_us(),
            queue_wait_us: self.queue_wait_interval.summary_us(),
            dropped_loss: self.loss.count - self.loss_at_snapshot,
            dropped_queue: self.queue.count - self.queue_at_snapshot,
        };
        self.loss_at_snapshot = self.loss.count;
        self.queue_at_snapshot = self.queue.count;
        self.lateness_interval = Histogram::default();
        self.ingress_interval = Histogram::default();
        self.queue_wait_interval = Histogram::default();
        self.packets_out_interval = 0;
        v
    }
    pub fn report(&self, in_flight: usize) -> DirReport {
        DirReport {
            packets_in: self.packets_in,
            bytes_in: self.bytes_in,
            packets_out: self.packets_out,
            bytes_out: self.bytes_out,
            dropped_loss: self.loss.count,
            dropped_queue: self.queue.count,
            dropped_write: self.write_errors,
            drop_digest: self.all.digest_hex(),
            drop_indices: self.all.first.clone(),
            loss_digest: self.loss.digest_hex(),
            loss_indices: self.loss.first.clone(),
            nonip_packets: self.nonip_packets,
            gso_segmented: self.gso_segmented,
            gso_passthrough: self.gso_passthrough,
            max_queue_packets: self.max_queue_packets,
            max_queue_bytes: self.max_queue_bytes,
            in_flight_at_exit: in_flight,
            lateness_us: self.lateness.summary_us(),
            ingress_us: self.ingress.summary_us(),
        }
    }
}

/// One direction's figures since the previous snapshot.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct DirInterval {
    /// Packets released.
    pub packets_out: u64,
    /// Their lateness: write time - scheduled release time.
    pub lateness_us: Lateness,
    /// Ingress waits: how long packets may have waited in the TUN before being read.
    pub ingress_us: Lateness,
    /// With a rate or trace: how long each packet waited in the queue behind the packets before
    /// it (its own serialization not included).
    pub queue_wait_us: Lateness,
    /// Packets dropped by the random (or bursty) loss since the previous snapshot.
    pub dropped_loss: u64,
    /// Packets dropped by the full queue (drop-tail) since the previous snapshot.
    pub dropped_queue: u64,
}

/// One direction's counters ("packets" are wire packets after GSO segmentation, "bytes" IP bytes).
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct DirReport {
    /// Entered the pipeline (read from the TUN).
    pub packets_in: u64,
    pub bytes_in: u64,
    /// Written to the other TUN.
    pub packets_out: u64,
    pub bytes_out: u64,
    /// Random loss.
    pub dropped_loss: u64,
    /// Drop-tail.
    pub dropped_queue: u64,
    /// Write to the TUN failed.
    pub dropped_write: u64,
    /// FNV-1a 64 (16 hex digits) over every dropped packet index (loss + queue).
    pub drop_digest: String,
    /// The first 1000 dropped packet indices, ascending.
    pub drop_indices: Vec<u64>,
    /// The same of the random losses only.
    pub loss_digest: String,
    pub loss_indices: Vec<u64>,
    /// Non-IPv4 packets passed.
    pub nonip_packets: u64,
    /// GSO super-packets split in software, and passed whole.
    pub gso_segmented: u64,
    pub gso_passthrough: u64,
    /// Maximum bottleneck queue occupancy (0 without rate or trace).
    pub max_queue_packets: u64,
    pub max_queue_bytes: u64,
    /// Packets still held (queue or delay) when stopped; discarded.
    pub in_flight_at_exit: usize,
    /// Write time - scheduled release time of every packet written.
    pub lateness_us: Lateness,
    /// Per packet read: how long it may have waited in the TUN.
    pub ingress_us: Lateness,
}

/// What delayed a packet: its release, or its ingress (read late from the TUN).
#[derive(Serialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum LateKind {
    Release,
    Ingress,
}

/// A link direction: up (client -> server), down (server -> client).
#[derive(Serialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Way {
    Up,
    Down,
}

/// Every delay of at least `threshold_ns` the emulator saw, with its wall-clock
/// time: what a measurement made meanwhile can be matched against (`pltlab
/// check` calls a sample explained by them a stall).
pub struct LateLog {
    pub threshold_ns: u64,
    pub count: u64,
    /// (wall-clock ns when it ended, delay ns, kind, direction)
    events: Vec<(u64, u64, LateKind, Way)>,
}

pub const KEEP_EVENTS: usize = 100_000;

impl LateLog {
    pub fn new(threshold_ns: u64) -> Self {
        LateLog { threshold_ns, count: 0, events: Vec::new() }
    }
    /// Logs `delay_ns` if it reaches the threshold.
    pub fn note(&mut self, wall_ns: u64, delay_ns: u64, kind: LateKind, dir: usize) {
        if delay_ns < self.threshold_ns || self.threshold_ns == 0 {
            return;
        }
        self.count += 1;
        if self.events.len() < KEEP_EVENTS {
            self.events.push((wall_ns, delay_ns, kind, if dir == 0 { Way::Up } else { Way::Down }));
        }
    }
    pub fn report(&self) -> LateEvents {
        LateEvents { threshold_us: self.threshold_ns as f64 / 1000.0, count: self.count, events: self.events.clone() }
    }
}

/// Every release or ingress delay of at least `threshold_us` (0: none logged).
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct LateEvents {
    pub threshold_us: f64,
    /// All of them; `events` keeps the first 100,000.
    pub count: u64,
    /// `[wall-clock ns when it ended, delay ns, kind, direction]`.
    pub events: Vec<(u64, u64, LateKind, Way)>,
}

/// The standby thread's work (link/emulator.rs).
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct StandbyReport {
    pub tick_us: u64,
    pub started: bool,
    /// Rounds it did because the main loop had not gone on for 60 us.
    pub looks: u64,
    /// Of those, the ones that read or released packets, and how many.
    pub rescues: u64,
    pub packets: u64,
}

/// The precision aids the config asked for and what became of them (tried once, before
/// `ready`): in the ready line and the final statistics alike. An aid is missing when its
/// `*_error` is not null (or it was requested and not applied).
#[derive(Serialize, JsonSchema, Debug, Clone, Default)]
pub struct Aids {
    pub sched_fifo_requested: bool,
    pub sched_fifo_applied: bool,
    /// null unless requested and refused.
    pub sched_fifo_error: Option<String>,
    /// The CPU asked for (null: not pinned).
    pub cpu: Option<usize>,
    /// null unless pinning was asked for and refused.
    pub cpu_error: Option<String>,
    pub mlock_applied: bool,
    /// null unless mlock was asked for and refused.
    pub mlock_error: Option<String>,
    pub idle_poll_requested: bool,
    pub idle_poll_applied: bool,
    /// null unless requested and refused.
    pub idle_poll_error: Option<String>,
}

/// Why the ready line was printed.
#[derive(Serialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ReadyEvent {
    Ready,
}

/// The line printed once both TUNs are attached and the aids tried: the control plane reads the
/// aids here, so every load knows them (not only the statistics at the end).
#[derive(Serialize, Debug, Clone)]
pub struct Ready<'a> {
    pub event: ReadyEvent,
    pub pid: u32,
    #[serde(flatten)]
    pub aids: &'a Aids,
}

/// Why the object was printed.
#[derive(Serialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum StatsEvent {
    Stats,
}

/// The final statistics (`pltlab-dp link`, at SIGTERM/SIGINT: the last stdout line and the
/// config's `stats` file).
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct LinkStats {
    pub event: StatsEvent,
    pub pid: u32,
    /// Seconds from attach to stop.
    pub run_time_s: f64,
    pub busy_wait_us: u64,
    pub offload: bool,
    #[serde(flatten)]
    pub aids: Aids,
    /// Records written (null without pcap).
    pub pcap_packets: Option<u64>,
    pub standby: StandbyReport,
    /// Packet buffers allocated by the pool (steady state: no allocation).
    pub buffers_allocated: u64,
    pub uplink: DirReport,
    pub downlink: DirReport,
    pub late_events: LateEvents,
}

/// Why the object was printed.
#[derive(Serialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum SnapshotEvent {
    Snapshot,
}

/// On SIGUSR1: each direction's figures since the previous snapshot (the control plane takes one
/// before and one after each load).
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct Snapshot {
    pub event: SnapshotEvent,
    pub uplink: DirInterval,
    pub downlink: DirInterval,
}

#[derive(Serialize, JsonSchema, Debug, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub enum UnimpairedEvent {
    Unimpaired,
}

/// On SIGUSR2: the link now passes packets unimpaired (`on`: a warm-up visit's, no delay, loss
/// or rate) or as configured.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct Unimpaired {
    pub event: UnimpairedEvent,
    pub on: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_roundtrip() {
        for v in [0u64, 1, 511, 512, 513, 1000, 12345, 1 << 20, 987_654_321, u64::MAX / 3] {
            let (lo, w) = bucket_range(bucket(v));
            assert!(lo <= v && v < lo + w, "v={v} lo={lo} w={w}");
            assert!(w == 1 || (w as f64) / (lo as f64) < 0.004);
        }
    }

    #[test]
    fn quantiles() {
        let mut h = Histogram::default();
        for v in 1..=1000u64 {
            h.record(v * 1000); // 1..1000 us
        }
        let q = |x| h.quantile(x) as f64 / 1000.0;
        assert!((q(0.5) - 500.0).abs() < 2.0, "{}", q(0.5));
        assert!((q(0.99) - 990.0).abs() < 4.0);
        assert_eq!(h.quantile(1.0), 1_000_000);
        assert!((h.mean() - 500_500.0).abs() < 1e-6);
        let j = h.summary_us();
        assert_eq!(j.max, 1000.0);
        assert_eq!(j.count, 1000);
    }

    #[test]
    fn late_log_keeps_what_reaches_the_threshold() {
        let mut l = LateLog::new(50_000);
        l.note(1, 49_999, LateKind::Release, 0);
        l.note(2, 50_000, LateKind::Release, 1);
        l.note(3, 2_000_000, LateKind::Ingress, 0);
        let j = serde_json::to_value(l.report()).unwrap();
        assert_eq!(j["count"], 2);
        assert_eq!(j["events"][0], serde_json::json!([2, 50_000, "release", "down"]));
        assert_eq!(j["events"][1], serde_json::json!([3, 2_000_000, "ingress", "up"]));
        let mut off = LateLog::new(0);
        off.note(1, u64::MAX, LateKind::Release, 0);
        assert_eq!(off.count, 0);
    }

    #[test]
    fn fnv_digest() {
        let mut d = DropLog::default();
        assert_eq!(d.digest_hex(), "cbf29ce484222325");
        d.add(0);
        // FNV-1a of eight zero bytes.
        let mut h = FNV_OFFSET;
        for b in [0u8; 8] {
            h = (h ^ u64::from(b)).wrapping_mul(FNV_PRIME);
        }
        assert_eq!(d.digest, h);
        for i in 1..2000 {
            d.add(i);
        }
        assert_eq!(d.first.len(), KEEP);
        assert_eq!(d.count, 2000);
    }
}
