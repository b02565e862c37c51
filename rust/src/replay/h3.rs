//! HTTP/3 on the replay server's udp listen entries (QUIC: quinn, hyperium's h3 over
//! h3-quinn; docs/dataplane-interfaces.md "HTTP/3 over QUIC").
//!
//! Per udp entry a UDP socket bound to its address, counted (quic_socket.rs), and one
//! `quinn::Endpoint` on it; every endpoint shares one `quinn::ServerConfig`
//! (`certs::quic::quic_server_config`: the certificate, key and session store of TLS over TCP,
//! so SIGHUP's ticket rotation covers QUIC). Transport settings (`server_config`): the
//! connection receive window starts at `tls.max_early_data` (what a client resuming with a
//! ticket may send as 0-RTT data: the flow-control limit it remembered, RFC 9000 §7.4.1) and is
//! raised to quinn's default (unlimited) once the handshake completes; no path MTU discovery
//! (1200-byte packets: packet counts do not depend on probes); the manifest's `quic` congestion
//! controller and initial window; an idle timeout of twice `request_timeout_ms`; at most
//! `h2::MAX_CONCURRENT_STREAMS` request streams at once.
//!
//! A connection: over `quic.max_connections` open it is refused, over `quic.retry_above`
//! handshakes in progress from unvalidated addresses it gets a Retry; else accepted and at once
//! `into_0rtt` (a server's always succeeds: early requests are answered at once, 0.5-RTT data),
//! h3 (`max_field_section_size` 64 KiB, as h2's header lists) over it. Its handshake must
//! complete, and its first request arrive, within `request_timeout_ms` of its first Initial,
//! else it is closed (`quic_handshake_timeouts`, `request_timeouts`). Each request is answered
//! as over h2 (`h2::framed`: the answers service's recording or 404, the same header fields and
//! body bytes, the think time), counted in `h3_streams`, `bytes_out` and the service times; the
//! handshake (full, resumed, 0-RTT: `certs::quic::HandshakeFacts`) in the `quic_*_used` counts at
//! the connection's first request. Order of the responses (manifest `h2_priority`, which applies
//! to h3 as well): "rfc9218", each request stream's QUIC send priority from its `priority`
//! header (`priority::quic_priority`, set through our transport adapter `h3_quic.rs`: h3-quinn
//! keeps its streams private); "round-robin", every stream at quinn's default priority.
use anyhow::{Context, Result};
use bytes::{Buf, Bytes};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Instant;

use super::answers::Asked;
use super::h2::{framed, head_bytes, MAX_CONCURRENT_STREAMS, MAX_REQUEST_BODY};
use super::h3_quic::{self, Priorities};
use super::manifest::{Manifest, QuicCc, QuicSettings};
use super::matcher::Scheme;
use super::priority;
use super::quic_socket::CountingSocket;
use super::shared::Shared;
use super::stats::TlsUse;
use crate::certs::quic::{handshake_data, HandshakeFacts};
use crate::http::request::MAX_HEAD_BYTES;

/// A datagram's payload in QUIC's initial packets (quinn's `INITIAL_MTU`): the unit of
/// `quic.initial_window_packets`.
pub const PACKET: u64 = 1200;
/// A response's body goes to the h3 stream in chunks of at most this many bytes.
const SEND_CHUNK: usize = 64 * 1024;
/// The socket's receive buffer, asked for (best effort).
const RECV_BUFFER: usize = 4 << 20;

type Conn = h3::server::Connection<h3_quic::Connection, Bytes>;
type Stream = h3::server::RequestStream<h3_quic::BidiStream<Bytes>, Bytes>;

/// The QUIC configuration of every udp entry of `m`: TLS as `certs::quic::quic_server_config`,
/// transport settings as said above.
pub fn server_config(m: &Manifest, sessions: Arc<crate::certs::Sessions>) -> Result<quinn::ServerConfig> {
    let t = m.tls.as_ref().context("udp listen entries (QUIC) need \"tls\": {\"cert\", \"key\"}")?;
    let mut cfg = crate::certs::quic::quic_server_config(&t.cert, &t.key, sessions, t.max_early_data)?;
    let mut tc = transport(&m.quic, m.request_timeout_ms);
    if t.max_early_data > 0 {
        tc.receive_window(quinn::VarInt::from_u32(t.max_early_data));
    }
    cfg.transport_config(Arc::new(tc));
    cfg.validation_token_config(super::quic_tokens::config());
    Ok(cfg)
}

/// Response bytes a connection may hold unacknowledged (quinn's `send_window`; its default is
/// 10 MB): the client's connection receive window (the loader's and Chromium's 15 MiB), so the
/// server is never the tighter limit.
pub const SEND_WINDOW: u64 = 15 << 20;

/// Transport settings from the manifest's `quic` object (receive window: quinn's default).
pub(super) fn transport(q: &QuicSettings, request_timeout_ms: u64) -> quinn::TransportConfig {
    use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
    let mut tc = quinn::TransportConfig::default();
    tc.mtu_discovery_config(None);
    tc.send_window(SEND_WINDOW);
    tc.max_concurrent_bidi_streams(MAX_CONCURRENT_STREAMS.into());
    let window = u64::from(q.initial_window_packets) * PACKET;
    match q.cc {
        QuicCc::Cubic => {
            tc.congestion_controller_factory(Arc::new(CubicConfig::default().initial_window(window).clone()))
        }
        QuicCc::Newreno => {
            tc.congestion_controller_factory(Arc::new(NewRenoConfig::default().initial_window(window).clone()))
        }
        QuicCc::Bbr => tc.congestion_controller_factory(Arc::new(BbrConfig::default().initial_window(window).clone())),
    };
    let idle = quinn::VarInt::from_u64(request_timeout_ms.saturating_mul(2)).unwrap_or(quinn::VarInt::MAX);
    tc.max_idle_timeout(Some(idle.into()));
    tc
}

/// The UDP socket of a udp entry (bound to `addr`), as a quinn endpoint serving h3 with `cfg`.
pub fn endpoint(addr: SocketAddr, cfg: quinn::ServerConfig, sh: &Shared) -> Result<quinn::Endpoint> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))?;
    let _ = s.set_recv_buffer_size(RECV_BUFFER);
    s.bind(&addr.into()).with_context(|| format!("cannot bind udp {addr}"))?;
    let sock = CountingSocket::new(s.into(), sh.stats.quic.clone()).with_context(|| format!("udp socket {addr}"))?;
    // no RFC 9287 greasing of the fixed bit: clients keep it set in what they send us, so a
    // datagram without it is not QUIC (`quic_bad_datagrams`)
    let mut ec = quinn::EndpointConfig::default();
    ec.grease_quic_bit(false);
    let ep = quinn::Endpoint::new_with_abstract_socket(ec, Some(cfg), Arc::new(sock), Arc::new(quinn::TokioRuntime))?;
    Ok(ep)
}

/// What the accept loops of every endpoint share: the `quic` limits and what they limit.
#[derive(Default)]
pub struct Gate {
    max_connections: usize,
    retry_above: usize,
    open: AtomicUsize,
    unvalidated: AtomicUsize,
}

impl Gate {
    pub fn new(q: &QuicSettings) -> Arc<Gate> {
        Arc::new(Gate {
            max_connections: q.max_connections as usize,
            retry_above: q.retry_above as usize,
            ..Default::default()
        })
    }
}

/// Counts one in a `Gate`'s count (`open`, or `unvalidated` if `.1`) while alive. Taken in the
/// accept loop, before the connection's task is spawned: taken in the task, a burst of Initials
/// would all pass the limits before any task ran (found by the hostile test: 72 of 100
/// handshakes completed under `max_connections` 60).
struct Held(Arc<Gate>, bool);
impl Held {
    fn new(gate: &Arc<Gate>, unvalidated: bool) -> Held {
        gate.count(unvalidated).fetch_add(1, Relaxed);
        Held(gate.clone(), unvalidated)
    }
}
impl Drop for Held {
    fn drop(&mut self) {
        self.0.count(self.1).fetch_sub(1, Relaxed);
    }
}

impl Gate {
    fn count(&self, unvalidated: bool) -> &AtomicUsize {
        if unvalidated {
            &self.unvalidated
        } else {
            &self.open
        }
    }
}

/// Accepts an endpoint's connections, each served on a task of its own.
pub async fn accept_loop(ep: quinn::Endpoint, sh: Arc<Shared>, gate: Arc<Gate>) {
    while let Some(incoming) = ep.accept().await {
        let st = &sh.stats;
        if gate.open.load(Relaxed) >= gate.max_connections {
            st.quic_refused.fetch_add(1, Relaxed);
            incoming.refuse();
            continue;
        }
        let incoming = if !incoming.remote_address_validated() && gate.unvalidated.load(Relaxed) >= gate.retry_above {
            match incoming.retry() {
                Ok(()) => {
                    st.quic_retries.fetch_add(1, Relaxed);
                    continue;
                }
                Err(e) => e.into_incoming(),
            }
        } else {
            incoming
        };
        let open = Held::new(&gate, false);
        let unvalidated = (!incoming.remote_address_validated()).then(|| Held::new(&gate, true));
        tokio::spawn(connection(incoming, sh.clone(), open, unvalidated));
    }
}

/// One QUIC connection: its handshake and its h3 requests, side by side (0.5-RTT).
async fn connection(incoming: quinn::Incoming, sh: Arc<Shared>, _open: Held, unvalidated: Option<Held>) {
    let st = &sh.stats;
    let deadline = tokio::time::Instant::now() + sh.request_timeout;
    st.quic_connections.fetch_add(1, Relaxed);
    let Ok(mut connecting) = incoming.accept() else {
        st.quic_handshake_errors.fetch_add(1, Relaxed);
        return;
    };
    // the whole ClientHello first: a server's into_0rtt succeeds at once, before a hello that
    // spans several Initials (Chromium's post-quantum one: two) has been read, and the handshake
    // facts exist only after it
    match tokio::time::timeout_at(deadline, connecting.handshake_data()).await {
        Ok(Ok(_)) => {}
        Ok(Err(e)) => {
            handshake_lost(st, &e);
            return;
        }
        Err(_) => {
            st.quic_handshake_timeouts.fetch_add(1, Relaxed);
            return;
        }
    }
    let (conn, established) = match connecting.into_0rtt() {
        Ok(x) => x,
        Err(_) => {
            // a server's into_0rtt does not fail (quinn's connection.rs)
            st.quic_handshake_errors.fetch_add(1, Relaxed);
            return;
        }
    };
    let Some(hd) = handshake_data(&conn) else {
        st.quic_handshake_errors.fetch_add(1, Relaxed);
        conn.close(0u32.into(), b"");
        return;
    };
    let facts = hd.facts.clone();
    // the handshake completed (else the first request's deadline is the handshake's: counted
    // there, not as a request timeout)
    let done = std::sync::atomic::AtomicBool::new(false);
    let sni: Option<Arc<str>> = hd.server_name.map(Into::into);
    let handshake = async {
        // a server's `established` resolves when the handshake completes (true if 0-RTT was
        // accepted, else false) or the connection is lost (false)
        match tokio::time::timeout_at(deadline, established).await {
            Ok(_) if conn.close_reason().is_none() => {
                drop(unvalidated);
                done.store(true, Relaxed);
                let early = facts.early_bytes();
                st.quic_early_bytes.fetch_add(early, Relaxed);
                if facts.zero_rtt() {
                    st.quic_early_data.fetch_add(1, Relaxed);
                }
                if facts.resumed() { &st.quic_resumed } else { &st.quic_full }.fetch_add(1, Relaxed);
                // 0-RTT is over: request bodies are no longer held to the early-data limit
                conn.set_receive_window(quinn::VarInt::MAX);
                Some(early)
            }
            Ok(_) => {
                if let Some(e) = conn.close_reason() {
                    // closed here at the deadline: the first request's wait ends at the same
                    // instant and, polled first, drops h3's connection, which closes the QUIC one
                    let ours =
                        matches!(e, quinn::ConnectionError::LocallyClosed) && tokio::time::Instant::now() >= deadline;
                    if ours {
                        st.quic_handshake_timeouts.fetch_add(1, Relaxed);
                    } else {
                        handshake_lost(st, &e);
                    }
                }
                None
            }
            Err(_) => {
                st.quic_handshake_timeouts.fetch_add(1, Relaxed);
                conn.close(0u32.into(), b"handshake timeout");
                None
            }
        }
    };
    let served = serve(conn.clone(), sh.clone(), sni, facts.clone(), deadline, &done);
    let (early, served) = tokio::join!(handshake, served);
    if let Some(counted) = early {
        // 0-RTT packets that came after the handshake completed (reordered)
        st.quic_early_bytes.fetch_add(facts.early_bytes().saturating_sub(counted), Relaxed);
        if let Err(e) = served {
            if !benign(&e) {
                st.h3_errors.fetch_add(1, Relaxed);
            }
        }
    }
}

/// A handshake that ended before it completed: quinn's idle timeout (nothing from the client for
/// the negotiated idle period, `ConnectionError::TimedOut`) counts as a timeout, as the
/// deadline does; anything else (a close by the client, a TLS or transport error) as an error.
fn handshake_lost(st: &super::stats::Stats, e: &quinn::ConnectionError) {
    if matches!(e, quinn::ConnectionError::TimedOut) { &st.quic_handshake_timeouts } else { &st.quic_handshake_errors }
        .fetch_add(1, Relaxed);
}

/// Why an h3 connection ended.
enum Ended {
    /// No first request by the deadline.
    Timeout,
    Error(h3::error::ConnectionError),
}

/// A plain end: the deadline (counted apart), H3_NO_ERROR either side, a close with code 0 (a
/// QUIC client's plain close), the idle timeout, or closed here.
fn benign(e: &Ended) -> bool {
    use h3::error::ConnectionError as E;
    use h3::quic::ConnectionErrorIncoming as I;
    let Ended::Error(e) = e else { return true };
    if e.is_h3_no_error() {
        return true;
    }
    match e {
        // (the variants are non_exhaustive: matched with braces)
        E::Timeout { .. } => true,
        E::Remote { 0: I::Timeout | I::ApplicationClose { error_code: 0 }, .. } => true,
        E::Remote { 0: I::Undefined(q), .. } => matches!(
            q.downcast_ref::<quinn::ConnectionError>(),
            Some(quinn::ConnectionError::LocallyClosed | quinn::ConnectionError::TimedOut)
        ),
        _ => false,
    }
}

/// The h3 connection: its first request by `deadline` (else closed, `request_timeouts`), each
/// request on a task of its own, until the client closes or errs.
async fn serve(
    conn: quinn::Connection,
    sh: Arc<Shared>,
    sni: Option<Arc<str>>,
    facts: Arc<HandshakeFacts>,
    deadline: tokio::time::Instant,
    done: &std::sync::atomic::AtomicBool,
) -> Result<(), Ended> {
    let prios = Arc::new(Priorities::default());
    let first = async {
        let mut h3c: Conn = h3::server::builder()
            .max_field_section_size(MAX_HEAD_BYTES as u64)
            .build(h3_quic::Connection::new(conn.clone(), prios.clone()))
            .await?;
        let first = h3c.accept().await;
        Ok::<_, h3::error::ConnectionError>((h3c, first))
    };
    tokio::pin!(first);
    let (mut h3c, mut next) = match tokio::time::timeout_at(deadline, &mut first).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => return Err(Ended::Error(e)),
        Err(_) => {
            // (before `first` is dropped: dropping h3's connection closes the QUIC one) not
            // closed by the handshake's own deadline
            // (found by the hostile test: both deadlines are one instant, and this close made
            // a never-completed handshake count as an error and a request timeout)
            if conn.close_reason().is_none() && done.load(Relaxed) {
                sh.stats.request_timeouts.fetch_add(1, Relaxed);
                conn.close(0u32.into(), b"no request");
            }
            return Err(Ended::Timeout);
        }
    };
    let mut used: Option<TlsUse> = None;
    loop {
        match next {
            Ok(Some(resolver)) => {
                // the handshake as it stands at the first request: a request sent as 0-RTT data
                // has its bytes counted by now
                used.get_or_insert_with(|| TlsUse::quic(facts.resumed(), facts.zero_rtt())).request(&sh.stats);
                tokio::spawn(request(resolver, sh.clone(), sni.clone(), prios.clone()));
            }
            Ok(None) => return Ok(()),
            Err(e) => return Err(Ended::Error(e)),
        }
        next = h3c.accept().await;
    }
}

/// One request: its body read into the digest, the answer chosen and sent.
async fn request(
    resolver: h3::server::RequestResolver<h3_quic::Connection, Bytes>,
    sh: Arc<Shared>,
    sni: Option<Arc<str>>,
    prios: Arc<Priorities>,
) {
    let Ok((req, mut stream)) = resolver.resolve_request().await else { return };
    if sh.h2_priority == priority::Scheme::Rfc9218 {
        // its place from the request's arrival (requests that came together are ordered
        // together); a response without data to send holds nothing back
        let p = req.headers().get("priority").and_then(|v| v.to_str().ok()).map(priority::parse);
        let id = stream.id().into_inner();
        prios.set(id, priority::quic_priority(p.unwrap_or_default(), id / 4));
    }
    let st = &sh.stats;
    st.requests.fetch_add(1, Relaxed);
    st.h3_streams.fetch_add(1, Relaxed);
    let t_req = Instant::now();
    let Some(body_sha256) = read_body(&mut stream).await else { return };
    let (parts, ()) = req.into_parts();
    let target = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let authority = parts.uri.authority().map(|a| a.as_str());
    let host = authority.or_else(|| parts.headers.get(::http::header::HOST).and_then(|v| v.to_str().ok()));
    let asked =
        Asked { method: parts.method.as_str(), scheme: Scheme::Https, target, host, sni: sni.as_deref(), body_sha256 };
    let (resp, body, wait) = framed(sh.answer(&asked));
    if let Some(w) = wait {
        tokio::time::sleep(w).await;
    }
    let body = if parts.method == ::http::Method::HEAD { Bytes::new() } else { body };
    let head = head_bytes(&resp);
    let total = body.len();
    if send(&mut stream, resp, body).await.is_ok() {
        st.note_service(t_req, wait);
    }
    st.bytes_out.fetch_add((head + total) as u64, Relaxed);
}

/// The request body's SHA-256 (None inside: no body); None if the stream failed or the body
/// was over `MAX_REQUEST_BODY` (the stream then stopped).
async fn read_body(stream: &mut Stream) -> Option<Option<[u8; 32]>> {
    let mut d = ring::digest::Context::new(&ring::digest::SHA256);
    let mut n = 0usize;
    while let Some(mut chunk) = stream.recv_data().await.ok()? {
        n += chunk.remaining();
        if n > MAX_REQUEST_BODY {
            stream.stop_sending(h3::error::Code::H3_REQUEST_REJECTED);
            return None;
        }
        while chunk.has_remaining() {
            let c = chunk.chunk();
            d.update(c);
            let k = c.len();
            chunk.advance(k);
        }
    }
    Some((n > 0).then(|| {
        let mut out = [0u8; 32];
        out.copy_from_slice(d.finish().as_ref());
        out
    }))
}

/// The response: HEADERS, the body as DATA frames of at most `SEND_CHUNK`, the stream's end.
async fn send(stream: &mut Stream, resp: ::http::Response<()>, mut body: Bytes) -> Result<(), h3::error::StreamError> {
    stream.send_response(resp).await?;
    while !body.is_empty() {
        let chunk = body.split_to(body.len().min(SEND_CHUNK));
        stream.send_data(chunk).await?;
    }
    stream.finish().await
}
