//! What a load returns (one JSON object on stdout): a record per request in plan order, one
//! per connection, and the page figures (docs/dataplane-interfaces.md).
use schemars::JsonSchema;
use serde::Serialize;

use super::plan::Plan;
use super::transport;

/// One request, in plan order.
#[derive(Serialize, JsonSchema, Debug, Clone, Default)]
pub struct Rec {
    pub index: usize,
    pub url: String,
    pub host: String,
    pub conn_id: usize,
    pub new_conn: bool,
    /// This request rode in the SYN of a TFO connection: it opened a connection whose SYN data
    /// was sent and acked (the connection's `tfo`); false for every later request on it.
    pub tfo: bool,
    pub ready_ms: f64,
    /// When the delayable-request limits let it go to its pool (= ready_ms if not held).
    pub released_ms: f64,
    pub connect_start_ms: Option<f64>,
    pub connect_end_ms: Option<f64>,
    pub tls_end_ms: Option<f64>,
    pub request_ms: f64,
    pub first_byte_ms: f64,
    pub last_byte_ms: f64,
    /// Body bytes after de-chunking, still content-encoded.
    pub bytes: u64,
    pub header_bytes: u64,
    /// Everything received for this response: heads (1xx ones too) + body as on the wire
    /// (chunk framing included).
    pub transfer_bytes: u64,
    /// The body once its Content-Encoding is undone (= `bytes` for identity or a decode error).
    pub body_bytes: u64,
    /// Content-Encoding as received, "" if none.
    pub encoding: String,
    /// Why the body could not be decoded (the load goes on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<String>,
    pub status: u16,
    /// The request's header fields as sent (HTTP/1.1: Host first; h2: the pseudo-headers first)
    /// and the size of its head (HTTP/1.1: the bytes written; h2: the same fields in HTTP/1.1
    /// framing, not the compressed bytes); the response's header fields as received (h2: as
    /// HPACK decodes them, without :status).
    pub request_headers: Vec<(String, String)>,
    pub request_header_bytes: u64,
    pub response_headers: Vec<(String, String)>,
    /// "http/1.1", "h2" or "h3": what the request went over.
    pub protocol: String,
    /// The first request of a TLS connection: its handshake ("full" or "resumed") and early
    /// data ("accepted", "rejected": sent again after the handshake; None: not tried).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tls_handshake: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub early_data: Option<String>,
}

/// One connection, by id.
#[derive(Serialize, JsonSchema, Debug, Clone, Default)]
pub struct ConnRec {
    pub id: usize,
    pub host: String,
    pub ip: String,
    pub port: u16,
    pub tls: bool,
    pub dns_end_ms: f64,
    pub connect_start_ms: f64,
    pub connect_end_ms: f64,
    pub tls_end_ms: Option<f64>,
    /// The transport's own facts, under its own keys (TCP: `tfo`, `tfo_client_fail`; QUIC:
    /// `tfo` (false), `rtt_ms`, `lost_packets`, `datagrams_out`/`_in`, `udp_bytes_out`/`_in`).
    #[serde(flatten)]
    pub transport: transport::Stats,
    pub requests: Vec<usize>,
    /// "http/1.1" or "h2" (ALPN), "h3" (QUIC); "" if it never finished setting up.
    pub protocol: String,
    /// Every host whose requests it carried, its own first (more than one: coalesced, h2).
    pub hosts: Vec<String>,
    /// TLS (over TCP or QUIC): "full" or "resumed" (None: no TLS, or the handshake never ended).
    pub tls_handshake: Option<String>,
    /// TLS 1.3 early data (QUIC: 0-RTT): "accepted", "rejected" (its bytes sent again at 1-RTT),
    /// None: not tried.
    pub early_data: Option<String>,
}

/// `pltlab-dp load`: the load report (stdout, one JSON object, only on success). Times in ms since
/// the load started.
#[derive(Serialize, JsonSchema, Debug, Clone)]
pub struct Output {
    pub plt_ms: f64,
    pub objects: usize,
    pub bytes: u64,
    pub tfo_requested: bool,
    /// TCP_FASTOPEN_CONNECT was accepted by the kernel (always false if not requested).
    pub tfo_available: bool,
    pub max_conns_per_host: usize,
    /// The plan's tls_mode; `warmup_ms`: how long the visit before it took (resume/0rtt).
    pub tls_mode: String,
    pub warmup_ms: Option<f64>,
    pub requests: Vec<Rec>,
    pub connections: Vec<ConnRec>,
    pub errors: Vec<String>,
}

impl Output {
    /// The load's figures from its records (`requests` in plan order, `connections` by id);
    /// `tfo_refused`: why the kernel refused TCP_FASTOPEN_CONNECT, if it did.
    pub fn new(plan: &Plan, mut requests: Vec<Rec>, connections: Vec<ConnRec>, tfo_refused: Option<String>) -> Output {
        for r in &mut requests {
            let c = &connections[r.conn_id];
            // SYN data is a connection's: only the request that opened it rode in that SYN
            r.tfo = c.transport.first_request_in_handshake() && r.new_conn;
            r.protocol = c.protocol.clone();
            if r.new_conn {
                r.connect_start_ms = Some(c.connect_start_ms);
                r.connect_end_ms = Some(c.connect_end_ms);
                r.tls_end_ms = c.tls_end_ms;
                r.tls_handshake = c.tls_handshake.clone();
                r.early_data = c.early_data.clone();
            }
        }
        Output {
            plt_ms: requests.iter().map(|r| r.last_byte_ms).fold(0.0, f64::max),
            objects: plan.objects.len(),
            bytes: requests.iter().map(|r| r.bytes).sum(),
            tfo_requested: plan.tfo,
            tfo_available: plan.tfo && tfo_refused.is_none(),
            max_conns_per_host: plan.max_conns_per_host,
            tls_mode: plan.tls_mode.clone(),
            warmup_ms: None,
            requests,
            connections,
            errors: tfo_refused.into_iter().collect(),
        }
    }
}
