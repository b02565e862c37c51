//! HTTP/1.1 (and 1.0) on the replay server's addresses: plain ones, and TLS ones whose client
//! did not pick h2. Keep-alive, no pipelining needed (but supported: requests are answered in
//! order). Each request head is parsed by the shared codec (crate::http::request: 64 KiB, 100
//! header lines, strict framing), its body read into its digest, and the answers service
//! (answers.rs) says what answers it: the recorded head serialized at start and the body, in
//! one writev (a recording that was chunked goes chunked to HTTP/1.1 clients, with a
//! Content-Length to HTTP/1.0 ones), or a 404. Hostile input: a head the codec refuses gets
//! 400/431/501 and a lingering close; a connection whose first request head is not in by its
//! deadline, or a later head not whole within `request_timeout` of its first byte, is closed;
//! keep-alive idling is not bounded. Without keep-alive (manifest `keep_alive` false) every
//! response says `Connection: close` and the connection closes after it (a lingering close).
use std::io::IoSlice;
use std::sync::atomic::Ordering::Relaxed;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::answers::{Answer, Asked};
use super::matcher::Scheme;
use super::shared::Shared;
use super::stats::TlsUse;
use crate::http::{request, response, BodyDecoder, Framing, Reject};

/// The whole answer to a refused request: status line, Connection: close, the reason as a
/// text body (bounded: reasons are short).
pub fn refusal(r: &Reject) -> Vec<u8> {
    let body = format!("pltlab replay: {}\n", r.reason);
    response::text(r.status, "text/plain", body.as_bytes(), false)
}

/// The head of a 404 with a text/plain body of `len` bytes (answers::not_found_body).
pub fn not_found_head(head: &mut Vec<u8>, len: usize, keep_alive: bool) {
    response::status_line(head, 1, 404);
    head.extend_from_slice(b"Content-Type: text/plain\r\n");
    response::end_head(head, Framing::Length(len as u64), keep_alive);
}

async fn write_all_vectored<S: AsyncWrite + Unpin>(s: &mut S, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut idx = 0;
    let mut off = 0;
    while idx < parts.len() {
        if off >= parts[idx].len() {
            idx += 1;
            off = 0;
            continue;
        }
        let mut slices: [IoSlice; 3] = [IoSlice::new(&[]), IoSlice::new(&[]), IoSlice::new(&[])];
        let mut k = 0;
        for (j, p) in parts[idx..].iter().enumerate().take(3) {
            slices[k] = IoSlice::new(if j == 0 { &p[off..] } else { p });
            k += 1;
        }
        let mut n = s.write_vectored(&slices[..k]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && idx < parts.len() {
            let left = parts[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
    s.flush().await
}

/// A closing connection is drained for at most this long (and this many bytes)
/// after the server shut its sending side: closing a socket with unread request
/// bytes makes the kernel send a reset, which can destroy the response before
/// the client has read it (RFC 9112 9.6, "lingering close").
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
const LINGER_BYTES: usize = 64 << 20;

/// Shuts the sending side (TLS: close_notify first), then reads and discards
/// until the client closes, LINGER passes or LINGER_BYTES arrived.
async fn close_lingering<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    let deadline = tokio::time::Instant::now() + LINGER;
    if tokio::time::timeout_at(deadline, s.shutdown()).await.is_err() {
        return;
    }
    let mut scratch = vec![0u8; 16 * 1024];
    let mut total = 0;
    while total < LINGER_BYTES {
        match tokio::time::timeout_at(deadline, s.read(&mut scratch)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
        }
    }
}

/// Answers a refused request (400/431/501, Connection: close) and closes the connection.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, sh: &Shared, r: &Reject) {
    sh.stats.bad_requests.fetch_add(1, Relaxed);
    let msg = refusal(r);
    let sent = async {
        s.write_all(&msg).await?;
        s.flush().await
    };
    if let Ok(Ok(())) = tokio::time::timeout(LINGER, sent).await {
        sh.stats.bytes_out.fetch_add(msg.len() as u64, Relaxed);
    }
    close_lingering(s).await;
}

/// Serves requests on one connection until the client closes it, asks to, or errs. The first
/// request head must be in by `first_deadline`, a later one `Shared::request_timeout` after its
/// first byte (else the connection closes, counted); between requests a connection may idle.
pub async fn serve<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    sh: &Shared,
    scheme: Scheme,
    sni: Option<String>,
    used: Option<&TlsUse>,
    first_deadline: tokio::time::Instant,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = vec![0; 16 * 1024];
    let mut len = 0usize;
    // buf[..len] may hold a whole head: parse it (parsing only then keeps a head
    // arriving byte by byte linear); the first bytes of a head are parsed at once
    // so that garbage is refused without waiting for a blank line
    let mut check = false;
    let mut head: Vec<u8> = Vec::with_capacity(2048);
    // None: idle between requests (keep-alive), no deadline until a head begins
    let mut head_deadline = Some(first_deadline);
    loop {
        // Read one request head (at most request::MAX_HEAD_BYTES).
        let req = loop {
            if check {
                match request::parse_request(&buf[..len]) {
                    Ok(Some(r)) => break r,
                    Ok(None) => {}
                    Err(r) => {
                        refuse(&mut s, sh, &r).await;
                        return Ok(());
                    }
                }
            }
            if len >= request::MAX_HEAD_BYTES {
                refuse(&mut s, sh, &Reject::head_too_large()).await;
                return Ok(());
            }
            if len == buf.len() {
                buf.resize((buf.len() * 2).min(request::MAX_HEAD_BYTES), 0);
            }
            if len > 0 {
                // a head has begun (its first bytes are in): it must be whole within the bound
                head_deadline.get_or_insert_with(|| tokio::time::Instant::now() + sh.request_timeout);
            }
            let read = s.read(&mut buf[len..]);
            let n = match head_deadline {
                None => read.await?,
                Some(d) => match tokio::time::timeout_at(d, read).await {
                    Ok(r) => r?,
                    Err(_) => {
                        sh.stats.request_timeouts.fetch_add(1, Relaxed);
                        return Ok(());
                    }
                },
            };
            if n == 0 {
                return Ok(());
            }
            check = len == 0 || request::may_end_head(&buf[..len + n], len.saturating_sub(2));
            len += n;
        };
        head_deadline = None;
        sh.stats.requests.fetch_add(1, Relaxed);
        sh.stats.h1_requests.fetch_add(1, Relaxed);
        if let Some(u) = used {
            u.request(&sh.stats);
        }
        let t_req = std::time::Instant::now();
        // Consume the head, then read any request body into its digest.
        buf.copy_within(req.head_len..len, 0);
        len -= req.head_len;
        if req.expect_continue && req.body != Framing::Empty {
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let mut dec = BodyDecoder::new(req.body);
        let mut digest = (req.body != Framing::Empty).then(|| ring::digest::Context::new(&ring::digest::SHA256));
        while !dec.is_done() {
            if len == 0 {
                let n = s.read(&mut buf[..]).await?;
                if n == 0 {
                    return Ok(());
                }
                len = n;
            }
            let to_digest = |p: &[u8]| {
                if let Some(d) = digest.as_mut() {
                    d.update(p)
                }
            };
            let used = match dec.feed_with(&buf[..len], to_digest) {
                Ok(u) => u,
                Err(_) => {
                    refuse(&mut s, sh, &Reject::bad_chunked_body()).await;
                    return Ok(());
                }
            };
            buf.copy_within(used..len, 0);
            len -= used;
        }
        check = len > 0;

        // an empty body (Content-Length: 0) is no body: recordings without one have no digest
        let body_sha256 = digest.filter(|_| dec.body_bytes > 0).map(|d| {
            let mut out = [0u8; 32];
            out.copy_from_slice(d.finish().as_ref());
            out
        });
        let is_head = req.method.eq_ignore_ascii_case("HEAD");
        // kept alive if the client asks and the manifest allows it (`keep_alive` false: every
        // response says Connection: close and ends the connection, as HTTP/1.0 servers did)
        let keep = req.keep_alive && sh.keep_alive;
        head.clear();
        let asked = Asked {
            method: &req.method,
            scheme,
            target: &req.target,
            host: req.host.as_deref(),
            sni: sni.as_deref(),
            body_sha256,
        };
        let p = match sh.answer(&asked) {
            Answer::Recorded(p) => p,
            Answer::NotFound(text) => {
                not_found_head(&mut head, text.len(), keep);
                let b: &[u8] = if is_head { b"" } else { text.as_bytes() };
                write_all_vectored(&mut s, &[&head, b]).await?;
                sh.stats.bytes_out.fetch_add((head.len() + b.len()) as u64, Relaxed);
                if !keep {
                    close_lingering(&mut s).await;
                    return Ok(());
                }
                continue;
            }
        };
        if let Some(w) = p.wait {
            tokio::time::sleep(w).await;
        }
        head.extend_from_slice(&p.head);
        let (framing, body): (Framing, &[u8]) = if p.no_body {
            (Framing::Empty, b"")
        } else if let (Some(cw), true) = (&p.chunked_wire, req.minor >= 1) {
            (Framing::Chunked, cw)
        } else {
            (Framing::Length((p.body.end - p.body.start) as u64), p.body.bytes())
        };
        response::end_head(&mut head, framing, keep);
        let body = if is_head { &b""[..] } else { body };
        write_all_vectored(&mut s, &[&head, body]).await?;
        sh.stats.note_service(t_req, p.wait);
        sh.stats.bytes_out.fetch_add((head.len() + body.len()) as u64, Relaxed);
        if !keep {
            close_lingering(&mut s).await;
            return Ok(());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::answers::{not_found_body, MAX_QUOTED_METHOD, MAX_QUOTED_URL};

    #[test]
    fn refusals_and_404s_are_bounded() {
        let r = refusal(&Reject::head_too_large());
        assert!(r.starts_with(b"HTTP/1.1 431 Request Header Fields Too Large\r\n") && r.len() < 200);
        assert!(r.ends_with(b"Connection: close\r\n\r\npltlab replay: request head larger than 65536 bytes\n"));
        let mut head = Vec::new();
        let body = not_found_body(&"M".repeat(100), &"u".repeat(10_000));
        not_found_head(&mut head, body.len(), true);
        assert!(body.len() < MAX_QUOTED_URL + MAX_QUOTED_METHOD + 50, "{body}");
        let h = String::from_utf8(head).unwrap();
        assert_eq!(
            h,
            format!("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n", body.len())
        );
    }
}
