//! The replay server's statistics object (printed on SIGUSR1 as a snapshot, at exit as the final
//! statistics, written to the manifest's `stats`): its counters as a type, so `pltlab-dp schema
//! replay-stats` names every one (the control plane's per-load counters are checked against it).
use schemars::JsonSchema;
use serde::Serialize;
use std::sync::atomic::Ordering::Relaxed;

use super::stats::Stats;

/// Why the object was printed.
#[derive(Serialize, JsonSchema, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Event {
    /// At exit (SIGTERM/SIGINT), also written to the manifest's `stats`.
    Stats,
    /// On SIGUSR1; the server goes on.
    Snapshot,
}

/// A URL (cut to 256 bytes) and how often it was asked for.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct UrlCount {
    pub url: String,
    pub count: u64,
}

/// A URL answered by a fallback (closest query), the response that answered and how often.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct Fallback {
    pub url: String,
    /// Index of the response in the manifest.
    pub response: usize,
    pub count: u64,
}

/// Service time (request parsed -> response handed to the socket, think time excluded), us:
/// the count and maximum exact, percentiles of a bounded sample.
#[derive(Serialize, JsonSchema, Debug, Clone, PartialEq)]
pub struct ServiceSummary {
    pub n: u64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

/// The replay server's statistics; every counter counts from the server's start.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct Report {
    pub event: Event,
    /// Requests answered (h2 streams included).
    pub requests: u64,
    /// Answered by an exact recording (the request's scheme, or the other one's `cross_scheme`).
    pub exact_matches: u64,
    /// Answered by the closest query of the same path.
    pub fallback_matches: u64,
    /// Exact or fallback matches answered by a recording of the other scheme.
    pub cross_scheme_matches: u64,
    /// Sessions begun by SIGUSR2.
    pub sessions: u64,
    /// The first 1000 distinct fallback URLs.
    pub fallbacks: Vec<Fallback>,
    /// Requests answered 404 (nothing recorded matched).
    pub not_found: u64,
    /// The first 1000 distinct URLs answered 404.
    pub not_found_urls: Vec<UrlCount>,
    /// Requests refused with 400/431/501.
    pub bad_requests: u64,
    /// Connections accepted.
    pub connections: u64,
    /// Failed accept calls (EMFILE/ENFILE when descriptors run out, ECONNABORTED ...).
    pub accept_errors: u64,
    /// Connections accepted on a TLS port, and of those the failed handshakes.
    pub tls_connections: u64,
    pub tls_handshake_errors: u64,
    /// Connections closed by `request_timeout_ms` in their TLS handshake.
    pub handshake_timeouts: u64,
    /// Connections closed by `request_timeout_ms` without a whole request head.
    pub request_timeouts: u64,
    /// TLS handshakes completed full.
    pub tls_full: u64,
    /// TLS handshakes completed resumed (PSK from a ticket).
    pub tls_resumed: u64,
    /// Of the TLS connections that carried at least one request: full handshakes.
    pub tls_full_used: u64,
    /// Of the TLS connections that carried at least one request: resumed handshakes.
    pub tls_resumed_used: u64,
    /// Of the TLS connections that carried at least one request: early data accepted.
    pub tls_early_used: u64,
    /// Resumed handshakes whose early data (0-RTT) was accepted.
    pub tls_early_data: u64,
    /// Early data bytes read.
    pub tls_early_bytes: u64,
    /// SIGHUP received: every TLS session forgotten.
    pub tls_ticket_rotations: u64,
    /// Connections served as HTTP/1.x (plain or TLS).
    pub h1_connections: u64,
    /// Connections served as h2.
    pub h2_connections: u64,
    /// Requests answered over h2 (also in `requests`).
    pub h2_streams: u64,
    /// h2 connections ended by a protocol error, either side.
    pub h2_errors: u64,
    /// Connections accepted with data in the SYN (TCP_INFO tcpi_options & 32).
    pub tfo_connections: u64,
    /// Of those, on a TLS port.
    pub tfo_tls_connections: u64,
    /// Of those, the SYN data was shorter than the TLS record it begins (the ClientHello did
    /// not fit).
    pub tfo_tls_hello_split: u64,
    /// Of those, the SYN also carried a whole early data record after the ClientHello.
    pub tfo_tls_early_in_syn: u64,
    /// Largest ClientHello record seen in SYN data, bytes.
    pub tfo_tls_hello_max: u64,
    /// Most SYN data seen, bytes.
    pub tfo_syn_bytes_max: u64,
    /// Response bytes handed to the sockets.
    pub bytes_out: u64,
    pub service_us: ServiceSummary,
}

impl Stats {
    /// The statistics as they stand.
    pub fn report(&self, event: Event) -> Report {
        let not_found_urls =
            self.not_found_urls.lock().unwrap().iter().map(|(u, n)| UrlCount { url: u.clone(), count: *n }).collect();
        let fallbacks = self
            .fallback_urls
            .lock()
            .unwrap()
            .iter()
            .map(|(u, i, n)| Fallback { url: u.clone(), response: *i, count: *n })
            .collect();
        Report {
            event,
            requests: self.requests.load(Relaxed),
            exact_matches: self.responses_exact.load(Relaxed),
            fallback_matches: self.fallback_matches.load(Relaxed),
            cross_scheme_matches: self.cross_scheme_matches.load(Relaxed),
            sessions: self.sessions.load(Relaxed),
            fallbacks,
            not_found: self.not_found.load(Relaxed),
            not_found_urls,
            bad_requests: self.bad_requests.load(Relaxed),
            connections: self.connections.load(Relaxed),
            accept_errors: self.accept_errors.load(Relaxed),
            tls_connections: self.tls_connections.load(Relaxed),
            tls_handshake_errors: self.tls_handshake_errors.load(Relaxed),
            handshake_timeouts: self.handshake_timeouts.load(Relaxed),
            request_timeouts: self.request_timeouts.load(Relaxed),
            tls_full: self.tls_full.load(Relaxed),
            tls_resumed: self.tls_resumed.load(Relaxed),
            tls_full_used: self.tls_full_used.load(Relaxed),
            tls_resumed_used: self.tls_resumed_used.load(Relaxed),
            tls_early_used: self.tls_early_used.load(Relaxed),
            tls_early_data: self.tls_early_data.load(Relaxed),
            tls_early_bytes: self.tls_early_bytes.load(Relaxed),
            tls_ticket_rotations: self.tls_ticket_rotations.load(Relaxed),
            h1_connections: self.h1_connections.load(Relaxed),
            h2_connections: self.h2_connections.load(Relaxed),
            h2_streams: self.h2_streams.load(Relaxed),
            h2_errors: self.h2_errors.load(Relaxed),
            tfo_connections: self.tfo_connections.load(Relaxed),
            tfo_tls_connections: self.tfo_tls_connections.load(Relaxed),
            tfo_tls_hello_split: self.tfo_tls_hello_split.load(Relaxed),
            tfo_tls_early_in_syn: self.tfo_tls_early_in_syn.load(Relaxed),
            tfo_tls_hello_max: self.tfo_tls_hello_max.load(Relaxed),
            tfo_syn_bytes_max: self.tfo_syn_bytes_max.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            service_us: self.service_ns.lock().unwrap().summary(),
        }
    }

    /// The final statistics as JSON (what tests look into).
    #[cfg(test)]
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self.report(Event::Stats)).expect("statistics serialize")
    }
}
