//! Queue disciplines of the emulated bottleneck: which arriving packets the
//! queue in front of the rate/trace serializer admits.
//!
//! The serializer is FIFO and computes a packet's departure at its arrival
//! (link/pipeline.rs), so a discipline sees the queue as the (departure,
//! bytes) of the packets still in it ([`Fifo`]) and decides admission: it may
//! drop on arrival (drop-tail, RED, CoDel-style on the queue's sojourn
//! time) but never reorders. `from_params` is the one place that picks the
//! discipline of a direction; a new one is a file here plus its row there.
mod droptail;

use std::collections::VecDeque;

pub use droptail::DropTail;

use super::config::DirParams;

/// A direction's queue discipline, driven by the pipeline's Direction:
/// `dequeue_until(now)`, then `admits(now, size)`; an admitted packet is then
/// `enqueue`d with the departure the serializer gave it.
pub trait QueueDiscipline: Send {
    /// Packets whose departure is at or before `now` have left the queue.
    fn dequeue_until(&mut self, now: u64);
    /// Whether a packet of `size` bytes arriving at `now` joins the queue
    /// (false: it is dropped, counted as a queue drop).
    fn admits(&mut self, now: u64, size: u32) -> bool;
    /// An admitted packet, leaving the serializer at `departure`.
    fn enqueue(&mut self, departure: u64, size: u32);
    /// The packets in the queue, as (departure, bytes) in FIFO order.
    fn queue(&self) -> &Fifo;
}

/// The discipline of one direction, from its validated parameters.
pub fn from_params(p: &DirParams) -> Box<dyn QueueDiscipline> {
    Box::new(DropTail::new(p.queue_packets, p.queue_bytes))
}

/// The occupancy of a FIFO queue: its packets' (departure, bytes).
#[derive(Debug, Default)]
pub struct Fifo {
    pkts: VecDeque<(u64, u32)>,
    bytes: u64,
}

impl Fifo {
    pub fn dequeue_until(&mut self, now: u64) {
        while let Some(&(d, b)) = self.pkts.front() {
            if d > now {
                break;
            }
            self.pkts.pop_front();
            self.bytes -= b as u64;
        }
    }

    pub fn enqueue(&mut self, departure: u64, size: u32) {
        self.pkts.push_back((departure, size));
        self.bytes += size as u64;
    }

    pub fn packets(&self) -> u64 {
        self.pkts.len() as u64
    }

    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// How long a packet arriving at `now` waits for the ones before it.
    pub fn wait(&self, now: u64) -> u64 {
        self.pkts.back().map_or(0, |&(d, _)| d.saturating_sub(now))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;
    use crate::link::config::ShaperSpec;
    use crate::link::pipeline::tests::ipv4;
    use crate::link::pipeline::{Direction, Drop};

    /// A second discipline, defined here alone: admits every other packet.
    #[derive(Default)]
    struct EveryOther {
        q: Fifo,
        n: u64,
    }

    impl QueueDiscipline for EveryOther {
        fn dequeue_until(&mut self, now: u64) {
            self.q.dequeue_until(now);
        }
        fn admits(&mut self, _now: u64, _size: u32) -> bool {
            self.n += 1;
            self.n % 2 == 1
        }
        fn enqueue(&mut self, departure: u64, size: u32) {
            self.q.enqueue(departure, size);
        }
        fn queue(&self) -> &Fifo {
            &self.q
        }
    }

    #[test]
    fn a_second_discipline_plugs_into_the_pipeline() {
        let p = DirParams {
            delay_ns: 0,
            loss: 0.0,
            gilbert: None,
            seed: 1,
            shaper: Some(ShaperSpec::Rate(12_000_000)), // 1 ms per 1500 B
            queue_packets: None,
            queue_bytes: None,
            overrides: HashMap::new(),
        };
        let mut d = Direction::with_qdisc(&p, true, 0, Box::<EveryOther>::default());
        let c = [198, 18, 0, 1];
        let s = [198, 19, 0, 1];
        let res: Vec<Option<Drop>> = (0..6).map(|_| d.arrive(0, ipv4(c, s, 1500)).err().map(|e| e.1)).collect();
        let q = Some(Drop::Queue);
        assert_eq!(res, [None, q, None, q, None, q]);
        assert_eq!((d.st.queue.count, d.st.max_queue_packets, d.in_flight()), (3, 3, 3));
        // the admitted ones leave one by one at the rate, as with drop-tail
        let out: Vec<u64> = std::iter::from_fn(|| d.pop_due(u64::MAX).map(|x| x.0)).collect();
        assert_eq!(out, [1_000_000, 2_000_000, 3_000_000]);
    }

    #[test]
    fn fifo_occupancy_and_wait() {
        let mut q = Fifo::default();
        q.enqueue(10, 100);
        q.enqueue(20, 50);
        assert_eq!((q.packets(), q.bytes(), q.wait(5)), (2, 150, 15));
        q.dequeue_until(10);
        assert_eq!((q.packets(), q.bytes(), q.wait(30)), (1, 50, 0));
    }
}
