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
    /// Requests answered over HTTP/1.x (also in `requests`).
    pub h1_requests: u64,
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
    /// Response bytes handed to the sockets (QUIC: to the h3 streams).
    pub bytes_out: u64,
    /// QUIC connections begun (a client's Initial accepted).
    pub quic_connections: u64,
    /// Of those, handshakes that failed.
    pub quic_handshake_errors: u64,
    /// Of those, handshakes not complete by `request_timeout_ms`.
    pub quic_handshake_timeouts: u64,
    /// QUIC handshakes completed full.
    pub quic_full: u64,
    /// QUIC handshakes completed resumed (PSK from a ticket).
    pub quic_resumed: u64,
    /// QUIC connections whose 0-RTT data was accepted and arrived.
    pub quic_early_data: u64,
    /// 0-RTT packet bytes accepted (decrypted), counted when the handshake completes and
    /// when the connection ends.
    pub quic_early_bytes: u64,
    /// 0-RTT packet bytes received and not accepted (refused 0-RTT, or not yet counted).
    pub quic_early_rejected_bytes: u64,
    /// Of the QUIC connections that carried at least one request: full handshakes.
    pub quic_full_used: u64,
    /// Of the QUIC connections that carried at least one request: resumed handshakes.
    pub quic_resumed_used: u64,
    /// Of the QUIC connections that carried at least one request: 0-RTT used.
    pub quic_early_used: u64,
    /// New QUIC connections sent a Retry (over `quic.retry_above` unvalidated ones).
    pub quic_retries: u64,
    /// New QUIC connections refused (over `quic.max_connections`).
    pub quic_refused: u64,
    /// Datagrams of an unknown QUIC version large enough to be answered with Version
    /// Negotiation.
    pub quic_version_negotiations: u64,
    /// Requests answered over h3 (also in `requests`).
    pub h3_streams: u64,
    /// h3 connections ended by an error (not H3_NO_ERROR, a plain close or the idle timeout).
    pub h3_errors: u64,
    /// UDP datagrams received and sent on the QUIC sockets (GSO/GRO batches counted per
    /// datagram).
    pub quic_datagrams_in: u64,
    pub quic_datagrams_out: u64,
    /// Their bytes (UDP payloads).
    pub quic_bytes_in: u64,
    pub quic_bytes_out: u64,
    /// Datagrams received that are not QUIC (fixed bit clear, or shorter than a header).
    pub quic_bad_datagrams: u64,
    /// Largest client Initial flight: bytes of the Initial packets a client sent to the
    /// connection ID it chose (its ClientHello, padding included; the counterpart of
    /// `tfo_tls_hello_max`).
    pub quic_initial_bytes_max: u64,
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
        let q = &self.quic;
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
            h1_requests: self.h1_requests.load(Relaxed),
            h2_streams: self.h2_streams.load(Relaxed),
            h2_errors: self.h2_errors.load(Relaxed),
            tfo_connections: self.tfo_connections.load(Relaxed),
            tfo_tls_connections: self.tfo_tls_connections.load(Relaxed),
            tfo_tls_hello_split: self.tfo_tls_hello_split.load(Relaxed),
            tfo_tls_early_in_syn: self.tfo_tls_early_in_syn.load(Relaxed),
            tfo_tls_hello_max: self.tfo_tls_hello_max.load(Relaxed),
            tfo_syn_bytes_max: self.tfo_syn_bytes_max.load(Relaxed),
            bytes_out: self.bytes_out.load(Relaxed),
            quic_connections: self.quic_connections.load(Relaxed),
            quic_handshake_errors: self.quic_handshake_errors.load(Relaxed),
            quic_handshake_timeouts: self.quic_handshake_timeouts.load(Relaxed),
            quic_full: self.quic_full.load(Relaxed),
            quic_resumed: self.quic_resumed.load(Relaxed),
            quic_early_data: self.quic_early_data.load(Relaxed),
            quic_early_bytes: self.quic_early_bytes.load(Relaxed),
            quic_early_rejected_bytes: q
                .zero_rtt_bytes
                .load(Relaxed)
                .saturating_sub(self.quic_early_bytes.load(Relaxed)),
            quic_full_used: self.quic_full_used.load(Relaxed),
            quic_resumed_used: self.quic_resumed_used.load(Relaxed),
            quic_early_used: self.quic_early_used.load(Relaxed),
            quic_retries: self.quic_retries.load(Relaxed),
            quic_refused: self.quic_refused.load(Relaxed),
            quic_version_negotiations: q.unknown_version.load(Relaxed),
            h3_streams: self.h3_streams.load(Relaxed),
            h3_errors: self.h3_errors.load(Relaxed),
            quic_datagrams_in: q.datagrams_in.load(Relaxed),
            quic_datagrams_out: q.datagrams_out.load(Relaxed),
            quic_bytes_in: q.bytes_in.load(Relaxed),
            quic_bytes_out: q.bytes_out.load(Relaxed),
            quic_bad_datagrams: q.bad.load(Relaxed),
            quic_initial_bytes_max: q.initial_flight_max(),
            service_us: self.service_ns.lock().unwrap().summary(),
        }
    }

    /// The final statistics as JSON (what tests look into).
    #[cfg(test)]
    pub fn json(&self) -> serde_json::Value {
        serde_json::to_value(self.report(Event::Stats)).expect("statistics serialize")
    }
}
