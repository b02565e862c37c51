//! One direction of the emulated link, as a pure state machine with time
//! passed in (ns, CLOCK_MONOTONIC in production):
//!
//! arrival -> loss (random: one ChaCha draw per IPv4 packet, in arrival order; Gilbert-Elliott:
//!            a second draw for its state's move; link/loss.rs)
//!         -> queue (its discipline: link/qdisc, drop-tail today)
//!            + rate/trace serializer (only with a rate/trace)
//!         -> propagation delay (per-origin override)
//!         -> release heap keyed (release_time, seq).
//!
//! Departure times of a FIFO serializer only depend on earlier packets, so the
//! release time is computed at arrival; the queue itself is represented by the
//! (departure, bytes) of packets still in it, which its discipline admits to.
use std::cmp::Ordering;
use std::collections::{BinaryHeap, HashMap};

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::buf::Pkt;
use super::config::{DirParams, OriginOv, ShaperSpec};
use super::loss::{Gilbert, LossModel};
use super::qdisc::{self, QueueDiscipline};
use super::shaper::{Rate, Shaper, Trace};
use super::stats::DirStats;

struct Ent {
    release: u64,
    seq: u64,
    pkt: Pkt,
}
impl PartialEq for Ent {
    fn eq(&self, o: &Self) -> bool {
        (self.release, self.seq) == (o.release, o.seq)
    }
}
impl Eq for Ent {}
impl PartialOrd for Ent {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Ent {
    // Reversed: BinaryHeap is a max-heap, we want the earliest (release, seq).
    fn cmp(&self, o: &Self) -> Ordering {
        (o.release, o.seq).cmp(&(self.release, self.seq))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drop {
    Loss,
    Queue,
}

pub struct Direction {
    delay_ns: u64,
    loss: LossModel,
    rng: ChaCha20Rng,
    overrides: HashMap<u32, OriginOv>,
    /// Server-side address = destination (uplink) or source (downlink).
    match_dst: bool,
    shaper: Option<Shaper>,
    qdisc: Box<dyn QueueDiscipline>,
    heap: BinaryHeap<Ent>,
    seq: u64,
    /// Index of the next IPv4 packet (the loss draw index).
    idx: u64,
    pub segment: bool,
    pub st: DirStats,
    /// Unimpaired (a warm-up visit's packets, `set_unimpaired`): released at once, no loss draw
    /// (the draw index stays where it was), no rate or queue; counted only as packets in.
    unimpaired: bool,
}

impl Direction {
    /// `uplink`: overrides match the destination address, else the source.
    /// `t0`: start time of a delivery trace.
    pub fn new(p: &DirParams, uplink: bool, t0: u64) -> Self {
        Self::with_qdisc(p, uplink, t0, qdisc::from_params(p))
    }

    /// Like `new`, with the queue discipline given.
    pub fn with_qdisc(p: &DirParams, uplink: bool, t0: u64, qdisc: Box<dyn QueueDiscipline>) -> Self {
        let shaper = p.shaper.as_ref().map(|s| match s {
            ShaperSpec::Rate(r) => Shaper::Rate(Rate::new(*r)),
            ShaperSpec::Trace(ts) => Shaper::Trace(Trace::new(ts.clone(), t0)),
        });
        Direction {
            delay_ns: p.delay_ns,
            loss: match &p.gilbert {
                Some(g) => LossModel::Gilbert(Gilbert::new(g)),
                None => LossModel::Random(p.loss),
            },
            rng: ChaCha20Rng::seed_from_u64(p.seed),
            overrides: p.overrides.clone(),
            match_dst: uplink,
            shaper,
            qdisc,
            heap: BinaryHeap::new(),
            seq: 0,
            idx: 0,
            segment: p.needs_segmentation(),
            st: DirStats::default(),
            unimpaired: false,
        }
    }

    /// From now on packets pass unimpaired (`on`) or as configured; packets already in flight
    /// keep their release times.
    pub fn set_unimpaired(&mut self, on: bool) {
        self.unimpaired = on;
    }

    fn server_addr(&self, ip: &[u8]) -> Option<u32> {
        if ip.len() < 20 || ip[0] >> 4 != 4 {
            return None;
        }
        let o = if self.match_dst { 16 } else { 12 };
        Some(u32::from_be_bytes([ip[o], ip[o + 1], ip[o + 2], ip[o + 3]]))
    }

    /// A packet arrives at `now`. Returns the packet back if it is dropped.
    pub fn arrive(&mut self, now: u64, pkt: Pkt) -> Result<(), (Pkt, Drop)> {
        let size = pkt.wire_len();
        self.st.packets_in += 1;
        self.st.bytes_in += size as u64;
        if self.unimpaired {
            self.push(now, pkt);
            return Ok(());
        }
        let Some(addr) = self.server_addr(pkt.ip()) else {
            // Not IPv4: base delay only, no loss draw, no queue.
            self.st.nonip_packets += 1;
            self.push(now + self.delay_ns, pkt);
            return Ok(());
        };
        let idx = self.idx;
        self.idx += 1;
        let ov = self.overrides.get(&addr).copied().unwrap_or_default();
        let u: f64 = self.rng.gen();
        let lost = match ov.loss {
            Some(p) => u < p, // an origin's own loss is random
            None => {
                let rng = &mut self.rng;
                self.loss.lost(u, || rng.gen())
            }
        };
        if lost {
            self.st.loss.add(idx);
            self.st.all.add(idx);
            return Err((pkt, Drop::Loss));
        }
        let delay = ov.delay_ns.unwrap_or(self.delay_ns);
        let dep = match &mut self.shaper {
            None => now,
            Some(sh) => {
                self.qdisc.dequeue_until(now);
                if !self.qdisc.admits(now, size as u32) {
                    self.st.queue.add(idx);
                    self.st.all.add(idx);
                    return Err((pkt, Drop::Queue));
                }
                // FIFO: it waits until the last packet queued before it has left
                self.st.queue_wait_interval.record(self.qdisc.queue().wait(now));
                let dep = sh.depart(now, size);
                self.qdisc.enqueue(dep, size as u32);
                let q = self.qdisc.queue();
                self.st.max_queue_packets = self.st.max_queue_packets.max(q.packets());
                self.st.max_queue_bytes = self.st.max_queue_bytes.max(q.bytes());
                dep
            }
        };
        self.push(dep + delay, pkt);
        Ok(())
    }

    fn push(&mut self, release: u64, pkt: Pkt) {
        self.seq += 1;
        self.heap.push(Ent { release, seq: self.seq, pkt });
    }

    pub fn next_release(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.release)
    }

    /// Pops the earliest packet if its release time is <= now.
    pub fn pop_due(&mut self, now: u64) -> Option<(u64, Pkt)> {
        if self.heap.peek()?.release <= now {
            let e = self.heap.pop().unwrap();
            Some((e.release, e.pkt))
        } else {
            None
        }
    }

    pub fn in_flight(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::link::config::GilbertCfg;

    const MS: u64 = 1_000_000;

    pub fn ipv4(src: [u8; 4], dst: [u8; 4], total: usize) -> Pkt {
        let mut ip = vec![0u8; total];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        ip[9] = 17;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        Pkt::from_ip(&ip)
    }

    fn params() -> DirParams {
        DirParams {
            delay_ns: 0,
            loss: 0.0,
            gilbert: None,
            seed: 1,
            shaper: None,
            queue_packets: None,
            queue_bytes: None,
            overrides: HashMap::new(),
        }
    }

    const C: [u8; 4] = [198, 18, 0, 1];
    const S: [u8; 4] = [198, 19, 0, 1];

    fn drain(d: &mut Direction, now: u64) -> Vec<(u64, usize)> {
        let mut v = vec![];
        while let Some((t, p)) = d.pop_due(now) {
            v.push((t, p.wire_len()));
        }
        v
    }

    #[test]
    fn delay_and_rate() {
        let mut p = params();
        p.delay_ns = 10 * MS;
        p.shaper = Some(ShaperSpec::Rate(4_000_000));
        let mut d = Direction::new(&p, true, 0);
        for _ in 0..3 {
            d.arrive(0, ipv4(C, S, 1500)).unwrap();
        }
        assert_eq!(d.next_release(), Some(13 * MS));
        assert!(d.pop_due(13 * MS - 1).is_none());
        assert_eq!(drain(&mut d, u64::MAX), vec![(13 * MS, 1500), (16 * MS, 1500), (19 * MS, 1500)]);
        assert_eq!(d.st.max_queue_packets, 3);
        // each waited for the ones before it to be sent (3 ms per 1500 B), not for its own sending
        let w = serde_json::to_value(d.st.take_interval().queue_wait_us).unwrap();
        assert_eq!((w["count"].as_u64(), w["max"].as_f64(), w["mean"].as_f64()), (Some(3), Some(6000.0), Some(3000.0)));
        // a packet arriving once the queue has drained waits for nothing
        d.arrive(u64::MAX / 2, ipv4(C, S, 1500)).unwrap();
        assert_eq!(serde_json::to_value(d.st.take_interval().queue_wait_us).unwrap()["max"].as_f64(), Some(0.0));
    }

    #[test]
    fn no_rate_means_no_queue() {
        let mut p = params();
        p.queue_packets = Some(1);
        p.delay_ns = 5;
        let mut d = Direction::new(&p, true, 0);
        for _ in 0..100 {
            d.arrive(0, ipv4(C, S, 1500)).unwrap();
        }
        assert_eq!(d.in_flight(), 100);
        assert_eq!(d.next_release(), Some(5));
    }

    #[test]
    fn droptail_packets() {
        let mut p = params();
        p.shaper = Some(ShaperSpec::Rate(12_000_000)); // 1 ms per 1500 B
        p.queue_packets = Some(3);
        let mut d = Direction::new(&p, false, 0);
        let res: Vec<bool> = (0..5).map(|_| d.arrive(0, ipv4(S, C, 1500)).is_ok()).collect();
        assert_eq!(res, [true, true, true, false, false]);
        // At 1 ms the first one has left: room for exactly one more.
        assert!(d.arrive(MS, ipv4(S, C, 1500)).is_ok());
        assert_eq!(d.arrive(MS, ipv4(S, C, 1500)).unwrap_err().1, Drop::Queue);
        assert_eq!(d.st.queue.count, 3);
        assert_eq!(d.st.queue.first, vec![3, 4, 6]);
        // a snapshot's interval counts the drops since the previous one (per load), then none
        let iv = d.st.take_interval();
        assert_eq!((iv.dropped_queue, iv.dropped_loss), (3, 0));
        assert_eq!(d.arrive(MS, ipv4(S, C, 1500)).unwrap_err().1, Drop::Queue);
        assert_eq!(d.st.take_interval().dropped_queue, 1);
        assert_eq!(d.st.take_interval().dropped_queue, 0);
        let out = drain(&mut d, u64::MAX);
        assert_eq!(out.iter().map(|x| x.0).collect::<Vec<_>>(), vec![MS, 2 * MS, 3 * MS, 4 * MS]);
    }

    #[test]
    fn droptail_bytes() {
        let mut p = params();
        p.shaper = Some(ShaperSpec::Rate(8_000_000)); // 1 us per byte
        p.queue_bytes = Some(3000);
        let mut d = Direction::new(&p, true, 0);
        assert!(d.arrive(0, ipv4(C, S, 1500)).is_ok());
        assert!(d.arrive(0, ipv4(C, S, 1000)).is_ok());
        assert!(d.arrive(0, ipv4(C, S, 600)).is_err()); // 3100 > 3000
        assert!(d.arrive(0, ipv4(C, S, 500)).is_ok()); // exactly 3000
        assert!(d.arrive(0, ipv4(C, S, 20)).is_err());
        assert_eq!(d.st.max_queue_bytes, 3000);
        // After the 1500 B packet left (1.5 ms), 1500 B fit again.
        assert!(d.arrive(1_500_000, ipv4(C, S, 1500)).is_ok());
        assert!(d.arrive(1_500_000, ipv4(C, S, 20)).is_err());
    }

    #[test]
    fn snapshot_counts_random_losses_since_the_previous_one() {
        let mut p = params();
        p.loss = 1.0;
        let mut d = Direction::new(&p, true, 0);
        for i in 0..7 {
            assert_eq!(d.arrive(i, ipv4(C, S, 100)).unwrap_err().1, Drop::Loss);
        }
        let iv = d.st.take_interval();
        assert_eq!((iv.dropped_loss, iv.dropped_queue), (7, 0));
        let _ = d.arrive(8, ipv4(C, S, 100));
        assert_eq!(d.st.take_interval().dropped_loss, 1);
        assert_eq!(d.st.loss.count, 8); // (the run's totals stay whole)
    }

    fn loss_run(seed: u64, p_loss: f64, n: usize) -> Vec<u64> {
        let mut p = params();
        p.loss = p_loss;
        p.seed = seed;
        let mut d = Direction::new(&p, true, 0);
        for i in 0..n {
            let _ = d.arrive(i as u64, ipv4(C, S, 100));
        }
        assert_eq!(d.st.loss.count as usize + d.in_flight(), n);
        d.st.loss.first.clone()
    }

    #[test]
    fn loss_determinism_and_rate() {
        let a = loss_run(42, 0.05, 10_000);
        let b = loss_run(42, 0.05, 10_000);
        assert_eq!(a, b);
        assert_ne!(a, loss_run(43, 0.05, 10_000));
        let rate = a.len() as f64 / 10_000.0;
        // first holds at most 1000 indices; 5% of 10000 = 500 fits.
        assert!((rate - 0.05).abs() <= 0.005, "loss rate {rate}");
        assert!(loss_run(1, 0.0, 1000).is_empty());
        assert_eq!(loss_run(1, 1.0, 100).len(), 100);
    }

    #[test]
    fn gilbert_direction_drops_in_bursts() {
        // 20 % loss in bursts of 5 on average (r = 0.2, p = 0.05): the drop log's indices come in
        // runs, random loss's mostly alone
        let runs = |gilbert: Option<GilbertCfg>, loss: f64| {
            let mut p = params();
            (p.gilbert, p.loss, p.seed) = (gilbert, loss, 5);
            let mut d = Direction::new(&p, true, 0);
            for i in 0..20_000 {
                let _ = d.arrive(i as u64, ipv4(C, S, 100));
            }
            // (the log keeps the first 1000 indices: the bursts among them)
            let idx = &d.st.loss.first;
            let bursts = 1 + idx.windows(2).filter(|w| w[1] != w[0] + 1).count();
            (d.st.loss.count as f64 / 20_000.0, idx.len() as f64 / bursts as f64)
        };
        let (rate, burst) = runs(Some(GilbertCfg { p: 0.05, r: 0.2, loss_good: 0.0, loss_bad: 1.0 }), 0.0);
        assert!((rate - 0.2).abs() < 0.03 && (4.0..6.5).contains(&burst), "rate {rate}, mean burst {burst}");
        let (rate, burst) = runs(None, 0.2);
        assert!((rate - 0.2).abs() < 0.03 && burst < 1.5, "rate {rate}, mean burst {burst}");
    }

    #[test]
    fn loss_draw_is_by_index_regardless_of_override() {
        // Same seed: an override that drops everything for one origin must not
        // shift the draws (and hence drops) of the other packets.
        let mut p = params();
        p.loss = 0.1;
        p.seed = 7;
        let mut base = Direction::new(&p, true, 0);
        let other = [198, 19, 0, 9];
        p.overrides.insert(u32::from_be_bytes(other), OriginOv { delay_ns: None, loss: Some(1.0) });
        let mut ov = Direction::new(&p, true, 0);
        for i in 0..2000 {
            let dst = if i % 3 == 0 { other } else { S };
            let _ = base.arrive(0, ipv4(C, dst, 100));
            let _ = ov.arrive(0, ipv4(C, dst, 100));
        }
        let expect: Vec<u64> = (0..2000u64).filter(|i| i % 3 == 0 || base.st.loss.first.contains(i)).collect();
        let got: Vec<u64> = ov.st.loss.first.clone();
        assert_eq!(got[..], expect[..got.len()]);
    }

    #[test]
    fn per_origin_delay_and_heap_order() {
        let mut p = params();
        p.delay_ns = 50 * MS;
        let fast = [198, 19, 0, 7];
        p.overrides.insert(u32::from_be_bytes(fast), OriginOv { delay_ns: Some(5 * MS), loss: None });
        // Downlink: matches the source address.
        let mut d = Direction::new(&p, false, 0);
        d.arrive(0, ipv4(S, C, 100)).unwrap(); // 50 ms
        d.arrive(1, ipv4(fast, C, 200)).unwrap(); // 5 ms
        d.arrive(2, ipv4(C, fast, 300)).unwrap(); // dst match ignored on downlink: 50 ms
        d.arrive(3, ipv4(fast, C, 400)).unwrap();
        // Identical release times keep arrival order.
        d.arrive(2, ipv4(S, C, 500)).unwrap();
        let out = drain(&mut d, u64::MAX);
        assert_eq!(
            out,
            vec![(5 * MS + 1, 200), (5 * MS + 3, 400), (50 * MS, 100), (50 * MS + 2, 300), (50 * MS + 2, 500)]
        );
        // Uplink matches the destination.
        let mut u = Direction::new(&p, true, 0);
        u.arrive(0, ipv4(C, fast, 100)).unwrap();
        assert_eq!(u.next_release(), Some(5 * MS));
    }

    #[test]
    fn unimpaired_packets_pass_at_once_and_leave_the_loss_draws_alone() {
        // a warm-up's packets: no delay, no loss, no rate; the configured link's draws then go
        // on from where they were, so the measured load meets the same losses as without them
        let mut p = params();
        p.delay_ns = 10 * MS;
        p.loss = 0.3;
        p.shaper = Some(ShaperSpec::Rate(8_000_000)); // 1 ms per 1000-byte packet
        let mut plain = Direction::new(&p, true, 0);
        let mut warm = Direction::new(&p, true, 0);
        warm.set_unimpaired(true);
        for i in 0..50u64 {
            assert!(warm.arrive(i, ipv4(C, S, 1000)).is_ok());
        }
        assert_eq!(drain(&mut warm, 49), (0..50u64).map(|i| (i, 1000)).collect::<Vec<_>>());
        warm.set_unimpaired(false);
        let t = 100 * MS;
        let fate = |d: &mut Direction| {
            (0..40u64).map(|i| d.arrive(t + i * 2 * MS, ipv4(C, S, 1000)).is_ok()).collect::<Vec<_>>()
        };
        let (a, b) = (fate(&mut plain), fate(&mut warm));
        assert_eq!(a, b);
        assert!(a.iter().any(|ok| !ok) && a.iter().any(|ok| *ok));
        assert_eq!(drain(&mut plain, u64::MAX), drain(&mut warm, u64::MAX));
        assert!(drain(&mut warm, u64::MAX).is_empty());
    }

    #[test]
    fn non_ipv4_passes_with_base_delay() {
        let mut p = params();
        p.delay_ns = 7;
        p.loss = 1.0;
        p.shaper = Some(ShaperSpec::Rate(1000));
        let mut d = Direction::new(&p, true, 0);
        let mut v6 = vec![0u8; 60];
        v6[0] = 0x60;
        d.arrive(100, Pkt::from_ip(&v6)).unwrap();
        assert_eq!(d.next_release(), Some(107));
        assert_eq!(d.st.nonip_packets, 1);
        // The IPv4 loss index is unaffected.
        assert!(d.arrive(100, ipv4(C, S, 100)).is_err());
        assert_eq!(d.st.loss.first, vec![0]);
    }

    #[test]
    fn trace_direction() {
        let mut p = params();
        p.shaper = Some(ShaperSpec::Trace(vec![MS, 2 * MS]));
        p.delay_ns = 10;
        let mut d = Direction::new(&p, true, 1000);
        d.arrive(1000, ipv4(C, S, 1504)).unwrap();
        d.arrive(1000, ipv4(C, S, 1504)).unwrap();
        d.arrive(1000, ipv4(C, S, 1504)).unwrap();
        let out = drain(&mut d, u64::MAX);
        assert_eq!(
            out.iter().map(|x| x.0).collect::<Vec<_>>(),
            vec![1000 + MS + 10, 1000 + 2 * MS + 10, 1000 + 3 * MS + 10]
        );
    }
}
