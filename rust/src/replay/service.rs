//! Per-response service times of a long-lived replay server in bounded memory.
//!
//! A sweep keeps one server up for thousands of loads and asks it for its
//! figures twice per load (SIGUSR1): keeping every time would grow the
//! server by 4 bytes per response and make every snapshot sort them all.
//! Kept instead: the exact count and maximum, and a uniform sample of at most
//! `SAMPLE` times (reservoir, Algorithm R) for the percentiles.
use super::report::ServiceSummary;

pub const SAMPLE: usize = 8192;

pub struct ServiceTimes {
    n: u64,
    max: u32,
    sample: Vec<u32>,
    rng: u64,
}

impl Default for ServiceTimes {
    fn default() -> Self {
        ServiceTimes { n: 0, max: 0, sample: Vec::new(), rng: 0x9e37_79b9_7f4a_7c15 }
    }
}

impl ServiceTimes {
    pub fn add(&mut self, ns: u32) {
        self.n += 1;
        self.max = self.max.max(ns);
        if self.sample.len() < SAMPLE {
            self.sample.push(ns);
            return;
        }
        // the n-th time replaces a random slot with probability SAMPLE / n
        let j = self.next() % self.n;
        if (j as usize) < SAMPLE {
            self.sample[j as usize] = ns;
        }
    }

    /// xorshift64*: deterministic, good enough to pick reservoir slots.
    fn next(&mut self) -> u64 {
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// `{"n", "p50", "p99", "max"}` in microseconds (percentiles of the sample, max exact).
    pub fn summary(&self) -> ServiceSummary {
        let mut sv = self.sample.clone();
        sv.sort_unstable();
        let q = |p: f64| {
            if sv.is_empty() {
                0.0
            } else {
                sv[((sv.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0
            }
        };
        ServiceSummary { n: self.n, p50: q(0.5), p99: q(0.99), max: self.max as f64 / 1000.0 }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn service_times_exact_while_small() {
        let mut s = ServiceTimes::default();
        for v in 1..=1000u32 {
            s.add(v * 1000);
        }
        let j = s.summary();
        assert_eq!(j.n, 1000);
        assert_eq!(j.max, 1000.0);
        assert_eq!(j.p50, 501.0); // index round(999 * 0.5) = 500 -> 501 us
        assert_eq!(j.p99, 990.0);
    }

    #[test]
    fn service_times_bounded_and_representative() {
        let mut s = ServiceTimes::default();
        let n = 1_000_000u64;
        for i in 0..n {
            // uniform 0..100 us, and one outlier that must survive as the max
            let v = if i == 777_777 { 5_000_000 } else { ((i * 7919) % 100_000) as u32 };
            s.add(v);
        }
        assert_eq!(s.n, n);
        assert_eq!(s.sample.len(), SAMPLE);
        assert!(s.sample.capacity() <= 2 * SAMPLE);
        let j = s.summary();
        assert_eq!(j.n, n);
        assert_eq!(j.max, 5000.0);
        let (p50, p99) = (j.p50, j.p99);
        assert!((p50 - 50.0).abs() < 3.0, "p50 {p50}");
        assert!((p99 - 99.0).abs() < 1.0, "p99 {p99}");
        // later times still enter the sample (not only the first SAMPLE)
        let mut t = ServiceTimes::default();
        for i in 0..(20 * SAMPLE as u32) {
            t.add(if i < SAMPLE as u32 { 1 } else { 2 });
        }
        let late = t.sample.iter().filter(|&&v| v == 2).count();
        assert!(late > SAMPLE * 8 / 10, "{late} of {SAMPLE} from the last 95 %");
    }
}
