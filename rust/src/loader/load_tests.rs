//! Loads against real origins on 127.0.0.1: the replay server (testutil::replay::start_server)
//! or one-connection fake origins; TFO ones in a throwaway network namespace (root).
use crate::loader::output::{Output, Rec};
use crate::loader::plan::{Plan, TightPhase};
use crate::testutil::loader::{load, obj, plan};
use crate::testutil::replay::{start_server, start_server_on, start_server_with};
use crate::testutil::{counter_in, tmpdir, Netns};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;

fn page() -> serde_json::Value {
    let mut r = vec![serde_json::json!({"host": "a.test", "path": "/", "status": 200,
        "headers": [["Content-Type", "text/html"], ["Connection", "close"], ["Content-Length", "999"]],
        "body": {"synth": 3000, "mime": "text/html"}})];
    for i in 0..30 {
        r.push(serde_json::json!({"host": if i % 2 == 0 { "a.test" } else { "b.test" }, "path": format!("/o{i}"),
            "query": "v=1", "status": 200, "headers": [["X-I", i.to_string()]],
            "body": {"synth": 1000 + 1000 * i}, "chunked": i % 3 == 0}));
    }
    serde_json::Value::Array(r)
}

fn page_plan(addr: SocketAddr, tls: bool, ca: Option<PathBuf>) -> Plan {
    let scheme = if tls { "https" } else { "http" };
    let mut objs = vec![obj(&format!("{scheme}://a.test/"), "a.test", addr, tls, None)];
    for i in 0..30 {
        let h = if i % 2 == 0 { "a.test" } else { "b.test" };
        // query differs from the recording: exercises the fallback
        objs.push(obj(&format!("{scheme}://{h}/o{i}?v=2"), h, addr, tls, Some(if i < 20 { 0 } else { i - 19 })));
    }
    objs.push(obj(&format!("{scheme}://a.test/missing?x=1"), "a.test", addr, tls, Some(0)));
    plan(objs, ca)
}

/// The page loaded whole and in order, reused connections or not.
fn check_requests(out: &Output) {
    assert_eq!(out.requests.len(), 32);
    assert_eq!(out.requests[0].bytes, 3000);
    assert_eq!(out.requests[0].status, 200);
    for i in 0..30u64 {
        let r = &out.requests[1 + i as usize];
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.bytes, 1000 + 1000 * i, "{r:?}");
        // the fields as sent and received (HTTP/1.1: Host first; h2: :method first, :authority)
        let host = if i % 2 == 0 { "a.test" } else { "b.test" };
        let field = |fs: &[(String, String)], name: &str| {
            fs.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.clone())
        };
        let authority = field(&r.request_headers, "host").or_else(|| field(&r.request_headers, ":authority"));
        assert!(authority.is_some_and(|a| a.starts_with(host)), "{r:?}");
        assert!(field(&r.request_headers, "accept-encoding").is_some_and(|v| v.contains("gzip")), "{r:?}");
        assert_eq!(field(&r.response_headers, "x-i"), Some(i.to_string()), "{r:?}");
        assert!(r.request_header_bytes > 60 && r.request_header_bytes < 200);
    }
    assert_eq!(out.requests[31].status, 404);
    // children after parents
    for (i, r) in out.requests.iter().enumerate().skip(1) {
        let p = if i <= 20 || i == 31 { 0 } else { i - 20 };
        assert!(r.request_ms >= out.requests[p].last_byte_ms, "{i} before its parent {p}");
        assert!(r.ready_ms >= out.requests[p].last_byte_ms);
    }
    let plt = out.requests.iter().map(|r| r.last_byte_ms).fold(0.0, f64::max);
    assert_eq!(out.plt_ms, plt);
}

fn check_page(out: &Output) {
    check_requests(out);
    // at most 6 connections per host, keep-alive reuse
    for h in ["a.test", "b.test"] {
        let n = out.connections.iter().filter(|c| c.host == h).count();
        assert!(n <= 6, "{h}: {n} connections");
    }
    assert!(out.connections.len() < 32);
    assert!(out.requests.iter().any(|r| !r.new_conn));
}

#[test]
fn http_page_load() {
    let srv = start_server(page(), false);
    let out = load(page_plan(srv.http, false, None)).unwrap();
    check_page(&out);
    // the main document was recorded with Connection: close, but that is hop-by-hop:
    // the server keeps the connection open
    assert!(out.connections[0].requests.len() > 1);
    let st = srv.shared.stats.json();
    assert_eq!(st["not_found"], 1);
    assert_eq!(st["not_found_urls"][0]["url"], "a.test/missing?x=1");
    assert_eq!(st["fallback_matches"], 30);
    assert_eq!(st["requests"], 32);
    assert_eq!(st["connections"].as_u64().unwrap(), out.connections.len() as u64);
}

/// Manifest keep_alive false (knob keepalive off): every response says Connection: close, so
/// the loader opens a connection per request, loses none, and still keeps to its per-host limit.
#[test]
fn without_keep_alive_every_request_opens_a_connection() {
    for tls in [false, true] {
        let listen = serde_json::json!([{"ip": "127.0.0.1", "port": 0, "tls": false},
            {"ip": "127.0.0.1", "port": 0, "tls": true}]);
        let srv = start_server_with(listen, page(), serde_json::json!({"keep_alive": false}));
        let (addr, ca) = if tls { (srv.https, Some(srv.dir.join("ca.pem"))) } else { (srv.http, None) };
        let mut p = page_plan(addr, tls, ca);
        p.max_conns_per_host = 2; // (20 children ready at once: the limit binds)
        let out = load(p).unwrap();
        check_requests(&out);
        assert_eq!(out.connections.len(), 32, "tls {tls}");
        assert!(out.requests.iter().all(|r| r.new_conn) && out.connections.iter().all(|c| c.requests.len() == 1));
        for r in &out.requests {
            let conn = r.response_headers.iter().find(|(k, _)| k.eq_ignore_ascii_case("connection"));
            assert_eq!(conn.map(|(_, v)| v.as_str()), Some("close"), "{r:?}");
        }
        let st = srv.shared.stats.json();
        assert_eq!((st["h1_connections"].as_u64(), st["h1_requests"].as_u64()), (Some(32), Some(32)), "{st}");
        // a connection is the pool's from its connect to its response's last byte (then closed):
        // never more than 2 of a host at once, and 2 at times
        for h in ["a.test", "b.test"] {
            let spans: Vec<(f64, f64)> = out
                .connections
                .iter()
                .filter(|c| c.host == h)
                .map(|c| (c.connect_start_ms, out.requests[c.requests[0]].last_byte_ms))
                .collect();
            let most = spans.iter().map(|&(t, _)| spans.iter().filter(|&&(s, e)| s <= t && t < e).count()).max();
            assert_eq!(most, Some(2), "{h}: {spans:?}");
        }
    }
}

#[test]
fn https_page_load() {
    let srv = start_server(page(), false);
    let out = load(page_plan(srv.https, true, Some(srv.dir.join("ca.pem")))).unwrap();
    check_page(&out);
    for r in out.requests.iter().filter(|r| r.new_conn) {
        let te = r.tls_end_ms.unwrap();
        assert!(te >= r.connect_end_ms.unwrap() && r.request_ms >= te);
    }
    let st = srv.shared.stats.json();
    assert_eq!(st["tls_connections"].as_u64().unwrap(), out.connections.len() as u64);
    assert_eq!(st["tls_handshake_errors"], 0);
}

#[test]
fn https_untrusted_ca_fails() {
    let srv = start_server(page(), false);
    let other = tmpdir("ca");
    let g = crate::certs::generate(&["a.test".into()]).unwrap();
    std::fs::write(other.join("ca.pem"), &g.ca_pem).unwrap();
    let e = load(page_plan(srv.https, true, Some(other.join("ca.pem")))).unwrap_err();
    assert!(format!("{e:#}").contains("TLS handshake"), "{e:#}");
    std::fs::remove_dir_all(other).ok();
}

#[test]
fn connection_limit_and_fifo() {
    let mut r = vec![serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 10}})];
    for i in 0..40 {
        r.push(serde_json::json!({"host": "a.test", "path": format!("/{i}"), "body": {"synth": 20000}}));
    }
    let srv = start_server(serde_json::Value::Array(r), false);
    let mk = |max: usize| {
        let mut objs = vec![obj("http://a.test/", "a.test", srv.http, false, None)];
        for i in 0..40 {
            objs.push(obj(&format!("http://a.test/{i}"), "a.test", srv.http, false, Some(0)));
        }
        let mut p = plan(objs, None);
        p.max_conns_per_host = max;
        p
    };
    for max in [1, 2, 6] {
        let out = load(mk(max)).unwrap();
        assert_eq!(out.connections.len(), max, "max {max}");
        // never more than `max` requests in flight at once
        let mut ev: Vec<(f64, i32)> = Vec::new();
        for r in &out.requests {
            ev.push((r.request_ms, 1));
            ev.push((r.last_byte_ms, -1));
        }
        ev.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let (mut cur, mut peak) = (0, 0);
        for (_, d) in ev {
            cur += d;
            peak = peak.max(cur);
        }
        assert!(peak <= max as i32, "max {max}: peak {peak}");
        // FIFO: requests are sent in the order they became ready (index order here)
        let mut order: Vec<&Rec> = out.requests.iter().skip(1).collect();
        order.sort_by(|a, b| a.request_ms.partial_cmp(&b.request_ms).unwrap());
        let idx: Vec<usize> = order.iter().map(|r| r.index).collect();
        assert_eq!(idx, (1..=40).collect::<Vec<_>>(), "max {max}");
        assert!(out.requests.iter().all(|r| r.bytes == if r.index == 0 { 10 } else { 20000 }));
    }
}

#[test]
fn delays_and_think_time() {
    let r = serde_json::json!([
        {"host": "a.test", "path": "/", "body": {"synth": 10}, "wait_ms": 40.0},
        {"host": "a.test", "path": "/c", "body": {"synth": 10}},
    ]);
    let srv = start_server(r, true);
    let mut objs = vec![obj("http://a.test/", "a.test", srv.http, false, None)];
    let mut c = obj("http://a.test/c", "a.test", srv.http, false, Some(0));
    c.delay_ms = 30.0;
    objs.push(c);
    let mut p = plan(objs, None);
    p.dns_delay_ms = 20.0;
    let out = load(p).unwrap();
    let (a, b) = (&out.requests[0], &out.requests[1]);
    assert!(a.connect_start_ms.unwrap() >= 20.0, "{a:?}");
    assert!(a.first_byte_ms - a.request_ms >= 40.0, "{a:?}");
    assert!(b.ready_ms - a.last_byte_ms >= 30.0, "{b:?}");
    assert!(!b.new_conn && b.conn_id == a.conn_id);
    assert!(out.plt_ms >= 90.0);
}

#[test]
fn conn_setup_delay_comes_before_each_new_connection() {
    // the browser's set-up beyond the link: every connection is dialled that much later (two
    // hosts: two connections, the second opened after the document arrived)
    let r = serde_json::json!([
        {"host": "a.test", "path": "/", "body": {"synth": 10}},
        {"host": "b.test", "path": "/c", "body": {"synth": 10}},
    ]);
    let srv = start_server(r, true);
    let objs = vec![
        obj("http://a.test/", "a.test", srv.http, false, None),
        obj("http://b.test/c", "b.test", srv.http, false, Some(0)),
    ];
    let mut p = plan(objs, None);
    let quick = load(p.clone()).unwrap();
    p.conn_setup_delay_ms = 60.0;
    let out = load(p).unwrap();
    let (a, b) = (&out.requests[0], &out.requests[1]);
    assert!(a.new_conn && b.new_conn && a.conn_id != b.conn_id, "{out:?}");
    assert!(a.connect_start_ms.unwrap() >= 60.0, "{a:?}");
    assert!(b.connect_start_ms.unwrap() - a.last_byte_ms >= 60.0, "{b:?}");
    assert!(out.plt_ms >= 120.0 && quick.plt_ms < 60.0, "{} {}", out.plt_ms, quick.plt_ms);
}

/// An origin for one connection: reads the request, then `answer` writes to the socket.
fn one_shot_origin(answer: impl FnOnce(&mut TcpStream) + Send + 'static) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    let th = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        answer(&mut s);
    });
    (a, th)
}

/// A fake origin: answers the connection with `resp` (then closes if `close`).
fn fake_origin(resp: &'static [u8], close: bool) -> (SocketAddr, std::thread::JoinHandle<()>) {
    one_shot_origin(move |s| {
        s.write_all(resp).unwrap();
        if !close {
            std::thread::sleep(std::time::Duration::from_millis(300));
        }
    })
}

#[test]
fn loader_close_delimited_body() {
    let (a, th) = fake_origin(b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nhello world, no length", true);
    let out = load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap();
    assert_eq!(out.requests[0].bytes, 22);
    th.join().unwrap();
}

#[test]
fn loader_fails_on_truncated_response() {
    let (a, th) = fake_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc", true);
    let e = load(plan(vec![obj("http://a.test/x", "a.test", a, false, None)], None)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("http://a.test/x") && msg.contains("closed before the end of the response body"), "{msg}");
    th.join().unwrap();
}

#[test]
fn loader_fails_on_refused_and_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    let e = load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap_err();
    assert!(format!("{e:#}").contains("connect to 127.0.0.1"), "{e:#}");
    // silent server -> timeout
    let (a, th) = fake_origin(b"", false);
    let mut p = plan(vec![obj("http://a.test/", "a.test", a, false, None)], None);
    p.timeout_s = 0.2;
    let e = load(p).unwrap_err();
    assert!(format!("{e:#}").contains("timed out"), "{e:#}");
    th.join().unwrap();
}

#[test]
fn server_stopped_mid_load_fails_clearly() {
    let mut r = vec![serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 10}})];
    for i in 0..10 {
        r.push(serde_json::json!({"host": "a.test", "path": format!("/{i}"), "body": {"synth": 10}, "wait_ms": 100.0}));
    }
    let mut srv = start_server(serde_json::Value::Array(r), true);
    let a = srv.http;
    let mut objs = vec![obj("http://a.test/", "a.test", a, false, None)];
    for i in 0..10 {
        objs.push(obj(&format!("http://a.test/{i}"), "a.test", a, false, Some(if i == 0 { 0 } else { i })));
    }
    let stop = srv.stop.take().unwrap();
    let killer = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(250));
        let _ = stop.send(());
    });
    let e = load(plan(objs, None)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("closed by the server") || msg.contains("connect to") || msg.contains("reset"), "{msg}");
    killer.join().unwrap();
}

#[test]
fn tfo_loads_in_namespace() {
    let Some(ns) = Netns::new(3) else { return };
    let before = ns.counter("TcpExtTCPFastOpenActive");
    let (o1, o2, st) = ns.enter(|| {
        let srv = start_server(page(), false);
        let mut p = page_plan(srv.http, false, None);
        p.tfo = true;
        let o1 = load(p.clone()).unwrap();
        let o2 = load(p).unwrap();
        // https too (the ClientHello rides in the SYN)
        let mut pt = page_plan(srv.https, true, Some(srv.dir.join("ca.pem")));
        pt.tfo = true;
        load(pt.clone()).unwrap();
        let o3 = load(pt).unwrap();
        assert!(o3.connections.iter().all(|c| c.transport.first_request_in_handshake()), "{:?}", o3.connections);
        (o1, o2, srv.shared.stats.json())
    });
    assert!(o1.tfo_available && o1.errors.is_empty());
    // first visit: no cookie for the first connection
    let tcp = o1.connections[0].transport.tcp().copied().unwrap();
    assert!(!tcp.tfo && tcp.tfo_client_fail == 1, "{:?}", o1.connections[0]);
    assert!(o2.connections.iter().all(|c| c.transport.first_request_in_handshake()), "{:?}", o2.connections);
    assert!(o2.requests.iter().all(|r| r.tfo == r.new_conn), "{:?}", o2.requests);
    assert_eq!(o2.requests.iter().filter(|r| r.tfo).count(), o2.connections.len());
    let after = ns.counter("TcpExtTCPFastOpenActive");
    assert!(after - before >= o2.connections.len() as u64, "{before} -> {after}");
    assert!(st["tfo_connections"].as_u64().unwrap() >= o2.connections.len() as u64, "{st}");
    assert_eq!(ns.counter("TcpExtTCPFastOpenListenOverflow"), 0);
}

#[test]
fn tfo_tls_off_keeps_tfo_to_plain_http() {
    // tfo_tls false (a browser whose ClientHello is larger than a SYN carries): TLS connections
    // open without TFO, cookies cached or not; plain-http ones still use it
    let Some(ns) = Netns::new(3) else { return };
    let name = ns.0.clone();
    let (https, http, active) = ns.enter(move || {
        let srv = start_server(page(), false);
        let mut warm = page_plan(srv.https, true, Some(srv.dir.join("ca.pem")));
        warm.tfo = true;
        load(warm.clone()).unwrap(); // cookies for the address: TFO would be used from here on
        let before = counter_in(&name, "TcpExtTCPFastOpenActive");
        let mut pt = warm;
        pt.tfo_tls = false;
        let https = load(pt).unwrap();
        let active = counter_in(&name, "TcpExtTCPFastOpenActive") - before;
        let mut ph = page_plan(srv.http, false, None);
        ph.tfo = true;
        ph.tfo_tls = false;
        load(ph.clone()).unwrap();
        (https, load(ph).unwrap(), active)
    });
    assert_eq!(active, 0, "TFO used on a TLS connection with tfo_tls false");
    assert!(https.tfo_requested && https.errors.is_empty(), "{:?}", https.errors);
    assert!(https.connections.iter().all(|c| !c.transport.first_request_in_handshake()), "{:?}", https.connections);
    assert!(https.connections.iter().all(|c| c.transport.tcp().is_some_and(|t| !t.tfo && t.tfo_client_fail == 0)));
    assert!(http.connections.iter().all(|c| c.transport.first_request_in_handshake()), "{:?}", http.connections);
}

#[test]
fn tfo_refused_by_sysctl_is_reported() {
    let Some(ns) = Netns::new(0) else { return };
    let out = ns.enter(|| {
        let srv = start_server(page(), false);
        let mut p = page_plan(srv.http, false, None);
        p.tfo = true;
        load(p).unwrap()
    });
    assert!(!out.tfo_available && out.tfo_requested);
    assert!(out.errors.iter().any(|e| e.contains("EOPNOTSUPP") || e.contains("not supported")), "{:?}", out.errors);
    assert!(out.connections.iter().all(|c| !c.transport.first_request_in_handshake()));
    assert_eq!(out.requests.len(), 32);
}

/// Peak number of `rs` in flight (released -> last byte) within [from, to).
fn peak_released(rs: &[&Rec], from: f64, to: f64) -> usize {
    let mut ev: Vec<(f64, i32)> = Vec::new();
    for r in rs {
        ev.push((r.released_ms, 1));
        ev.push((r.last_byte_ms, -1));
    }
    ev.sort_by(|a, b| a.partial_cmp(b).unwrap().then(a.1.cmp(&b.1))); // ends before starts
    let (mut cur, mut peak) = (0i32, 0i32);
    for (t, d) in ev {
        cur += d;
        if t >= from && t < to {
            peak = peak.max(cur);
        }
    }
    peak as usize
}

#[test]
fn delayable_limits_tight_phase_and_priority() {
    // Chromium-like scheduling: 12 images (delayable) discovered with a stylesheet and a script
    // that take 150 ms each (think time, one connection: tight phase ~300 ms); meanwhile at most
    // 1 image (60 ms each) is released,
    // afterwards at most 4; on one connection, a non-delayable request overtakes queued images.
    let mut r = vec![
        serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 10}}),
        serde_json::json!({"host": "b.test", "path": "/css", "body": {"synth": 10}, "wait_ms": 150.0}),
        serde_json::json!({"host": "b.test", "path": "/js", "body": {"synth": 10}, "wait_ms": 150.0}),
    ];
    for i in 0..12 {
        r.push(
            serde_json::json!({"host": "a.test", "path": format!("/img{i}"), "body": {"synth": 10}, "wait_ms": 60.0}),
        );
    }
    r.push(serde_json::json!({"host": "a.test", "path": "/late-js", "body": {"synth": 10}}));
    let srv = start_server(serde_json::Value::Array(r), true);
    let mut objs = vec![
        obj("http://a.test/", "a.test", srv.http, false, None),
        obj("http://b.test/css", "b.test", srv.http, false, Some(0)),
        obj("http://b.test/js", "b.test", srv.http, false, Some(0)),
    ];
    for i in 0..12 {
        let mut o = obj(&format!("http://a.test/img{i}"), "a.test", srv.http, false, Some(0));
        o.delayable = true;
        objs.push(o);
    }
    // a script discovered later (400 ms), while images are queued: must not wait behind them
    let mut late = obj("http://a.test/late-js", "a.test", srv.http, false, Some(0));
    late.delay_ms = 400.0;
    objs.push(late);
    let mut p = plan(objs, None);
    p.max_conns_per_host = 1;
    p.delayable_limit = Some(4);
    p.tight_limit = Some(1);
    p.tight_until = vec![1, 2];
    let out = load(p.clone()).unwrap();
    let rq = &out.requests;
    let tight_end = rq[1].last_byte_ms.max(rq[2].last_byte_ms);
    let imgs: Vec<&Rec> = rq[3..15].iter().collect();
    assert_eq!(peak_released(&imgs, 0.0, tight_end), 1, "tight phase: {imgs:?}");
    assert!(peak_released(&imgs, tight_end, f64::MAX) <= 4);
    // held images wait, are released in discovery order, and go out once the phase ends
    assert!(imgs.iter().all(|r| r.released_ms >= r.ready_ms && r.request_ms >= r.released_ms));
    assert!(imgs.windows(2).all(|w| w[0].released_ms <= w[1].released_ms));
    let held_after: Vec<_> = imgs.iter().filter(|r| r.released_ms >= tight_end).collect();
    assert!(held_after.len() >= 4, "{held_after:?}");
    assert!(imgs.iter().filter(|r| r.released_ms < tight_end).count() >= 2); // 1 at a time, 60 ms each
                                                                             // the late script is sent before every image queued at that time on the single connection
    let late = &rq[15];
    let queued: Vec<_> =
        imgs.iter().filter(|r| r.released_ms <= late.ready_ms && r.request_ms > late.ready_ms).collect();
    assert!(!queued.is_empty(), "no image queued when the script became ready");
    assert!(queued.iter().all(|r| r.request_ms > late.request_ms), "{late:?} {queued:?}");
    // tight_delay_ms: the tight phase lasts that much longer after its last object arrived
    let mut p3 = p.clone();
    p3.tight_delay_ms = 250.0;
    let out3 = load(p3).unwrap();
    let rq3 = &out3.requests;
    let end3 = rq3[1].last_byte_ms.max(rq3[2].last_byte_ms) + 250.0;
    let imgs3: Vec<&Rec> = rq3[3..15].iter().collect();
    assert_eq!(peak_released(&imgs3, 0.0, end3 - 1.0), 1, "extended tight phase: {imgs3:?}");
    let first_after =
        imgs3.iter().filter(|r| r.released_ms >= end3 - 1.0).map(|r| r.released_ms).fold(f64::MAX, f64::min);
    assert!(first_after < end3 + 30.0, "held images not released when the phase ended: {imgs3:?}");
    assert!(peak_released(&imgs3, end3, f64::MAX) > 1);
    // without the limits every image is released when discovered
    let mut p2 = plan(vec![obj("http://a.test/", "a.test", srv.http, false, None)], None);
    for i in 0..12 {
        let mut o = obj(&format!("http://a.test/img{i}"), "a.test", srv.http, false, Some(0));
        o.delayable = true;
        p2.objects.push(o);
    }
    let out2 = load(p2).unwrap();
    assert!(out2.requests.iter().all(|r| r.released_ms == r.ready_ms));
}

#[test]
fn tight_phases_are_per_frame() {
    // Two frames: frame 0's tight phase lasts until a slow stylesheet (300 ms) arrived, frame 1's
    // until the main document did. Frame 0's images go one at a time meanwhile, frame 1's at once.
    let mut r = vec![
        serde_json::json!({"host": "a.test", "path": "/", "body": {"synth": 10}}),
        serde_json::json!({"host": "b.test", "path": "/css", "body": {"synth": 10}, "wait_ms": 300.0}),
    ];
    for i in 0..10 {
        r.push(
            serde_json::json!({"host": "a.test", "path": format!("/img{i}"), "body": {"synth": 10}, "wait_ms": 40.0}),
        );
    }
    let srv = start_server(serde_json::Value::Array(r), true);
    let mut objs = vec![
        obj("http://a.test/", "a.test", srv.http, false, None),
        obj("http://b.test/css", "b.test", srv.http, false, Some(0)),
    ];
    for i in 0..10 {
        let mut o = obj(&format!("http://a.test/img{i}"), "a.test", srv.http, false, Some(0));
        o.delayable = true;
        o.tight_phase = Some(usize::from(i >= 5));
        objs.push(o);
    }
    let mut p = plan(objs, None);
    p.tight_limit = Some(1);
    p.tight_phases = vec![
        TightPhase { until: vec![1], delay_ms: 0.0, doc: None },
        TightPhase { until: vec![0], delay_ms: 0.0, doc: None },
    ];
    let out = load(p.clone()).unwrap();
    let rq = &out.requests;
    let css_end = rq[1].last_byte_ms;
    let f0: Vec<&Rec> = rq[2..7].iter().collect();
    let f1: Vec<&Rec> = rq[7..12].iter().collect();
    assert_eq!(peak_released(&f0, 0.0, css_end - 1.0), 1, "frame 0: {f0:?}");
    assert!(peak_released(&f1, 0.0, css_end - 1.0) >= 4, "frame 1 held by frame 0's phase: {f1:?}");
}

/// An origin that sends the response head and half the body, waits `pause_ms`, then the rest.
fn slow_body_origin(pause_ms: u64) -> (SocketAddr, std::thread::JoinHandle<()>) {
    one_shot_origin(move |s| {
        s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2000\r\n\r\n").unwrap();
        s.write_all(&[b'x'; 1000]).unwrap();
        s.flush().unwrap();
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        s.write_all(&[b'x'; 1000]).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(200));
    })
}

#[test]
fn first_byte_discovery_and_after() {
    // object 0 (slow body: 150 ms between its first and last byte) references 1 at its first
    // byte and 2 at its last; 3 needs its parent 0 and also 1 ("after").
    let (slow, th) = slow_body_origin(150);
    let r = serde_json::json!([
        {"host": "b.test", "path": "/early", "body": {"synth": 10}, "wait_ms": 50.0},
        {"host": "b.test", "path": "/late", "body": {"synth": 10}},
        {"host": "b.test", "path": "/after", "body": {"synth": 10}},
    ]);
    let srv = start_server(r, true);
    let mut early = obj("http://b.test/early", "b.test", srv.http, false, Some(0));
    early.at_first_byte = true;
    let mut after = obj("http://b.test/after", "b.test", srv.http, false, Some(0));
    after.after = vec![1];
    let objs = vec![
        obj("http://a.test/", "a.test", slow, false, None),
        early,
        obj("http://b.test/late", "b.test", srv.http, false, Some(0)),
        after,
    ];
    let out = load(plan(objs, None)).unwrap();
    th.join().unwrap();
    let rq = &out.requests;
    assert!(rq[0].last_byte_ms - rq[0].first_byte_ms >= 140.0, "{:?}", rq[0]);
    assert!(rq[1].ready_ms >= rq[0].first_byte_ms && rq[1].ready_ms < rq[0].last_byte_ms - 100.0, "{:?}", rq[1]);
    assert!(rq[2].ready_ms >= rq[0].last_byte_ms);
    // 1 takes 50 ms (think time) from ~the first byte of 0: done before 0's last byte, so 3 is
    // ready at 0's last byte; make 1 the later one instead by checking the max rule
    assert!(rq[3].ready_ms >= rq[0].last_byte_ms.max(rq[1].last_byte_ms), "{:?}", rq[3]);
}

#[test]
fn loader_decodes_content_encodings() {
    use crate::testutil::encode::{br, gzip, raw_deflate, zlib, zstd};
    let d: Vec<u8> = (0..60_000u32).map(|i| b"<p>replay me, byte for byte</p>\n"[(i % 32) as usize]).collect();
    let cases: Vec<(&str, &str, Vec<u8>, bool)> = vec![
        ("/gz", "gzip", gzip(&d), false),
        ("/gzc", "gzip", gzip(&d), true),
        ("/df", "deflate", zlib(&d), false),
        ("/raw", "deflate", raw_deflate(&d), true),
        ("/br", "br", br(&d), false),
        ("/zs", "zstd", zstd(&d), true),
        ("/stack", "gzip, br", br(&gzip(&d)), false),
        ("/id", "", d.clone(), true),
        ("/bad", "gzip", b"this is not gzip".to_vec(), false),
    ];
    let bodies = tmpdir("enc");
    let file = bodies.join("bodies.bin");
    let mut all = Vec::new();
    let mut r = Vec::new();
    for (path, enc, body, chunked) in &cases {
        let headers =
            if enc.is_empty() { serde_json::json!([]) } else { serde_json::json!([["Content-Encoding", enc]]) };
        r.push(serde_json::json!({"host": "a.test", "path": path, "headers": headers, "chunked": chunked,
                                  "body": {"file": file, "offset": all.len(), "length": body.len()}}));
        all.extend_from_slice(body);
    }
    std::fs::write(&file, &all).unwrap();
    let srv = start_server(serde_json::Value::Array(r), false);
    let objs = cases
        .iter()
        .enumerate()
        .map(|(i, c)| obj(&format!("http://a.test{}", c.0), "a.test", srv.http, false, (i > 0).then_some(0)))
        .collect();
    let out = load(plan(objs, None)).unwrap();
    for (rec, (path, enc, body, chunked)) in out.requests.iter().zip(&cases) {
        assert_eq!((rec.status, rec.bytes, rec.encoding.as_str()), (200, body.len() as u64, *enc), "{path}");
        let wire = if *chunked { crate::http::encode_chunked(body, 16 * 1024).len() } else { body.len() };
        assert_eq!(rec.transfer_bytes, rec.header_bytes + wire as u64, "{path}");
        if *path == "/bad" {
            let e = rec.decode_error.as_deref().unwrap();
            assert!(e.contains("gzip"), "{e}");
            assert_eq!(rec.body_bytes, rec.bytes);
        } else {
            assert_eq!((rec.body_bytes, &rec.decode_error), (d.len() as u64, &None), "{path}");
        }
    }
    let j = serde_json::to_value(&out.requests[0]).unwrap();
    assert!(j.get("decode_error").is_none() && j["body_bytes"] == d.len() && j["transfer_bytes"].is_u64(), "{j}");
    assert!(serde_json::to_value(&out.requests[8]).unwrap()["decode_error"].is_string());
    std::fs::remove_dir_all(bodies).ok();
}

#[test]
fn loader_transfer_bytes_count_interim_heads_and_framing() {
    let body = crate::testutil::encode::gzip(b"hello hello hello hello");
    let mut resp = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n".to_vec();
    let head =
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: x-gzip\r\nConnection: close\r\n\r\n";
    resp.extend_from_slice(head);
    resp.extend_from_slice(&crate::http::encode_chunked(&body, 7));
    let total = resp.len() as u64;
    let (a, th) = one_shot_origin(move |s| s.write_all(&resp).unwrap());
    let out = load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap();
    th.join().unwrap();
    let r = &out.requests[0];
    assert_eq!(
        (r.transfer_bytes, r.header_bytes, r.bytes, r.body_bytes),
        (total, head.len() as u64, body.len() as u64, 23)
    );
    assert_eq!(r.encoding, "x-gzip");
}

/// The page over h2 against the replay server: one connection for both hosts (same address,
/// coalesced), requests overlapping on it, the same bytes as over HTTP/1.1; a server address
/// offering only http/1.1 -> the loader falls back to HTTP/1.1 pools.
#[test]
fn loads_over_h2_with_coalescing_and_falls_back_to_http11() {
    let listen = serde_json::json!([
        {"ip": "127.0.0.1", "port": 0, "tls": false},
        {"ip": "127.0.0.1", "port": 0, "tls": true, "alpn": ["h2", "http/1.1"]},
        {"ip": "127.0.0.1", "port": 0, "tls": true},
    ]);
    let mut responses = page();
    responses
        .as_array_mut()
        .unwrap()
        .push(serde_json::json!({"host": "a.test", "path": "/big", "body": {"synth": 1_000_000}}));
    let srv = start_server_on(listen, responses, false);
    let ca = Some(srv.dir.join("ca.pem"));
    let h2plan = |addr: SocketAddr| {
        let mut p = page_plan(addr, true, ca.clone());
        p.objects.push(obj("https://a.test/big", "a.test", addr, true, Some(0)));
        for o in &mut p.objects {
            o.protocol = "h2".into();
        }
        p
    };
    // (check_page knows the page without /big: its PLT is the page's own)
    let without_big = |out: &mut Output| {
        let big = out.requests.pop().unwrap();
        out.plt_ms = out.requests.iter().map(|r| r.last_byte_ms).fold(0.0, f64::max);
        big
    };
    let mut out = load(h2plan(srv.addrs[1])).unwrap();
    let big = without_big(&mut out);
    assert_eq!((big.status, big.bytes, big.protocol.as_str()), (200, 1_000_000, "h2"));
    check_page(&out);
    assert_eq!(out.connections.len(), 1, "{:?}", out.connections);
    let c = &out.connections[0];
    assert_eq!((c.protocol.as_str(), c.hosts.clone()), ("h2", vec!["a.test".to_string(), "b.test".to_string()]));
    assert!(out.requests.iter().all(|r| r.protocol == "h2" && r.conn_id == 0));
    assert_eq!(out.requests.iter().filter(|r| r.new_conn).count(), 1);
    // the 20 children of the document were all in flight at once on the one connection
    let kids: Vec<&Rec> = out.requests[1..=20].iter().collect();
    let first_done = kids.iter().map(|r| r.last_byte_ms).fold(f64::MAX, f64::min);
    assert!(kids.iter().all(|r| r.request_ms <= first_done), "requests were not multiplexed");
    assert_eq!(srv.shared.stats.h2_connections.load(std::sync::atomic::Ordering::Relaxed), 1);
    // the address without h2: HTTP/1.1, pools of connections per host as before
    let mut out = load(h2plan(srv.addrs[2])).unwrap();
    without_big(&mut out);
    check_page(&out);
    assert!(out.requests.iter().all(|r| r.protocol == "http/1.1"));
    assert!(out.connections.len() > 2 && out.connections.iter().all(|c| c.protocol == "http/1.1"));
}
