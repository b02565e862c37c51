//! The replay server under hostile clients (loopback, bounded in connections and time):
//! malformed framing gets its status code (never a reset), error bodies stay short,
//! a low open-file limit delays connections without losing them.
use super::tests::{start_server, TestServer};
use crate::http::{parse_response_head, BodyDecoder};
use rand::{RngCore, SeedableRng};
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// Sends `req` in one write and reads until the server closes. A reset or a read
/// timeout fails the test: every answer must arrive whole.
fn exchange(addr: SocketAddr, req: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    s.write_all(req).unwrap();
    let mut out = Vec::new();
    s.read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("{e} after {} bytes: {:?}", out.len(), String::from_utf8_lossy(&out)));
    out
}

fn status(out: &[u8]) -> u16 {
    parse_response_head(out, false).ok().flatten().map_or(0, |h| h.status)
}

/// (status, X-Tag or "", body) of each response in `out`, in order.
fn responses(mut out: &[u8]) -> Vec<(u16, String, Vec<u8>)> {
    let mut v = Vec::new();
    while !out.is_empty() {
        let h = parse_response_head(out, false).unwrap().unwrap();
        let head = String::from_utf8_lossy(&out[..h.head_len]).to_string();
        let tag = head.lines().find_map(|l| l.strip_prefix("X-Tag: ")).unwrap_or("").to_string();
        let mut body = Vec::new();
        let mut d = BodyDecoder::new(h.framing);
        let used = d.feed_with(&out[h.head_len..], |p| body.extend_from_slice(p)).unwrap();
        assert!(d.is_done(), "truncated response {head}");
        v.push((h.status, tag, body));
        out = &out[h.head_len + used..];
    }
    v
}

fn server() -> TestServer {
    let mut r = vec![
        serde_json::json!({"host": "a.test", "path": "/", "headers": [["X-Tag", "root"]], "body": {"synth": 100}}),
    ];
    for i in 0..100 {
        r.push(serde_json::json!({"host": "a.test", "path": format!("/p{i}"), "headers": [["X-Tag", format!("t{i}")]],
            "body": {"synth": 10 + i}, "chunked": i % 2 == 0}));
    }
    r.push(serde_json::json!({"method": "POST", "host": "a.test", "path": "/api", "headers": [["X-Tag", "api"]]}));
    start_server(serde_json::Value::Array(r), false)
}

/// Each malformed framing gets its status code, Connection: close and a short body, and
/// arrives whole (no reset) even when the client sent much more than the server read.
#[test]
fn malformed_framing_gets_a_status_not_a_reset() {
    let srv = server();
    let post =
        |extra: &str, body: &str| format!("POST /api HTTP/1.1\r\nHost: a.test\r\n{extra}\r\n{body}").into_bytes();
    let many: String = (0..200).map(|i| format!("X-{i}: 1\r\n")).collect();
    let mut huge = b"GET / HTTP/1.1\r\nHost: a.test\r\nX-Big: ".to_vec();
    huge.resize(1 << 20, b'a'); // a 1 MB head, all sent before reading
    let cases: Vec<(&str, Vec<u8>, u16)> = vec![
        ("conflicting Content-Length", post("Content-Length: 3\r\nContent-Length: 4\r\n", "abcd"), 400),
        ("Content-Length list", post("Content-Length: 3, 4\r\n", "abcd"), 400),
        (
            "Content-Length + chunked",
            post("Content-Length: 3\r\nTransfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n\r\n"),
            400,
        ),
        ("non-numeric Content-Length", post("Content-Length: abc\r\n", ""), 400),
        ("negative Content-Length", post("Content-Length: -3\r\n", "abc"), 400),
        ("overflowing Content-Length", post("Content-Length: 184467440737095516160\r\n", "abc"), 400),
        ("bad chunk size", post("Transfer-Encoding: chunked\r\n", "zz\r\nabc\r\n0\r\n\r\n"), 400),
        ("overflowing chunk size", post("Transfer-Encoding: chunked\r\n", "fffffffffffffffff\r\nabc\r\n"), 400),
        ("bad chunk terminator", post("Transfer-Encoding: chunked\r\n", "3\r\nabcXY0\r\n\r\n"), 400),
        ("chunked not last", post("Transfer-Encoding: chunked, gzip\r\n", ""), 400),
        ("unsupported coding", post("Transfer-Encoding: gzip, chunked\r\n", "0\r\n\r\n"), 501),
        ("two Host headers", post("Host: b.test\r\n", ""), 400),
        ("too many headers", format!("GET / HTTP/1.1\r\nHost: a.test\r\n{many}\r\n").into_bytes(), 431),
        ("1 MB head", huge, 431),
        ("garbage", b"\x16\x03\x01\x02\x00 nonsense\r\n\r\n".to_vec(), 400),
    ];
    for (what, req, code) in &cases {
        let out = exchange(srv.http, req);
        let text = String::from_utf8_lossy(&out);
        assert_eq!(status(&out), *code, "{what}: {text}");
        assert!(text.contains("\r\nConnection: close\r\n") && out.len() < 400, "{what}: {text}");
        let r = responses(&out);
        assert_eq!(r.len(), 1, "{what}: {text}");
    }
    assert_eq!(srv.shared.stats.bad_requests.load(Relaxed), cases.len() as u64);
    // a sound request still works, also after a request body
    let out = exchange(srv.http, &post("Content-Length: 3\r\nConnection: close\r\n", "abc"));
    assert_eq!(responses(&out)[0].1, "api");
}

/// A 404 quotes the URL cut to 256 bytes; so do the stats.
#[test]
fn not_found_bodies_are_bounded() {
    let srv = server();
    let long = format!("/{}", "x".repeat(30_000));
    let out =
        exchange(srv.http, format!("GET {long}?q=1 HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n").as_bytes());
    let r = responses(&out);
    assert_eq!(r[0].0, 404);
    let body = String::from_utf8_lossy(&r[0].2).to_string();
    assert!(body.len() < 350 && body.contains("a.test/xxxx") && body.ends_with("...\n"), "{body}");
    // a long method and a long Host header are cut as well
    let m = "M".repeat(5000);
    let h = "h".repeat(5000);
    let out = exchange(srv.http, format!("{m} /p1 HTTP/1.1\r\nHost: {h}\r\nConnection: close\r\n\r\n").as_bytes());
    assert!(out.len() < 700 && status(&out) == 404, "{}", out.len());
    let st = srv.shared.stats.json();
    let urls = st["not_found_urls"].as_array().unwrap();
    assert_eq!(urls.len(), 2, "{st}");
    for u in urls {
        let u = u["url"].as_str().unwrap();
        assert!(u.len() <= 256 && u.ends_with("..."), "{u}");
    }
    // a target with multi-byte characters where "http://" would end (this once aborted the server)
    let out = exchange(srv.http, "GET éééé HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n".as_bytes());
    assert_eq!(status(&out), 404);
}

/// One server, a few hundred hostile connections within a few seconds; it keeps answering.
#[test]
fn hostile_clients_do_not_stop_the_server() {
    let srv = server();
    let t0 = Instant::now();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(12);
    // stalled half-written requests, held open throughout
    let stalled: Vec<TcpStream> = (0..60)
        .map(|i| {
            let mut s = connect(srv.http);
            let req = b"GET /p1 HTTP/1.1\r\nHost: a.test\r\nX-Pad: 1234567890\r\n";
            s.write_all(&req[..(i * 7) % req.len() + 1]).unwrap();
            s
        })
        .collect();
    // garbage: answered with a 4xx or closed, never left hanging
    let mut refused = 0;
    for i in 0..40 {
        let mut g = vec![0u8; 1 + (rng.next_u32() % 3000) as usize];
        rng.fill_bytes(&mut g);
        if i % 4 == 0 {
            g.extend_from_slice(b"\r\n\r\n");
        }
        let mut s = connect(srv.http);
        s.write_all(&g).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        s.read_to_end(&mut out).unwrap();
        let code = status(&out);
        assert!(out.is_empty() || (400..=501).contains(&code), "{:?}", String::from_utf8_lossy(&out));
        refused += usize::from(code >= 400);
    }
    assert!(refused >= 30, "{refused} of 40 garbage requests answered");
    // oversized heads, the client still sending
    for _ in 0..5 {
        let mut big = b"GET / HTTP/1.1\r\nHost: a.test\r\nCookie: ".to_vec();
        big.resize(600_000, b'c');
        assert_eq!(status(&exchange(srv.http, &big)), 431);
    }
    // 100 pipelined requests in one write (every 10th a miss), answered in order
    let mut req = Vec::new();
    for i in 0..100 {
        let path = if i % 10 == 9 { format!("/missing{i}") } else { format!("/p{i}") };
        let close = if i == 99 { "Connection: close\r\n" } else { "" };
        req.extend_from_slice(format!("GET {path} HTTP/1.1\r\nHost: a.test\r\n{close}\r\n").as_bytes());
    }
    let r = responses(&exchange(srv.http, &req));
    assert_eq!(r.len(), 100);
    for (i, (code, tag, body)) in r.iter().enumerate() {
        if i % 10 == 9 {
            assert!(*code == 404 && String::from_utf8_lossy(body).contains(&format!("/missing{i}")), "{i}");
        } else {
            assert_eq!((*code, tag.as_str(), body.len()), (200, format!("t{i}").as_str(), 10 + i), "{i}");
        }
    }
    // TLS garbage on the https port: random bytes, a record header promising more than
    // comes, plain HTTP; each connection ends (closed by the server or at the client's EOF)
    for i in 0..30 {
        let mut s = connect(srv.https);
        let g: Vec<u8> = match i % 3 {
            0 => {
                let mut g = vec![0u8; 1 + (rng.next_u32() % 2000) as usize];
                rng.fill_bytes(&mut g);
                g
            }
            1 => vec![22, 3, 1, 0x40, 0x00, 1, 0, 0x3f, 0xfc, 3, 3],
            _ => b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n".to_vec(),
        };
        s.write_all(&g).unwrap();
        s.shutdown(std::net::Shutdown::Write).unwrap();
        let mut out = Vec::new();
        let _ = s.read_to_end(&mut out); // a reset is fine here: TLS alerts may race the close
        assert!(!out.starts_with(b"HTTP/"), "{i}");
    }
    // the stalled connections are still open, and the server still answers
    for s in &stalled {
        s.set_nonblocking(true).unwrap();
        let mut b = [0u8; 1];
        let e = (&*s).read(&mut b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
    }
    let r = responses(&exchange(srv.http, b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n"));
    assert_eq!((r[0].0, r[0].1.as_str()), (200, "root"));
    drop(stalled);
    let st = srv.shared.stats.json();
    assert!(st["tls_handshake_errors"].as_u64().unwrap() >= 30, "{st}");
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
}

/// The JSON object with this "event" in a line of the child's stdout (libtest may
/// print "test ... " before it on the same line).
fn json_event(line: &str, event: &str) -> Option<serde_json::Value> {
    let v: serde_json::Value = serde_json::from_str(&line[line.find('{')?..]).ok()?;
    (v["event"] == event).then_some(v)
}

const CHILD_ENV: &str = "PLTLAB_TEST_REPLAY_CHILD_MANIFEST";

/// A replay process with a hard limit of 40 open files (soft 20, which the server raises
/// to 40) gets 200 simultaneous connections, each held 200 ms after its answer: each one
/// is answered within the time bound, accept errors are counted, and stderr carries at
/// most about one line a second.
#[test]
fn open_file_limit_delays_but_answers_every_connection() {
    if let Ok(m) = std::env::var(CHILD_ENV) {
        // the child: this very test binary, run as a replay server
        super::run(super::Args { manifest: m.into() }).unwrap();
        return;
    }
    use std::os::unix::process::CommandExt;
    let dir = std::env::temp_dir().join(format!("pltlab-rp-nofile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let manifest = dir.join("manifest.json");
    let m = serde_json::json!({"listen": [{"ip": "127.0.0.1", "port": 0, "tls": false}], "tfo_queue": 0,
        "responses": [{"host": "a.test", "path": "/", "body": {"synth": 2000}}]});
    std::fs::write(&manifest, m.to_string()).unwrap();
    let mut cmd = std::process::Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "replay::hostile_tests::open_file_limit_delays_but_answers_every_connection",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD_ENV, &manifest)
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped());
    // SAFETY: only async-signal-safe setrlimit between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            let r = libc::rlimit { rlim_cur: 20, rlim_max: 40 };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &r) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let stderr = child.stderr.take().unwrap();
    let err_lines =
        std::thread::spawn(move || std::io::BufReader::new(stderr).lines().map_while(Result::ok).collect::<Vec<_>>());
    let ready = loop {
        let mut l = String::new();
        assert!(stdout.read_line(&mut l).unwrap() > 0, "child ended before its ready line");
        if let Some(v) = json_event(&l, "ready") {
            break v;
        }
    };
    let addr: SocketAddr = ready["listen"][0]["addr"].as_str().unwrap().parse().unwrap();
    let limits = std::fs::read_to_string(format!("/proc/{}/limits", child.id())).unwrap();
    let nofile =
        limits.lines().find(|l| l.starts_with("Max open files")).unwrap().split_whitespace().collect::<Vec<_>>();
    assert_eq!(nofile[3..5], ["40", "40"], "soft limit raised to the hard one: {limits}");

    let t0 = Instant::now();
    let clients: Vec<_> = (0..200)
        .map(|_| {
            std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
                s.write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n").unwrap();
                let mut out = Vec::new();
                let r = s.read_to_end(&mut out).map(|_| (status(&out), out.len()));
                // hold the connection (the server lingers until the client closes), so that
                // descriptors stay short for a while
                std::thread::sleep(Duration::from_millis(200));
                r
            })
        })
        .collect();
    for c in clients {
        let (code, n) = c.join().unwrap().expect("answered within the read timeout");
        assert_eq!(code, 200);
        assert!(n > 2000);
    }
    let took = t0.elapsed();
    unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
    let mut rest = String::new();
    stdout.read_to_string(&mut rest).unwrap();
    child.wait().unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let stats = rest.lines().rev().find_map(|l| json_event(l, "stats")).expect("a stats line");
    let errs = err_lines.join().unwrap();
    assert_eq!(stats["requests"], 200, "{stats}");
    assert!(stats["accept_errors"].as_u64().unwrap() > 0, "the limit was reached: {stats}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    assert!(errs.len() as f64 <= took.as_secs_f64() + 2.0, "{} stderr lines in {took:?}: {errs:?}", errs.len());
    assert!(errs.iter().all(|l| l.contains("accept")), "{errs:?}");
}

use std::sync::atomic::Ordering::Relaxed;
