//! Accept errors: when descriptors run out (EMFILE/ENFILE) accept fails again
//! at once for as long as no connection closes, so the accept loop backs off
//! (1 ms doubling to 100 ms, back to 1 ms after an accept succeeds) and the
//! errors are logged at most once a second, with a count of those not logged.
//! Connections left in the listen backlog meanwhile are accepted once
//! descriptors free up (within one back-off step).
use std::sync::Mutex;
use std::time::{Duration, Instant};

pub const BACKOFF_MIN: Duration = Duration::from_millis(1);
pub const BACKOFF_MAX: Duration = Duration::from_millis(100);
pub const LOG_EVERY: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Backoff { next: BACKOFF_MIN }
    }
}

impl Backoff {
    /// The pause after a failed accept; each failure in a row doubles it (up to BACKOFF_MAX).
    pub fn failed(&mut self) -> Duration {
        let d = self.next;
        self.next = (self.next * 2).min(BACKOFF_MAX);
        d
    }
    pub fn succeeded(&mut self) {
        self.next = BACKOFF_MIN;
    }
}

/// Rate-limited log of accept errors, shared by every listen socket.
#[derive(Default)]
pub struct ErrorLog {
    /// (when the last line was printed, errors not printed since)
    state: Mutex<(Option<Instant>, u64)>,
}

impl ErrorLog {
    /// The line to print for this error at `now`, or None (counted as suppressed).
    pub fn note_at(&self, now: Instant, what: impl std::fmt::Display) -> Option<String> {
        let mut st = self.state.lock().unwrap();
        if st.0.is_some_and(|t| now.duration_since(t) < LOG_EVERY) {
            st.1 += 1;
            return None;
        }
        let more = std::mem::take(&mut st.1);
        st.0 = Some(now);
        Some(if more > 0 {
            format!("pltlab-dp replay: accept: {what} ({more} more accept errors not shown)")
        } else {
            format!("pltlab-dp replay: accept: {what}")
        })
    }

    /// Logs `e` on stderr unless a line was printed less than LOG_EVERY ago.
    pub fn note(&self, listen_addr: &str, e: &std::io::Error) {
        if let Some(l) = self.note_at(Instant::now(), format_args!("{listen_addr}: {e}")) {
            eprintln!("{l}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_the_cap_and_resets() {
        let mut b = Backoff::default();
        let v: Vec<u64> = (0..9).map(|_| b.failed().as_millis() as u64).collect();
        assert_eq!(v, [1, 2, 4, 8, 16, 32, 64, 100, 100]);
        b.succeeded();
        assert_eq!(b.failed(), BACKOFF_MIN);
    }

    #[test]
    fn at_most_one_line_per_second_with_the_count() {
        let log = ErrorLog::default();
        let t0 = Instant::now();
        let lines: Vec<String> =
            (0..1000u64).filter_map(|i| log.note_at(t0 + Duration::from_micros(i * 500), "EMFILE")).collect();
        // 1000 errors over 0.5 s: one line
        assert_eq!(lines, ["pltlab-dp replay: accept: EMFILE"]);
        let l = log.note_at(t0 + Duration::from_millis(1200), "EMFILE").unwrap();
        assert!(l.ends_with("(999 more accept errors not shown)"), "{l}");
        assert!(log.note_at(t0 + Duration::from_millis(1300), "EMFILE").is_none());
    }
}
