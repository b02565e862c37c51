//! HTTP/2 on the replay server's https addresses that offer ALPN "h2" (hyperium's `h2` crate
//! over the same tokio-rustls stream; TFO on the listen socket is unchanged).
//!
//! Each request is answered exactly as over HTTP/1.1 (`super::choose`: the same matching, the
//! same recorded status, headers and body bytes, the same think time), the headers without the
//! connection-specific ones and with `content-length`; a recording that was chunked is sent
//! as DATA frames like any other body (h2 has no chunked coding).
//!
//! Settings, like a CDN front end (nginx's and Cloudflare's defaults are of this order):
//! MAX_CONCURRENT_STREAMS 100 (Chromium opens at most that many; more are refused with
//! RST_STREAM REFUSED_STREAM by the crate), INITIAL_WINDOW_SIZE 64 KiB for request bodies, a
//! 1 MiB connection receive window, MAX_FRAME_SIZE 16 KiB (the default), header lists of at
//! most 64 KiB (as HTTP/1.1 heads: crate::http::request::MAX_HEAD_BYTES). What the server sends
//! is limited by the client's windows (Chromium: 6 MiB per stream, 15 MiB per connection).
//! Streams are served in the order their data is ready, DATA frames of streams with data to
//! send interleaved by the crate (round robin); RFC 7540 priorities and RFC 9218 `priority`
//! headers are not acted on. Hostile input: a malformed frame or HPACK block, a reset flood
//! (more than `MAX_PENDING_RESETS` streams reset before the server accepted them) or too many
//! locally reset streams end that connection with GOAWAY (counted in `h2_errors`); the others
//! are served on.
use bytes::Bytes;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Instant;
use tokio::io::{AsyncRead, AsyncWrite};

use super::matcher::Scheme;
use super::{answers, choose, Choice, Shared, TlsUse};
use crate::http::request::MAX_HEAD_BYTES;

pub const MAX_CONCURRENT_STREAMS: u32 = 100;
pub const INITIAL_WINDOW: u32 = 64 * 1024;
pub const CONNECTION_WINDOW: u32 = 1 << 20;
pub const MAX_PENDING_RESETS: usize = 20;
/// Request bodies are read into their digest up to this many bytes, then the stream is reset.
pub const MAX_REQUEST_BODY: usize = 64 << 20;
/// Largest DATA chunk handed to the connection at once (then wait for window/capacity).
const SEND_CHUNK: usize = 64 * 1024;

/// A body slice of the manifest's shared buffer, handed to h2 without copying.
struct Blob(Arc<Vec<u8>>);
impl AsRef<[u8]> for Blob {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

fn builder() -> ::h2::server::Builder {
    let mut b = ::h2::server::Builder::new();
    b.max_concurrent_streams(MAX_CONCURRENT_STREAMS)
        .initial_window_size(INITIAL_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(MAX_HEAD_BYTES as u32)
        .max_pending_accept_reset_streams(MAX_PENDING_RESETS)
        .max_send_buffer_size(1 << 20);
    b
}

/// Serves one TLS connection that negotiated h2 until the client closes it or errs.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin + Send + 'static>(
    s: S,
    sh: Arc<Shared>,
    sni: Option<String>,
    used: Arc<TlsUse>,
) {
    let mut conn = match builder().handshake::<_, Bytes>(s).await {
        Ok(c) => c,
        Err(e) => {
            note_error(&sh, &e);
            return;
        }
    };
    let sni: Option<Arc<str>> = sni.map(Into::into);
    while let Some(r) = conn.accept().await {
        match r {
            Ok((req, respond)) => {
                used.request(&sh.stats);
                tokio::spawn(stream(req, respond, sh.clone(), sni.clone()));
            }
            Err(e) => {
                note_error(&sh, &e);
                return;
            }
        }
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
    let (resp, body, wait) = match choose(&sh, method, Scheme::Https, target, host, sni.as_deref(), body_sha256) {
        Choice::Recorded(i) => {
            let p = &sh.responses[i];
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
        Choice::NotFound(url) => {
            let text = answers::not_found_body(method, &url);
            let mut r = ::http::Response::new(());
            *r.status_mut() = ::http::StatusCode::NOT_FOUND;
            let h = r.headers_mut();
            h.insert(::http::header::CONTENT_TYPE, ::http::HeaderValue::from_static("text/plain"));
            h.insert(::http::header::CONTENT_LENGTH, text.len().into());
            (r, Bytes::from(text), None)
        }
    };
    if let Some(w) = wait {
        tokio::time::sleep(w).await;
    }
    let body = if is_head { Bytes::new() } else { body };
    let head_bytes: usize = resp.headers().iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum::<usize>() + 12;
    let Ok(mut out) = respond.send_response(resp, body.is_empty()) else { return };
    let total = body.len();
    if send_body(&mut out, body).await {
        st.note_service(t_req, wait);
    }
    st.bytes_out.fetch_add((head_bytes + total) as u64, Relaxed);
}

/// Sends `body` as DATA frames as the peer's windows allow, END_STREAM on the last one.
/// Returns false if the stream was reset or the connection went away meanwhile.
async fn send_body(out: &mut ::h2::SendStream<Bytes>, mut body: Bytes) -> bool {
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
