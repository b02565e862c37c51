//! An HTTP/1.1 connection of the loader: one request at a time (no pipelining), each an
//! exchange: the request written, 1xx heads skipped, the final head parsed and the body framed
//! by the shared codec (crate::http), an encoded body decoded at its end (decode.rs) to count
//! its bytes. The connection's transport facts (TFO) are read after its first response.
use anyhow::{anyhow, bail, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::clock::Clock;
use super::decode;
use super::msg::Msg;
use super::output::Rec;
use super::plan::{Object, Plan};
use super::transport::{Conn, Io};
use crate::http;

/// The request for `o`: GET (or its method) with the loader's header lines, no body.
pub fn request(o: &Object) -> Vec<u8> {
    let headers = [
        ("User-Agent", "pltlab-loader/0.1"),
        ("Accept", "*/*"),
        ("Accept-Encoding", "gzip, deflate, br, zstd"),
        ("Connection", "keep-alive"),
    ];
    http::request::write_request(&o.method, &o.url, &o.host, o.port, o.tls, &headers)
}

/// The header fields of a request `request` wrote (its head; no body follows).
fn request_fields(req: &[u8]) -> Vec<(String, String)> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut r = httparse::Request::new(&mut headers);
    match r.parse(req) {
        Ok(_) => {
            r.headers.iter().map(|h| (h.name.to_string(), String::from_utf8_lossy(h.value).into_owned())).collect()
        }
        Err(_) => Vec::new(),
    }
}

/// One request/response exchange; returns (record, keep_alive).
pub async fn exchange(
    clock: &Clock,
    s: &mut dyn Io,
    buf: &mut Vec<u8>,
    req: &[u8],
    head_req: bool,
    url: &str,
    first_byte: impl FnOnce(),
) -> Result<(Rec, bool)> {
    let mut first_byte = Some(first_byte);
    let mut rec = Rec { request_ms: clock.ms(), request_header_bytes: req.len() as u64, ..Default::default() };
    s.write_all(req).await.map_err(|e| anyhow!("sending request for {url}: {e}"))?;
    s.flush().await.map_err(|e| anyhow!("sending request for {url}: {e}"))?;
    let mut len = 0usize;
    let mut head = 'head: loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = s.read(&mut buf[len..]).await.map_err(|e| anyhow!("reading response for {url}: {e}"))?;
        if n == 0 {
            bail!("connection closed by the server before the response to {url} ({len} bytes received)");
        }
        if len == 0 {
            rec.first_byte_ms = clock.ms();
            if let Some(f) = first_byte.take() {
                f();
            }
        }
        len += n;
        // drop informational (1xx) heads, then take the final head
        loop {
            match http::parse_response_head(&buf[..len], head_req).map_err(|e| anyhow!("{url}: {e:#}"))? {
                Some(h) if (100..200).contains(&h.status) && h.status != 101 => {
                    rec.transfer_bytes += h.head_len as u64;
                    buf.copy_within(h.head_len..len, 0);
                    len -= h.head_len;
                }
                Some(h) => break 'head h,
                None => break,
            }
        }
    };
    rec.status = head.status;
    rec.header_bytes = head.head_len as u64;
    rec.response_headers = std::mem::take(&mut head.headers);
    // an encoded body is kept (de-chunked) and decoded at its end; an identity one is only counted
    let encoded = !decode::codings(&head.content_encoding).is_empty();
    let mut body: Vec<u8> = Vec::new();
    let mut keep = |p: &[u8]| {
        if encoded {
            body.extend_from_slice(p);
        }
    };
    let mut dec = http::BodyDecoder::new(head.framing);
    let first = dec.feed_with(&buf[head.head_len..len], &mut keep).map_err(|e| anyhow!("{url}: {e:#}"))?;
    let mut wire = first as u64;
    let mut used = first + head.head_len;
    while !dec.is_done() {
        let n = s.read(&mut buf[..]).await.map_err(|e| anyhow!("reading response body of {url}: {e}"))?;
        if n == 0 {
            dec.eof().map_err(|e| anyhow!("{url}: {e:#}"))?;
            len = 0;
            used = 0;
            break;
        }
        len = n;
        used = dec.feed_with(&buf[..n], &mut keep).map_err(|e| anyhow!("{url}: {e:#}"))?;
        wire += used as u64;
    }
    rec.last_byte_ms = clock.ms();
    rec.request_headers = request_fields(req); // (after the timed part)
    if used < len {
        bail!("{url}: {} unexpected bytes after the response", len - used);
    }
    rec.bytes = dec.body_bytes;
    rec.transfer_bytes += head.head_len as u64 + wire;
    rec.body_bytes = rec.bytes;
    if encoded {
        match decode::decoded_len(&head.content_encoding, &body) {
            Ok(n) => rec.body_bytes = n,
            Err(e) => rec.decode_error = Some(format!("Content-Encoding {:?}: {e}", head.content_encoding)),
        }
    }
    rec.encoding = head.content_encoding;
    Ok((rec, head.keep_alive))
}

/// Serves the requests the driver hands the connection (`rx`: object indices, `reqs` their
/// requests), one at a time, until the driver drops it, the server closes it (an idle
/// connection closed, or one that spoke out of turn: `Msg::Closed`) or a response says it is
/// the last.
pub async fn serve(
    clock: &Clock,
    plan: &Plan,
    reqs: &[Vec<u8>],
    mut conn: Conn,
    cid: usize,
    tx: &UnboundedSender<Msg>,
    mut rx: UnboundedReceiver<usize>,
) -> Result<()> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut first = true;
    loop {
        let idx = tokio::select! {
            biased;
            m = rx.recv() => match m { Some(i) => i, None => return Ok(()) },
            r = conn.io.read(&mut buf[..]) => {
                // idle connection: closed (or spoke out of turn) -> drop it
                let _ = r;
                let _ = tx.send(Msg::Closed { cid });
                return Ok(());
            }
        };
        let o = &plan.objects[idx];
        let head_req = o.method.eq_ignore_ascii_case("HEAD");
        let fb_tx = tx.clone();
        let (mut rec, keep) = exchange(clock, conn.io.as_mut(), &mut buf, &reqs[idx], head_req, &o.url, move || {
            let _ = fb_tx.send(Msg::FirstByte(idx));
        })
        .await?;
        rec.index = idx;
        let transport = if first {
            first = false;
            conn.probe.stats()
        } else {
            None
        };
        let _ = tx.send(Msg::Done { cid, rec: Box::new(rec), keep, transport });
        if !keep {
            let _ = conn.io.shutdown().await;
            return Ok(());
        }
    }
}
