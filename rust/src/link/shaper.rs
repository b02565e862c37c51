//! Bandwidth models: each computes, at a packet's arrival, the time its last
//! bit leaves the bottleneck (FIFO, so it only depends on earlier packets).
use super::trace::OPPORTUNITY_BYTES;

/// Fixed-rate serializer: departure = max(now, last_departure) + bits/rate,
/// computed exactly in integers (the sub-ns remainder is carried).
#[derive(Debug, Clone)]
pub struct Rate {
    rate_bps: u64,
    last_dep: u64,
    /// Remainder of the last division, in units of 1/rate ns.
    frac: u128,
}

impl Rate {
    pub fn new(rate_bps: u64) -> Self {
        Rate { rate_bps, last_dep: 0, frac: 0 }
    }
    pub fn depart(&mut self, now: u64, bytes: usize) -> u64 {
        if now >= self.last_dep {
            // Idle link: serialization starts now.
            self.last_dep = now;
            self.frac = 0;
        }
        let num = bytes as u128 * 8 * 1_000_000_000 + self.frac;
        let r = self.rate_bps as u128;
        self.last_dep += (num / r) as u64;
        self.frac = num % r;
        self.last_dep
    }
}

/// Mahimahi delivery trace. Opportunity k happens at
/// t0 + (k / n) * period + ts[k % n]; each carries up to 1504 bytes, a packet
/// leaves at the opportunity that carries its last byte, bytes of an
/// opportunity that finds the queue empty are lost. A packet can only use
/// opportunities at or after its arrival.
#[derive(Debug, Clone)]
pub struct Trace {
    t0: u64,
    ts: Vec<u64>,
    period: u64,
    k: u64,
    left: u32,
    started: bool,
}

impl Trace {
    pub fn new(ts: Vec<u64>, t0: u64) -> Self {
        let period = *ts.last().expect("validated non-empty trace");
        Trace { t0, ts, period, k: 0, left: 0, started: false }
    }
    fn opp_time(&self, k: u64) -> u64 {
        let n = self.ts.len() as u64;
        self.t0 + (k / n) * self.period + self.ts[(k % n) as usize]
    }
    /// Index of the first opportunity at or after t.
    fn first_at_or_after(&self, t: u64) -> u64 {
        let n = self.ts.len() as u64;
        if t <= self.t0 {
            return 0;
        }
        let rel = t - self.t0;
        let (c, w) = (rel / self.period, rel % self.period);
        if w == 0 && c > 0 {
            // Exactly at a cycle boundary: the previous cycle's last
            // opportunities (offset == period) happen right now.
            return (c - 1) * n + self.ts.partition_point(|&x| x < self.period) as u64;
        }
        let i = self.ts.partition_point(|&x| x < w) as u64;
        if i == n {
            (c + 1) * n
        } else {
            c * n + i
        }
    }
    pub fn depart(&mut self, now: u64, bytes: usize) -> u64 {
        let (mut k, mut left);
        if self.started && self.opp_time(self.k) >= now && self.left > 0 {
            k = self.k;
            left = self.left;
        } else if self.started && self.opp_time(self.k) >= now {
            k = self.k + 1;
            left = OPPORTUNITY_BYTES;
        } else {
            k = self.first_at_or_after(now);
            left = OPPORTUNITY_BYTES;
        }
        let mut need = bytes as u64;
        loop {
            if need <= left as u64 {
                left -= need as u32;
                break;
            }
            need -= left as u64;
            k += 1;
            left = OPPORTUNITY_BYTES;
        }
        self.started = true;
        self.k = k;
        self.left = left;
        self.opp_time(k)
    }
}

#[derive(Debug, Clone)]
pub enum Shaper {
    Rate(Rate),
    Trace(Trace),
}

impl Shaper {
    pub fn depart(&mut self, now: u64, bytes: usize) -> u64 {
        match self {
            Shaper::Rate(r) => r.depart(now, bytes),
            Shaper::Trace(t) => t.depart(now, bytes),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    const MS: u64 = 1_000_000;

    #[test]
    fn rate_serialization() {
        let mut r = Rate::new(4_000_000);
        // 1500 B at 4 Mbit/s = 3 ms.
        assert_eq!(r.depart(10 * MS, 1500), 13 * MS);
        // Back-to-back arrivals queue behind each other.
        assert_eq!(r.depart(10 * MS, 1500), 16 * MS);
        assert_eq!(r.depart(11 * MS, 1500), 19 * MS);
        // After the link went idle, serialization starts at arrival.
        assert_eq!(r.depart(100 * MS, 100), 100 * MS + 200_000);
    }

    #[test]
    fn rate_carries_remainder() {
        // 1 byte at 3 bit/s = 8/3 s; 3 packets must take exactly 8 s.
        let mut r = Rate::new(3);
        r.depart(0, 1);
        r.depart(0, 1);
        assert_eq!(r.depart(0, 1), 8_000_000_000);
        // 1000 packets of 1500 B at 1 Gbit/s back-to-back = 12 ms exactly.
        let mut r = Rate::new(1_000_000_000);
        let mut d = 0;
        for _ in 0..1000 {
            d = r.depart(0, 1500);
        }
        assert_eq!(d, 12 * MS);
    }

    #[test]
    fn trace_delivery_timing() {
        // Opportunities at 1,1,3 ms, period 3 ms.
        let mut t = Trace::new(vec![MS, MS, 3 * MS], 1000 * MS);
        let t0 = 1000 * MS;
        // First packet at t0 uses the 1 ms opportunity.
        assert_eq!(t.depart(t0, 1500), t0 + MS);
        // 4 bytes are left in that opportunity; a 1500 B packet needs the second one.
        assert_eq!(t.depart(t0, 1500), t0 + MS);
        // Next: the one at 3 ms.
        assert_eq!(t.depart(t0, 100), t0 + 3 * MS);
        // 1404 left at 3 ms; packet of 1404 fits exactly.
        assert_eq!(t.depart(t0 + 2 * MS, 1404), t0 + 3 * MS);
        // Loops: next cycle starts at 3 ms: opportunities at 4, 4, 6 ms.
        assert_eq!(t.depart(t0 + 2 * MS, 1000), t0 + 4 * MS);
        // Idle: leftover bytes at 4 ms are wasted for a packet arriving at 4.5 ms.
        assert_eq!(t.depart(t0 + 4 * MS + MS / 2, 10), t0 + 6 * MS);
        // A packet arriving far later waits for the next opportunity in its cycle.
        assert_eq!(t.depart(t0 + 30 * MS + 1, 10), t0 + 31 * MS);
        // A packet bigger than one opportunity spans two.
        let mut t = Trace::new(vec![MS, 2 * MS], 0);
        assert_eq!(t.depart(0, 2000), 2 * MS);
    }

    #[test]
    fn trace_arrival_exactly_at_opportunity_uses_it() {
        let mut t = Trace::new(vec![5 * MS], 0);
        assert_eq!(t.depart(5 * MS, 100), 5 * MS);
        assert_eq!(t.depart(5 * MS + 1, 100), 10 * MS);
    }

    #[test]
    fn trace_long_run_rate() {
        // One opportunity per ms = 1504 B/ms = 12.032 Mbit/s.
        let mut t = Trace::new(vec![MS], 0);
        let mut last = 0;
        for _ in 0..1000 {
            last = t.depart(0, 1504);
        }
        assert_eq!(last, 1000 * MS);
    }
}
