//! Request heads. Parsing is the replay server's, strict: httparse, then the framing rules of
//! RFC 9112 (one unambiguous body length, or a refusal with a status code). Writing is the
//! loader's: a request line with an origin-form target, Host, then the caller's header lines.
use std::borrow::Cow;

use super::{keep_alive, Framing};

/// Largest request head (request line + header lines + blank line); larger gets 431.
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Most header lines in one request head; more gets 431.
pub const MAX_HEADERS: usize = 100;

#[derive(Debug)]
pub struct Request {
    pub method: String,
    pub target: String,
    pub host: Option<String>,
    pub minor: u8,
    pub keep_alive: bool,
    pub body: Framing,
    pub head_len: usize,
    pub expect_continue: bool,
}

/// A request a server will not serve: to be answered with `status`, `reason` saying why, and
/// the connection closed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reject {
    pub status: u16,
    pub reason: Cow<'static, str>,
}

fn bad(reason: &'static str) -> Reject {
    Reject { status: 400, reason: reason.into() }
}

impl Reject {
    pub fn head_too_large() -> Reject {
        Reject { status: 431, reason: "request head larger than 65536 bytes".into() }
    }

    /// For a request body whose chunked framing is broken (bad size line or terminator).
    pub fn bad_chunked_body() -> Reject {
        bad("malformed chunked request body")
    }
}

/// Whether a head may have ended in `buf[from..]`: a blank line ("\n\n" or
/// "\n\r\n") ends there. `from` should step back 2 bytes over what was there
/// before, so that a blank line split across reads is found.
pub fn may_end_head(buf: &[u8], from: usize) -> bool {
    let w = &buf[from.min(buf.len())..];
    w.windows(2).any(|p| p == b"\n\n") || w.windows(3).any(|p| p == b"\n\r\n")
}

/// A Content-Length value: digits only (a list of equal values, "5, 5", allowed as one).
fn content_length(v: &[u8]) -> Result<u64, Reject> {
    let s = std::str::from_utf8(v).map_err(|_| bad("bad Content-Length"))?;
    let mut out: Option<u64> = None;
    for part in s.split(',') {
        let p = part.trim_matches([' ', '\t']);
        if p.is_empty() || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad("bad Content-Length"));
        }
        let n: u64 = p.parse().map_err(|_| bad("Content-Length too large"))?;
        if out.is_some_and(|o| o != n) {
            return Err(bad("conflicting Content-Length values"));
        }
        out = Some(n);
    }
    out.ok_or_else(|| bad("bad Content-Length"))
}

/// Parses a request head from `buf`. Ok(None) = incomplete (and within the limit).
pub fn parse_request(buf: &[u8]) -> Result<Option<Request>, Reject> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Request::new(&mut headers);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) if n <= MAX_HEAD_BYTES => n,
        Ok(httparse::Status::Complete(_)) => return Err(Reject::head_too_large()),
        Ok(httparse::Status::Partial) if buf.len() >= MAX_HEAD_BYTES => return Err(Reject::head_too_large()),
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => {
            return Err(Reject { status: 431, reason: format!("more than {MAX_HEADERS} header fields").into() })
        }
        // httparse's messages are short fixed strings
        Err(e) => return Err(Reject { status: 400, reason: format!("malformed request head: {e}").into() }),
    };
    let minor = r.version.unwrap_or(1);
    let mut host: Option<String> = None;
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut length: Option<u64> = None;
    let mut codings: Option<Vec<String>> = None;
    let mut expect_continue = false;
    for h in r.headers.iter() {
        let name = h.name;
        if name.eq_ignore_ascii_case("host") {
            if host.is_some() {
                return Err(bad("more than one Host header"));
            }
            let v = std::str::from_utf8(h.value).map_err(|_| bad("bad Host header"))?;
            host = Some(v.trim().to_string());
        } else if name.eq_ignore_ascii_case("connection") {
            conn_close |= super::has_token(h.value, "close");
            conn_keep |= super::has_token(h.value, "keep-alive");
        } else if name.eq_ignore_ascii_case("content-length") {
            let l = content_length(h.value)?;
            if length.is_some_and(|o| o != l) {
                return Err(bad("conflicting Content-Length values"));
            }
            length = Some(l);
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            let c = codings.get_or_insert_with(Vec::new);
            for t in String::from_utf8_lossy(h.value).split(',') {
                let t = t.trim_matches([' ', '\t']);
                if !t.is_empty() {
                    c.push(t.to_ascii_lowercase());
                }
            }
        } else if name.eq_ignore_ascii_case("expect") {
            expect_continue = String::from_utf8_lossy(h.value).trim().eq_ignore_ascii_case("100-continue");
        }
    }
    let body = match (codings, length) {
        (None, None) => Framing::Empty,
        (None, Some(l)) => Framing::Length(l),
        // RFC 9112 6.3: a server may reject both, or let chunked win; both is a smuggling
        // pattern, so refuse it.
        (Some(_), Some(_)) => return Err(bad("both Content-Length and Transfer-Encoding")),
        (Some(_), None) if minor == 0 => return Err(bad("Transfer-Encoding in an HTTP/1.0 request")),
        (Some(c), None) => {
            let chunked = c.iter().filter(|t| t.as_str() == "chunked").count();
            // chunked must come last, once (RFC 9112 6.1: else the length is unknown -> 400)
            if chunked != 1 || c.last().map(String::as_str) != Some("chunked") {
                return Err(bad("Transfer-Encoding does not end with chunked"));
            }
            if c.len() > 1 {
                return Err(Reject { status: 501, reason: "unsupported transfer coding".into() });
            }
            Framing::Chunked
        }
    };
    Ok(Some(Request {
        method: r.method.unwrap_or("GET").to_string(),
        target: r.path.unwrap_or("/").to_string(),
        host: host.filter(|h| !h.is_empty()),
        minor,
        keep_alive: keep_alive(minor, conn_close, conn_keep),
        body,
        head_len: n,
        expect_continue,
    }))
}

/// Request target (origin-form) of a URL: "/path?query" (fragment dropped).
pub fn target_of(url: &str) -> String {
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => return if url.starts_with('/') { url.split('#').next().unwrap().to_string() } else { "/".into() },
    };
    let t = match rest.find(['/', '?']) {
        Some(i) => &rest[i..],
        None => "/",
    };
    let t = t.split('#').next().unwrap_or("/");
    if t.starts_with('?') {
        format!("/{t}")
    } else {
        t.to_string()
    }
}

/// A request head without body: "METHOD target HTTP/1.1", Host (with ":port" unless the
/// scheme's default), then `headers`, then the blank line.
pub fn write_request(method: &str, url: &str, host: &str, port: u16, tls: bool, headers: &[(&str, &str)]) -> Vec<u8> {
    use std::fmt::Write;
    let default_port = if tls { 443 } else { 80 };
    let mut out = String::with_capacity(256);
    // writing to a String cannot fail
    let _ = write!(out, "{} {} HTTP/1.1\r\nHost: {host}", method.to_ascii_uppercase(), target_of(url));
    if port != default_port {
        let _ = write!(out, ":{port}");
    }
    out.push_str("\r\n");
    for (k, v) in headers {
        let _ = write!(out, "{k}: {v}\r\n");
    }
    out.push_str("\r\n");
    out.into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(raw: &str) -> Option<u16> {
        match parse_request(raw.as_bytes()) {
            Ok(Some(_)) => Some(200),
            Ok(None) => None,
            Err(r) => Some(r.status),
        }
    }

    #[test]
    fn framing_rules() {
        let head = |extra: &str| format!("POST / HTTP/1.1\r\nHost: a.test\r\n{extra}\r\n");
        let body = |extra: &str| parse_request(head(extra).as_bytes()).unwrap().unwrap().body;
        assert_eq!(body(""), Framing::Empty);
        assert_eq!(body("Content-Length: 5\r\n"), Framing::Length(5));
        assert_eq!(body("Content-Length: 5\r\ncontent-length: 5\r\n"), Framing::Length(5));
        assert_eq!(body("Content-Length: 5, 5\r\n"), Framing::Length(5));
        assert_eq!(body("Transfer-Encoding: Chunked\r\n"), Framing::Chunked);
        for (extra, code) in [
            ("Content-Length: 5\r\nContent-Length: 6\r\n", 400),
            ("Content-Length: 5, 6\r\n", 400),
            ("Content-Length: -1\r\n", 400),
            ("Content-Length: +5\r\n", 400),
            ("Content-Length: 0x10\r\n", 400),
            ("Content-Length: \r\n", 400),
            ("Content-Length: 99999999999999999999999\r\n", 400),
            ("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n", 400),
            ("Transfer-Encoding: chunked, gzip\r\n", 400),
            ("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n", 400),
            ("Transfer-Encoding: identity\r\n", 400),
            ("Transfer-Encoding: \r\n", 400),
            ("Transfer-Encoding: gzip, chunked\r\n", 501),
            ("Host: b.test\r\n", 400),
        ] {
            assert_eq!(status(&head(extra)), Some(code), "{extra:?}");
        }
        assert_eq!(status("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), Some(400));
    }

    #[test]
    fn keep_alive_and_expect() {
        let req = |raw: &str| parse_request(raw.as_bytes()).unwrap().unwrap();
        assert!(req("GET / HTTP/1.1\r\n\r\n").keep_alive);
        assert!(!req("GET / HTTP/1.1\r\nConnection: Upgrade, close\r\n\r\n").keep_alive);
        assert!(!req("GET / HTTP/1.0\r\n\r\n").keep_alive);
        assert!(req("GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n").keep_alive);
        let r = req("POST /x?y HTTP/1.1\r\nHost:  a.test \r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n");
        assert!(r.expect_continue);
        assert_eq!(
            (r.method.as_str(), r.target.as_str(), r.host.as_deref(), r.minor),
            ("POST", "/x?y", Some("a.test"), 1)
        );
        assert_eq!(req("GET / HTTP/1.1\r\nHost: \r\n\r\n").host, None);
    }

    #[test]
    fn head_limits() {
        let big = format!("GET / HTTP/1.1\r\nX: {}\r\n\r\n", "a".repeat(MAX_HEAD_BYTES));
        assert_eq!(status(&big), Some(431));
        assert_eq!(status(&big[..MAX_HEAD_BYTES]), Some(431));
        assert_eq!(status(&big[..MAX_HEAD_BYTES - 1]), None);
        let many: String = (0..=MAX_HEADERS).map(|i| format!("X-{i}: 1\r\n")).collect();
        assert_eq!(status(&format!("GET / HTTP/1.1\r\n{many}\r\n")), Some(431));
        assert_eq!(status("\x01\x02 nonsense\r\n\r\n"), Some(400));
    }

    #[test]
    fn blank_line_detection() {
        assert!(may_end_head(b"GET / HTTP/1.1\r\n\r\n", 0));
        assert!(may_end_head(b"GET / HTTP/1.1\n\n", 10));
        assert!(!may_end_head(b"GET / HTTP/1.1\r\nHost: a\r\n", 0));
        assert!(!may_end_head(b"ab", 5));
    }

    #[test]
    fn targets_and_written_requests() {
        assert_eq!(target_of("https://a.b/x/y?q=1#f"), "/x/y?q=1");
        assert_eq!(target_of("http://a.b"), "/");
        assert_eq!(target_of("http://a.b?x"), "/?x");
        assert_eq!(target_of("/p#f"), "/p");
        assert_eq!(target_of("nonsense"), "/");
        let r = write_request("get", "http://a.test:8080/x?y#z", "a.test", 8080, false, &[("Accept", "*/*")]);
        assert_eq!(r, b"GET /x?y HTTP/1.1\r\nHost: a.test:8080\r\nAccept: */*\r\n\r\n");
        let r = write_request("HEAD", "https://a.test/", "a.test", 443, true, &[]);
        assert_eq!(r, b"HEAD / HTTP/1.1\r\nHost: a.test\r\n\r\n");
        let p = parse_request(&write_request("GET", "http://a.test/", "a.test", 80, false, &[])).unwrap().unwrap();
        assert_eq!((p.host.as_deref(), p.body), (Some("a.test"), Framing::Empty));
    }
}
