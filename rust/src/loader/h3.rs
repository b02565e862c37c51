//! An HTTP/3 connection of the loader: hyperium's h3 client over the QUIC connection the
//! transport set up (transport/quic.rs, `h3_quinn::Connection`); every request the driver hands
//! it becomes a request stream of its own, answered concurrently, reported as h2.rs does.
//!
//! Client settings: header sections up to 256 KiB (as h2.rs), no grease (the bytes on the wire
//! are only the page's), static QPACK (h3 0.0.8 has no dynamic table). Per request:
//! `request_ms` when its HEADERS were written, `first_byte_ms` the response HEADERS,
//! `last_byte_ms` the stream's end; `header_bytes` = the response fields as QPACK decodes them
//! in HTTP/1.1 framing (name + value + 4 each, plus the status line's 12), `bytes` = DATA
//! payload, `transfer_bytes` = both; the plan's `priority` goes as the RFC 9218 header.
//!
//! 0-RTT (the transport's `zero_rtt`): the h3 client (its control and QPACK streams) and the
//! requests handed to it before the handshake ends go as 0-RTT data. Its driver is not polled
//! before the server's answer is known (it would accept the server's control stream on a
//! client it may have to drop). Accepted: the driver starts. Rejected: quinn does not send
//! rejected 0-RTT streams again (they fail with `ZeroRttRejected`), so the first client is
//! dropped, a new one made on the same (now 1-RTT) connection, and each request that failed
//! is sent again on it, keeping its `request_ms` (as TLS early data over TCP, sent again by
//! tokio-rustls, keeps the time it was first written).
use anyhow::{anyhow, Result};
use bytes::{Buf, Bytes};
use std::cell::Cell;
use std::rc::Rc;
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender};
use tokio::sync::watch;

use super::clock::Clock;
use super::decode;
use super::h2::{head_size, request};
use super::msg::{Msg, Protocol};
use super::output::Rec;
use super::plan::Plan;
use super::transport::quic::note_handshake;
use super::transport::tls::TlsSeen;
use super::transport::QuicOpen;

type Send = ::h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;
type Driver = ::h3::client::Connection<h3_quinn::Connection, Bytes>;

/// H3_NO_ERROR (RFC 9114 §8.1): the code the loader closes its connections with.
const H3_NO_ERROR: u32 = 0x100;

/// A new h3 client on `conn`: its driver (to be polled) and the handle to send requests.
async fn client(conn: &quinn::Connection) -> Result<(Driver, Send)> {
    ::h3::client::builder()
        .max_field_section_size(256 << 10)
        .send_grease(false)
        .build(h3_quinn::Connection::new(conn.clone()))
        .await
        .map_err(|e| anyhow!("h3 connection to {}: {e}", conn.remote_address()))
}

/// Drives an h3 client until its connection ends, then tells the driver (`Msg::Closed`: the
/// streams still open on it are requeued by the scheduler).
fn spawn_driver(mut driver: Driver, cid: usize, tx: UnboundedSender<Msg>) {
    tokio::task::spawn_local(async move {
        let _ = driver.wait_idle().await;
        let _ = tx.send(Msg::Closed { cid });
    });
}

/// The 0-RTT answer: None while unknown, then Some(None) accepted (or no 0-RTT), Some(Some(send))
/// rejected: the client made afterwards on the 1-RTT connection.
type Outcome = Option<Option<Send>>;

/// Takes requests from the driver until it drops the connection; each one a stream task.
/// Reports the connection (`Msg::Connected`, protocol h3) first, and its transport facts
/// (`Msg::Transport`) before each response.
#[allow(clippy::too_many_arguments)]
pub async fn serve(
    clock: Clock,
    plan: Rc<Plan>,
    open: QuicOpen,
    cid: usize,
    tx: UnboundedSender<Msg>,
    mut rx: UnboundedReceiver<usize>,
    seen: Rc<Cell<TlsSeen>>,
) -> Result<()> {
    let QuicOpen { conn: q, probe, connect_start_ms: cs, connect_end_ms: ce } = open;
    let conn = q.conn.clone();
    let (driver, send) = client(&conn).await?;
    let (otx, orx) = watch::channel::<Outcome>(None);
    match q.zero_rtt {
        None => {
            spawn_driver(driver, cid, tx.clone());
            let _ = otx.send(Some(None));
        }
        Some(accepted) => {
            let (conn, tx, seen, hs) = (conn.clone(), tx.clone(), seen.clone(), q.handshake_timeout);
            tokio::task::spawn_local(async move {
                let Ok(ok) = tokio::time::timeout(hs, accepted).await else {
                    let _ = tx.send(Msg::Fatal(format!(
                        "QUIC handshake with {} failed: no answer over UDP within {:.1} s (0-RTT)",
                        conn.remote_address(),
                        hs.as_secs_f64()
                    )));
                    return;
                };
                if let Some(reason) = conn.close_reason() {
                    let _ = tx.send(Msg::Fatal(format!(
                        "QUIC handshake with {} failed (0-RTT): {reason}",
                        conn.remote_address()
                    )));
                    return;
                }
                note_handshake(&conn, &seen, true, ok);
                if ok {
                    spawn_driver(driver, cid, tx);
                    let _ = otx.send(Some(None));
                    return;
                }
                drop(driver);
                match client(&conn).await {
                    Ok((driver, send)) => {
                        spawn_driver(driver, cid, tx);
                        let _ = otx.send(Some(Some(send)));
                    }
                    Err(e) => {
                        let _ = tx.send(Msg::Fatal(format!("{e:#} (after its 0-RTT data was rejected)")));
                    }
                }
            });
        }
    }
    let stats = probe.stats();
    let _ = tx.send(Msg::Connected { cid, cs, ce, tls: Some(ce), protocol: Protocol::H3, transport: stats });
    let probe = Rc::new(probe);
    while let Some(idx) = rx.recv().await {
        // the client to use: the first one, or the one made after a 0-RTT rejection
        let current = match &*orx.borrow() {
            Some(Some(rejected)) => rejected.clone(),
            _ => send.clone(),
        };
        let early = orx.borrow().is_none();
        let (plan, tx2, probe, mut orx) = (plan.clone(), tx.clone(), probe.clone(), orx.clone());
        tokio::task::spawn_local(async move {
            let t0 = clock.ms();
            let mut res = stream(&clock, &plan, current, idx, &tx2).await;
            if res.is_err() && early {
                // sent as 0-RTT data: if the server refused it, again on the new client
                let again = orx.wait_for(|o| o.is_some()).await.ok().and_then(|o| o.clone().flatten());
                if let Some(again) = again {
                    res = stream(&clock, &plan, again, idx, &tx2).await.map(|mut r| {
                        r.request_ms = t0;
                        r
                    });
                }
            }
            match res {
                Ok(rec) => {
                    if let Some(stats) = probe.stats() {
                        let _ = tx2.send(Msg::Transport { cid, stats });
                    }
                    let _ = tx2.send(Msg::StreamDone { cid, rec: Box::new(rec) });
                }
                Err(e) => {
                    let _ = tx2.send(Msg::Fatal(format!("{e:#}")));
                }
            }
        });
    }
    // the load is over (or this visit): close the connection, as dropping a TCP stream does
    conn.close(quinn::VarInt::from_u32(H3_NO_ERROR), b"");
    drop(q.endpoint);
    Ok(())
}

/// One request and its response.
async fn stream(clock: &Clock, plan: &Plan, mut send: Send, idx: usize, tx: &UnboundedSender<Msg>) -> Result<Rec> {
    let (url, req, request_headers) = request(&plan.objects[idx], "h3")?;
    let mut rec = Rec {
        index: idx,
        request_ms: clock.ms(),
        request_header_bytes: head_size(&request_headers),
        request_headers,
        ..Default::default()
    };
    let mut s = send.send_request(req).await.map_err(|e| anyhow!("{url}: h3 request: {e}"))?;
    s.finish().await.map_err(|e| anyhow!("{url}: h3 request: {e}"))?;
    let resp = s.recv_response().await.map_err(|e| anyhow!("{url}: h3 response: {e}"))?;
    rec.first_byte_ms = clock.ms();
    let _ = tx.send(Msg::FirstByte(idx));
    rec.status = resp.status().as_u16();
    rec.response_headers = resp
        .headers()
        .iter()
        .map(|(k, v)| (k.as_str().to_string(), String::from_utf8_lossy(v.as_bytes()).into_owned()))
        .collect();
    rec.header_bytes = 12 + head_size(&rec.response_headers);
    let encoding = resp
        .headers()
        .get_all(::http::header::CONTENT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .collect::<Vec<_>>()
        .join(", ");
    let encoded = !decode::codings(&encoding).is_empty();
    let mut kept = Vec::new();
    while let Some(mut chunk) = s.recv_data().await.map_err(|e| anyhow!("{url}: h3 response body: {e}"))? {
        let n = chunk.remaining();
        rec.bytes += n as u64;
        if encoded {
            while chunk.has_remaining() {
                let c = chunk.chunk();
                let k = c.len();
                kept.extend_from_slice(c);
                chunk.advance(k);
            }
        } else {
            chunk.advance(n);
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
