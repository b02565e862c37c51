//! The replay server over HTTP/3 (QUIC, udp listen entries): answers identical to h2's for the
//! same manifest (less framing), 404s, repeated URLs per session, request bodies, the QUIC
//! handshake counts (full, resumed, 0-RTT), the manifest's udp and quic checks.
use super::h2_tests::{get as h2_get, h2_client, responses};
use super::manifest::{self, Transport};
use crate::testutil::h3::{Early, H3Client};
use crate::testutil::replay::{start_server_on, start_server_with, TestServer};
use crate::testutil::tmpdir;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

/// http, https with h2, and h3 (udp) on 127.0.0.1.
fn listen_h3() -> serde_json::Value {
    serde_json::json!([
        {"ip": "127.0.0.1", "port": 0, "tls": false},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "alpn": ["h2", "http/1.1"]},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "transport": "udp", "alpn": ["h3"]},
    ])
}

fn client(srv: &TestServer) -> H3Client {
    H3Client::new(&srv.dir.join("ca.pem"))
}

/// Until `what` holds (the server counts on its own thread), at most 2 s.
fn wait_for(what: impl Fn() -> bool) {
    for _ in 0..400 {
        if what() {
            return;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn h3_answers_as_h2_does() {
    let srv = start_server_on(listen_h3(), responses(), false);
    assert_eq!(srv.addrs.len(), 3);
    rt().block_on(async {
        let c = client(&srv);
        let mut h3 = c.connect(srv.addrs[2], false).await;
        let mut h2 = h2_client(&srv, srv.addrs[1]).await;
        for (method, path, body) in [
            ("GET", "/a", None),
            ("GET", "/ch", None),
            ("GET", "/big", None),
            ("GET", "/nope?q=1", None),
            ("GET", "/nc", None),
            ("HEAD", "/a", None),
            ("POST", "/api", Some(&b"two"[..])),
            ("POST", "/api", Some(&b"one"[..])),
        ] {
            let url = format!("https://a.test{path}");
            let (s3, h3h, b3) = h3.get(method, &url, body).await;
            let (s2, h2h, b2) = h2_get(&mut h2, method, &url, body).await;
            assert_eq!((s3, b3.len()), (s2, b2.len()), "{method} {path}");
            assert!(b3 == b2, "{method} {path}: bodies differ");
            assert_eq!(h3h, h2h, "{method} {path}: headers differ");
        }
        let (st, h, body) = h3.get("GET", "https://a.test/a", None).await;
        assert_eq!((st, h.get("x-tag").unwrap().to_str().unwrap(), body.len()), (200, "a", 40000));
        assert!(h.get("connection").is_none() && h.get("keep-alive").is_none());
        let (st, h, body) = h3.get("GET", "https://a.test/nope", None).await;
        assert_eq!((st, h.get("content-type").unwrap().to_str().unwrap()), (404, "text/plain"));
        assert!(body.len() < 400 && body.starts_with(b"pltlab replay: no recorded response for GET"));
        // many requests at once on the connection
        let mut tasks = Vec::new();
        for i in 0..30 {
            let req = http::Request::builder().uri(format!("https://a.test/{}", if i % 10 == 0 { "big" } else { "a" }));
            let mut send = h3.send.clone();
            tasks.push(tokio::spawn(async move {
                let mut s = send.send_request(req.body(()).unwrap()).await.unwrap();
                s.finish().await.unwrap();
                let r = s.recv_response().await.unwrap();
                let mut n = 0;
                while let Some(c) = s.recv_data().await.unwrap() {
                    n += bytes::Buf::remaining(&c);
                }
                (r.status().as_u16(), n)
            }));
        }
        for (i, t) in tasks.into_iter().enumerate() {
            assert_eq!(t.await.unwrap(), (200, if i % 10 == 0 { 1_000_000 } else { 40000 }), "stream {i}");
        }
        h3.close().await;
    });
    let st = &srv.shared.stats;
    wait_for(|| st.quic_full.load(Relaxed) == 1);
    let j = st.json();
    assert_eq!(j["h3_streams"], 8 + 2 + 30, "{j}");
    assert_eq!(j["h2_streams"], 8, "{j}");
    assert_eq!((j["quic_connections"].as_u64(), j["quic_full"].as_u64()), (Some(1), Some(1)), "{j}");
    assert_eq!((j["quic_full_used"].as_u64(), j["quic_resumed_used"].as_u64()), (Some(1), Some(0)), "{j}");
    assert_eq!((j["h3_errors"].as_u64(), j["quic_handshake_errors"].as_u64()), (Some(0), Some(0)), "{j}");
    assert_eq!(j["quic_bad_datagrams"], 0, "{j}");
    assert!(j["quic_datagrams_in"].as_u64().unwrap() > 10 && j["quic_datagrams_out"].as_u64().unwrap() > 1000, "{j}");
    // the client's Initial flight: its ClientHello in at least one padded 1200-byte datagram
    let init = j["quic_initial_bytes_max"].as_u64().unwrap();
    assert!((1100..=2400).contains(&init), "{j}");
    assert!(j["service_us"]["n"].as_u64().unwrap() >= 48, "{j}");
}

#[test]
fn h3_repeated_urls_follow_the_recorded_order_per_session() {
    let r = serde_json::json!([
        {"host": "a.test", "path": "/poll", "headers": [["X-Tag", "r0"]]},
        {"host": "a.test", "path": "/poll", "headers": [["X-Tag", "r1"]]},
        {"host": "a.test", "path": "/poll", "headers": [["X-Tag", "r2"]]},
    ]);
    let srv = start_server_on(listen_h3(), r, false);
    rt().block_on(async {
        let c = client(&srv);
        let mut a = c.connect(srv.addrs[2], false).await;
        let tag = async |conn: &mut crate::testutil::h3::H3Conn| {
            let (_, h, _) = conn.get("GET", "https://a.test/poll", None).await;
            h.get("x-tag").unwrap().to_str().unwrap().to_string()
        };
        assert_eq!([tag(&mut a).await, tag(&mut a).await], ["r0", "r1"]);
        // the order is the server's, whatever connection asks
        let mut b = c.connect(srv.addrs[2], false).await;
        assert_eq!([tag(&mut b).await, tag(&mut b).await], ["r2", "r2"]);
        srv.shared.new_session();
        assert_eq!([tag(&mut a).await, tag(&mut b).await], ["r0", "r1"]);
        a.close().await;
        b.close().await;
    });
}

/// Full, then resumed with 0-RTT (the request sent as early data), then resumed without early
/// data, then a connection that asks nothing; after a ticket rotation, 0-RTT is refused.
#[test]
fn quic_handshakes_are_counted_full_resumed_and_0rtt() {
    let srv = start_server_on(listen_h3(), responses(), false);
    let st = &srv.shared.stats;
    let rt = rt();
    let c = H3Client::new_outside(&srv.dir.join("ca.pem"), &rt);
    let step = |early: bool, ask: bool| {
        rt.block_on(async {
            let mut conn = c.connect(srv.addrs[2], early).await;
            if ask {
                let (s, _, body) = conn.get("GET", "https://a.test/a", None).await;
                assert_eq!((s, body.len()), (200, 40000));
            }
            let e = conn.early().await;
            conn.close().await;
            e
        })
    };
    // (1) no ticket: full
    assert_eq!(step(true, true), Early::None);
    wait_for(|| st.quic_full.load(Relaxed) == 1);
    // (2) 0-RTT: the request leaves with the ClientHello, accepted
    assert_eq!(step(true, true), Early::Accepted);
    wait_for(|| st.quic_resumed.load(Relaxed) == 1);
    // (3) resumed, no early data offered
    assert_eq!(step(false, true), Early::None);
    wait_for(|| st.quic_resumed.load(Relaxed) == 2);
    // (4) resumed with early data offered (rustls does on every resumption), nothing asked
    assert_eq!(step(true, false), Early::Accepted);
    wait_for(|| st.quic_resumed.load(Relaxed) == 3);
    let j = st.json();
    assert_eq!(j["quic_connections"], 4, "{j}");
    assert_eq!((j["quic_full"].as_u64(), j["quic_resumed"].as_u64()), (Some(1), Some(3)), "{j}");
    assert_eq!((j["quic_full_used"].as_u64(), j["quic_resumed_used"].as_u64()), (Some(1), Some(2)), "{j}");
    // 0-RTT counted where early bytes arrived: (2), and (4) whose h3 control streams went early
    assert_eq!(j["quic_early_used"], 1, "{j}");
    let early = j["quic_early_data"].as_u64().unwrap();
    assert!((1..=2).contains(&early), "{j}");
    assert!(j["quic_early_bytes"].as_u64().unwrap() > 30, "{j}");
    assert_eq!(j["quic_early_rejected_bytes"], 0, "{j}");
    assert_eq!((j["h3_errors"].as_u64(), j["quic_handshake_errors"].as_u64()), (Some(0), Some(0)), "{j}");
    // (5) the server forgets its sessions (SIGHUP): the client's 0-RTT is refused, full handshake
    srv.shared.rotate_tickets();
    assert_eq!(step(true, false), Early::Rejected);
    wait_for(|| st.quic_full.load(Relaxed) == 2);
    let j = st.json();
    assert_eq!((j["quic_full"].as_u64(), j["quic_resumed"].as_u64()), (Some(2), Some(3)), "{j}");
    assert!(j["quic_early_rejected_bytes"].as_u64().unwrap() > 0, "{j}");
}

/// A client that never sends a request is closed at `request_timeout_ms`.
#[test]
fn h3_connections_without_a_request_are_closed_at_the_bound() {
    let srv = start_server_with(listen_h3(), responses(), serde_json::json!({"request_timeout_ms": 300}));
    rt().block_on(async {
        let c = client(&srv);
        let conn = c.connect(srv.addrs[2], false).await;
        let t = std::time::Instant::now();
        let closed = tokio::time::timeout(Duration::from_secs(5), conn.quic.closed()).await;
        assert!(closed.is_ok(), "not closed");
        assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    });
    let j = srv.shared.stats.json();
    assert_eq!((j["request_timeouts"].as_u64(), j["h3_errors"].as_u64()), (Some(1), Some(0)), "{j}");
}

#[test]
fn manifest_udp_entries_and_quic_settings_are_checked() {
    let dir = tmpdir("mh3");
    let path = dir.join("m.json");
    let load = |listen: serde_json::Value, extra: serde_json::Value| {
        let mut m = serde_json::json!({"listen": listen, "tls": {"cert": "c", "key": "k"}, "responses": []});
        if let Some(o) = extra.as_object() {
            m.as_object_mut().unwrap().extend(o.clone());
        }
        std::fs::write(&path, m.to_string()).unwrap();
        manifest::load(&path).map_err(|e| format!("{e:#}"))
    };
    let none = serde_json::json!({});
    let m = load(listen_h3(), none.clone()).unwrap();
    let kinds: Vec<Transport> = m.listen.iter().map(|l| l.transport).collect();
    assert_eq!(kinds, [Transport::Tcp, Transport::Tcp, Transport::Udp]);
    assert_eq!((m.quic.initial_window_packets, m.quic.cc), (10, manifest::QuicCc::Cubic));
    let bad = |listen: serde_json::Value, extra: serde_json::Value, want: &str| {
        let e = load(listen, extra).unwrap_err();
        assert!(e.contains(want), "{e}\nwants: {want}");
    };
    bad(
        serde_json::json!([{"ip": "127.0.0.1", "port": 443, "tls": true, "alpn": ["h3"]}]),
        none.clone(),
        "listen 127.0.0.1:443: ALPN protocol \"h3\" is offered only on a \"transport\": \"udp\" entry",
    );
    bad(
        serde_json::json!([{"ip": "127.0.0.1", "port": 443, "transport": "udp", "alpn": ["h3"]}]),
        none.clone(),
        "listen 127.0.0.1:443 (udp): a udp entry (QUIC) needs \"tls\": true",
    );
    bad(
        serde_json::json!([{"ip": "127.0.0.1", "port": 443, "tls": true, "transport": "udp"}]),
        none.clone(),
        "listen 127.0.0.1:443 (udp): a udp entry offers \"alpn\": [\"h3\"] only, not [\"http/1.1\"]",
    );
    bad(
        serde_json::json!([{"ip": "127.0.0.1", "port": 443, "tls": true, "transport": "sctp"}]),
        none.clone(),
        "unknown variant `sctp`",
    );
    bad(listen_h3(), serde_json::json!({"quic": {"cc": "cubic", "pacing": true}}), "unknown field `pacing`");
    bad(listen_h3(), serde_json::json!({"quic": {"cc": "vegas"}}), "unknown variant `vegas`");
    bad(
        listen_h3(),
        serde_json::json!({"quic": {"initial_window_packets": 1}}),
        "quic.initial_window_packets 1 is not from 2 to 1000",
    );
    bad(listen_h3(), serde_json::json!({"quic": {"max_connections": 0}}), "quic.max_connections 0 is not from 1");
    bad(listen_h3(), serde_json::json!({"quic": {"retry_above": 2000000}}), "quic.retry_above 2000000 is not");
    let m = load(listen_h3(), serde_json::json!({"quic": {"cc": "bbr", "initial_window_packets": 32}})).unwrap();
    assert_eq!((m.quic.cc, m.quic.initial_window_packets, m.quic.max_connections), (manifest::QuicCc::Bbr, 32, 10_000));
    std::fs::remove_dir_all(dir).ok();
}

/// The ready line names each socket's transport.
#[test]
fn ready_line_says_the_transport() {
    let srv = super::Server {
        addrs: vec![
            ("127.0.0.1:443".parse().unwrap(), true, Transport::Tcp),
            ("127.0.0.1:443".parse().unwrap(), true, Transport::Udp),
        ],
        quic: Vec::new(),
    };
    assert_eq!(
        serde_json::Value::from(srv.listen_json()),
        serde_json::json!([
            {"addr": "127.0.0.1:443", "tls": true, "transport": "tcp"},
            {"addr": "127.0.0.1:443", "tls": true, "transport": "udp"},
        ])
    );
}

/// Congestion controllers and initial windows from the manifest serve alike.
#[test]
fn quic_settings_serve() {
    for cc in ["newreno", "bbr"] {
        let extra = serde_json::json!({"quic": {"cc": cc, "initial_window_packets": 4}});
        let srv = start_server_with(listen_h3(), responses(), extra);
        rt().block_on(async {
            let mut conn = client(&srv).connect(srv.addrs[2], false).await;
            let (s, _, body) = conn.get("GET", "https://a.test/big", None).await;
            assert_eq!((s, body.len()), (200, 1_000_000), "{cc}");
            conn.close().await;
        });
    }
}

/// `quic.retry_above` 0: every new connection is sent a Retry first, then served;
/// `quic.max_connections` 1: a second connection while one is open is refused (without a Retry).
#[test]
fn quic_limits_retry_and_refuse() {
    let extra = serde_json::json!({"quic": {"retry_above": 0, "max_connections": 1}});
    let srv = start_server_with(listen_h3(), responses(), extra);
    rt().block_on(async {
        let c = client(&srv);
        let mut conn = c.connect(srv.addrs[2], false).await;
        let (s, _, body) = conn.get("GET", "https://a.test/a", None).await;
        assert_eq!((s, body.len()), (200, 40000));
        let refused = c.handshake(srv.addrs[2]).await;
        assert!(matches!(refused, Err(quinn::ConnectionError::ConnectionClosed(_))), "{refused:?}");
        conn.close().await;
    });
    let st = &srv.shared.stats;
    wait_for(|| st.quic_refused.load(Relaxed) == 1);
    let j = st.json();
    // (the refused one is refused before any Retry)
    assert_eq!((j["quic_retries"].as_u64(), j["quic_refused"].as_u64()), (Some(1), Some(1)), "{j}");
    assert_eq!((j["quic_connections"].as_u64(), j["quic_full"].as_u64()), (Some(1), Some(1)), "{j}");
}

/// A 600 KB image (u=5) then a 300 KB stylesheet (u=0) asked for at once on one h3 connection:
/// how many bytes of the image the client had read when the stylesheet ended.
fn image_bytes_when_css_ends(scheme: &str) -> usize {
    use std::sync::atomic::AtomicUsize;
    use std::sync::Arc;
    let resp = serde_json::json!([
        {"host": "a.test", "path": "/img", "body": {"synth": 600_000}},
        {"host": "a.test", "path": "/css", "body": {"synth": 300_000}},
    ]);
    let srv = start_server_with(listen_h3(), resp, serde_json::json!({"h2_priority": scheme}));
    rt().block_on(async {
        let mut conn = client(&srv).connect(srv.addrs[2], false).await;
        let mut streams = Vec::new();
        for (path, prio) in [("/img", "u=5"), ("/css", "u=0")] {
            let req = http::Request::builder().uri(format!("https://a.test{path}")).header("priority", prio);
            let mut s = conn.send.send_request(req.body(()).unwrap()).await.unwrap();
            s.finish().await.unwrap();
            streams.push(s);
        }
        let img_bytes = Arc::new(AtomicUsize::new(0));
        let mut tasks = Vec::new();
        for (i, mut s) in streams.into_iter().enumerate() {
            let img_bytes = img_bytes.clone();
            tasks.push(tokio::spawn(async move {
                assert_eq!(s.recv_response().await.unwrap().status(), 200);
                let mut n = 0;
                while let Some(c) = s.recv_data().await.unwrap() {
                    n += bytes::Buf::remaining(&c);
                    if i == 0 {
                        img_bytes.fetch_add(bytes::Buf::remaining(&c), Relaxed);
                    }
                }
                (n, img_bytes.load(Relaxed))
            }));
        }
        let css = tasks.pop().unwrap().await.unwrap();
        let img = tasks.pop().unwrap().await.unwrap();
        assert_eq!((img.0, css.0), (600_000, 300_000));
        conn.close().await;
        css.1
    })
}

#[test]
fn rfc9218_priorities_order_the_responses_of_an_h3_connection() {
    // the urgent response overtakes: of the image, only what left before the server had read
    // the second request (and what was in flight)
    let prio = image_bytes_when_css_ends("rfc9218");
    assert!(prio <= 4 * super::h2::PRIO_CHUNK, "rfc9218: {prio} bytes of the urgency-5 image came first");
    // without: quinn's round robin between the two
    let rr = image_bytes_when_css_ends("round-robin");
    eprintln!("image bytes before the stylesheet ended: rfc9218 {prio}, round-robin {rr}");
    assert!(rr >= 150_000, "round-robin: {rr} bytes of the image before the stylesheet ended");
}

#[test]
fn the_replays_send_window_covers_the_labs_largest_bdp() {
    // the server may hold this much unacknowledged: below the BDP, h3 transfers stall at
    // window / RTT (the same bound the loader's receive windows are tested against)
    use crate::loader::transport::quic::tests::{window, LAB_BDP};
    let t = super::h3::transport(&Default::default(), 120_000);
    let w = window(&t, "send_window");
    assert!(w >= LAB_BDP, "send_window {w} below the lab's largest BDP {LAB_BDP}");
}
