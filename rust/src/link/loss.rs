//! Loss models of one direction, pure: each IPv4 packet's fate from uniform draws the pipeline
//! takes from its seeded ChaCha stream (one draw per packet for random loss, as before, so loss
//! patterns of earlier configurations stay as they were; a second draw for the Gilbert-Elliott
//! state's move).
use super::config::GilbertCfg;

/// How one direction loses packets.
#[derive(Debug, Clone, PartialEq)]
pub enum LossModel {
    /// Each packet lost with this probability, independently.
    Random(f64),
    /// Gilbert-Elliott: a two-state Markov chain, each state with its own loss probability.
    Gilbert(Gilbert),
}

/// Gilbert-Elliott state machine (netem's `loss gemodel p r 1-h 1-k`): from good to bad with
/// probability `p` per packet, back with `r`; a packet is lost with `loss_bad` in the bad state,
/// `loss_good` in the good one. Starts good. Stationary share of the bad state: p / (p + r); with
/// loss_bad 1 and loss_good 0 a burst of losses lasts 1 / r packets on average.
#[derive(Debug, Clone, PartialEq)]
pub struct Gilbert {
    pub p: f64,
    pub r: f64,
    pub loss_good: f64,
    pub loss_bad: f64,
    pub bad: bool,
}

impl Gilbert {
    pub fn new(c: &GilbertCfg) -> Self {
        Gilbert { p: c.p, r: c.r, loss_good: c.loss_good, loss_bad: c.loss_bad, bad: false }
    }

    /// One packet: lost in the current state (`u_loss`), then the state moves (`u_move`).
    pub fn step(&mut self, u_loss: f64, u_move: f64) -> bool {
        let lost = u_loss < if self.bad { self.loss_bad } else { self.loss_good };
        if u_move < if self.bad { self.r } else { self.p } {
            self.bad = !self.bad;
        }
        lost
    }

    /// The long-run loss rate.
    #[cfg(test)]
    pub fn mean_loss(&self) -> f64 {
        if self.p + self.r == 0.0 {
            return self.loss_good; // never leaves the good state
        }
        let bad = self.p / (self.p + self.r);
        bad * self.loss_bad + (1.0 - bad) * self.loss_good
    }
}

impl LossModel {
    /// Whether the packet is lost; `u_loss` is the packet's draw, `more` gives further draws.
    pub fn lost(&mut self, u_loss: f64, more: impl FnOnce() -> f64) -> bool {
        match self {
            LossModel::Random(p) => u_loss < *p,
            LossModel::Gilbert(g) => g.step(u_loss, more()),
        }
    }

    /// Whether this model ever loses a packet (GSO super-packets must then be segmented).
    pub fn lossy(&self) -> bool {
        match self {
            LossModel::Random(p) => *p > 0.0,
            LossModel::Gilbert(g) => g.loss_good > 0.0 || (g.p > 0.0 && g.loss_bad > 0.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    fn gilbert(p: f64, r: f64, loss_good: f64, loss_bad: f64) -> LossModel {
        LossModel::Gilbert(Gilbert::new(&GilbertCfg { p, r, loss_good, loss_bad }))
    }

    /// (loss rate, mean length of runs of consecutive losses) over `n` packets.
    fn run(m: &mut LossModel, seed: u64, n: usize) -> (f64, f64) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let (mut lost, mut bursts, mut prev) = (0usize, 0usize, false);
        for _ in 0..n {
            let u: f64 = rng.gen();
            let l = m.lost(u, || rng.gen());
            lost += l as usize;
            bursts += (l && !prev) as usize;
            prev = l;
        }
        (lost as f64 / n as f64, lost as f64 / bursts.max(1) as f64)
    }

    #[test]
    fn gilbert_mean_loss_and_burst_length() {
        // 25 % loss in bursts of 4 packets on average: r = 1/4, p / (p + r) = 0.25 -> p = 1/12.
        let mut m = gilbert(1.0 / 12.0, 0.25, 0.0, 1.0);
        let (rate, burst) = run(&mut m, 7, 400_000);
        assert!((rate - 0.25).abs() < 0.01, "loss rate {rate}");
        assert!((burst - 4.0).abs() < 0.15, "mean burst {burst}");
    }

    #[test]
    fn random_loss_has_bursts_of_one_over_one_minus_p() {
        // independent losses at 25 %: runs of 1 / (1 - 0.25) = 1.33 packets on average
        let (rate, burst) = run(&mut LossModel::Random(0.25), 7, 400_000);
        assert!((rate - 0.25).abs() < 0.01, "loss rate {rate}");
        assert!((burst - 4.0 / 3.0).abs() < 0.05, "mean burst {burst}");
    }

    #[test]
    fn gilbert_with_state_loss_probabilities() {
        // bad state loses half, good state 1 %: mean = 0.2 * 0.5 + 0.8 * 0.01 = 0.108
        let g = Gilbert::new(&GilbertCfg { p: 0.05, r: 0.2, loss_good: 0.01, loss_bad: 0.5 });
        assert!((g.mean_loss() - 0.108).abs() < 1e-12);
        let (rate, _) = run(&mut LossModel::Gilbert(g), 3, 400_000);
        assert!((rate - 0.108).abs() < 0.006, "loss rate {rate}");
    }

    #[test]
    fn gilbert_is_deterministic_per_seed_and_starts_good() {
        let mut a = gilbert(0.1, 0.3, 0.0, 1.0);
        let mut b = gilbert(0.1, 0.3, 0.0, 1.0);
        assert_eq!(run(&mut a, 11, 10_000), run(&mut b, 11, 10_000));
        // starts good, and with p = 0 never leaves it: no loss at all
        assert_eq!(run(&mut gilbert(0.0, 0.3, 0.0, 1.0), 1, 10_000).0, 0.0);
        assert!(!gilbert(0.0, 0.3, 0.0, 1.0).lossy());
        assert!(gilbert(0.01, 0.3, 0.0, 1.0).lossy());
    }
}
