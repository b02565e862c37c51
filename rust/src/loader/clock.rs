//! The load's clock: every time of a load is in ms since it started (object 0 ready, before
//! any DNS delay).
use std::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
pub struct Clock {
    t0: Instant,
}

impl Clock {
    /// A load starts now.
    pub fn start() -> Clock {
        Clock { t0: Instant::now() }
    }

    /// Ms since the load started.
    pub fn ms(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1000.0
    }

    /// The instant `ms` after the start (a timer's deadline; before the start: the start).
    pub fn at(&self, ms: f64) -> Instant {
        self.t0 + Duration::from_secs_f64(ms.max(0.0) / 1000.0)
    }
}
