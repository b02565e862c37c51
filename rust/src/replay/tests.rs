//! Replay server + loader integration tests on 127.0.0.1 (random ports).
use super::*;
use crate::loader::{self, Object, Plan};
use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpStream};

pub struct TestServer {
    pub http: SocketAddr,
    pub https: SocketAddr,
    pub shared: Arc<Shared>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    th: Option<std::thread::JoinHandle<()>>,
    pub dir: PathBuf,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.th.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn tmpdir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let d = std::env::temp_dir().join(format!("pltlab-rp-{tag}-{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Starts a replay server (http + https on 127.0.0.1, port 0) for `responses`.
pub fn start_server(responses: serde_json::Value, think_time: bool) -> TestServer {
    let dir = tmpdir("srv");
    let g = crate::certs::generate(&["a.test".into(), "b.test".into()]).unwrap();
    std::fs::write(dir.join("ca.pem"), &g.ca_pem).unwrap();
    std::fs::write(dir.join("hosts.pem"), &g.leaf_pem).unwrap();
    std::fs::write(dir.join("hosts.key"), &g.leaf_key_pem).unwrap();
    let m: manifest::Manifest = serde_json::from_value(serde_json::json!({
        "listen": [{"ip": "127.0.0.1", "port": 0, "tls": false}, {"ip": "127.0.0.1", "port": 0, "tls": true}],
        "tls": {"cert": dir.join("hosts.pem"), "key": dir.join("hosts.key")},
        "think_time": think_time,
        "responses": responses,
    }))
    .unwrap();
    let shared = build_shared(&m).unwrap();
    let (atx, arx) = std::sync::mpsc::channel();
    let (stx, srx) = tokio::sync::oneshot::channel::<()>();
    let sh2 = shared.clone();
    let th = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async move {
            let srv = start(&m, sh2).unwrap();
            atx.send(srv.addrs.clone()).unwrap();
            let _ = srx.await;
        });
    });
    let addrs = arx.recv().unwrap();
    TestServer { http: addrs[0].0, https: addrs[1].0, shared, stop: Some(stx), th: Some(th), dir }
}

fn obj(url: &str, host: &str, addr: SocketAddr, tls: bool, parent: Option<usize>) -> Object {
    Object {
        url: url.into(),
        method: "GET".into(),
        host: host.into(),
        ip: addr.ip(),
        port: addr.port(),
        tls,
        parent,
        delay_ms: 0.0,
        at_first_byte: false,
        after: Vec::new(),
        delayable: false,
        tight_phase: None,
    }
}

fn plan(objects: Vec<Object>, ca: Option<PathBuf>) -> Plan {
    Plan {
        objects,
        max_conns_per_host: 6,
        tfo: false,
        dns_delay_ms: 0.0,
        ca,
        timeout_s: 20.0,
        delayable_limit: None,
        tight_limit: None,
        tight_until: Vec::new(),
        tight_delay_ms: 0.0,
        tight_phases: Vec::new(),
    }
}

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

fn check_page(out: &loader::Output) {
    assert_eq!(out.requests.len(), 32);
    assert_eq!(out.requests[0].bytes, 3000);
    assert_eq!(out.requests[0].status, 200);
    for i in 0..30u64 {
        let r = &out.requests[1 + i as usize];
        assert_eq!(r.status, 200, "{r:?}");
        assert_eq!(r.bytes, 1000 + 1000 * i, "{r:?}");
    }
    assert_eq!(out.requests[31].status, 404);
    // children after parents
    for (i, r) in out.requests.iter().enumerate().skip(1) {
        let p = if i <= 20 || i == 31 { 0 } else { i - 20 };
        assert!(r.request_ms >= out.requests[p].last_byte_ms, "{i} before its parent {p}");
        assert!(r.ready_ms >= out.requests[p].last_byte_ms);
    }
    // at most 6 connections per host, keep-alive reuse
    for h in ["a.test", "b.test"] {
        let n = out.connections.iter().filter(|c| c.host == h).count();
        assert!(n <= 6, "{h}: {n} connections");
    }
    assert!(out.connections.len() < 32);
    assert!(out.requests.iter().any(|r| !r.new_conn));
    let plt = out.requests.iter().map(|r| r.last_byte_ms).fold(0.0, f64::max);
    assert_eq!(out.plt_ms, plt);
}

#[test]
fn http_page_load() {
    let srv = start_server(page(), false);
    let out = loader::load(page_plan(srv.http, false, None)).unwrap();
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

#[test]
fn https_page_load() {
    let srv = start_server(page(), false);
    let out = loader::load(page_plan(srv.https, true, Some(srv.dir.join("ca.pem")))).unwrap();
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
    let e = loader::load(page_plan(srv.https, true, Some(other.join("ca.pem")))).unwrap_err();
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
        let out = loader::load(mk(max)).unwrap();
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
        let mut order: Vec<&loader::Rec> = out.requests.iter().skip(1).collect();
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
    let out = loader::load(p).unwrap();
    let (a, b) = (&out.requests[0], &out.requests[1]);
    assert!(a.connect_start_ms.unwrap() >= 20.0, "{a:?}");
    assert!(a.first_byte_ms - a.request_ms >= 40.0, "{a:?}");
    assert!(b.ready_ms - a.last_byte_ms >= 30.0, "{b:?}");
    assert!(!b.new_conn && b.conn_id == a.conn_id);
    assert!(out.plt_ms >= 90.0);
}

fn raw_exchange(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out).unwrap();
    out
}

#[test]
fn http10_and_framing() {
    let r = serde_json::json!([
        {"host": "a.test", "path": "/ch", "body": {"synth": 40000}, "chunked": true,
         "headers": [["Transfer-Encoding", "chunked"], ["X-Rec", "yes"]]},
        {"host": "a.test", "path": "/nc", "status": 304, "headers": [["ETag", "\"x\""]], "body": {"synth": 50}},
    ]);
    let srv = start_server(r, false);
    // HTTP/1.0: Content-Length framing even though recorded chunked, then close
    let out = raw_exchange(srv.http, b"GET /ch HTTP/1.0\r\nHost: a.test\r\n\r\n");
    let text = String::from_utf8_lossy(&out[..200]).to_string();
    assert!(text.starts_with("HTTP/1.1 200 OK\r\n"), "{text}");
    assert!(text.contains("Content-Length: 40000\r\n") && text.contains("Connection: close\r\n"), "{text}");
    assert!(text.contains("X-Rec: yes\r\n") && !text.contains("Transfer-Encoding"), "{text}");
    let h = crate::loader::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!(out.len() - h.head_len, 40000);
    // HTTP/1.1 + Connection: close: chunked as recorded
    let out = raw_exchange(srv.http, b"GET /ch HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    let h = crate::loader::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!(h.framing, crate::loader::http::Framing::Chunked);
    let mut d = crate::loader::http::BodyDecoder::new(h.framing);
    assert_eq!(d.feed(&out[h.head_len..]).unwrap(), out.len() - h.head_len);
    assert!(d.is_done() && d.body_bytes == 40000);
    // 304: no body; HEAD: no body; host-less 1.0 request matches by path
    let out = raw_exchange(srv.http, b"GET /nc HTTP/1.0\r\n\r\n");
    assert!(out.starts_with(b"HTTP/1.1 304 Not Modified\r\n") && out.ends_with(b"\r\n\r\n"));
    let out = raw_exchange(srv.http, b"HEAD /ch HTTP/1.0\r\nHost: a.test\r\n\r\n");
    assert!(out.ends_with(b"\r\n\r\n") && String::from_utf8_lossy(&out).contains("Content-Length: 40000"));
    // keep-alive with two requests in one write (pipelined) are answered in order
    let out = raw_exchange(
        srv.http,
        b"GET /nc HTTP/1.1\r\nHost: a.test\r\n\r\nGET /zz HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
    );
    let t = String::from_utf8_lossy(&out);
    assert!(t.starts_with("HTTP/1.1 304") && t.contains("HTTP/1.1 404 Not Found"), "{t}");
    // garbage -> 400
    let out = raw_exchange(srv.http, b"\x01\x02 nonsense\r\n\r\n");
    assert!(out.starts_with(b"HTTP/1.1 400"));
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
    let out = loader::load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap();
    assert_eq!(out.requests[0].bytes, 22);
    th.join().unwrap();
}

#[test]
fn loader_fails_on_truncated_response() {
    let (a, th) = fake_origin(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nabc", true);
    let e = loader::load(plan(vec![obj("http://a.test/x", "a.test", a, false, None)], None)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("http://a.test/x") && msg.contains("closed before the end of the response body"), "{msg}");
    th.join().unwrap();
}

#[test]
fn loader_fails_on_refused_and_timeout() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    drop(l);
    let e = loader::load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap_err();
    assert!(format!("{e:#}").contains("connect to 127.0.0.1"), "{e:#}");
    // silent server -> timeout
    let (a, th) = fake_origin(b"", false);
    let mut p = plan(vec![obj("http://a.test/", "a.test", a, false, None)], None);
    p.timeout_s = 0.2;
    let e = loader::load(p).unwrap_err();
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
    let e = loader::load(plan(objs, None)).unwrap_err();
    let msg = format!("{e:#}");
    assert!(msg.contains("closed by the server") || msg.contains("connect to") || msg.contains("reset"), "{msg}");
    killer.join().unwrap();
}

#[test]
fn plan_validation() {
    let a = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9);
    let mut p = plan(vec![obj("http://a/", "a", a, false, Some(1)), obj("http://a/b", "a", a, false, Some(0))], None);
    assert!(format!("{:#}", loader::load(p.clone()).unwrap_err()).contains("cycle"));
    p.objects[0].parent = Some(5);
    assert!(format!("{:#}", loader::load(p.clone()).unwrap_err()).contains("bad parent"));
    let p = plan(vec![obj("https://a/", "a", a, true, None)], None);
    assert!(format!("{:#}", loader::load(p).unwrap_err()).contains("no \"ca\""));
    // "after" edges: bad index, cycle through parent + after; bad tight_until, zero limits
    let mut p = plan(vec![obj("http://a/", "a", a, false, None), obj("http://a/b", "a", a, false, Some(0))], None);
    p.objects[1].after = vec![7];
    assert!(format!("{:#}", loader::load(p.clone()).unwrap_err()).contains("bad \"after\""));
    p.objects.push(obj("http://a/c", "a", a, false, Some(1)));
    p.objects[1].after = vec![2];
    assert!(format!("{:#}", loader::load(p.clone()).unwrap_err()).contains("cycle"));
    p.objects[1].after.clear();
    p.tight_until = vec![3];
    assert!(format!("{:#}", loader::load(p.clone()).unwrap_err()).contains("tight_until"));
    p.tight_until.clear();
    p.delayable_limit = Some(0);
    assert!(format!("{:#}", loader::load(p).unwrap_err()).contains(">= 1"));
    assert_eq!(loader::target_of("https://a.b/x/y?q=1#f"), "/x/y?q=1");
    assert_eq!(loader::target_of("http://a.b"), "/");
    assert_eq!(loader::target_of("http://a.b?x"), "/?x");
}

/// A throwaway network namespace (deleted on drop), lo up, given tcp_fastopen.
struct Netns(String);
impl Netns {
    fn new(tfo: u32) -> Option<Netns> {
        use std::process::Command;
        if unsafe { libc::geteuid() } != 0 || Command::new("ip").arg("-V").output().is_err() {
            eprintln!("skipping: needs root + ip");
            return None;
        }
        static N: AtomicU64 = AtomicU64::new(0);
        let ns = Netns(format!("pltrp-t{}-{}", std::process::id(), N.fetch_add(1, Relaxed)));
        assert!(Command::new("ip").args(["netns", "add", &ns.0]).status().unwrap().success());
        ns.run(&["ip", "link", "set", "lo", "up"]);
        ns.run(&["sysctl", "-qw", &format!("net.ipv4.tcp_fastopen={tfo}")]);
        Some(ns)
    }
    fn run(&self, args: &[&str]) -> String {
        let o = std::process::Command::new("ip").args(["netns", "exec", &self.0]).args(args).output().unwrap();
        assert!(o.status.success(), "{args:?}: {}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).to_string()
    }
    fn counter(&self, name: &str) -> u64 {
        let out = self.run(&["nstat", "-azs", name]);
        out.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|x| x.parse().ok())
            .expect("nstat output")
    }
    /// Runs `f` on a thread that entered the namespace (threads it spawns inherit it).
    fn enter<T: Send + 'static>(&self, f: impl FnOnce() -> T + Send + 'static) -> T {
        let nsf = std::fs::File::open(format!("/run/netns/{}", self.0)).unwrap();
        std::thread::spawn(move || {
            nix::sched::setns(nsf, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            f()
        })
        .join()
        .unwrap()
    }
}
impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

#[test]
fn tfo_loads_in_namespace() {
    let Some(ns) = Netns::new(3) else { return };
    let before = ns.counter("TcpExtTCPFastOpenActive");
    let (o1, o2, st) = ns.enter(|| {
        let srv = start_server(page(), false);
        let mut p = page_plan(srv.http, false, None);
        p.tfo = true;
        let o1 = loader::load(p.clone()).unwrap();
        let o2 = loader::load(p).unwrap();
        // https too (the ClientHello rides in the SYN)
        let mut pt = page_plan(srv.https, true, Some(srv.dir.join("ca.pem")));
        pt.tfo = true;
        loader::load(pt.clone()).unwrap();
        let o3 = loader::load(pt).unwrap();
        assert!(o3.connections.iter().all(|c| c.tfo), "{:?}", o3.connections);
        (o1, o2, srv.shared.stats.json())
    });
    assert!(o1.tfo_available && o1.errors.is_empty());
    // first visit: no cookie for the first connection
    assert!(!o1.connections[0].tfo && o1.connections[0].tfo_client_fail == 1, "{:?}", o1.connections[0]);
    assert!(o2.connections.iter().all(|c| c.tfo), "{:?}", o2.connections);
    assert!(o2.requests.iter().all(|r| r.tfo));
    let after = ns.counter("TcpExtTCPFastOpenActive");
    assert!(after - before >= o2.connections.len() as u64, "{before} -> {after}");
    assert!(st["tfo_connections"].as_u64().unwrap() >= o2.connections.len() as u64, "{st}");
    assert_eq!(ns.counter("TcpExtTCPFastOpenListenOverflow"), 0);
}

#[test]
fn tfo_refused_by_sysctl_is_reported() {
    let Some(ns) = Netns::new(0) else { return };
    let out = ns.enter(|| {
        let srv = start_server(page(), false);
        let mut p = page_plan(srv.http, false, None);
        p.tfo = true;
        loader::load(p).unwrap()
    });
    assert!(!out.tfo_available && out.tfo_requested);
    assert!(out.errors.iter().any(|e| e.contains("EOPNOTSUPP") || e.contains("not supported")), "{:?}", out.errors);
    assert!(out.connections.iter().all(|c| !c.tfo));
    assert_eq!(out.requests.len(), 32);
}

#[test]
fn shim_turns_on_tfo_for_plain_connect() {
    let Some(ns) = Netns::new(3) else { return };
    if std::process::Command::new("python3").arg("-V").output().is_err() {
        eprintln!("skipping: needs python3");
        return;
    }
    let dir = tmpdir("shim");
    let so = dir.join("libpltlab_tfo_shim.so");
    crate::shim::write(&so).unwrap();
    let script = r#"
import socket, threading, sys
srv = socket.socket(); srv.setsockopt(socket.IPPROTO_TCP, 23, 16)
srv.bind(("127.0.0.1", 0)); srv.listen(16); port = srv.getsockname()[1]
def serve():
    for _ in range(3):
        c, _ = srv.accept(); c.sendall(b"ok:" + c.recv(100)); c.close()
t = threading.Thread(target=serve); t.start()
for i in range(3):
    s = socket.socket(); s.connect(("127.0.0.1", port)); s.sendall(b"hi"); assert s.recv(100) == b"ok:hi"; s.close()
t.join()
"#;
    let run = |preload: bool| {
        let before = ns.counter("TcpExtTCPFastOpenActive");
        let mut c = std::process::Command::new("ip");
        c.args(["netns", "exec", &ns.0, "python3", "-c", script]);
        if preload {
            c.env("LD_PRELOAD", &so);
        }
        let o = c.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        ns.counter("TcpExtTCPFastOpenActive") - before
    };
    assert_eq!(run(false), 0);
    assert_eq!(run(true), 2, "first connect fetches the cookie, the next two use it");
    std::fs::remove_dir_all(dir).ok();
}

/// Peak number of `rs` in flight (released -> last byte) within [from, to).
fn peak_released(rs: &[&loader::Rec], from: f64, to: f64) -> usize {
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
        r.push(serde_json::json!({"host": "a.test", "path": format!("/img{i}"), "body": {"synth": 10}, "wait_ms": 60.0}));
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
    let out = loader::load(p.clone()).unwrap();
    let rq = &out.requests;
    let tight_end = rq[1].last_byte_ms.max(rq[2].last_byte_ms);
    let imgs: Vec<&loader::Rec> = rq[3..15].iter().collect();
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
    let queued: Vec<_> = imgs.iter().filter(|r| r.released_ms <= late.ready_ms && r.request_ms > late.ready_ms).collect();
    assert!(!queued.is_empty(), "no image queued when the script became ready");
    assert!(queued.iter().all(|r| r.request_ms > late.request_ms), "{late:?} {queued:?}");
    // tight_delay_ms: the tight phase lasts that much longer after its last object arrived
    let mut p3 = p.clone();
    p3.tight_delay_ms = 250.0;
    let out3 = loader::load(p3).unwrap();
    let rq3 = &out3.requests;
    let end3 = rq3[1].last_byte_ms.max(rq3[2].last_byte_ms) + 250.0;
    let imgs3: Vec<&loader::Rec> = rq3[3..15].iter().collect();
    assert_eq!(peak_released(&imgs3, 0.0, end3 - 1.0), 1, "extended tight phase: {imgs3:?}");
    let first_after = imgs3.iter().filter(|r| r.released_ms >= end3 - 1.0).map(|r| r.released_ms).fold(f64::MAX, f64::min);
    assert!(first_after < end3 + 30.0, "held images not released when the phase ended: {imgs3:?}");
    assert!(peak_released(&imgs3, end3, f64::MAX) > 1);
    // without the limits every image is released when discovered
    let mut p2 = plan(vec![obj("http://a.test/", "a.test", srv.http, false, None)], None);
    for i in 0..12 {
        let mut o = obj(&format!("http://a.test/img{i}"), "a.test", srv.http, false, Some(0));
        o.delayable = true;
        p2.objects.push(o);
    }
    let out2 = loader::load(p2).unwrap();
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
        r.push(serde_json::json!({"host": "a.test", "path": format!("/img{i}"), "body": {"synth": 10}, "wait_ms": 40.0}));
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
        loader::TightPhase { until: vec![1], delay_ms: 0.0 },
        loader::TightPhase { until: vec![0], delay_ms: 0.0 },
    ];
    let out = loader::load(p.clone()).unwrap();
    let rq = &out.requests;
    let css_end = rq[1].last_byte_ms;
    let f0: Vec<&loader::Rec> = rq[2..7].iter().collect();
    let f1: Vec<&loader::Rec> = rq[7..12].iter().collect();
    assert_eq!(peak_released(&f0, 0.0, css_end - 1.0), 1, "frame 0: {f0:?}");
    assert!(peak_released(&f1, 0.0, css_end - 1.0) >= 4, "frame 1 held by frame 0's phase: {f1:?}");
    // a bad phase index is refused, and so are bad phases and delays
    let mut q = p.clone();
    q.objects[2].tight_phase = Some(2);
    assert!(q.validate().is_err());
    let mut q = p.clone();
    q.tight_phases[1].until = vec![99];
    assert!(q.validate().is_err());
    let mut q = p.clone();
    q.tight_phases[0].delay_ms = f64::NAN;
    assert!(q.validate().is_err());
    let mut q = p.clone();
    q.tight_delay_ms = -1.0;
    assert!(q.validate().is_err());
    assert!(p.validate().is_ok());
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
    let objs = vec![obj("http://a.test/", "a.test", slow, false, None), early,
                    obj("http://b.test/late", "b.test", srv.http, false, Some(0)), after];
    let out = loader::load(plan(objs, None)).unwrap();
    th.join().unwrap();
    let rq = &out.requests;
    assert!(rq[0].last_byte_ms - rq[0].first_byte_ms >= 140.0, "{:?}", rq[0]);
    assert!(rq[1].ready_ms >= rq[0].first_byte_ms && rq[1].ready_ms < rq[0].last_byte_ms - 100.0, "{:?}", rq[1]);
    assert!(rq[2].ready_ms >= rq[0].last_byte_ms);
    // 1 takes 50 ms (think time) from ~the first byte of 0: done before 0's last byte, so 3 is
    // ready at 0's last byte; make 1 the later one instead by checking the max rule
    assert!(rq[3].ready_ms >= rq[0].last_byte_ms.max(rq[1].last_byte_ms), "{:?}", rq[3]);
}

/// (status, value of the X-Tag header or "", body length) of the single response in `out`.
fn tagged(out: &[u8]) -> (u16, String, usize) {
    let h = crate::loader::http::parse_response_head(out, false).unwrap().unwrap();
    let head = String::from_utf8_lossy(&out[..h.head_len]).to_string();
    let tag = head.lines().find_map(|l| l.strip_prefix("X-Tag: ")).unwrap_or("").to_string();
    (h.status, tag, out.len() - h.head_len)
}

fn sha256(b: &[u8]) -> String {
    ring::digest::digest(&ring::digest::SHA256, b).as_ref().iter().map(|x| format!("{x:02x}")).collect()
}

#[test]
fn scheme_matching_over_http_and_https() {
    let r = serde_json::json!([
        {"scheme": "https", "host": "a.test", "path": "/", "body": {"synth": 100}},
        {"scheme": "http", "host": "a.test", "path": "/", "body": {"synth": 101}},
        {"scheme": "http", "host": "a.test", "path": "/old", "body": {"synth": 102}},
        {"scheme": "http", "cross_scheme": false, "host": "a.test", "path": "/loop", "status": 301,
         "headers": [["Location", "https://a.test/loop"]], "body": {"synth": 103}},
        {"scheme": "HTTPS", "cross_scheme": false, "host": "b.test", "path": "/s", "query": "a=1", "body": {"synth": 104}},
    ]);
    let srv = start_server(r, false);
    let urls = ["a.test/", "a.test/old", "a.test/loop", "b.test/s?a=2", "b.test/s?a=1"];
    let load = |tls: bool| {
        let (addr, scheme) = if tls { (srv.https, "https") } else { (srv.http, "http") };
        let objs = urls.iter().enumerate()
            .map(|(i, u)| obj(&format!("{scheme}://{u}"), &u[..6], addr, tls, (i > 0).then_some(0)))
            .collect();
        let out = loader::load(plan(objs, Some(srv.dir.join("ca.pem")))).unwrap();
        out.requests.iter().map(|r| (r.status, r.bytes)).collect::<Vec<_>>()
    };
    // https: own recording; http-only one (HSTS upgrade); not the self-redirect; closest query
    let https = load(true);
    assert_eq!((https[0], https[1], https[2].0, https[3], https[4]), ((200, 100), (200, 102), 404, (200, 104), (200, 104)));
    let st = srv.shared.stats.json();
    assert_eq!((st["cross_scheme_matches"].as_u64(), st["fallback_matches"].as_u64()), (Some(1), Some(1)), "{st}");
    // http: own recordings; the https-only response with cross_scheme false is not served
    let http = load(false);
    assert_eq!(http[..3], [(200, 101), (200, 102), (301, 103)]);
    assert_eq!((http[3].0, http[4].0), (404, 404));
    assert_eq!(srv.shared.stats.json()["cross_scheme_matches"], 1);
}

#[test]
fn repeated_urls_sessions_and_post_bodies() {
    let r = serde_json::json!([
        {"host": "a.test", "path": "/poll", "headers": [["X-Tag", "r0"]]},
        {"host": "a.test", "path": "/poll", "headers": [["X-Tag", "r1"]]},
        {"method": "POST", "host": "a.test", "path": "/api", "body_sha256": sha256(b"one"), "headers": [["X-Tag", "p0"]]},
        {"method": "POST", "host": "a.test", "path": "/api", "body_sha256": sha256(b"two").to_uppercase(), "headers": [["X-Tag", "p1"]]},
        {"method": "POST", "host": "a.test", "path": "/api", "headers": [["X-Tag", "p2"]]},
    ]);
    let srv = start_server(r, false);
    let get = || tagged(&raw_exchange(srv.http, b"GET /poll HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")).1;
    let post = |body: &str| {
        let req = format!("POST /api HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        tagged(&raw_exchange(srv.http, req.as_bytes())).1
    };
    assert_eq!([get(), get(), get()], ["r0", "r1", "r1"]);
    srv.shared.new_session();
    assert_eq!(get(), "r0");
    // the body digest picks the recording; chunked bodies are digested de-chunked
    assert_eq!(post("two"), "p1");
    let chunked = b"POST /api HTTP/1.1\r\nHost: a.test\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n2\r\non\r\n1\r\ne\r\n0\r\n\r\n";
    assert_eq!(tagged(&raw_exchange(srv.http, chunked)).1, "p0");
    assert_eq!(post("one"), "p0");
    // unknown body, then none: in sequence over all recordings, then the last again
    assert_eq!([post("zzz"), post("")], ["p2", "p2"]);
    srv.shared.new_session();
    assert_eq!([post(""), post("two"), post("")], ["p0", "p1", "p2"]);
    let st = srv.shared.stats.json();
    assert_eq!((st["sessions"].as_u64(), st["exact_matches"].as_u64()), (Some(2), Some(12)), "{st}");
}

#[test]
fn sigusr2_starts_a_new_session() {
    let srv = start_server(serde_json::json!([{"host": "a.test", "path": "/"}]), false);
    let sh = srv.shared.clone();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            // the handler is installed before the signal goes out (SIGUSR2 would kill the process otherwise)
            let mut sig = Signals::new().unwrap();
            unsafe { libc::kill(libc::getpid(), libc::SIGUSR2) };
            let counted = async {
                while sh.stats.sessions.load(Relaxed) == 0 {
                    tokio::time::sleep(std::time::Duration::from_millis(5)).await;
                }
            };
            tokio::select! {
                _ = sig.serve(&sh) => panic!("stopped without SIGTERM"),
                _ = tokio::time::timeout(std::time::Duration::from_secs(10), counted) => {}
            }
        });
    })
    .join()
    .unwrap();
    assert_eq!(srv.shared.stats.json()["sessions"], 1);
}

#[test]
fn manifest_headers_split_and_skipped() {
    let r = serde_json::json!([{"host": "a.test", "path": "/", "body": {"synth": 5},
        "headers": [["Set-Cookie", "a=1; Path=/\nb=2\r\n\n \n"], ["", "x"], [":status", "200"], ["Bad Name", "x"],
                    ["X\u{1}", "y"], ["Bad:Name", "z"], ["Link", "<a.css>; rel=preload\r\n<b.js>; rel=preload"],
                    ["X-Ctl", "v\u{0}1\t2"]]}]);
    let srv = start_server(r, false);
    let out = raw_exchange(srv.http, b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    let h = crate::loader::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!((h.status, out.len() - h.head_len), (200, 5));
    let head = String::from_utf8_lossy(&out[..h.head_len]).to_string();
    let lines: Vec<&str> = head.split("\r\n").skip(1).filter(|l| !l.is_empty()).collect();
    assert_eq!(lines, ["Set-Cookie: a=1; Path=/", "Set-Cookie: b=2", "Link: <a.css>; rel=preload", "Link: <b.js>; rel=preload",
                       "X-Ctl: v1\t2", "Content-Length: 5", "Connection: close"]);
}

#[test]
fn manifest_errors_name_the_response() {
    let dir = tmpdir("merr");
    std::fs::write(dir.join("b.bin"), b"0123456789").unwrap();
    let err = |resp: serde_json::Value| {
        let m: manifest::Manifest = serde_json::from_value(serde_json::json!({
            "listen": [{"ip": "127.0.0.1", "port": 0}],
            "responses": [{"host": "a.test", "path": "/"}, resp],
        })).unwrap();
        format!("{:#}", build_shared(&m).err().expect("an error"))
    };
    let e = err(serde_json::json!({"host": "www.a.com", "path": "/x.js", "body": {"file": dir.join("nope.bin"), "length": 1}}));
    assert!(e.starts_with("response 1 (www.a.com/x.js): cannot read body file"), "{e}");
    let e = err(serde_json::json!({"host": "www.a.com", "path": "/x.js", "body": {"file": dir.join("b.bin"), "offset": 5, "length": 6}}));
    assert!(e.starts_with("response 1 (www.a.com/x.js): body 5+6 beyond the end"), "{e}");
    let e = err(serde_json::json!({"scheme": "ftp", "host": "b.com", "path": "/y"}));
    assert!(e.starts_with("response 1 (b.com/y): scheme \"ftp\""), "{e}");
    let e = err(serde_json::json!({"method": "POST", "host": "b.com", "path": "/y", "body_sha256": "abc"}));
    assert!(e.starts_with("response 1 (b.com/y): body_sha256 \"abc\""), "{e}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn loader_decodes_content_encodings() {
    use crate::loader::decode::tests::{br, gzip, raw_deflate, zlib, zstd};
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
        let headers = if enc.is_empty() { serde_json::json!([]) } else { serde_json::json!([["Content-Encoding", enc]]) };
        r.push(serde_json::json!({"host": "a.test", "path": path, "headers": headers, "chunked": chunked,
                                  "body": {"file": file, "offset": all.len(), "length": body.len()}}));
        all.extend_from_slice(body);
    }
    std::fs::write(&file, &all).unwrap();
    let srv = start_server(serde_json::Value::Array(r), false);
    let objs = cases.iter().enumerate()
        .map(|(i, c)| obj(&format!("http://a.test{}", c.0), "a.test", srv.http, false, (i > 0).then_some(0)))
        .collect();
    let out = loader::load(plan(objs, None)).unwrap();
    for (rec, (path, enc, body, chunked)) in out.requests.iter().zip(&cases) {
        assert_eq!((rec.status, rec.bytes, rec.encoding.as_str()), (200, body.len() as u64, *enc), "{path}");
        let wire = if *chunked { crate::loader::http::encode_chunked(body, 16 * 1024).len() } else { body.len() };
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
    let body = crate::loader::decode::tests::gzip(b"hello hello hello hello");
    let mut resp = b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n".to_vec();
    let head = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Encoding: x-gzip\r\nConnection: close\r\n\r\n";
    resp.extend_from_slice(head);
    resp.extend_from_slice(&crate::loader::http::encode_chunked(&body, 7));
    let total = resp.len() as u64;
    let (a, th) = one_shot_origin(move |s| s.write_all(&resp).unwrap());
    let out = loader::load(plan(vec![obj("http://a.test/", "a.test", a, false, None)], None)).unwrap();
    th.join().unwrap();
    let r = &out.requests[0];
    assert_eq!((r.transfer_bytes, r.header_bytes, r.bytes, r.body_bytes), (total, head.len() as u64, body.len() as u64, 23));
    assert_eq!(r.encoding, "x-gzip");
}
