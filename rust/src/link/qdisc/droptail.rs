//! Drop-tail: an arriving packet is dropped when the queue holds its packet
//! limit, or when it would take the queue past its byte limit.
use super::{Fifo, QueueDiscipline};

pub struct DropTail {
    q: Fifo,
    max_packets: Option<u64>,
    max_bytes: Option<u64>,
}

impl DropTail {
    /// None: no limit of that kind.
    pub fn new(max_packets: Option<u64>, max_bytes: Option<u64>) -> Self {
        DropTail { q: Fifo::default(), max_packets, max_bytes }
    }
}

impl QueueDiscipline for DropTail {
    fn dequeue_until(&mut self, now: u64) {
        self.q.dequeue_until(now);
    }

    fn admits(&mut self, _now: u64, size: u32) -> bool {
        let full = self.max_packets.is_some_and(|l| self.q.packets() >= l)
            || self.max_bytes.is_some_and(|l| self.q.bytes() + size as u64 > l);
        !full
    }

    fn enqueue(&mut self, departure: u64, size: u32) {
        self.q.enqueue(departure, size);
    }

    fn queue(&self) -> &Fifo {
        &self.q
    }
}
