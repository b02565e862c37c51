//! Minimal HTTP/1.x face of the probe server, so `pltlab shell` origins answer curl/wget/browsers:
//! `GET /bytes/N` -> N bytes of application/octet-stream, `GET /` -> a short text page, else 404.
//! Heads are parsed and written by the shared codec (crate::http): keep-alive as HTTP/1.1
//! defines it (HTTP/1.0 closes unless asked to keep alive), bad heads get 400/431 and a close.
use std::io::{BufRead, Write};

use crate::http::{self, response, Framing};

/// Whether a request line looks like HTTP (`METHOD TARGET HTTP/1.x`).
pub fn is_http(line: &str) -> bool {
    let mut it = line.split_ascii_whitespace();
    matches!((it.next(), it.next(), it.next(), it.next()),
             (Some(_), Some(_), Some(v), None) if v.starts_with("HTTP/1."))
}

/// Serve one HTTP request whose request line was already read. Returns whether to keep the
/// connection open: as the client asks, unless `keep_alive` is false (`probe serve
/// --no-keep-alive`: every response says Connection: close).
pub fn serve<R: BufRead, W: Write>(
    line: &str,
    rd: &mut R,
    w: &mut W,
    data: &[u8],
    keep_alive: bool,
) -> std::io::Result<bool> {
    // the rest of the head, up to its blank line, then the whole head to the parser
    let mut head = format!("{line}\r\n").into_bytes();
    loop {
        let before = head.len();
        let limit = (http::request::MAX_HEAD_BYTES + 1).saturating_sub(before) as u64;
        if std::io::Read::take(&mut *rd, limit).read_until(b'\n', &mut head)? == 0 {
            return Ok(false);
        }
        if head.last() != Some(&b'\n') {
            break; // over the limit: the parser refuses it
        }
        if head[before..].iter().all(|b| b.is_ascii_whitespace()) {
            break;
        }
    }
    let req = match http::parse_request(&head) {
        Ok(Some(r)) => r,
        other => {
            let r = other.err().unwrap_or(http::Reject { status: 400, reason: "malformed request head".into() });
            w.write_all(&response::text(r.status, "text/plain", format!("{}\r\n", r.reason).as_bytes(), false))?;
            w.flush()?;
            return Ok(false);
        }
    };
    let keep = req.keep_alive && keep_alive;
    let head_only = req.method == "HEAD";
    let (status, ctype, len, body): (u16, &str, u64, Option<&[u8]>) = match req.target.as_str() {
        "/" => (200, "text/plain", INDEX.len() as u64, Some(INDEX.as_bytes())),
        t if t.starts_with("/bytes/") => match t["/bytes/".len()..].parse::<u64>() {
            Ok(n) => (200, "application/octet-stream", n, None),
            Err(_) => (400, "text/plain", 12, Some(b"bad length\r\n".as_slice())),
        },
        _ => (404, "text/plain", 11, Some(b"not found\r\n".as_slice())),
    };
    let (status, len, body) =
        if req.method == "GET" || head_only { (status, len, body) } else { (405, 0, Some(b"".as_slice())) };
    let mut out = Vec::with_capacity(160);
    response::status_line(&mut out, req.minor, status);
    out.extend_from_slice(format!("Server: pltlab-probe\r\nContent-Type: {ctype}\r\n").as_bytes());
    response::end_head(&mut out, Framing::Length(len), keep);
    w.write_all(&out)?;
    if !head_only {
        match body {
            Some(b) => w.write_all(b)?,
            None => {
                let mut n = len;
                while n > 0 {
                    let k = (n as usize).min(data.len());
                    w.write_all(&data[..k])?;
                    n -= k as u64;
                }
            }
        }
    }
    w.flush()?;
    Ok(keep)
}

const INDEX: &str = "pltlab origin: GET /bytes/N for N bytes\r\n";
#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn req(line: &str, headers: &str) -> (String, bool) {
        let mut rd = Cursor::new(headers.as_bytes().to_vec());
        let mut out = Vec::new();
        let keep = serve(line, &mut rd, &mut out, &[b'x'; 64], true).unwrap();
        (String::from_utf8(out).unwrap(), keep)
    }

    #[test]
    fn without_keep_alive_every_response_closes() {
        let mut rd = Cursor::new(b"Host: x\r\nConnection: keep-alive\r\n\r\n".to_vec());
        let mut out = Vec::new();
        assert!(!serve("GET /bytes/3 HTTP/1.1", &mut rd, &mut out, &[b'x'; 64], false).unwrap());
        assert!(String::from_utf8(out).unwrap().ends_with("Content-Length: 3\r\nConnection: close\r\n\r\nxxx"));
    }

    #[test]
    fn detects_http_request_lines() {
        assert!(is_http("GET /bytes/10 HTTP/1.1"));
        assert!(!is_http("GET 10"));
        assert!(!is_http("GET / FTP/1.0"));
    }

    #[test]
    fn bytes_with_exact_length_and_keepalive() {
        let (out, keep) = req("GET /bytes/100 HTTP/1.1", "Host: x\r\n\r\n");
        assert!(keep);
        let (head, body) = out.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK") && head.contains("Content-Length: 100"));
        assert_eq!(body.len(), 100);
    }

    #[test]
    fn http10_closes_unless_asked_and_unknown_is_404() {
        assert!(!req("GET / HTTP/1.0", "\r\n").1);
        assert!(req("GET / HTTP/1.0", "Connection: keep-alive\r\n\r\n").1);
        assert!(!req("GET / HTTP/1.1", "Connection: close\r\n\r\n").1);
        assert!(req("GET /nope HTTP/1.1", "\r\n").0.starts_with("HTTP/1.1 404"));
        let (out, _) = req("HEAD /bytes/5 HTTP/1.1", "\r\n");
        assert!(out.ends_with("\r\n\r\n") && out.contains("Content-Length: 5"));
        let (out, keep) = req("GET / HTTP/1.0", "\r\n");
        assert!(out.starts_with("HTTP/1.0 200 OK\r\nServer: pltlab-probe\r\nContent-Type: text/plain\r\n"), "{out}");
        assert!(out.contains("Connection: close\r\n\r\npltlab origin") && !keep);
        assert!(req("POST /bytes/3 HTTP/1.1", "\r\n").0.starts_with("HTTP/1.1 405 Method Not Allowed\r\n"));
        assert!(req("GET /bytes/x HTTP/1.1", "\r\n").0.starts_with("HTTP/1.1 400 Bad Request\r\n"));
    }

    #[test]
    fn bad_heads_are_refused_and_closed() {
        let (out, keep) = req("GET / HTTP/1.1", "Bad Header\r\n\r\n");
        assert!(out.starts_with("HTTP/1.1 400 Bad Request\r\n") && out.contains("Connection: close") && !keep, "{out}");
        let big = format!("X: {}\r\n\r\n", "a".repeat(70_000));
        let (out, keep) = req("GET / HTTP/1.1", &big);
        assert!(out.starts_with("HTTP/1.1 431 ") && !keep, "{out}");
        assert_eq!(req("GET / HTTP/1.1", "Host: x\r\n"), (String::new(), false), "EOF inside the head");
    }
}
