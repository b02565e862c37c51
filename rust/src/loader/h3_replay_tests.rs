//! Loads over HTTP/3 against the real replay server (replay/h3.rs, udp listen entries, through
//! testutil::replay on 127.0.0.1): the same page's answers over h3 as over h2, one coalesced
//! connection, and full, resumed, 0-RTT and refused 0-RTT handshakes as the loader's records and
//! the server's own counts say.
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use crate::loader::output::Output;
use crate::loader::{self, Plan};
use crate::testutil::loader::{load, obj, plan};
use crate::testutil::replay::{start_server_on, TestServer};

/// A document on a.test and 12 children on a.test and b.test (one recorded address).
fn responses() -> serde_json::Value {
    let mut r = vec![serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 5000, "mime": "text/html"}})];
    for i in 0..12 {
        let host = if i % 2 == 0 { "a.test" } else { "b.test" };
        r.push(serde_json::json!({"host": host, "path": format!("/o{i}"), "body": {"synth": 2000 + 500 * i}}));
    }
    serde_json::Value::Array(r)
}

/// https with h2 (addrs[0]) and h3 (addrs[1], udp) on 127.0.0.1.
fn server() -> TestServer {
    let listen = serde_json::json!([
        {"ip": "127.0.0.1", "port": 0, "tls": true, "alpn": ["h2", "http/1.1"]},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "transport": "udp", "alpn": ["h3"]},
    ]);
    start_server_on(listen, responses(), false)
}

fn page(srv: &TestServer, h3: bool, mode: &str) -> Plan {
    let addr = srv.addrs[if h3 { 1 } else { 0 }];
    let mut objs = vec![obj("https://a.test/", "a.test", addr, true, None)];
    for i in 0..12 {
        let h = if i % 2 == 0 { "a.test" } else { "b.test" };
        objs.push(obj(&format!("https://{h}/o{i}"), h, addr, true, Some(0)));
    }
    for o in &mut objs {
        o.protocol = if h3 { "h3" } else { "h2" }.into();
    }
    let mut p = plan(objs, Some(srv.dir.join("ca.pem")));
    p.tls_mode = mode.into();
    p
}

const KEYS: [&str; 10] = [
    "quic_connections",
    "quic_full",
    "quic_resumed",
    "quic_early_data",
    "quic_early_bytes",
    "quic_full_used",
    "quic_resumed_used",
    "quic_early_used",
    "h3_streams",
    "h3_errors",
];

/// Until the server counted `n` QUIC connections' handshakes (on its own thread), at most 2 s.
fn settle(srv: &TestServer, n: u64) {
    let st = &srv.shared.stats;
    for _ in 0..400 {
        if st.quic_full.load(Relaxed) + st.quic_resumed.load(Relaxed) >= n {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// The server's counts during the measured load only (taken after the warm-up visit).
fn measured(srv: &TestServer, p: Plan, between: impl FnOnce(&TestServer)) -> (Output, serde_json::Value) {
    let mut before = srv.shared.stats.json();
    let out = loader::load_phased(p, |_| {
        between(srv);
        before = srv.shared.stats.json();
        Ok(())
    })
    .unwrap();
    let want = before["quic_full"].as_u64().unwrap() + before["quic_resumed"].as_u64().unwrap() + 1;
    settle(srv, want);
    std::thread::sleep(Duration::from_millis(20));
    let after = srv.shared.stats.json();
    let d: serde_json::Map<String, serde_json::Value> = KEYS
        .iter()
        .map(|k| (k.to_string(), (after[k].as_u64().unwrap() - before[k].as_u64().unwrap()).into()))
        .collect();
    (out, d.into())
}

fn handshake(out: &Output) -> (Option<&str>, Option<&str>) {
    assert_eq!(out.connections.len(), 1, "{:?}", out.connections);
    let c = &out.connections[0];
    (c.tls_handshake.as_deref(), c.early_data.as_deref())
}

/// The page over h3: the answers of h2 (bytes, statuses, header fields less framing), one
/// connection for both hosts, the server's counts.
#[test]
fn page_over_h3_from_the_replay_as_over_h2() {
    let srv = server();
    let h2 = load(page(&srv, false, "full")).unwrap();
    let (h3, d) = measured(&srv, page(&srv, true, "full"), |_| {});
    assert_eq!(h3.requests.len(), 13);
    for (a, b) in h2.requests.iter().zip(&h3.requests) {
        assert_eq!((a.status, a.bytes, a.body_bytes), (b.status, b.bytes, b.body_bytes), "{b:?}");
        assert_eq!(a.response_headers, b.response_headers, "{b:?}");
        assert_eq!((a.protocol.as_str(), b.protocol.as_str()), ("h2", "h3"));
    }
    assert_eq!(h3.requests[0].bytes, 5000);
    assert_eq!(handshake(&h3), (Some("full"), None));
    assert_eq!(h3.connections[0].hosts, ["a.test", "b.test"]);
    assert_eq!(d["quic_connections"], 1, "{d}");
    assert_eq!((d["quic_full"].as_u64(), d["quic_full_used"].as_u64()), (Some(1), Some(1)), "{d}");
    assert_eq!((d["h3_streams"].as_u64(), d["h3_errors"].as_u64()), (Some(13), Some(0)), "{d}");
}

/// resume: resumed, no early data; 0rtt: resumed with 0-RTT accepted; 0rtt after the server
/// rotated its tickets: full, 0-RTT refused and the requests sent again; each as the loader's
/// record and the replay's counts say.
#[test]
fn resume_0rtt_and_refused_0rtt_against_the_replay() {
    let srv = server();
    let (out, d) = measured(&srv, page(&srv, true, "resume"), |_| {});
    assert_eq!(out.requests.len(), 13);
    assert_eq!(handshake(&out), (Some("resumed"), None));
    assert_eq!((d["quic_resumed"].as_u64(), d["quic_full"].as_u64()), (Some(1), Some(0)), "{d}");
    assert_eq!((d["quic_resumed_used"].as_u64(), d["quic_early_data"].as_u64()), (Some(1), Some(0)), "{d}");

    let (out, d) = measured(&srv, page(&srv, true, "0rtt"), |_| {});
    assert!(out.requests.iter().all(|r| r.status == 200));
    assert_eq!(handshake(&out), (Some("resumed"), Some("accepted")));
    assert_eq!(out.requests[0].early_data.as_deref(), Some("accepted"));
    assert_eq!((d["quic_resumed"].as_u64(), d["quic_early_data"].as_u64()), (Some(1), Some(1)), "{d}");
    assert_eq!(d["quic_early_used"], 1, "{d}");
    assert!(d["quic_early_bytes"].as_u64().unwrap() > 0, "{d}");
    assert_eq!(d["h3_streams"], 13, "{d}");

    let (out, d) = measured(&srv, page(&srv, true, "0rtt"), |s| s.shared.rotate_tickets());
    assert!(out.requests.iter().all(|r| r.status == 200));
    assert_eq!(out.requests[0].bytes, 5000);
    assert_eq!(handshake(&out), (Some("full"), Some("rejected")));
    assert_eq!((d["quic_full"].as_u64(), d["quic_early_data"].as_u64()), (Some(1), Some(0)), "{d}");
    assert_eq!((d["h3_streams"].as_u64(), d["h3_errors"].as_u64()), (Some(13), Some(0)), "{d}");
}
