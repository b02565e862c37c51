//! Replay server tests on 127.0.0.1 (random ports): framing, matching, sessions, manifests.
use super::*;
use crate::testutil::loader::{load, obj, plan};
use crate::testutil::replay::start_server;
use crate::testutil::{sha256, tmpdir};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};

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
    let h = crate::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!(out.len() - h.head_len, 40000);
    // HTTP/1.1 + Connection: close: chunked as recorded
    let out = raw_exchange(srv.http, b"GET /ch HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n");
    let h = crate::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!(h.framing, crate::http::Framing::Chunked);
    let mut d = crate::http::BodyDecoder::new(h.framing);
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

/// (status, value of the X-Tag header or "", body length) of the single response in `out`.
fn tagged(out: &[u8]) -> (u16, String, usize) {
    let h = crate::http::parse_response_head(out, false).unwrap().unwrap();
    let head = String::from_utf8_lossy(&out[..h.head_len]).to_string();
    let tag = head.lines().find_map(|l| l.strip_prefix("X-Tag: ")).unwrap_or("").to_string();
    (h.status, tag, out.len() - h.head_len)
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
        let objs = urls
            .iter()
            .enumerate()
            .map(|(i, u)| obj(&format!("{scheme}://{u}"), &u[..6], addr, tls, (i > 0).then_some(0)))
            .collect();
        let out = load(plan(objs, Some(srv.dir.join("ca.pem")))).unwrap();
        out.requests.iter().map(|r| (r.status, r.bytes)).collect::<Vec<_>>()
    };
    // https: own recording; http-only one (HSTS upgrade); not the self-redirect; closest query
    let https = load(true);
    assert_eq!(
        (https[0], https[1], https[2].0, https[3], https[4]),
        ((200, 100), (200, 102), 404, (200, 104), (200, 104))
    );
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
        let req = format!(
            "POST /api HTTP/1.1\r\nHost: a.test\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
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
    let h = crate::http::parse_response_head(&out, false).unwrap().unwrap();
    assert_eq!((h.status, out.len() - h.head_len), (200, 5));
    let head = String::from_utf8_lossy(&out[..h.head_len]).to_string();
    let lines: Vec<&str> = head.split("\r\n").skip(1).filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines,
        [
            "Set-Cookie: a=1; Path=/",
            "Set-Cookie: b=2",
            "Link: <a.css>; rel=preload",
            "Link: <b.js>; rel=preload",
            "X-Ctl: v1\t2",
            "Content-Length: 5",
            "Connection: close"
        ]
    );
}

#[test]
fn manifest_errors_name_the_response() {
    let dir = tmpdir("merr");
    std::fs::write(dir.join("b.bin"), b"0123456789").unwrap();
    let err = |resp: serde_json::Value| {
        let m: manifest::Manifest = serde_json::from_value(serde_json::json!({
            "listen": [{"ip": "127.0.0.1", "port": 0}],
            "responses": [{"host": "a.test", "path": "/"}, resp],
        }))
        .unwrap();
        format!("{:#}", build_shared(&m).err().expect("an error"))
    };
    let e = err(
        serde_json::json!({"host": "www.a.com", "path": "/x.js", "body": {"file": dir.join("nope.bin"), "length": 1}}),
    );
    assert!(e.starts_with("response 1 (www.a.com/x.js): cannot read body file"), "{e}");
    let e = err(
        serde_json::json!({"host": "www.a.com", "path": "/x.js", "body": {"file": dir.join("b.bin"), "offset": 5, "length": 6}}),
    );
    assert!(e.starts_with("response 1 (www.a.com/x.js): body 5+6 beyond the end"), "{e}");
    let e = err(serde_json::json!({"scheme": "ftp", "host": "b.com", "path": "/y"}));
    assert!(e.starts_with("response 1 (b.com/y): scheme \"ftp\""), "{e}");
    let e = err(serde_json::json!({"method": "POST", "host": "b.com", "path": "/y", "body_sha256": "abc"}));
    assert!(e.starts_with("response 1 (b.com/y): body_sha256 \"abc\""), "{e}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn manifest_request_timeout_is_checked() {
    let dir = tmpdir("mto");
    let path = dir.join("m.json");
    let load = |extra: serde_json::Value| {
        let mut m = serde_json::json!({"listen": [{"ip": "127.0.0.1", "port": 0}], "responses": []});
        if let Some(o) = extra.as_object() {
            m.as_object_mut().unwrap().extend(o.clone());
        }
        std::fs::write(&path, m.to_string()).unwrap();
        manifest::load(&path).map(|m| m.request_timeout_ms).map_err(|e| format!("{e:#}"))
    };
    assert_eq!(load(serde_json::json!({})), Ok(120_000)); // the default
    for ms in [1, 86_400_000] {
        assert_eq!(load(serde_json::json!({"request_timeout_ms": ms})), Ok(ms));
    }
    for ms in [0, 86_400_001] {
        let e = load(serde_json::json!({"request_timeout_ms": ms})).unwrap_err();
        assert!(e.ends_with(&format!("request_timeout_ms {ms} is not from 1 to 86400000")), "{e}");
    }
    assert!(load(serde_json::json!({"request_timeout_ms": -1})).is_err());
    std::fs::remove_dir_all(dir).ok();
}

/// Manifest `keep_alive` false: every HTTP/1.1 answer (recorded or 404) says Connection: close
/// and its connection closes after it, the recorded response otherwise byte for byte the same;
/// a request pipelined behind it is not answered. Absent: kept alive (the default).
#[test]
fn without_keep_alive_each_response_closes_its_connection() {
    let r = serde_json::json!([
        {"host": "a.test", "path": "/ch", "body": {"synth": 40000}, "chunked": true,
         "headers": [["Transfer-Encoding", "chunked"], ["X-Rec", "yes"], ["Connection", "keep-alive"]]},
        {"host": "a.test", "path": "/cl", "body": {"synth": 5000}, "headers": [["X-Rec", "cl"]]},
    ]);
    let listen = serde_json::json!([{"ip": "127.0.0.1", "port": 0, "tls": false}]);
    let on = crate::testutil::replay::start_server_with(listen.clone(), r.clone(), serde_json::json!({}));
    let off = crate::testutil::replay::start_server_with(listen, r, serde_json::json!({"keep_alive": false}));
    assert!(on.shared.keep_alive && !off.shared.keep_alive);
    for path in ["/ch", "/cl", "/missing"] {
        let req = format!("GET {path} HTTP/1.1\r\nHost: a.test\r\nConnection: keep-alive\r\n\r\n");
        // kept alive: the server waits for the next request (the read times out)
        let mut s = TcpStream::connect(on.http).unwrap();
        s.set_read_timeout(Some(std::time::Duration::from_millis(300))).unwrap();
        s.write_all(req.as_bytes()).unwrap();
        let mut kept = Vec::new();
        let e = s.read_to_end(&mut kept).unwrap_err();
        assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut), "{e}");
        // not kept: the same answer but for its Connection field, then the end of the stream
        // (raw_exchange reads to it; a second request in the same write gets no answer)
        let closed = raw_exchange(off.http, format!("{req}{req}").as_bytes());
        let (hk, hc) = (
            crate::http::parse_response_head(&kept, false).unwrap().unwrap(),
            crate::http::parse_response_head(&closed, false).unwrap().unwrap(),
        );
        assert!(hk.keep_alive && !hc.keep_alive, "{path}");
        assert_eq!((hk.status, hk.framing), (hc.status, hc.framing), "{path}");
        assert_eq!(kept[hk.head_len..], closed[hc.head_len..], "{path}: the body as recorded");
        let text = String::from_utf8_lossy(&closed[..hc.head_len]).to_string();
        let want = String::from_utf8_lossy(&kept[..hk.head_len])
            .replace("Connection: keep-alive\r\n", "Connection: close\r\n");
        assert_eq!(text, want, "{path}");
        assert_eq!(text.matches("Connection:").count(), 1, "{text}");
    }
    let st = off.shared.stats.json();
    assert_eq!((st["h1_connections"].as_u64(), st["h1_requests"].as_u64()), (Some(3), Some(3)), "{st}");
    assert_eq!(st["requests"], 3);
}
