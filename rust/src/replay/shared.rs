//! What every connection of the replay server shares, whatever its protocol: the answers
//! service, the counters, the TLS sessions, the manifest's settings.
use anyhow::Result;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

use super::accept;
use super::answers::{Answer, Answers, Asked};
use super::manifest::Manifest;
use super::priority;
use super::stats::Stats;

pub struct Shared {
    pub answers: Answers,
    pub stats: Stats,
    pub accept_log: accept::ErrorLog,
    /// TLS sessions (tickets) of every https origin.
    pub sessions: Arc<crate::certs::Sessions>,
    /// How an h2 connection orders its responses.
    pub h2_priority: priority::Scheme,
    /// Responses wait their recorded server time (manifest `think_time`).
    pub think_time: bool,
    /// Manifest `request_timeout_ms`: the TLS handshake and the first request head must be in
    /// this long after the accept, a later HTTP/1.1 head this long after its first byte.
    pub request_timeout: std::time::Duration,
    /// Manifest `keep_alive`: false, every HTTP/1.x response ends its connection.
    pub keep_alive: bool,
}

impl Shared {
    /// The answer to a request, counted (answers.rs).
    pub fn answer(&self, q: &Asked) -> Answer<'_> {
        self.answers.answer(&self.stats, q)
    }
    /// A new load begins: repeated URLs start again from their first recording.
    pub fn new_session(&self) {
        self.answers.new_session();
        self.stats.sessions.fetch_add(1, Relaxed);
    }
    /// Forgets every TLS session, as a ticket key rotation does: tickets clients hold no
    /// longer resume (a full handshake follows, early data is refused and sent again).
    pub fn rotate_tickets(&self) {
        self.sessions.clear();
        self.stats.tls_ticket_rotations.fetch_add(1, Relaxed);
    }
}

pub fn build_shared(m: &Manifest) -> Result<Arc<Shared>> {
    Ok(Arc::new(Shared {
        answers: Answers::new(m)?,
        stats: Stats::default(),
        accept_log: Default::default(),
        sessions: Default::default(),
        h2_priority: m.h2_priority,
        think_time: m.think_time,
        request_timeout: std::time::Duration::from_millis(m.request_timeout_ms),
        keep_alive: m.keep_alive,
    }))
}
