//! HTTP/2 on the replay server's https addresses that offer ALPN "h2" (hyperium's `h2` crate
//! over the same tokio-rustls stream; TFO on the listen socket is unchanged).
//!
//! Each request is answered exactly as over HTTP/1.1 (the answers service, answers.rs: the
//! same matching, the same recorded status, headers and body bytes, the same think time), the
//! headers without the connection-specific ones and with `content-length`; a recording that was
//! chunked is sent as DATA frames like any other body (h2 has no chunked coding).
//!
//! Settings, like a CDN front end (nginx's and Cloudflare's defaults are of this order):
//! MAX_CONCURRENT_STREAMS 100 (Chromium opens at most that many; more are refused with
//! RST_STREAM REFUSED_STREAM by the crate), INITIAL_WINDOW_SIZE 64 KiB for request bodies, a
//! 1 MiB connection receive window, MAX_FRAME_SIZE 16 KiB (the default), header lists of at
//! most 64 KiB (as HTTP/1.1 heads: crate::http::request::MAX_HEAD_BYTES). What the server sends
//! is limited by the client's windows (Chromium: 6 MiB per stream, 15 MiB per connection).
//! Order of the responses (manifest `h2_priority`): "rfc9218" (the control plane's default), by
//! the requests' `priority` headers as a CDN front end does it (priority.rs): each request joins
//! its connection's schedule as it arrives (so requests that came together are ordered
//! together); a response sends a chunk of at most `PRIO_CHUNK` bytes at a time, when the
//! schedule says it may; a stream buffers at most that much in the crate and the socket holds at
//! most `NOT_SENT_LOWAT` unsent bytes (TCP_NOTSENT_LOWAT), so a request of a higher priority
//! overtakes within a few chunks. A response alone on its connection (no other one pending)
//! hands over `ALONE_CHUNK` at a time: only a request still to come could overtake it, and each
//! chunk costs a round trip between two tasks (docs/dataplane-interfaces.md, issue 25). A
//! response that fits one chunk is handed over whole and the next one follows at once: what is
//! ready leaves in one write, in priority order.
//! "round-robin": every response sends as soon as its data is ready, DATA frames of the streams
//! with data interleaved by the crate. RFC 7540 priorities (in HEADERS or PRIORITY
//! frames) and PRIORITY_UPDATE frames are not read (the crate hides the first and drops the
//! second). Hostile input: a malformed frame or HPACK block, a reset flood
//! (more than `MAX_PENDING_RESETS` streams reset before the server accepted them) or too many
//! locally reset streams end that connection with GOAWAY (counted in `h2_errors`); the others
//! are served on. A header list over 64 KiB gets the crate's 431 on its stream alone while its
//! block comes in at most 7 frames and decodes to at most 256 KiB; beyond, the crate's flood
//! and HPACK-bomb limits (multiples of max_header_list_size) end the connection with GOAWAY
//! (docs/dataplane-interfaces.md). A connection without its first request by the deadline
//! `serve` is given is closed (a slowloris that sends the preface only, or half a HEADERS).
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::Notify;

use super::answers::{Answer, Asked};
use super::h2_sent;
use super::matcher::Scheme;
use super::priority;
use super::shared::Shared;
use super::stats::TlsUse;
use crate::http::request::MAX_HEAD_BYTES;

pub const MAX_CONCURRENT_STREAMS: u32 = 100;
pub const INITIAL_WINDOW: u32 = 64 * 1024;
pub const CONNECTION_WINDOW: u32 = 1 << 20;
pub const MAX_PENDING_RESETS: usize = 20;
/// Request bodies are read into their digest up to this many bytes, then the stream is reset.
pub const MAX_REQUEST_BODY: usize = 64 << 20;
/// Largest DATA chunk handed to the connection at once (then wait for window/capacity).
const SEND_CHUNK: usize = 64 * 1024;
/// With "rfc9218": a response's chunk, and what one stream may buffer in the crate.
pub const PRIO_CHUNK: usize = 16 * 1024;
/// With "rfc9218": a response alone on its connection (no other one pending) hands the crate
/// this much at a time instead: a chunk is a round trip between the response's task and the
/// connection's (issue 25: 100 KB in 2 chunks, not 7, is 9-10 us less server time on
/// loopback), and only a request that is still to come could want to overtake it.
const ALONE_CHUNK: usize = SEND_CHUNK;
/// With "rfc9218": the unsent bytes a connection's socket takes at most (Cloudflare's value).
const NOT_SENT_LOWAT: i32 = 16 * 1024;
/// With "rfc9218": a response that has waited this long for room to send (the client's flow
/// control window, or a very slow link) leaves the schedule until it gets some, so that a
/// client not reading one stream (a paused video) does not hold the others back.
const PARK_AFTER: std::time::Duration = std::time::Duration::from_millis(500);

/// A body slice of the manifest's shared buffer, handed to h2 without copying.
struct Blob(Arc<Vec<u8>>);
impl AsRef<[u8]> for Blob {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn builder(prio: bool) -> ::h2::server::Builder {
    let mut b = ::h2::server::Builder::new();
    b.max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_window_size(INITIAL_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_send_buffer_size(if prio { PRIO_CHUNK } else { 1 << 20 });
    b
}

/// One connection's schedule (priority.rs) and the wake-up of the responses waiting on it.
#[derive(Default)]
struct ConnPrio {
    schedule: Mutex<priority::Schedule>,
    changed: Notify,
}

/// A response's place in its connection's schedule, left when dropped (sent, reset, gone).
struct Turn {
    conn: Arc<ConnPrio>,
    seq: u64,
    p: priority::Priority,
}

impl Turn {
    /// In the schedule from the request's arrival: `ready` if its answer can go at once (else
    /// `ready()` once it can), so that requests that came together are ordered together.
    fn new(conn: Arc<ConnPrio>, seq: u64, p: priority::Priority, ready: bool) -> Turn {
        conn.schedule.lock().unwrap().add(seq, p, ready);
        conn.changed.notify_waiters();
        Turn { conn, seq, p }
    }

    fn ready(&self) {
        self.conn.schedule.lock().unwrap().ready(self.seq);
        self.conn.changed.notify_waiters();
    }

    /// Until the schedule lets this response send its next chunk.
    async fn wait(&self) {
        loop {
            let changed = self.conn.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            if self.conn.schedule.lock().unwrap().may_send(self.seq) {
                return;
            }
            changed.await;
        }
    }

    /// How much of its body this response hands the crate next: `PRIO_CHUNK`, or `ALONE_CHUNK`
    /// while no other response of its connection is pending.
    fn chunk(&self) -> usize {
        if self.conn.schedule.lock().unwrap().alone(self.seq) {
            ALONE_CHUNK
        } else {
            PRIO_CHUNK
        }
    }

    /// Out of the schedule (waiting for the peer), or back in it.
    fn park(&self, parked: bool) {
        let mut s = self.conn.schedule.lock().unwrap();
        if parked {
            s.remove(self.seq);
        } else {
            s.add(self.seq, self.p, true);
        }
        drop(s);
        self.conn.changed.notify_waiters();
    }
}

impl Drop for Turn {
    fn drop(&mut self) {
        self.conn.schedule.lock().unwrap().remove(self.seq);
        self.conn.changed.notify_waiters();
    }
}

/// The TCP socket of a connection that negotiated h2, before `serve`: with "rfc9218", at most
/// `NOT_SENT_LOWAT` unsent bytes in it (best effort: without, priorities act a socket buffer later).
pub fn tune_socket(sh: &Shared, tcp: &tokio::net::TcpStream) {
    if sh.h2_priority == priority::Scheme::Rfc9218 {
        let _ = crate::os::sock::set_tcp_int(tcp, libc::TCP_NOTSENT_LOWAT, NOT_SENT_LOWAT);
    }
}

/// Serves one TLS connection that negotiated h2 until the client closes it or errs. Its preface,
/// SETTINGS and first request (HEADERS) must be in by `deadline`, else it is closed (counted in
/// `request_timeouts`); after that it may idle between requests.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    s: S,
    sh: Arc<Shared>,
    sni: Option<String>,
    used: Arc<TlsUse>,
    deadline: tokio::time::Instant,
) {
    let prio = (sh.h2_priority == priority::Scheme::Rfc9218).then(|| Arc::new(ConnPrio::default()));
    let sent = Arc::new(h2_sent::Expected::default());
    let s = h2_sent::Tap::new(s, sent.clone(), sh.clone());
    let first = async {
        let mut conn = builder(prio.is_some()).handshake::<_, Bytes>(s).await?;
        let first = conn.accept().await;
        Ok::<_, ::h2::Error>((conn, first))
    };
    let (mut conn, mut next) = match tokio::time::timeout_at(deadline, first).await {
        Ok(Ok(c)) => c,
        Ok(Err(e)) => {
            note_error(&sh, &e);
            return;
        }
        Err(_) => {
            sh.stats.request_timeouts.fetch_add(1, Relaxed);
            return;
        }
    };
    let sni: Option<Arc<str>> = sni.map(Into::into);
    let mut seq = 0u64;
    while let Some(r) = next {
        match r {
            Ok((req, respond)) => {
                used.request(&sh.stats);
                seq += 1;
                let turn = prio.as_ref().map(|c| {
                    let p = req.headers().get("priority").and_then(|v| v.to_str().ok()).map(priority::parse);
                    let ready = !sh.think_time && req.body().is_end_stream();
                    Turn::new(c.clone(), seq, p.unwrap_or_default(), ready)
                });
                tokio::spawn(stream(req, respond, sh.clone(), sni.clone(), turn, sent.clone()));
            }
            Err(e) => {
                note_error(&sh, &e);
                return;
            }
        }
        next = conn.accept().await;
    }
}

/// A connection-level error counts unless it is a plain close (NO_ERROR, or the peer went away).
fn note_error(sh: &Shared, e: &::h2::Error) {
    let benign = e.is_io() || e.reason() == Some(::h2::Reason::NO_ERROR);
    if !benign {
        sh.stats.h2_errors.fetch_add(1, Relaxed);
    }
}

/// One request: read its body into the digest, choose the answer, send it under flow control.
async fn stream(
    req: ::http::Request<::h2::RecvStream>,
    mut respond: ::h2::server::SendResponse<Bytes>,
    sh: Arc<Shared>,
    sni: Option<Arc<str>>,
    turn: Option<Turn>,
    sent: Arc<h2_sent::Expected>,
) {
    let st = &sh.stats;
    st.requests.fetch_add(1, Relaxed);
    st.h2_streams.fetch_add(1, Relaxed);
    let t_req = Instant::now();
    let (parts, mut body) = req.into_parts();
    let body_sha256 = if body.is_end_stream() {
        None
    } else {
        let mut d = ring::digest::Context::new(&ring::digest::SHA256);
        let mut n = 0usize;
        while let Some(chunk) = body.data().await {
            let Ok(chunk) = chunk else { return };
            n += chunk.len();
            if n > MAX_REQUEST_BODY {
                respond.send_reset(::h2::Reason::REFUSED_STREAM);
                return;
            }
            let _ = body.flow_control().release_capacity(chunk.len());
            d.update(&chunk);
        }
        (n > 0).then(|| {
            let mut out = [0u8; 32];
            out.copy_from_slice(d.finish().as_ref());
            out
        })
    };
    let method = parts.method.as_str();
    let target = parts.uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let authority = parts.uri.authority().map(|a| a.as_str());
    let host = authority.or_else(|| parts.headers.get(::http::header::HOST).and_then(|v| v.to_str().ok()));
    let is_head = parts.method == ::http::Method::HEAD;
    let asked = Asked { method, scheme: Scheme::Https, target, host, sni: sni.as_deref(), body_sha256 };
    let (resp, body, wait) = framed(sh.answer(&asked));
    if let Some(w) = wait {
        tokio::time::sleep(w).await;
    }
    let body = if is_head { Bytes::new() } else { body };
    let head_bytes = head_bytes(&resp);
    // its data at hand (the request's body read, the think time over): the schedule decides
    if let Some(t) = &turn {
        t.ready();
        t.wait().await;
    }
    // timed until its END_STREAM is written (h2_sent.rs), as HTTP/1.1's until its last byte
    let id = respond.stream_id().as_u32();
    sent.expect(id, t_req, wait);
    let Ok(mut out) = respond.send_response(resp, body.is_empty()) else {
        sent.forget(id);
        return;
    };
    let total = body.len();
    if !send_body(&mut out, body, turn.as_ref()).await {
        sent.forget(id);
    }
    st.bytes_out.fetch_add((head_bytes + total) as u64, Relaxed);
}

/// An answer as h2 (and h3: h3.rs) frame it: the status and header fields (the recorded ones
/// less the connection-specific ones, `content-length` added), the body bytes (a slice of the
/// shared buffer, not copied) and the think time to wait first.
pub fn framed(a: Answer) -> (::http::Response<()>, Bytes, Option<std::time::Duration>) {
    match a {
        Answer::Recorded(p) => {
            let mut r = ::http::Response::new(());
            *r.status_mut() = ::http::StatusCode::from_u16(p.status).unwrap_or(::http::StatusCode::OK);
            *r.headers_mut() = p.h2_headers.clone();
            let body = if p.no_body {
                Bytes::new()
            } else {
                Bytes::from_owner(Blob(p.body.data.clone())).slice(p.body.start..p.body.end)
            };
            if !p.no_body {
                r.headers_mut().insert(::http::header::CONTENT_LENGTH, body.len().into());
            }
            (r, body, p.wait)
        }
        Answer::NotFound(text) => {
            let mut r = ::http::Response::new(());
            *r.status_mut() = ::http::StatusCode::NOT_FOUND;
            let h = r.headers_mut();
            h.insert(::http::header::CONTENT_TYPE, ::http::HeaderValue::from_static("text/plain"));
            h.insert(::http::header::CONTENT_LENGTH, text.len().into());
            (r, Bytes::from(text), None)
        }
    }
}

/// A response head's size as counted in `bytes_out`: its fields as `name: value\r\n`, and a
/// status line.
pub fn head_bytes(resp: &::http::Response<()>) -> usize {
    resp.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum::<usize>() + 12
}

/// Sends `body` as DATA frames as the peer's windows allow, END_STREAM on the last one (with a
/// `turn`: `send_body_in_turn`). Returns false if the stream was reset or the connection went
/// away meanwhile.
async fn send_body(out: &mut ::h2::SendStream<Bytes>, mut body: Bytes, turn: Option<&Turn>) -> bool {
    if let Some(t) = turn {
        return body.is_empty() || send_body_in_turn(out, body, t).await;
    }
    // the first chunk at once (h2 buffers it, a slice of the shared body): it leaves with the
    // HEADERS in the connection's next write; waiting for capacity first would send the HEADERS
    // alone, and a burst of small segments uses up the initial window (counted in segments)
    if !body.is_empty() {
        let first = body.split_to(body.len().min(SEND_CHUNK));
        if out.send_data(first, body.is_empty()).is_err() {
            return false;
        }
    }
    while !body.is_empty() {
        out.reserve_capacity(body.len().min(SEND_CHUNK));
        let cap = match std::future::poll_fn(|cx| out.poll_capacity(cx)).await {
            Some(Ok(c)) => c,
            _ => return false,
        };
        if cap == 0 {
            continue;
        }
        let chunk = body.split_to(cap.min(body.len()));
        if out.send_data(chunk, body.is_empty()).is_err() {
            return false;
        }
    }
    true
}

/// `send_body` in the connection's schedule: the first chunk (at most `PRIO_CHUNK`, or
/// `ALONE_CHUNK` while no other response is pending) with the HEADERS, then each further one
/// once the last has left the crate's buffer and the schedule allows. (A response that fits one
/// chunk is handed to the crate whole, and the next one in the schedule follows at once: what
/// is ready goes out in one write, in priority order.)
async fn send_body_in_turn(out: &mut ::h2::SendStream<Bytes>, mut body: Bytes, t: &Turn) -> bool {
    let first = body.split_to(body.len().min(t.chunk()));
    if out.send_data(first, body.is_empty()).is_err() {
        return false;
    }
    // one timer for the whole response, pushed back at each chunk (cheap); a new one per chunk
    // would wake the runtime's driver each time (an eventfd write and an extra epoll_wait)
    let park = tokio::time::sleep(PARK_AFTER);
    tokio::pin!(park);
    while !body.is_empty() {
        park.as_mut().reset(tokio::time::Instant::now() + PARK_AFTER);
        let Some(cap) = room(out, t, body.len().min(PRIO_CHUNK), park.as_mut()).await else { return false };
        t.wait().await;
        // room is at most PRIO_CHUNK (the crate's buffer): all of it means the last chunk has
        // left and the window has that much, so a lone response may hand over more
        let n = if cap >= PRIO_CHUNK { t.chunk() } else { cap };
        let chunk = body.split_to(n.min(body.len()));
        if out.send_data(chunk, body.is_empty()).is_err() {
            return false;
        }
    }
    true
}

/// Until the stream's earlier data has left the crate's buffer and the peer's windows allow
/// `want` bytes: the bytes it may send now; None if the stream or the connection ended. When
/// `park` fires (`PARK_AFTER` of waiting: a client not reading this stream, or a very slow
/// link) the response leaves the schedule until some room comes, then takes what there is.
async fn room(
    out: &mut ::h2::SendStream<Bytes>,
    t: &Turn,
    want: usize,
    park: std::pin::Pin<&mut tokio::time::Sleep>,
) -> Option<usize> {
    out.reserve_capacity(want);
    let enough = async {
        while out.capacity() < want {
            std::future::poll_fn(|cx| out.poll_capacity(cx)).await?.ok()?;
        }
        Some(out.capacity())
    };
    tokio::select! {
        biased;
        r = enough => return r,
        _ = park => {}
    }
    t.park(true);
    let some = async {
        while out.capacity() == 0 {
            std::future::poll_fn(|cx| out.poll_capacity(cx)).await?.ok()?;
        }
        Some(out.capacity())
    };
    let r = some.await;
    t.park(false);
    r
}
