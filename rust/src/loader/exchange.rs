//! One request/response exchange on a connection: the request written, 1xx heads skipped,
//! the final head parsed and the body framed by the shared codec (crate::http), an encoded
//! body decoded at its end (decode.rs) to count its bytes.
use anyhow::{anyhow, bail, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::connections::{Ctx, Io};
use super::decode;
use super::output::Rec;
use super::plan::Object;
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
    ctx: &Ctx,
    s: &mut dyn Io,
    buf: &mut Vec<u8>,
    req: &[u8],
    head_req: bool,
    url: &str,
    first_byte: impl FnOnce(),
) -> Result<(Rec, bool)> {
    let mut first_byte = Some(first_byte);
    let mut rec = Rec { request_ms: ctx.ms(), request_header_bytes: req.len() as u64, ..Default::default() };
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
            rec.first_byte_ms = ctx.ms();
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
    rec.last_byte_ms = ctx.ms();
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
