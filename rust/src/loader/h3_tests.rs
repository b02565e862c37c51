//! Loads over HTTP/3 (QUIC) against the test h3 server (testutil::h3_server, 127.0.0.1): a page
//! of several objects, one connection per origin and coalescing on the same address, full,
//! resumed and 0-RTT handshakes after a warm visit (as the client and the server saw them),
//! 0-RTT rejected after the server forgot its tickets (the requests sent again at 1-RTT), and
//! a handshake nothing answers failing the load with the address.
use std::net::SocketAddr;
use std::time::Duration;

use crate::loader::output::{ConnRec, Output};
use crate::loader::{self, Plan};
use crate::testutil::h3_server::{DelayProxy, H3Server};
use crate::testutil::loader::{load, obj, plan};

/// A document (5,000 bytes) on a.test at `a`, and 12 children on a.test (`a`) and b.test (`b`).
fn page(srv: &H3Server, a: SocketAddr, b: SocketAddr, mode: &str) -> Plan {
    let mut objs = vec![obj("https://a.test/5000", "a.test", a, true, None)];
    for i in 0..12 {
        let (h, addr) = if i % 2 == 0 { ("a.test", a) } else { ("b.test", b) };
        objs.push(obj(&format!("https://{h}/{}", 2000 + 500 * i), h, addr, true, Some(0)));
    }
    for o in &mut objs {
        o.protocol = "h3".into();
    }
    let mut p = plan(objs, Some(srv.dir.join("ca.pem")));
    p.tls_mode = mode.into();
    p
}

fn check_complete(out: &Output) {
    assert_eq!(out.requests.len(), 13);
    for (i, r) in out.requests.iter().enumerate() {
        let want = if i == 0 { 5000 } else { 2000 + 500 * (i as u64 - 1) };
        assert_eq!((r.status, r.bytes, r.body_bytes, r.protocol.as_str()), (200, want, want, "h3"), "{r:?}");
        assert!(!r.tfo, "{r:?}");
        assert!(r.first_byte_ms >= r.request_ms && r.last_byte_ms >= r.first_byte_ms, "{r:?}");
    }
    for c in &out.connections {
        assert_eq!(c.protocol, "h3", "{c:?}");
        let q = c.transport.quic().unwrap_or_else(|| panic!("QUIC facts: {c:?}"));
        assert!(!q.tfo && q.datagrams_out > 0 && q.datagrams_in > 0 && q.rtt_ms > 0.0, "{c:?}");
        assert!(q.udp_bytes_in > 0 && q.udp_bytes_out > 0, "{c:?}");
        assert_eq!(c.tls_end_ms, Some(c.connect_end_ms), "{c:?}");
    }
}

fn handshakes(out: &Output) -> Vec<(Option<&str>, Option<&str>)> {
    out.connections.iter().map(|c: &ConnRec| (c.tls_handshake.as_deref(), c.early_data.as_deref())).collect()
}

/// A page over h3, full handshakes: one connection for a.test and b.test on one address
/// (coalesced), the request fields as h2 sends them, the records' keys.
#[test]
fn page_over_h3_coalesced_on_one_address() {
    let srv = H3Server::start();
    let out = load(page(&srv, srv.addr, srv.addr, "full")).unwrap();
    check_complete(&out);
    assert_eq!(out.connections.len(), 1, "{:?}", out.connections);
    let c = &out.connections[0];
    assert_eq!(c.hosts, ["a.test", "b.test"]);
    assert_eq!(c.requests.len(), 13);
    assert_eq!(handshakes(&out), [(Some("full"), None)]);
    assert!(out.requests[0].new_conn && out.requests[1..].iter().all(|r| !r.new_conn));
    assert_eq!(out.requests[0].tls_handshake.as_deref(), Some("full"));
    let r = &out.requests[0];
    assert_eq!(r.request_headers[0], (":method".into(), "GET".into()));
    assert!(r.request_headers.contains(&(":authority".into(), "a.test".into())), "{r:?}");
    assert!(r.response_headers.contains(&("content-length".into(), "5000".into())), "{r:?}");
    assert_eq!(r.header_bytes, 12 + ("content-type".len() + "text/plain".len() + 4 + 14 + 4 + 4) as u64);
    assert_eq!(r.transfer_bytes, r.header_bytes + 5000);
    // the server saw one full handshake and every request with its authority
    assert_eq!(srv.accepted(), 1);
    let f = srv.conns.lock().unwrap()[0].clone();
    assert!(f.settled() && !f.resumed() && !f.early_data());
    let reqs = srv.requests.lock().unwrap().clone();
    assert_eq!(reqs.len(), 13);
    assert!(reqs.contains(&("b.test".into(), "/2500".into())), "{reqs:?}");
    // the records as JSON: QUIC's keys flattened into the connection, no TCP-only key
    let j = serde_json::to_value(&out).unwrap();
    let c = &j["connections"][0];
    for k in ["tfo", "rtt_ms", "lost_packets", "datagrams_out", "datagrams_in", "udp_bytes_out", "udp_bytes_in"] {
        assert!(c.get(k).is_some(), "{k}: {c}");
    }
    assert_eq!((c["protocol"].as_str(), c["tfo"].as_bool()), (Some("h3"), Some(false)));
    assert!(c.get("tfo_client_fail").is_none(), "{c}");
    assert_eq!(j["requests"][3]["protocol"], "h3");
}

/// Two addresses: one connection per origin, each on its own UDP socket (4-tuple).
#[test]
fn one_connection_per_origin_address() {
    let a = H3Server::start();
    let b = H3Server::beside(&a);
    let out = load(page(&a, a.addr, b.addr, "full")).unwrap();
    check_complete(&out);
    assert_eq!(out.connections.len(), 2, "{:?}", out.connections);
    let (ca, cb) = (&out.connections[0], &out.connections[1]);
    assert_eq!((ca.hosts.as_slice(), cb.hosts.as_slice()), (&["a.test".to_string()][..], &["b.test".to_string()][..]));
    assert_eq!((ca.requests.len(), cb.requests.len()), (7, 6));
    assert_eq!((ca.port, cb.port), (a.addr.port(), b.addr.port()));
    assert_eq!((a.accepted(), b.accepted()), (1, 1));
    assert_eq!(handshakes(&out), [(Some("full"), None), (Some("full"), None)]);
}

/// A page over h3 with an http/1.1 origin over TCP (the replay server): each over its own
/// transport, the TCP connection's record with TCP's keys.
#[test]
fn h3_beside_tcp_in_one_load() {
    let srv = H3Server::start();
    let tcp = crate::testutil::replay::start_server(
        serde_json::json!([{"host": "c.test", "path": "/c", "body": {"synth": 3000}}]),
        false,
    );
    let mut p = page(&srv, srv.addr, srv.addr, "full");
    p.objects.push(obj("http://c.test/c", "c.test", tcp.http, false, Some(0)));
    let out = load(p).unwrap();
    assert_eq!(out.connections.len(), 2, "{:?}", out.connections);
    let (q, t) = (&out.connections[0], &out.connections[1]);
    assert_eq!((q.protocol.as_str(), t.protocol.as_str()), ("h3", "http/1.1"));
    assert!(q.transport.quic().is_some() && t.transport.tcp().is_some());
    assert_eq!((out.requests[13].bytes, out.requests[13].protocol.as_str()), (3000, "http/1.1"));
    assert!(out.requests[..13].iter().all(|r| r.protocol == "h3" && r.status == 200));
}

/// The server's facts of the connections accepted after index `from`.
fn server_facts(srv: &H3Server, from: usize) -> Vec<(bool, bool, u64)> {
    srv.conns.lock().unwrap()[from..].iter().map(|f| (f.resumed(), f.early_data(), f.early_bytes())).collect()
}

/// One-way delay of the relay in front of the server in the handshake tests: RTT 50 ms.
const DELAY_MS: u64 = 25;
const RTT: f64 = 2.0 * DELAY_MS as f64;

/// The document's response time from its connection's start (ms).
fn doc_time(out: &Output) -> f64 {
    out.requests[0].first_byte_ms - out.connections[0].connect_start_ms
}

/// "resume": the warm visit's tickets resume every connection, no early data offered (the
/// document 2 round trips after the connection's start: handshake, request); "0rtt": every
/// connection resumes with its first requests as 0-RTT data, accepted (the document 1 round
/// trip after the start); both as the records and the server say. Through a relay adding
/// 25 ms each way.
#[test]
fn resume_and_0rtt_after_a_warm_visit() {
    let srv = H3Server::start();
    let relay = DelayProxy::start(srv.addr, Duration::from_millis(DELAY_MS));
    let mut warm = 0;
    let out = loader::load_phased(page(&srv, relay.addr, relay.addr, "resume"), |_| {
        warm = srv.accepted();
        Ok(())
    })
    .unwrap();
    check_complete(&out);
    assert!(out.warmup_ms.unwrap() > 0.0);
    assert_eq!(warm, 1);
    assert_eq!(handshakes(&out), [(Some("resumed"), None)]);
    assert_eq!(out.requests[0].tls_handshake.as_deref(), Some("resumed"));
    assert_eq!(server_facts(&srv, warm), [(true, false, 0)]);
    assert!(doc_time(&out) >= 2.0 * RTT, "{}", doc_time(&out));
    let q = out.connections[0].transport.quic().unwrap();
    assert!(q.rtt_ms >= RTT, "{q:?}");

    let from = srv.accepted();
    let mut warm = 0;
    let out = loader::load_phased(page(&srv, relay.addr, relay.addr, "0rtt"), |_| {
        warm = srv.accepted();
        Ok(())
    })
    .unwrap();
    check_complete(&out);
    assert_eq!(warm, from + 1);
    // the visit: full (its own ticket store, the load's), no early data
    assert_eq!(server_facts(&srv, from)[0], (false, false, 0));
    assert_eq!(handshakes(&out), [(Some("resumed"), Some("accepted"))]);
    assert_eq!(out.requests[0].early_data.as_deref(), Some("accepted"));
    let f = server_facts(&srv, warm);
    assert_eq!(f.len(), 1);
    assert!(f[0].0 && f[0].1 && f[0].2 > 0, "{f:?}");
    // the document's request went in the Initial's flight: answered in one round trip
    let t = doc_time(&out);
    assert!((RTT..1.5 * RTT).contains(&t), "{t}");
}

/// 0-RTT refused (the server forgot its tickets after the visit): the handshake is full, the
/// early request is sent again at 1-RTT on a new h3 client (2 round trips) and every object
/// arrives, each request seen once by the server.
#[test]
fn rejected_0rtt_is_sent_again() {
    let srv = H3Server::start();
    let relay = DelayProxy::start(srv.addr, Duration::from_millis(DELAY_MS));
    let mut warm = 0;
    let out = loader::load_phased(page(&srv, relay.addr, relay.addr, "0rtt"), |_| {
        warm = srv.accepted();
        srv.sessions.clear();
        Ok(())
    })
    .unwrap();
    check_complete(&out);
    assert_eq!(handshakes(&out), [(Some("full"), Some("rejected"))]);
    assert_eq!(server_facts(&srv, warm), [(false, false, 0)]);
    // sent again as soon as the rejection is known: 2 round trips, no loss timer waited for
    let t = doc_time(&out);
    assert!((2.0 * RTT..2.5 * RTT).contains(&t), "{t}");
    // request_ms: when it was first written (as 0-RTT), before the handshake's round trip
    let r = &out.requests[0];
    assert!(r.first_byte_ms - r.request_ms >= 2.0 * RTT - 1.0, "{r:?}");
    assert_eq!(srv.requests.lock().unwrap().len(), 2 * 13);
}

/// Nothing answers on UDP: the load fails, naming the address (no fallback to TCP).
#[test]
fn failed_quic_handshake_names_the_address() {
    let srv = H3Server::start();
    let dead = std::net::UdpSocket::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let mut p = page(&srv, dead, dead, "full");
    p.timeout_s = 2.0;
    let t = std::time::Instant::now();
    let e = format!("{:#}", load(p).unwrap_err());
    assert!(e.contains(&format!("QUIC handshake with {dead} (a.test) failed")), "{e}");
    assert!(t.elapsed().as_secs_f64() < 1.9, "{:?}", t.elapsed());
}

/// A 0-RTT handshake nothing answers (the path cut after the warm visit): the load fails within
/// the handshake deadline, naming the address.
#[test]
fn unanswered_0rtt_handshake_names_the_address() {
    let srv = H3Server::start();
    let relay = DelayProxy::start(srv.addr, Duration::from_millis(1));
    let mut p = page(&srv, relay.addr, relay.addr, "0rtt");
    p.timeout_s = 2.0;
    let t = std::time::Instant::now();
    let e = loader::load_phased(p, |_| {
        relay.cut();
        Ok(())
    })
    .unwrap_err();
    let e = format!("{e:#}");
    assert!(e.contains(&format!("QUIC handshake with {} failed: no answer", relay.addr)), "{e}");
    assert!(t.elapsed().as_secs_f64() < 1.9, "{:?}", t.elapsed());
}

/// The plan: "h3" needs tls; quic_cc and quic_icw are checked, and set the loader's side.
#[test]
fn h3_plan_checks_and_quic_settings() {
    let srv = H3Server::start();
    let mut p = page(&srv, srv.addr, srv.addr, "full");
    p.objects[3].tls = false;
    assert!(format!("{:#}", p.validate().unwrap_err()).contains("object 3: protocol \"h3\" needs \"tls\""));
    let mut p = page(&srv, srv.addr, srv.addr, "full");
    p.quic_cc = Some("vegas".into());
    assert!(format!("{:#}", p.validate().unwrap_err()).contains("quic_cc"));
    p.quic_cc = Some("newreno".into());
    p.quic_icw = Some(0);
    assert!(format!("{:#}", p.validate().unwrap_err()).contains("quic_icw"));
    for cc in ["cubic", "newreno", "bbr"] {
        let mut p = page(&srv, srv.addr, srv.addr, "full");
        p.quic_cc = Some(cc.into());
        p.quic_icw = Some(32);
        check_complete(&load(p).unwrap());
    }
}
