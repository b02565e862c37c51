//! Minimal HTTP/1.x face of the probe server, so `pltlab shell` origins answer curl/wget/browsers:
//! `GET /bytes/N` -> N bytes of application/octet-stream, `GET /` -> a short text page, else 404.
//! Keep-alive as HTTP/1.1 defines it (HTTP/1.0 closes unless asked to keep alive).
use std::io::{BufRead, Write};

/// Whether a request line looks like HTTP (`METHOD TARGET HTTP/1.x`).
pub fn is_http(line: &str) -> bool {
    let mut it = line.split_ascii_whitespace();
    matches!((it.next(), it.next(), it.next(), it.next()),
             (Some(_), Some(_), Some(v), None) if v.starts_with("HTTP/1."))
}

/// Serve one HTTP request whose request line was already read. Returns whether to keep the
/// connection open.
pub fn serve<R: BufRead, W: Write>(line: &str, rd: &mut R, w: &mut W, data: &[u8]) -> std::io::Result<bool> {
    let mut parts = line.split_ascii_whitespace();
    let (method, target, version) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""),
                                     parts.next().unwrap_or(""));
    let mut keep = version == "HTTP/1.1";
    let mut hdr = String::new();
    loop {
        hdr.clear();
        if rd.read_line(&mut hdr)? == 0 {
            return Ok(false);
        }
        let h = hdr.trim_end();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            if k.eq_ignore_ascii_case("connection") {
                let v = v.trim();
                keep = if v.eq_ignore_ascii_case("close") { false }
                       else if v.eq_ignore_ascii_case("keep-alive") { true } else { keep };
            }
        }
    }
    let conn = if keep { "keep-alive" } else { "close" };
    let head_only = method == "HEAD";
    let (status, ctype, len, body): (&str, &str, u64, Option<&[u8]>) = match target {
        "/" => ("200 OK", "text/plain", INDEX.len() as u64, Some(INDEX.as_bytes())),
        t if t.starts_with("/bytes/") => match t["/bytes/".len()..].parse::<u64>() {
            Ok(n) => ("200 OK", "application/octet-stream", n, None),
            Err(_) => ("400 Bad Request", "text/plain", 12, Some(b"bad length\r\n".as_slice())),
        },
        _ => ("404 Not Found", "text/plain", 11, Some(b"not found\r\n".as_slice())),
    };
    let (status, len, body) = if method == "GET" || head_only { (status, len, body) }
                              else { ("405 Method Not Allowed", 0, Some(b"".as_slice())) };
    write!(w, "{version} {status}\r\nServer: pltlab-probe\r\nContent-Type: {ctype}\r\n\
               Content-Length: {len}\r\nConnection: {conn}\r\n\r\n",
           version = if version == "HTTP/1.0" { "HTTP/1.0" } else { "HTTP/1.1" })?;
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
        let keep = serve(line, &mut rd, &mut out, &[b'x'; 64]).unwrap();
        (String::from_utf8(out).unwrap(), keep)
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
    }
}
