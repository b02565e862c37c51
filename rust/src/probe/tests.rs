//! Loopback tests: server + clients in-process over 127.0.0.1 (random ports).
use super::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn server() -> SocketAddr {
    server::start(&["127.0.0.1:0".parse().unwrap()], 256, true).unwrap().addrs[0]
}

fn read_exact_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    s.read_exact(&mut v).unwrap();
    v
}

#[test]
fn get_sizes_exact() {
    let a = server();
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    for n in [0usize, 1, 1 << 20, 3 * (1 << 20) + 7, 1] {
        s.write_all(format!("GET {n}\n").as_bytes()).unwrap();
        assert_eq!(read_exact_n(&mut s, n).len(), n);
    }
    // nothing more must arrive
    s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
    let mut b = [0u8; 16];
    match s.read(&mut b) {
        Err(e) => assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut)),
        Ok(k) => panic!("unexpected {k} extra bytes"),
    }
    // pipelined requests on the same connection
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(b"GET 10\nGET 0\nGET 5\n").unwrap();
    assert_eq!(read_exact_n(&mut s, 15).len(), 15);
}

#[test]
fn malformed_gets_err_and_close() {
    let a = server();
    for req in [&b"FOO\n"[..], b"GET\n", b"GET -1\n", b"GET 1 2\n", b"UDPSTAT x\n"] {
        let mut s = TcpStream::connect(a).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(req).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap(); // EOF => server closed
        assert!(out.starts_with(b"ERR "), "{:?} -> {:?}", req, out);
        assert!(out.ends_with(b"\n"));
    }
    // over-long line
    let mut s = TcpStream::connect(a).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s.write_all(&[b'A'; 300]).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    assert!(out.starts_with(b"ERR "));
}

#[test]
fn ping_samples() {
    let a = server();
    let o = ping::run(&ping::Args { connect: a, count: 50, interval_ms: 0.0, warmup: 3, timeout_s: 10.0, flows: 1 })
        .unwrap();
    assert_eq!(o.samples_us.len(), 50);
    assert!(o.min_us > 0.0 && o.min_us <= o.p50_us && o.p50_us <= o.p99_us && o.p99_us <= o.max_us);
    // kernel timestamps on every round trip; the network RTT never exceeds the application's
    assert_eq!(o.unstamped, 0);
    for (n, a) in o.samples_us.iter().zip(&o.app_samples_us) {
        assert!(*n <= a + 5.0, "network {n} us > application {a} us");
    }
}

#[test]
fn ping_flows_share_the_rounds() {
    let a = server();
    let o = ping::run(&ping::Args { connect: a, count: 31, interval_ms: 0.0, warmup: 1, timeout_s: 10.0, flows: 4 })
        .unwrap();
    assert_eq!((o.samples_us.len(), o.app_samples_us.len(), o.at_ns.len(), o.flows), (31, 31, 31, 4));
    // start times are wall-clock ns of this run
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64;
    assert!(o.at_ns.iter().all(|&t| t <= now && now - t < 10_000_000_000), "{:?}", &o.at_ns[..3]);
    let e = ping::run(&ping::Args { connect: a, count: 3, interval_ms: 0.0, warmup: 0, timeout_s: 10.0, flows: 0 })
        .unwrap_err();
    assert!(e.to_string().contains("--flows"), "{e}");
}

#[test]
fn fetch_fields() {
    let a = server();
    for bytes in [0u64, 1, 1 << 20] {
        let o =
            fetch::run(&fetch::Args { connect: a, bytes, count: 3, tfo: false, gap_ms: 1.0, timeout_s: 10.0 }).unwrap();
        assert_eq!(o.fetches.len(), 3);
        let v = serde_json::to_value(&o).unwrap();
        for f in v["fetches"].as_array().unwrap() {
            for k in ["ms", "connect_ms", "ttfb_ms", "syn_data", "syn_data_acked", "retrans", "snd_cwnd", "rtt_us"] {
                assert!(f.get(k).is_some(), "missing {k} in {f}");
            }
            assert!(f["ms"].as_f64().unwrap() >= f["connect_ms"].as_f64().unwrap());
            assert_eq!(f["syn_data"], false);
            assert!(f["snd_cwnd"].as_u64().unwrap() > 0);
            if bytes > 0 {
                assert!(f["ttfb_ms"].as_f64().unwrap() <= f["ms"].as_f64().unwrap());
            }
        }
    }
}

#[test]
fn bulk_goodput() {
    let a = server();
    let o = bulk::run(&bulk::Args { connect: a, seconds: 0.5, warmup: 0.2, timeout_s: 10.0 }).unwrap();
    assert!(o.bytes > 0 && o.goodput_bps > 0.0, "{o:?}");
    assert!(o.seconds >= 0.5 && o.seconds < 1.0, "{o:?}");
}

#[test]
fn udp_no_loss_on_loopback() {
    let a = server();
    let t = Instant::now();
    let o = udp::run(&udp::Args {
        connect: a,
        count: 5000,
        pps: 20000.0,
        size: 512,
        session: Some(42),
        wait_ms: 300.0,
        timeout_s: 10.0,
    })
    .unwrap();
    assert_eq!((o.sent, o.received, o.loss), (5000, 5000, 0.0), "{o:?}");
    assert!(o.missing.is_empty());
    // pacing: 5000 packets at 20 kpps = 0.25 s
    let el = t.elapsed().as_secs_f64();
    assert!(el > 0.5 && el < 2.0, "elapsed {el}");
    assert!((o.send_pps - 20000.0).abs() < 1000.0, "{o:?}");
}

#[test]
fn udp_missing_reported() {
    // send only some sequence numbers by hand, check the server's list
    let a = server();
    let s = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let mut buf = [0u8; 64];
    for seq in [0u64, 2, 3, 3, 1, 6] {
        udp::Header { session: 7, seq, total: 8 }.encode(&mut buf);
        s.send_to(&buf, a).unwrap();
    }
    std::thread::sleep(Duration::from_millis(100));
    let mut t = TcpStream::connect(a).unwrap();
    t.write_all(b"UDPSTAT 7\n").unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(&mut std::io::BufReader::new(&t), &mut line).unwrap();
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["received"], 5);
    assert_eq!(v["missing"], serde_json::json!([4, 5, 7]));
    assert_eq!(v["max_seq"], 6);
    assert_eq!(v["duplicates"], 1);
    assert_eq!(v["reordered"], 1);
}

#[test]
fn closed_port_fails_fast() {
    // grab a free port, then close it
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let a: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let t = Instant::now();
    let e = ping::run(&ping::Args { connect: a, count: 1, interval_ms: 0.0, warmup: 0, timeout_s: 10.0, flows: 1 })
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_secs(1));
    let msg = format!("{e:#}");
    assert!(msg.contains(&format!("connect {a}")) && msg.contains("refused"), "{msg}");
    let e = fetch::run(&fetch::Args { connect: a, bytes: 1, count: 1, tfo: true, gap_ms: 0.0, timeout_s: 10.0 })
        .unwrap_err();
    assert!(format!("{e:#}").contains("refused"), "{e:#}");
    assert!(bulk::run(&bulk::Args { connect: a, seconds: 0.2, warmup: 0.0, timeout_s: 10.0 }).is_err());
}

#[test]
fn silent_server_times_out() {
    // accepts but never answers
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = l.local_addr().unwrap();
    std::thread::spawn(move || {
        let mut keep = Vec::new();
        while let Ok((s, _)) = l.accept() {
            keep.push(s);
        }
    });
    let t = Instant::now();
    let e = ping::run(&ping::Args { connect: a, count: 1, interval_ms: 0.0, warmup: 0, timeout_s: 0.5, flows: 1 })
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(1500), "{:?}", t.elapsed());
    assert!(format!("{e:#}").contains("timed out"), "{e:#}");
    let t = Instant::now();
    let e = fetch::run(&fetch::Args { connect: a, bytes: 10, count: 1, tfo: false, gap_ms: 0.0, timeout_s: 0.5 })
        .unwrap_err();
    assert!(t.elapsed() < Duration::from_millis(1500));
    assert!(format!("{e:#}").contains("timed out"), "{e:#}");
}

/// TFO over loopback inside a throwaway network namespace (needs root and
/// iproute2; skipped otherwise). The namespace is entered by a thread of this
/// test only (setns), so the root namespace's sysctls are untouched.
#[test]
fn tfo_in_namespace() {
    let Some(ns) = crate::testutil::Netns::new(3) else { return };
    let before = ns.counter("TcpExtTCPFastOpenActive");
    let out = ns.enter(|| {
        let a = server(); // threads spawned here inherit the namespace
        fetch::run(&fetch::Args { connect: a, bytes: 100_000, count: 3, tfo: true, gap_ms: 0.0, timeout_s: 10.0 })
            .unwrap()
    });
    let after = ns.counter("TcpExtTCPFastOpenActive");
    let f = &out.fetches;
    assert!(!f[0].syn_data && !f[0].syn_data_acked, "first fetch has no cookie yet: {f:?}");
    assert!(f[1].syn_data && f[1].syn_data_acked && f[2].syn_data_acked, "{f:?}");
    assert!(after >= before + 2, "TcpExtTCPFastOpenActive {before} -> {after}");
}

#[test]
fn connect_timeout_when_syn_dropped() {
    // A listener whose accept queue is full drops further SYNs silently.
    let l = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    l.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    l.listen(0).unwrap();
    let a = l.local_addr().unwrap().as_socket().unwrap();
    let mut fill = Vec::new();
    for _ in 0..4 {
        if let Ok(s) = TcpStream::connect_timeout(&a, Duration::from_millis(300)) {
            fill.push(s);
        }
    }
    let t = Instant::now();
    let e = ping::run(&ping::Args { connect: a, count: 1, interval_ms: 0.0, warmup: 0, timeout_s: 0.7, flows: 1 })
        .unwrap_err();
    let el = t.elapsed();
    assert!(el >= Duration::from_millis(600) && el < Duration::from_millis(1500), "{el:?}");
    assert!(format!("{e:#}").contains("timed out"), "{e:#}");
}
