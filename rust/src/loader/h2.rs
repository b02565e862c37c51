//! An h2 connection of the loader (hyperium's h2 client over the TLS stream the transport set up):
//! every request the driver hands it becomes a stream of its own, answered concurrently.
//!
//! Client settings as Chromium sends them: stream window 6 MiB, connection window 15 MiB
//! (so the server's sending is limited by the network, not by flow control), header lists up to
//! 256 KiB. Requests carry the loader's usual headers (no Host/Connection: :authority instead).
//! Per request: `request_ms` when HEADERS were handed to the connection, `first_byte_ms` the
//! response HEADERS, `last_byte_ms` END_STREAM; `header_bytes` = the response header fields as
//! HPACK decodes them (name + value + 4 per field, plus the status line's 12: the size of the
//! same head in HTTP/1.1 framing, not the compressed bytes), `bytes` = DATA payload,
//! `transfer_bytes` = header_bytes + bytes. The plan's `priority` (RFC 9218) is sent as a header;
//! RFC 7540 stream priorities are not (the crate has no API for them).
use anyhow::{anyhow, Result};
use bytes::Bytes;
use std::rc::Rc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};

use super::clock::Clock;
use super::decode;
use super::msg::Msg;
use super::output::Rec;
use super::plan::Plan;
use super::transport::{Io, Probe};

pub const STREAM_WINDOW: u32 = 6 << 20;
pub const CONNECTION_WINDOW: u32 = 15 << 20;

pub type H2Conn = ::h2::client::Connection<Box<dyn Io>, Bytes>;

/// The h2 handshake on `io` (the preface written; nothing waits for the server): the handle to
/// send requests and the connection, to be driven by `serve`.
pub async fn handshake(io: Box<dyn Io>) -> Result<(::h2::client::SendRequest<Bytes>, H2Conn)> {
    ::h2::client::Builder::new()
        .initial_window_size(STREAM_WINDOW)
        .initial_connection_window_size(CONNECTION_WINDOW)
        .max_header_list_size(256 << 10)
        .enable_push(false)
        .handshake::<_, Bytes>(io)
        .await
        .map_err(|e| anyhow!("h2 handshake failed: {e}"))
}

/// Takes requests from the driver until it drops the connection; each one a stream task. The
/// connection runs on a local task, started once the first request is queued (so that with
/// early data its HEADERS leave with the preface: in the SYN too, under TFO), and reports its
/// end (`Msg::Closed`: the streams still open on it are requeued by the scheduler). `early`:
/// the probe of an early-data connection, whose transport facts are read after its first
/// response.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    clock: Clock,
    plan: Rc<Plan>,
    send: ::h2::client::SendRequest<Bytes>,
    conn: H2Conn,
    cid: usize,
    tx: UnboundedSender<Msg>,
    mut rx: UnboundedReceiver<usize>,
    mut early: Option<Probe>,
) -> Result<()> {
    let mut conn = Some(conn);
    while let Some(idx) = rx.recv().await {
        let (plan, send, tx2) = (plan.clone(), send.clone(), tx.clone());
        let probe = early.take();
        tokio::task::spawn_local(async move {
            match stream(&clock, &plan, send, idx, &tx2).await {
                Ok(rec) => {
                    if let Some(stats) = probe.and_then(|p| p.stats()) {
                        let _ = tx2.send(Msg::Transport { cid, stats });
                    }
                    let _ = tx2.send(Msg::StreamDone { cid, rec: Box::new(rec) });
                }
                Err(e) => {
                    let _ = tx2.send(Msg::Fatal(format!("{e:#}")));
                }
            }
        });
        if let Some(c) = conn.take() {
            let tx = tx.clone();
            tokio::task::spawn_local(async move {
                let _ = c.await;
                let _ = tx.send(Msg::Closed { cid });
            });
        }
    }
    Ok(())
}

/// A request's fields as h2 sends them: the pseudo-headers (from its URI), then its headers.
pub(super) fn request_fields(req: &::http::Request<()>) -> Vec<(String, String)> {
    let u = req.uri();
    let mut out = vec![(":method".to_string(), req.method().as_str().to_string())];
    out.push((":scheme".into(), u.scheme_str().unwrap_or("https").to_string()));
    out.push((":authority".into(), u.authority().map(|a| a.as_str()).unwrap_or("").to_string()));
    out.push((":path".into(), u.path_and_query().map(|p| p.as_str()).unwrap_or("/").to_string()));
    out.extend(
        req.headers().iter().map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned())),
    );
    out
}

/// A request as built: its URL, the request, its header fields as sent.
pub(super) type Built<'a> = (&'a str, ::http::Request<()>, Vec<(String, String)>);

/// An object's request as h2 and h3 send it (``what``: the protocol, for the error) with its URL
/// (fragment cut) and its header fields as sent (pseudo-headers first).
pub(super) fn request<'a>(o: &'a super::plan::Object, what: &str) -> Result<Built<'a>> {
    let url = o.url.split('#').next().unwrap_or(&o.url);
    let mut req = ::http::Request::builder()
        .method(o.method.as_str())
        .uri(url)
        .header("user-agent", "pltlab-loader/0.1")
        .header("accept", "*/*")
        .header("accept-encoding", "gzip, deflate, br, zstd");
    if let Some(p) = &o.priority {
        req = req.header("priority", p.as_str());
    }
    let req = req.body(()).map_err(|e| anyhow!("{url}: cannot make an {what} request: {e}"))?;
    let fields = request_fields(&req);
    Ok((url, req, fields))
}

/// Header fields' size in HTTP/1.1 framing ("name: value\r\n" each, without the blank line).
pub(super) fn head_size(fields: &[(String, String)]) -> u64 {
    fields.iter().map(|(k, v)| (k.len() + v.len() + 4) as u64).sum()
}

/// One request and its response.
async fn stream(
    clock: &Clock,
    plan: &Plan,
    send: ::h2::client::SendRequest<Bytes>,
    idx: usize,
    tx: &UnboundedSender<Msg>,
) -> Result<Rec> {
    let (url, req, request_headers) = request(&plan.objects[idx], "h2")?;
    let mut send = send.ready().await.map_err(|e| anyhow!("{url}: h2 connection: {e}"))?;
    let mut rec = Rec {
        index: idx,
        request_ms: clock.ms(),
        request_header_bytes: head_size(&request_headers),
        request_headers,
        ..Default::default()
    };
    let (resp, _) = send.send_request(req, true).map_err(|e| anyhow!("{url}: h2 request: {e}"))?;
    let resp = resp.await.map_err(|e| anyhow!("{url}: h2 response: {e}"))?;
    rec.first_byte_ms = clock.ms();
    let _ = tx.send(Msg::FirstByte(idx));
    let (parts, mut body) = resp.into_parts();
    rec.status = parts.status.as_u16();
    rec.response_headers = parts
        .headers
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    rec.header_bytes = 12 + head_size(&rec.response_headers);
    let encoding = parts
        .headers
        .get_all(::http::header::CONTENT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ");
    let encoded = !decode::codings(&encoding).is_empty();
    let mut kept = Vec::new();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.map_err(|e| anyhow!("{url}: h2 response body: {e}"))?;
        let _ = body.flow_control().release_capacity(chunk.len());
        rec.bytes += chunk.len() as u64;
        if encoded {
            kept.extend_from_slice(&chunk);
        }
    }
    rec.last_byte_ms = clock.ms();
    rec.transfer_bytes = rec.header_bytes + rec.bytes;
    rec.body_bytes = rec.bytes;
    if encoded {
        match decode::decoded_len(&encoding, &kept) {
            Ok(n) => rec.body_bytes = n,
            Err(e) => rec.decode_error = Some(format!("Content-Encoding {encoding:?}: {e}")),
        }
    }
    rec.encoding = encoding;
    Ok(rec)
}
