//! The replay server over HTTP/2: ALPN per listen address, answers identical to HTTP/1.1,
//! multiplexing, flow control, request-body matching, and hostile clients (malformed frames,
//! reset floods, oversized header blocks) ending only their own connection.
use crate::testutil::replay::{start_server_on, start_server_with, TestServer};
use crate::testutil::sha256;
use bytes::Bytes;
use std::net::SocketAddr;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// TLS to `addr` for host a.test offering `alpn`; returns the stream and the protocol picked.
async fn tls(srv: &TestServer, addr: SocketAddr, alpn: &[&str]) -> (Tls, Option<String>) {
    let cfg = crate::certs::client_config(&srv.dir.join("ca.pem"), alpn).unwrap();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("a.test").unwrap();
    let s = tokio_rustls::TlsConnector::from(cfg).connect(name, tcp).await.unwrap();
    let p = s.get_ref().1.alpn_protocol().map(|p| String::from_utf8_lossy(p).to_string());
    (s, p)
}

/// An h2 client on `addr` (its connection driven on a local task).
pub(super) async fn h2_client(srv: &TestServer, addr: SocketAddr) -> h2::client::SendRequest<Bytes> {
    let (s, p) = tls(srv, addr, &["h2", "http/1.1"]).await;
    assert_eq!(p.as_deref(), Some("h2"));
    let (send, conn) = h2::client::Builder::new()
        .initial_window_size(6 << 20)
        .initial_connection_window_size(15 << 20)
        .handshake(s)
        .await
        .unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// (status, headers, body) of one h2 request.
pub(super) async fn get(
    send: &mut h2::client::SendRequest<Bytes>,
    method: &str,
    url: &str,
    body: Option<&[u8]>,
) -> (u16, http::HeaderMap, Vec<u8>) {
    let req = http::Request::builder().method(method).uri(url).body(()).unwrap();
    let mut s = send.clone().ready().await.unwrap();
    let (resp, mut tx) = s.send_request(req, body.is_none()).unwrap();
    if let Some(b) = body {
        tx.send_data(Bytes::copy_from_slice(b), true).unwrap();
    }
    let resp = resp.await.unwrap();
    let (parts, mut rb) = resp.into_parts();
    let mut out = Vec::new();
    while let Some(c) = rb.data().await {
        let c = c.unwrap();
        let _ = rb.flow_control().release_capacity(c.len());
        out.extend_from_slice(&c);
    }
    (parts.status.as_u16(), parts.headers, out)
}

/// The body of an HTTP/1.1 answer from the plain-http address.
fn h1_body(srv: &TestServer, path: &str) -> (u16, Vec<u8>) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(srv.http).unwrap();
    write!(s, "GET {path} HTTP/1.0\r\nHost: a.test\r\n\r\n").unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    let h = crate::http::parse_response_head(&out, false).unwrap().unwrap();
    (h.status, out[h.head_len..].to_vec())
}

fn listen_h2() -> serde_json::Value {
    serde_json::json!([
        {"ip": "127.0.0.1", "port": 0, "tls": false},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "alpn": ["h2", "http/1.1"]},
        {"ip": "127.0.0.1", "port": 0, "tls": true},
    ])
}

pub(super) fn responses() -> serde_json::Value {
    serde_json::json!([
        {"host": "a.test", "path": "/a", "body": {"synth": 40000, "mime": "text/css"},
         "headers": [["Content-Type", "text/css"], ["X-Tag", "a"], ["Connection", "keep-alive"], ["Keep-Alive", "x"]]},
        {"host": "a.test", "path": "/ch", "body": {"synth": 30000}, "chunked": true,
         "headers": [["Transfer-Encoding", "chunked"], ["X-Tag", "ch"]]},
        {"host": "a.test", "path": "/big", "body": {"synth": 1000000}},
        {"host": "a.test", "path": "/nc", "status": 304, "headers": [["ETag", "\"x\""]], "body": {"synth": 50}},
        {"method": "POST", "host": "a.test", "path": "/api", "body_sha256": sha256(b"one"), "headers": [["X-Tag", "p0"]]},
        {"method": "POST", "host": "a.test", "path": "/api", "body_sha256": sha256(b"two"), "headers": [["X-Tag", "p1"]]},
    ])
}

#[test]
fn alpn_per_listen_address() {
    let srv = start_server_on(listen_h2(), responses(), false);
    rt().block_on(async {
        assert_eq!(tls(&srv, srv.addrs[1], &["h2", "http/1.1"]).await.1.as_deref(), Some("h2"));
        assert_eq!(tls(&srv, srv.addrs[1], &["http/1.1"]).await.1.as_deref(), Some("http/1.1"));
        // an address without h2 in its list: http/1.1 even for a client that prefers h2
        assert_eq!(tls(&srv, srv.addrs[2], &["h2", "http/1.1"]).await.1.as_deref(), Some("http/1.1"));
    });
}

#[test]
fn handshakes_of_connections_without_requests_are_not_counted_as_used() {
    let srv = start_server_on(listen_h2(), responses(), false);
    let st = &srv.shared.stats;
    let wait_for = |what: &dyn Fn() -> bool| {
        for _ in 0..200 {
            if what() {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    rt().block_on(async {
        // a spare connection: handshake, nothing sent (as a browser's unused connection)
        let (spare, _) = tls(&srv, srv.addrs[1], &["h2", "http/1.1"]).await;
        // h2, two requests on one connection; HTTP/1.1 over TLS, one request
        let mut c = h2_client(&srv, srv.addrs[1]).await;
        for _ in 0..2 {
            assert_eq!(get(&mut c, "GET", "https://a.test/a", None).await.0, 200);
        }
        let (mut h1, _) = tls(&srv, srv.addrs[2], &["http/1.1"]).await;
        h1.write_all(b"GET /a HTTP/1.1\r\nHost: a.test\r\n\r\n").await.unwrap();
        let mut b = [0u8; 64];
        assert!(h1.read(&mut b).await.unwrap() > 0);
        drop(spare);
    });
    wait_for(&|| st.tls_full.load(Relaxed) == 3);
    assert_eq!(st.tls_full.load(Relaxed), 3);
    assert_eq!(st.tls_full_used.load(Relaxed), 2, "the spare connection carried nothing");
    assert_eq!((st.tls_resumed_used.load(Relaxed), st.tls_early_used.load(Relaxed)), (0, 0));
}

#[test]
fn h2_answers_as_http11_does() {
    let srv = start_server_on(listen_h2(), responses(), false);
    rt().block_on(async {
        let mut c = h2_client(&srv, srv.addrs[1]).await;
        for path in ["/a", "/ch", "/nope?q=1"] {
            let (st, h, body) = get(&mut c, "GET", &format!("https://a.test{path}"), None).await;
            let (st1, body1) = h1_body(&srv, path);
            assert_eq!((st, body.len()), (st1, body1.len()), "{path}");
            assert!(body == body1, "{path}: bodies differ");
            assert_eq!(h.get("content-length").unwrap().to_str().unwrap(), body.len().to_string());
            for k in ["connection", "keep-alive", "transfer-encoding"] {
                assert!(h.get(k).is_none(), "{path}: {k} sent over h2");
            }
        }
        let (st, h, body) = get(&mut c, "GET", "https://a.test/a", None).await;
        assert_eq!((st, h.get("x-tag").unwrap().to_str().unwrap(), body.len()), (200, "a", 40000));
        assert_eq!(h.get("content-type").unwrap(), "text/css");
        let (st, _, body) = get(&mut c, "GET", "https://a.test/nope", None).await;
        assert!(st == 404 && body.len() < 400 && body.starts_with(b"pltlab replay: no recorded response for GET"));
        let (st, h, body) = get(&mut c, "HEAD", "https://a.test/a", None).await;
        assert_eq!((st, body.len()), (200, 0));
        assert_eq!(h.get("content-length").unwrap(), "40000");
        let (st, _, body) = get(&mut c, "GET", "https://a.test/nc", None).await;
        assert_eq!((st, body.len()), (304, 0));
        // request bodies are matched by their digest, as over HTTP/1.1
        let (_, h, _) = get(&mut c, "POST", "https://a.test/api", Some(b"two")).await;
        assert_eq!(h.get("x-tag").unwrap(), "p1");
        let (_, h, _) = get(&mut c, "POST", "https://a.test/api", Some(b"one")).await;
        assert_eq!(h.get("x-tag").unwrap(), "p0");
    });
    let st = &srv.shared.stats;
    assert_eq!(st.h2_connections.load(Relaxed), 1);
    assert_eq!(st.h2_streams.load(Relaxed), 9);
    assert!(st.h1_connections.load(Relaxed) >= 3);
    assert_eq!(st.h2_errors.load(Relaxed), 0);
}

#[test]
fn many_streams_and_a_large_body_on_one_connection() {
    let srv = start_server_on(listen_h2(), responses(), false);
    rt().block_on(async {
        let c = h2_client(&srv, srv.addrs[1]).await;
        let mut tasks = Vec::new();
        for i in 0..60 {
            let mut c = c.clone();
            let path = if i % 10 == 0 { "/big" } else { "/a" };
            tasks.push(tokio::spawn(async move { get(&mut c, "GET", &format!("https://a.test{path}"), None).await }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            let (st, _, body) = t.await.unwrap();
            assert_eq!((st, body.len()), (200, if i % 10 == 0 { 1_000_000 } else { 40000 }), "stream {i}");
        }
        // a client with the protocol's default 64 KiB windows: 1 MB arrives by flow control
        let (s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let (mut send, conn) = h2::client::handshake(s).await.unwrap();
        tokio::spawn(async move {
            let _ = conn.await;
        });
        let (st, _, body) = get(&mut send, "GET", "https://a.test/big", None).await;
        assert_eq!((st, body.len()), (200, 1_000_000));
        assert!(body == h1_body(&srv, "/big").1);
    });
    let st = &srv.shared.stats;
    assert_eq!(st.h2_connections.load(Relaxed), 2);
    assert_eq!(st.h2_streams.load(Relaxed), 61);
    // every response timed, the h2 ones at the flush after their END_STREAM (h2_sent.rs)
    assert_eq!(st.service_ns.lock().unwrap().summary().n, 62);
}

/// Two 8 MB responses asked for at once (one write) on one connection, the first at urgency 5,
/// the second at 0: how many bytes of the first came on the wire before the second ended.
fn first_bytes_when_urgent_one_ends(scheme: &str) -> usize {
    let body = 8_000_000;
    let resp = serde_json::json!([
        {"host": "a.test", "path": "/low", "body": {"synth": body}},
        {"host": "a.test", "path": "/high", "body": {"synth": body}},
    ]);
    let srv = start_server_with(listen_h2(), resp, serde_json::json!({"h2_priority": scheme}));
    rt().block_on(async {
        let (mut s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        // windows large enough for both bodies: only the server's order decides
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
        out.extend(frame(8, 0, 0, &(0x7fff_ffffu32 - 65535).to_be_bytes()));
        out.extend(frame(1, 0x5, 1, &get_block_with("/low", "u=5")));
        out.extend(frame(1, 0x5, 3, &get_block_with("/high", "u=0")));
        s.write_all(&out).await.unwrap();
        let got = data_until_end(&mut s, 3).await;
        assert_eq!(got[&3], body);
        assert!(srv.shared.stats.service_ns.lock().unwrap().summary().n >= 1, "the urgent one timed");
        got.get(&1).copied().unwrap_or(0)
    })
}

/// Reads frames (acknowledging SETTINGS) until the DATA of stream `until` ends: the DATA bytes
/// that came per stream, in wire order up to there.
async fn data_until_end(s: &mut Tls, until: u32) -> std::collections::HashMap<u32, usize> {
    let (mut buf, mut tmp) = (Vec::new(), vec![0u8; 1 << 16]);
    let mut got = std::collections::HashMap::new();
    loop {
        while buf.len() >= 9 {
            let n = ((buf[0] as usize) << 16) | ((buf[1] as usize) << 8) | buf[2] as usize;
            if buf.len() < 9 + n {
                break;
            }
            let (kind, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes(buf[5..9].try_into().unwrap()) & 0x7fff_ffff;
            if kind == 4 && flags & 1 == 0 {
                s.write_all(&frame(4, 1, 0, &[])).await.unwrap(); // SETTINGS ack
            }
            if kind == 0 {
                *got.entry(stream).or_insert(0) += n;
                if stream == until && flags & 1 == 1 {
                    return got;
                }
            }
            buf.drain(..9 + n);
        }
        let n = tokio::time::timeout(Duration::from_secs(10), s.read(&mut tmp)).await.unwrap().unwrap();
        assert!(n > 0, "connection closed");
        buf.extend_from_slice(&tmp[..n]);
    }
}

/// HPACK: GET https://a.test{path} with a `priority` field (literals, no Huffman).
fn get_block_with(path: &str, priority: &str) -> Vec<u8> {
    let mut b = vec![0x82, 0x87]; // :method GET, :scheme https
    hpack_int(&mut b, 0x00, 4, 4); // :path (static name 4), literal without indexing
    hpack_int(&mut b, 0x00, 7, path.len());
    b.extend_from_slice(path.as_bytes());
    b.extend_from_slice(&[0x41, 6]);
    b.extend_from_slice(b"a.test");
    b.push(0x00); // a new name, literal without indexing
    hpack_int(&mut b, 0x00, 7, 8);
    b.extend_from_slice(b"priority");
    hpack_int(&mut b, 0x00, 7, priority.len());
    b.extend_from_slice(priority.as_bytes());
    b
}

#[test]
fn rfc9218_priorities_order_the_responses_of_a_connection() {
    // the urgent response overtakes: of the other one, only the chunks that left before the
    // server had read the second request
    let prio = first_bytes_when_urgent_one_ends("rfc9218");
    assert!(prio <= 4 * super::h2::PRIO_CHUNK, "rfc9218: {prio} bytes of the urgency-5 response came first");
    // without: the first one asked for is not held back
    let rr = first_bytes_when_urgent_one_ends("round-robin");
    assert!(rr >= 1_000_000, "round-robin: {rr} bytes of the first response before the second ended");
}

#[test]
fn many_small_responses_do_not_hold_back_an_urgent_one() {
    // 40 images of 10 KB (u=4, incremental) asked for before a stylesheet (u=0), all at once:
    // the stylesheet comes after what had left before the server read its request
    let mut resp: Vec<serde_json::Value> = (0..40)
        .map(|i| serde_json::json!({"host": "a.test", "path": format!("/img{i}"), "body": {"synth": 10_000}}))
        .collect();
    resp.push(serde_json::json!({"host": "a.test", "path": "/css", "body": {"synth": 10_000}}));
    let mut bytes_before = Vec::new();
    for scheme in ["rfc9218", "round-robin"] {
        let srv = start_server_with(listen_h2(), serde_json::json!(resp), serde_json::json!({"h2_priority": scheme}));
        let got = rt().block_on(async {
            let (mut s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
            let mut out = PREFACE.to_vec();
            out.extend(frame(4, 0, 0, &[0, 4, 0x7f, 0xff, 0xff, 0xff]));
            out.extend(frame(8, 0, 0, &(0x7fff_ffffu32 - 65535).to_be_bytes()));
            for i in 0..40u32 {
                out.extend(frame(1, 0x5, 1 + 2 * i, &get_block_with(&format!("/img{i}"), "u=4, i")));
            }
            out.extend(frame(1, 0x5, 81, &get_block_with("/css", "u=0")));
            s.write_all(&out).await.unwrap();
            data_until_end(&mut s, 81).await
        });
        assert_eq!(got[&81], 10_000);
        bytes_before.push(got.iter().filter(|(&k, _)| k != 81).map(|(_, v)| v).sum::<usize>());
    }
    let (prio, rr) = (bytes_before[0], bytes_before[1]);
    assert!(prio <= 4 * super::h2::PRIO_CHUNK, "rfc9218: {prio} bytes of images before the stylesheet ended");
    assert!(rr >= 200_000, "round-robin: {rr} bytes of images before the stylesheet ended");
}

#[test]
fn a_response_the_client_does_not_read_holds_the_others_back_only_for_a_while() {
    // the urgent response stops at its 64 KiB stream window (the client never opens it); the
    // other one, which fits its window, still comes once the first has waited PARK_AFTER
    let resp = serde_json::json!([
        {"host": "a.test", "path": "/stuck", "body": {"synth": 1_000_000}},
        {"host": "a.test", "path": "/small", "body": {"synth": 30_000}},
    ]);
    let srv = start_server_with(listen_h2(), resp, serde_json::json!({"h2_priority": "rfc9218"}));
    let (got, waited) = rt().block_on(async {
        let (mut s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[]));
        out.extend(frame(8, 0, 0, &(1u32 << 24).to_be_bytes())); // connection window only
        out.extend(frame(1, 0x5, 1, &get_block_with("/stuck", "u=0")));
        out.extend(frame(1, 0x5, 3, &get_block_with("/small", "u=5")));
        let t = std::time::Instant::now();
        s.write_all(&out).await.unwrap();
        let got = data_until_end(&mut s, 3).await;
        (got, t.elapsed())
    });
    assert_eq!((got[&1], got[&3]), (65535, 30_000));
    assert!(waited >= Duration::from_millis(400), "{waited:?}: the urgent response was not waited for");
}

// --- hostile clients: raw frames ---

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

fn frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let n = payload.len();
    let mut f = vec![(n >> 16) as u8, (n >> 8) as u8, n as u8, kind, flags];
    f.extend_from_slice(&stream.to_be_bytes());
    f.extend_from_slice(payload);
    f
}

/// HPACK: an indexed :method GET, :scheme https, :path /, then :authority a.test (literal).
fn get_block() -> Vec<u8> {
    let mut b = vec![0x82, 0x87, 0x84, 0x41, 6];
    b.extend_from_slice(b"a.test");
    b
}

/// HPACK integer with an `n`-bit prefix (first byte's high bits `first`).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 128 {
        out.push((v % 128 + 128) as u8);
        v /= 128;
    }
    out.push(v as u8);
}

/// Reads frames until a GOAWAY (7) or RST_STREAM (3) arrives: (frame type, error code); None
/// if the connection ended first.
async fn ended(s: &mut Tls) -> Option<(u8, u32)> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 16384];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        while buf.len() >= 9 {
            let n = ((buf[0] as usize) << 16) | ((buf[1] as usize) << 8) | buf[2] as usize;
            if buf.len() < 9 + n {
                break;
            }
            if buf[3] == 7 && n >= 8 {
                return Some((7, u32::from_be_bytes(buf[13..17].try_into().unwrap())));
            }
            if buf[3] == 3 && n == 4 {
                return Some((3, u32::from_be_bytes(buf[9..13].try_into().unwrap())));
            }
            buf.drain(..9 + n);
        }
        match tokio::time::timeout_at(deadline, s.read(&mut tmp)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&tmp[..n]),
            _ => return None,
        }
    }
}

/// After `attack` on its own connection, the server still answers a well-behaved client.
fn survives(attack: impl FnOnce(Vec<u8>) -> Vec<u8>) -> (Option<u32>, u64) {
    let (end, errors, _) = survives_with(attack);
    (end.map(|e| e.1), errors)
}

/// `survives`, returning how the attacking connection ended (frame type, code), the h2 errors
/// and the requests the server answered.
fn survives_with(attack: impl FnOnce(Vec<u8>) -> Vec<u8>) -> (Option<(u8, u32)>, u64, u64) {
    let srv = start_server_on(listen_h2(), responses(), false);
    let code = rt().block_on(async {
        let (mut s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[])); // SETTINGS
        let out = attack(out);
        let _ = s.write_all(&out).await;
        let _ = s.flush().await;
        let code = ended(&mut s).await;
        let mut c = h2_client(&srv, srv.addrs[1]).await;
        let (st, _, body) = get(&mut c, "GET", "https://a.test/a", None).await;
        assert_eq!((st, body.len()), (200, 40000));
        code
    });
    let st = &srv.shared.stats;
    (code, st.h2_errors.load(Relaxed), st.requests.load(Relaxed))
}

#[test]
fn malformed_frames_end_only_that_connection() {
    // a DATA frame on stream 0 and a HEADERS block that is not HPACK: PROTOCOL_ERROR (1) or
    // COMPRESSION_ERROR (9)
    let (code, errors) = survives(|mut out| {
        out.extend(frame(0, 0, 0, b"xx"));
        out
    });
    assert_eq!(code, Some(1));
    assert_eq!(errors, 1);
    let (code, errors) = survives(|mut out| {
        out.extend(frame(1, 0x5, 1, &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff]));
        out
    });
    assert!(matches!(code, Some(1 | 9)), "{code:?}");
    assert_eq!(errors, 1);
}

#[test]
fn reset_flood_gets_goaway() {
    // HEADERS then RST_STREAM, 500 times (the "rapid reset" attack)
    let (code, errors) = survives(|mut out| {
        for k in 0..500u32 {
            let id = 2 * k + 1;
            out.extend(frame(1, 0x5, id, &get_block()));
            out.extend(frame(3, 0, id, &8u32.to_be_bytes()));
        }
        out
    });
    assert_eq!(code, Some(11), "ENHANCE_YOUR_CALM expected");
    assert_eq!(errors, 1);
}

/// One frame read from the server: (type, flags, stream, payload).
type Frame = (u8, u8, u32, Vec<u8>);

/// Reads frames (acknowledging SETTINGS) until `done` says so or the connection ends (10 s at
/// most): every frame read, in order.
async fn frames_until(s: &mut Tls, mut done: impl FnMut(&Frame) -> bool) -> Vec<Frame> {
    let (mut buf, mut tmp, mut got) = (Vec::new(), vec![0u8; 1 << 16], Vec::new());
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        while buf.len() >= 9 {
            let n = ((buf[0] as usize) << 16) | ((buf[1] as usize) << 8) | buf[2] as usize;
            if buf.len() < 9 + n {
                break;
            }
            let f: Frame = (
                buf[3],
                buf[4],
                u32::from_be_bytes(buf[5..9].try_into().unwrap()) & 0x7fff_ffff,
                buf[9..9 + n].to_vec(),
            );
            buf.drain(..9 + n);
            if f.0 == 4 && f.1 & 1 == 0 {
                let _ = s.write_all(&frame(4, 1, 0, &[])).await; // SETTINGS ack
            }
            let stop = done(&f);
            got.push(f);
            if stop {
                return got;
            }
        }
        match tokio::time::timeout_at(deadline, s.read(&mut tmp)).await {
            Ok(Ok(n)) if n > 0 => buf.extend_from_slice(&tmp[..n]),
            _ => return got,
        }
    }
}

/// HEADERS (+ CONTINUATION) frames of at most 16 KiB on `stream`: GET https://a.test/ with one
/// `x-big` field of `n` bytes (literal, no Huffman, never indexed: the block is about `n` bytes),
/// END_STREAM if `ended` (else a body would follow); and how many frames.
fn big_request(stream: u32, n: usize, ended: bool) -> (Vec<u8>, usize) {
    let mut block = get_block();
    block.push(0x00);
    hpack_int(&mut block, 0, 7, 5);
    block.extend_from_slice(b"x-big");
    hpack_int(&mut block, 0, 7, n);
    block.extend(std::iter::repeat_n(b'v', n));
    let mut out = Vec::new();
    let chunks: Vec<&[u8]> = block.chunks(16384).collect();
    for (i, c) in chunks.iter().enumerate() {
        let end_headers = if i + 1 == chunks.len() { 0x4 } else { 0 };
        let end_stream = u8::from(i == 0 && ended);
        out.extend(frame(if i == 0 { 1 } else { 9 }, end_headers | end_stream, stream, c));
    }
    (out, chunks.len())
}

/// A header list over 64 KiB (the server's SETTINGS_MAX_HEADER_LIST_SIZE), then GET /a on the
/// same connection: how the big one ended (431 on its stream, RST_STREAM, GOAWAY) and whether
/// /a was answered on that connection; the server's h2 errors and requests counted.
struct Oversize {
    status_431: bool,
    reset: Option<u32>,
    goaway: Option<u32>,
    next_answered: bool,
    h2_errors: u64,
    requests: u64,
}

fn oversize(block: Vec<u8>) -> Oversize {
    let srv = start_server_on(listen_h2(), responses(), false);
    let frames = rt().block_on(async {
        let (mut s, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[]));
        out.extend(block);
        let mut a = vec![0x82, 0x87, 0x04, 2];
        a.extend_from_slice(b"/a");
        a.extend_from_slice(&[0x41, 6]);
        a.extend_from_slice(b"a.test");
        out.extend(frame(1, 0x5, 3, &a));
        let _ = s.write_all(&out).await;
        let frames = frames_until(&mut s, |f| f.0 == 7 || (f.0 == 0 && f.2 == 3 && f.1 & 1 == 1)).await;
        // whatever became of that connection, another one is served
        let mut c = h2_client(&srv, srv.addrs[1]).await;
        assert_eq!(get(&mut c, "GET", "https://a.test/a", None).await.0, 200);
        frames
    });
    let st = &srv.shared.stats;
    let on1: Vec<&Frame> = frames.iter().filter(|f| f.2 == 1).collect();
    let code = |f: &Frame, at: usize| u32::from_be_bytes(f.3[at..at + 4].try_into().unwrap());
    Oversize {
        // HEADERS, END_STREAM: `:status` (static name 8, incremental indexing), Huffman "431"
        status_431: on1.iter().any(|f| f.0 == 1 && f.1 & 1 == 1 && f.3 == [0x48, 0x83, 0x69, 0x90, 0xff]),
        reset: on1.iter().find(|f| f.0 == 3).map(|f| code(f, 0)),
        goaway: frames.iter().find(|f| f.0 == 7).map(|f| code(f, 4)),
        next_answered: frames.iter().filter(|f| f.0 == 0 && f.2 == 3).map(|f| f.3.len()).sum::<usize>() == 40000,
        h2_errors: st.h2_errors.load(Relaxed),
        requests: st.requests.load(Relaxed),
    }
}

#[test]
fn oversized_header_list_gets_431_on_its_stream_within_the_crates_bounds() {
    // over 64 KiB decoded, in 5 and in 7 frames (HEADERS + 6 CONTINUATION: the most h2 0.4
    // takes at 16 KiB frames): 431 on that stream, the next request on the same connection is
    // answered, nothing counted as an error; the big request never reaches the matcher (the two
    // requests counted: /a on that connection and on another one)
    for (n, ended) in [(80_000, true), (110_000, true), (80_000, false)] {
        let (block, frames) = big_request(1, n, ended);
        let r = oversize(block);
        assert!(r.status_431, "{n} bytes in {frames} frames: no 431");
        assert_eq!((r.goaway, r.next_answered), (None, true), "{n} bytes in {frames} frames");
        assert_eq!((r.h2_errors, r.requests), (0, 2), "{n} bytes in {frames} frames");
        // a request with a body to come: its stream is reset too (PROTOCOL_ERROR), nothing to read
        assert_eq!(r.reset, (!ended).then_some(1), "{n} bytes, END_STREAM {ended}");
    }
}

#[test]
fn header_blocks_beyond_the_crates_bounds_end_their_connection() {
    // 8 frames and more (a CONTINUATION flood to h2 0.4), e.g. a 200 KB field: GOAWAY
    // ENHANCE_YOUR_CALM for that connection, counted; the others are served on
    for n in [120_000, 200_000] {
        let (block, frames) = big_request(1, n, true);
        let r = oversize(block);
        assert_eq!((r.goaway, r.status_431, r.next_answered), (Some(11), false, false), "{n} bytes in {frames} frames");
        assert_eq!((r.h2_errors, r.requests), (1, 1), "{n} bytes in {frames} frames");
    }
    // a small block that decodes to over 4 x 64 KiB (one 4 KB field indexed once, then
    // referenced 70 times): GOAWAY ENHANCE_YOUR_CALM too
    let mut block = get_block();
    block.push(0x40); // literal with incremental indexing, new name
    hpack_int(&mut block, 0, 7, 5);
    block.extend_from_slice(b"x-big");
    hpack_int(&mut block, 0, 7, 4000);
    block.extend(std::iter::repeat_n(b'v', 4000));
    block.extend(std::iter::repeat_n(0x80 | 62, 70)); // indexed: the dynamic table's first entry
    let r = oversize(frame(1, 0x5, 1, &block));
    assert_eq!((r.goaway, r.next_answered, r.h2_errors), (Some(11), false, 1));
}

/// Reads until the server closes `s` (EOF, a reset or an error): how long after `since`; None if
/// it is still open 5 s later.
async fn closed_after(s: &mut Tls, since: std::time::Instant) -> Option<Duration> {
    let mut b = vec![0u8; 1 << 16];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        match tokio::time::timeout_at(deadline, s.read(&mut b)).await {
            Ok(Ok(n)) if n > 0 => continue,
            Ok(_) => return Some(since.elapsed()),
            Err(_) => return None,
        }
    }
}

/// A 400 ms bound: h2 connections that send nothing after the TLS handshake, only the preface
/// and SETTINGS, or a HEADERS frame whose block never ends are closed at the bound and counted;
/// one whose first request came in time then idles for twice the bound is served on.
#[test]
fn h2_connections_without_a_first_request_are_closed_at_the_bound() {
    const BOUND: Duration = Duration::from_millis(400);
    let srv = start_server_with(listen_h2(), responses(), serde_json::json!({"request_timeout_ms": 400}));
    rt().block_on(async {
        let t0 = std::time::Instant::now();
        let (mut silent, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let (mut settings, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        let mut out = PREFACE.to_vec();
        out.extend(frame(4, 0, 0, &[]));
        settings.write_all(&out).await.unwrap();
        let (mut half, _) = tls(&srv, srv.addrs[1], &["h2"]).await;
        out.extend(frame(1, 0x1, 1, &get_block())); // END_STREAM, no END_HEADERS: a CONTINUATION is due
        half.write_all(&out).await.unwrap();
        let mut c = h2_client(&srv, srv.addrs[1]).await;
        assert_eq!(get(&mut c, "GET", "https://a.test/a", None).await.0, 200);
        for (what, s) in
            [("silent", &mut silent), ("preface and SETTINGS", &mut settings), ("half a HEADERS", &mut half)]
        {
            let d = closed_after(s, t0).await;
            assert!(d.is_some_and(|d| d >= BOUND && d < BOUND + Duration::from_secs(3)), "{what}: closed after {d:?}");
        }
        tokio::time::sleep(2 * BOUND).await;
        assert_eq!(get(&mut c, "GET", "https://a.test/a", None).await.0, 200, "after idling between requests");
    });
    let st = &srv.shared.stats;
    assert_eq!((st.request_timeouts.load(Relaxed), st.handshake_timeouts.load(Relaxed)), (3, 0));
    assert_eq!((st.requests.load(Relaxed), st.h2_errors.load(Relaxed)), (2, 0));
}
