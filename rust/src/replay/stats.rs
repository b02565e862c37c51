//! The replay server's counters: what every connection, protocol and answer adds to, printed
//! as the stats object (docs/dataplane-interfaces.md) at SIGUSR1 (a snapshot) and at the end.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};

use super::service;

#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub responses_exact: AtomicU64,
    pub fallback_matches: AtomicU64,
    /// Exact or fallback matches answered by a recording of the other scheme.
    pub cross_scheme_matches: AtomicU64,
    /// Sessions begun by SIGUSR2 (`Shared::new_session`).
    pub sessions: AtomicU64,
    pub not_found: AtomicU64,
    pub bad_requests: AtomicU64,
    pub connections: AtomicU64,
    /// Failed accept calls (EMFILE/ENFILE when descriptors run out, ECONNABORTED ...).
    pub accept_errors: AtomicU64,
    pub tls_connections: AtomicU64,
    pub tls_handshake_errors: AtomicU64,
    /// Connections closed by `Shared::request_timeout`: in their TLS handshake; without a whole
    /// request head (none, or one trickling in; h2: no preface, SETTINGS and first HEADERS).
    pub handshake_timeouts: AtomicU64,
    pub request_timeouts: AtomicU64,
    /// TLS handshakes completed: full, resumed (PSK from a ticket); of the resumed, those whose
    /// early data (0-RTT) was accepted, and the early data bytes read.
    pub tls_full: AtomicU64,
    pub tls_resumed: AtomicU64,
    pub tls_early_data: AtomicU64,
    pub tls_early_bytes: Arc<AtomicU64>,
    /// The same handshake counts, of the TLS connections that carried at least one request
    /// (a browser's spare connections, never used, left out): a load's proof of what its
    /// requests got.
    pub tls_full_used: AtomicU64,
    pub tls_resumed_used: AtomicU64,
    pub tls_early_used: AtomicU64,
    /// SIGHUP: every session forgotten (a ticket key rotation), how often.
    pub tls_ticket_rotations: AtomicU64,
    /// Connections served as HTTP/1.x (plain or TLS) and as h2 (TLS, ALPN "h2").
    pub h1_connections: AtomicU64,
    pub h2_connections: AtomicU64,
    /// Requests answered over HTTP/1.x (also counted in `requests`).
    pub h1_requests: AtomicU64,
    /// Requests answered over h2 (also counted in `requests`).
    pub h2_streams: AtomicU64,
    /// h2 connections ended by a protocol error (GOAWAY with an error code, either way).
    pub h2_errors: AtomicU64,
    pub tfo_connections: AtomicU64,
    /// TLS connections whose SYN carried data; of those, the ones whose
    /// ClientHello was larger than that data (TFO then saves no round trip).
    pub tfo_tls_connections: AtomicU64,
    pub tfo_tls_hello_split: AtomicU64,
    /// TLS connections whose SYN also carried early data (a whole 0-RTT record after the hello).
    pub tfo_tls_early_in_syn: AtomicU64,
    /// Largest ClientHello record seen in a SYN-data connection, and the most SYN data.
    pub tfo_tls_hello_max: AtomicU64,
    pub tfo_syn_bytes_max: AtomicU64,
    pub bytes_out: AtomicU64,
    /// QUIC (h3.rs): connections begun (Incoming accepted); of those the failed handshakes
    /// and those not done by `request_timeout_ms`; handshakes completed full or resumed; 0-RTT
    /// used (early data accepted and received: `HandshakeFacts::zero_rtt`) and its bytes.
    pub quic_connections: AtomicU64,
    pub quic_handshake_errors: AtomicU64,
    pub quic_handshake_timeouts: AtomicU64,
    pub quic_full: AtomicU64,
    pub quic_resumed: AtomicU64,
    pub quic_early_data: AtomicU64,
    pub quic_early_bytes: AtomicU64,
    /// The same, of the QUIC connections that carried at least one request.
    pub quic_full_used: AtomicU64,
    pub quic_resumed_used: AtomicU64,
    pub quic_early_used: AtomicU64,
    /// New connections sent a Retry (over `quic.retry_above`), refused (over
    /// `quic.max_connections`).
    pub quic_retries: AtomicU64,
    pub quic_refused: AtomicU64,
    /// Requests answered over h3 (also in `requests`); h3 connections ended by an error.
    pub h3_streams: AtomicU64,
    pub h3_errors: AtomicU64,
    /// The UDP sockets' traffic (quic_socket.rs).
    pub quic: Arc<super::quic_socket::Counts>,
    /// URL (cut to answers::MAX_QUOTED_URL bytes) -> count, first-seen order (bounded).
    pub not_found_urls: Mutex<Vec<(String, u64)>>,
    /// (URL cut like not_found_urls, response index, count), first-seen order (bounded).
    pub fallback_urls: Mutex<Vec<(String, usize, u64)>>,
    /// Per-response service time in ns: request head parsed -> its last byte handed to the
    /// socket (TLS: to the TLS stream, flushed; h2: h2_sent.rs), think time excluded. Bounded
    /// sample (service.rs).
    pub service_ns: Mutex<service::ServiceTimes>,
}

const MAX_LISTED_URLS: usize = 1000;

impl Stats {
    /// A request no recording answers; `url` as its 404 quotes it (cut: answers.rs).
    pub fn note_404(&self, url: &str) {
        self.not_found.fetch_add(1, Relaxed);
        let mut v = self.not_found_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url) {
            e.1 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url.to_string(), 1));
        }
    }
    /// A request answered by recording `idx` of the closest query; `url` cut as for `note_404`.
    pub fn note_fallback(&self, url: &str, idx: usize) {
        self.fallback_matches.fetch_add(1, Relaxed);
        let mut v = self.fallback_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url && e.1 == idx) {
            e.2 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url.to_string(), idx, 1));
        }
    }
    /// A request answered at `t` + its service time (`think`, the recorded wait, left out).
    pub fn note_service(&self, t: std::time::Instant, think: Option<std::time::Duration>) {
        let d = t.elapsed().saturating_sub(think.unwrap_or_default());
        self.service_ns.lock().unwrap().add(d.as_nanos().min(u32::MAX as u128) as u32);
    }
}

/// A TLS connection's handshake (over TCP, or QUIC's), counted in the `*_used` stats at its
/// first request.
pub struct TlsUse {
    resumed: bool,
    early_data: bool,
    quic: bool,
    counted: AtomicBool,
}

impl TlsUse {
    pub fn new(resumed: bool, early_data: bool) -> Self {
        TlsUse { resumed, early_data, quic: false, counted: AtomicBool::new(false) }
    }

    /// A QUIC connection's handshake (`quic_*_used`).
    pub fn quic(resumed: bool, early_data: bool) -> Self {
        TlsUse { quic: true, ..TlsUse::new(resumed, early_data) }
    }

    pub fn request(&self, st: &Stats) {
        if self.counted.swap(true, Relaxed) {
            return;
        }
        let (full, resumed, early) = if self.quic {
            (&st.quic_full_used, &st.quic_resumed_used, &st.quic_early_used)
        } else {
            (&st.tls_full_used, &st.tls_resumed_used, &st.tls_early_used)
        };
        if self.resumed { resumed } else { full }.fetch_add(1, Relaxed);
        if self.early_data {
            early.fetch_add(1, Relaxed);
        }
    }
}
