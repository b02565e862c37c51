//! TLS 1.3 sessions in loads against the replay server: full handshakes, resumption and early
//! data after a warm-up visit, over HTTP/1.1 and h2, proven by the server's own counts; early
//! data refused after a ticket key rotation is sent again at 1-RTT; with TFO, the ClientHello
//! and the early data ride in the SYN.
use crate::loader::output::Output;
use crate::loader::{self, Plan};
use crate::testutil::loader::{load, obj, plan};
use crate::testutil::replay::{start_server_on, TestServer};
use crate::testutil::Netns;
use std::net::SocketAddr;

/// A document on a.test and 12 children on a.test and b.test (one recorded address).
fn responses() -> serde_json::Value {
    let mut r = vec![serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 5000, "mime": "text/html"}})];
    for i in 0..12 {
        let host = if i % 2 == 0 { "a.test" } else { "b.test" };
        r.push(serde_json::json!({"host": host, "path": format!("/o{i}"), "body": {"synth": 2000 + 500 * i}}));
    }
    serde_json::Value::Array(r)
}

fn server() -> TestServer {
    let listen = serde_json::json!([
        {"ip": "127.0.0.1", "port": 0, "tls": true},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "alpn": ["h2", "http/1.1"]},
    ]);
    start_server_on(listen, responses(), false)
}

fn page_plan(srv: &TestServer, addr: SocketAddr, h2: bool, mode: &str) -> Plan {
    let mut objs = vec![obj("https://a.test/", "a.test", addr, true, None)];
    for i in 0..12 {
        let h = if i % 2 == 0 { "a.test" } else { "b.test" };
        objs.push(obj(&format!("https://{h}/o{i}"), h, addr, true, Some(0)));
    }
    for o in &mut objs {
        o.protocol = if h2 { "h2" } else { "http/1.1" }.into();
    }
    let mut p = plan(objs, Some(srv.dir.join("ca.pem")));
    p.tls_mode = mode.into();
    p
}

const KEYS: [&str; 9] = [
    "tls_connections",
    "tls_full",
    "tls_resumed",
    "tls_early_data",
    "tls_early_bytes",
    "tls_full_used",
    "tls_resumed_used",
    "tls_early_used",
    "requests",
];

/// The server's counts during the measured load only (taken after the warm-up visit).
fn measured(srv: &TestServer, p: Plan, between: impl FnOnce(&TestServer)) -> (Output, serde_json::Value) {
    let mut before = srv.shared.stats.json();
    let out = loader::load_phased(p, |_| {
        between(srv);
        before = srv.shared.stats.json();
        Ok(())
    })
    .unwrap();
    let after = srv.shared.stats.json();
    let d: serde_json::Map<String, serde_json::Value> = KEYS
        .iter()
        .map(|k| (k.to_string(), (after[k].as_u64().unwrap() - before[k].as_u64().unwrap()).into()))
        .collect();
    (out, d.into())
}

/// Connections that carried a request (an early-data connection the scheduler ended up not
/// using never even sent its ClientHello: nothing to count).
fn used(out: &Output) -> Vec<&crate::loader::output::ConnRec> {
    out.connections.iter().filter(|c| !c.requests.is_empty()).collect()
}

fn check_complete(out: &Output) {
    assert_eq!(out.requests.len(), 13);
    assert!(out.requests.iter().all(|r| r.status == 200), "{:?}", out.requests);
    assert_eq!(out.requests[0].bytes, 5000);
}

#[test]
fn full_resumed_and_early_data_handshakes_are_counted_over_h1_and_h2() {
    let srv = server();
    for (addr, h2) in [(srv.addrs[0], false), (srv.addrs[1], true)] {
        let (out, d) = measured(&srv, page_plan(&srv, addr, h2, "full"), |_| {});
        check_complete(&out);
        // header fields as sent and received, on either protocol
        let r = &out.requests[0];
        let first = if h2 { ":method" } else { "Host" };
        assert_eq!(r.request_headers[0].0, first, "{r:?}");
        assert!(r.request_headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("user-agent")), "{r:?}");
        assert!(!r.response_headers.is_empty() && r.request_header_bytes > 0, "{r:?}");
        let n = out.connections.len() as u64;
        assert!(out.warmup_ms.is_none());
        assert_eq!(
            (d["tls_connections"].as_u64(), d["tls_full"].as_u64(), d["tls_resumed"].as_u64()),
            (Some(n), Some(n), Some(0)),
            "{d}"
        );
        assert!(out.connections.iter().all(|c| c.tls_handshake.as_deref() == Some("full") && c.early_data.is_none()));

        let (out, d) = measured(&srv, page_plan(&srv, addr, h2, "resume"), |_| {});
        check_complete(&out);
        let n = out.connections.len() as u64;
        assert!(out.warmup_ms.unwrap() > 0.0);
        // every connection of the measured load resumed; the visit before it is not counted
        assert_eq!(
            (d["tls_resumed"].as_u64(), d["tls_full"].as_u64(), d["tls_early_data"].as_u64()),
            (Some(n), Some(0), Some(0)),
            "{d}"
        );
        assert_eq!(d["requests"], 13);
        // (a connection the scheduler ended up not using carried nothing)
        let u = used(&out).len() as u64;
        assert_eq!((d["tls_resumed_used"].as_u64(), d["tls_full_used"].as_u64()), (Some(u), Some(0)), "{d}");
        assert!(out
            .connections
            .iter()
            .all(|c| c.tls_handshake.as_deref() == Some("resumed") && c.early_data.is_none()));
        if h2 {
            assert_eq!(n, 1, "{:?}", out.connections); // a.test and b.test coalesced
        } else {
            assert!(n > 2, "{:?}", out.connections);
        }

        let (out, d) = measured(&srv, page_plan(&srv, addr, h2, "0rtt"), |_| {});
        check_complete(&out);
        let n = used(&out).len() as u64;
        assert_eq!((d["tls_resumed"].as_u64(), d["tls_early_data"].as_u64()), (Some(n), Some(n)), "{d}");
        assert_eq!(d["tls_early_used"].as_u64(), Some(n), "{d}");
        assert!(d["tls_early_bytes"].as_u64().unwrap() > 0);
        for c in used(&out) {
            assert_eq!(
                (c.tls_handshake.as_deref(), c.early_data.as_deref()),
                (Some("resumed"), Some("accepted")),
                "{c:?}"
            );
            assert_eq!(c.protocol, if h2 { "h2" } else { "http/1.1" });
        }
        let first = out.requests.iter().filter(|r| r.new_conn).collect::<Vec<_>>();
        assert!(first.iter().all(|r| r.early_data.as_deref() == Some("accepted") && r.tls_end_ms == r.connect_end_ms));
    }
}

#[test]
fn early_data_refused_after_a_ticket_key_rotation_is_sent_again() {
    let srv = server();
    for (addr, h2) in [(srv.addrs[0], false), (srv.addrs[1], true)] {
        let (out, d) = measured(&srv, page_plan(&srv, addr, h2, "0rtt"), |s| s.shared.rotate_tickets());
        check_complete(&out);
        let count = |f: &dyn Fn(&crate::loader::output::ConnRec) -> bool| {
            used(&out).into_iter().filter(|c| f(c)).count() as u64
        };
        // the tickets name sessions the server forgot: full handshakes, the early data sent again
        // at 1-RTT; connections opened once those handshakes gave new tickets resume (as a browser's)
        let rejected =
            count(&|c| c.tls_handshake.as_deref() == Some("full") && c.early_data.as_deref() == Some("rejected"));
        let accepted =
            count(&|c| c.tls_handshake.as_deref() == Some("resumed") && c.early_data.as_deref() == Some("accepted"));
        assert_eq!(rejected + accepted, used(&out).len() as u64, "{:?}", out.connections);
        assert!(rejected >= 1 && out.connections[0].early_data.as_deref() == Some("rejected"));
        assert_eq!(
            (d["tls_full"].as_u64(), d["tls_resumed"].as_u64(), d["tls_early_data"].as_u64()),
            (Some(rejected), Some(accepted), Some(accepted)),
            "{d}"
        );
        assert_eq!(d["requests"], 13);
    }
}

#[test]
fn bad_tls_modes_are_refused() {
    let srv = server();
    let mut p = page_plan(&srv, srv.addrs[0], false, "2rtt");
    assert!(format!("{:#}", load(p.clone()).unwrap_err()).contains("tls_mode \"2rtt\""));
    p.tls_mode = "resume".into();
    for o in &mut p.objects {
        o.tls = false;
    }
    assert!(format!("{:#}", load(p).unwrap_err()).contains("needs an https object"));
}

/// With TFO (a cookie from an earlier load), the ClientHello and the early data of every
/// connection arrive in its SYN: the request is answered one round trip after the SYN.
#[test]
fn tfo_carries_the_hello_and_early_data_in_the_syn() {
    let Some(ns) = Netns::new(3) else { return };
    let (outs, syn_early) = ns.enter(|| {
        let srv = server();
        let mut outs = Vec::new();
        let mut syn_early = Vec::new();
        for (addr, h2) in [(srv.addrs[0], false), (srv.addrs[1], true)] {
            let mut p = page_plan(&srv, addr, h2, "full");
            p.tfo = true;
            load(p.clone()).unwrap(); // TFO cookies
            p.tls_mode = "0rtt".into();
            let before = srv.shared.stats.tfo_tls_early_in_syn.load(std::sync::atomic::Ordering::Relaxed);
            let out = load(p).unwrap();
            let after = srv.shared.stats.tfo_tls_early_in_syn.load(std::sync::atomic::Ordering::Relaxed);
            syn_early.push(after - before);
            outs.push(out);
        }
        (outs, syn_early)
    });
    for (out, n) in outs.iter().zip(syn_early) {
        check_complete(out);
        for c in used(out) {
            assert!(c.transport.first_request_in_handshake() && c.early_data.as_deref() == Some("accepted"), "{c:?}");
        }
        assert_eq!(n, used(out).len() as u64, "early data in the SYN");
    }
}
