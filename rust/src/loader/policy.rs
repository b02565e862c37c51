//! Which ready requests the scheduler releases to their pools, and in which order a pool
//! serves them: the scheduler's policy, one per browser model of the control plane.
//!
//! * `Archive`: every request is released when ready; a pool's queue is FIFO.
//! * `Chromium` (Chromium's ResourceScheduler and Blink's tight mode, per frame): delayable
//!   (low-priority) requests are released at most `delayable_limit` at a time, and while a
//!   tight phase is on (until every object of its `until` has arrived, and its `delay_ms`
//!   more) at most `tight_limit` of its own; held ones go FIFO per phase; in a pool's queue
//!   every other request goes ahead of the delayable ones.
//!
//! A plan without delayable objects gets `Archive`: `Chromium` would do the same for it.
use std::collections::VecDeque;

use super::events::{Action, Timer};
use super::plan::{Plan, TightPhase};

pub enum Policy {
    Archive,
    Chromium(Chromium),
}

pub struct Chromium {
    delayable: Vec<bool>,
    delayable_limit: Option<usize>,
    tight_limit: Option<usize>,
    /// Ready delayable requests held back by the limits, FIFO per phase slot (`slot`).
    held: Vec<VecDeque<usize>>,
    /// Delayable requests released and not yet arrived.
    out: usize,
    /// The tight phases (`tight_phases`, then the `tight_until` one) and their state.
    phases: Vec<Phase>,
    /// Per object: the phases whose `until` it is part of.
    in_tight: Vec<Vec<usize>>,
    /// Per object: its held-queue slot (its phase; phases.len() = none).
    slot: Vec<usize>,
}

struct Phase {
    /// Objects of `until` not yet arrived.
    left: usize,
    /// Tight mode in force (until `delay_ms` after the last of `until`).
    on: bool,
    /// Its delayable requests released and not yet arrived.
    out: usize,
    delay_ms: f64,
}

impl Policy {
    pub fn for_plan(plan: &Plan) -> Policy {
        if plan.objects.iter().any(|o| o.delayable) {
            Policy::Chromium(Chromium::new(plan))
        } else {
            Policy::Archive
        }
    }

    /// Object `i` is ready: whether it may go to its pool now (else it is held, and comes
    /// back from `next_held`).
    pub fn admit(&mut self, i: usize) -> bool {
        match self {
            Policy::Archive => true,
            Policy::Chromium(c) => c.admit(i),
        }
    }

    /// Puts released object `i` into its pool's queue.
    pub fn enqueue(&mut self, i: usize, queue: &mut VecDeque<usize>) {
        match self {
            Policy::Archive => queue.push_back(i),
            Policy::Chromium(c) => c.enqueue(i, queue),
        }
    }

    /// Object `i` arrived at `now` (timers to set go to `out`).
    pub fn arrived(&mut self, i: usize, now: f64, out: &mut Vec<Action>) {
        if let Policy::Chromium(c) = self {
            c.arrived(i, now, out);
        }
    }

    /// Timer `TightEnd(k)` fired.
    pub fn phase_ended(&mut self, k: usize) {
        if let Policy::Chromium(c) = self {
            c.phases[k].on = false;
        }
    }

    /// The next held request that may go now, if any.
    pub fn next_held(&mut self) -> Option<usize> {
        match self {
            Policy::Archive => None,
            Policy::Chromium(c) => c.next_held(),
        }
    }
}

impl Chromium {
    fn new(plan: &Plan) -> Chromium {
        let n = plan.objects.len();
        let mut defs: Vec<TightPhase> = plan.tight_phases.clone();
        let legacy = (!plan.tight_until.is_empty()).then(|| {
            defs.push(TightPhase { until: plan.tight_until.clone(), delay_ms: plan.tight_delay_ms, doc: None });
            defs.len() - 1
        });
        let mut in_tight = vec![Vec::new(); n];
        let mut phases = Vec::new();
        for (k, d) in defs.iter().enumerate() {
            let mut until = d.until.clone();
            until.sort_unstable();
            until.dedup();
            for &t in &until {
                in_tight[t].push(k);
            }
            phases.push(Phase { left: until.len(), on: !until.is_empty(), out: 0, delay_ms: d.delay_ms });
        }
        let slot = plan.objects.iter().map(|o| o.tight_phase.or(legacy).unwrap_or(phases.len())).collect();
        Chromium {
            delayable: plan.objects.iter().map(|o| o.delayable).collect(),
            delayable_limit: plan.delayable_limit,
            tight_limit: plan.tight_limit,
            held: vec![VecDeque::new(); phases.len() + 1],
            out: 0,
            phases,
            in_tight,
            slot,
        }
    }

    /// A delayable request of slot `k` may be released now.
    fn gate_open(&self, k: usize) -> bool {
        let global = self.delayable_limit.is_none_or(|d| self.out < d);
        let tight = match (self.phases.get(k), self.tight_limit) {
            (Some(ph), Some(t)) if ph.on => ph.out < t,
            _ => true,
        };
        global && tight
    }

    fn admit(&mut self, i: usize) -> bool {
        let k = self.slot[i];
        if self.delayable[i] && (!self.held[k].is_empty() || !self.gate_open(k)) {
            self.held[k].push_back(i);
            return false;
        }
        true
    }

    fn enqueue(&mut self, i: usize, queue: &mut VecDeque<usize>) {
        if self.delayable[i] {
            self.out += 1;
            if let Some(ph) = self.phases.get_mut(self.slot[i]) {
                ph.out += 1;
            }
            queue.push_back(i);
        } else {
            // a pool serves its queued requests by priority: ahead of every delayable one
            let pos = queue.iter().position(|&k| self.delayable[k]).unwrap_or(queue.len());
            queue.insert(pos, i);
        }
    }

    fn arrived(&mut self, i: usize, now: f64, out: &mut Vec<Action>) {
        if self.delayable[i] {
            self.out -= 1;
            if let Some(ph) = self.phases.get_mut(self.slot[i]) {
                ph.out -= 1;
            }
        }
        for &k in &self.in_tight[i] {
            let ph = &mut self.phases[k];
            ph.left -= 1;
            if ph.left == 0 {
                // the last of its `until` arrived: the phase ends after its delay
                if ph.delay_ms > 0.0 {
                    out.push(Action::Timer { at: now + ph.delay_ms, timer: Timer::TightEnd(k) });
                } else {
                    ph.on = false;
                }
            }
        }
    }

    /// The first held request (phase slots in order) whose gate is open. Releasing only
    /// closes gates, so slots passed over stay passed over while the scheduler drains them.
    fn next_held(&mut self) -> Option<usize> {
        let k = (0..self.held.len()).find(|&k| !self.held[k].is_empty() && self.gate_open(k))?;
        self.held[k].pop_front()
    }
}
