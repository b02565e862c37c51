//! Response heads: parsing (the loader) and writing (the replay server, the probe server).
use anyhow::{anyhow, bail, Result};

use super::{has_token, keep_alive, reason, status_has_no_body, Framing};

/// Most header lines in a response head the loader reads.
pub const MAX_HEADERS: usize = 128;
/// Largest response head the loader reads.
pub const MAX_HEAD_BYTES: usize = 256 * 1024;

#[derive(Debug, Clone)]
pub struct ResponseHead {
    pub status: u16,
    pub head_len: usize,
    pub framing: Framing,
    /// The connection may carry another request after this response.
    pub keep_alive: bool,
    /// Content-Encoding as sent (several header lines joined by ", "), "" if none.
    pub content_encoding: String,
    /// Every header line as received, in order (values lossily UTF-8).
    pub headers: Vec<(String, String)>,
}

/// Parses a response head from `buf` (the answer to a HEAD request if `head_request`: no
/// body). Ok(None) = incomplete.
pub fn parse_response_head(buf: &[u8], head_request: bool) -> Result<Option<ResponseHead>> {
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut r = httparse::Response::new(&mut headers);
    let n = match r.parse(buf).map_err(|e| anyhow!("malformed HTTP response head: {e}"))? {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => {
            if buf.len() > MAX_HEAD_BYTES {
                bail!("HTTP response head larger than {MAX_HEAD_BYTES} bytes");
            }
            return Ok(None);
        }
    };
    let status = r.code.unwrap_or(0);
    let minor = r.version.unwrap_or(1);
    let mut chunked = false;
    let mut length: Option<u64> = None;
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut content_encoding = String::new();
    let mut fields = Vec::with_capacity(r.headers.len());
    for h in r.headers.iter() {
        fields.push((h.name.to_string(), String::from_utf8_lossy(h.value).into_owned()));
        if h.name.eq_ignore_ascii_case("content-encoding") {
            let v = String::from_utf8_lossy(h.value);
            if !content_encoding.is_empty() {
                content_encoding.push_str(", ");
            }
            content_encoding.push_str(v.trim());
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if has_token(h.value, "chunked") {
                chunked = true;
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let s = std::str::from_utf8(h.value).unwrap_or("").trim();
            let v: u64 = s.parse().map_err(|_| anyhow!("bad Content-Length {s:?}"))?;
            if length.is_some_and(|old| old != v) {
                bail!("conflicting Content-Length headers");
            }
            length = Some(v);
        } else if h.name.eq_ignore_ascii_case("connection") {
            conn_close |= has_token(h.value, "close");
            conn_keep |= has_token(h.value, "keep-alive");
        }
    }
    let framing = if head_request || status_has_no_body(status) {
        Framing::Empty
    } else if chunked {
        Framing::Chunked
    } else if let Some(l) = length {
        Framing::Length(l)
    } else {
        Framing::Close
    };
    let keep_alive = framing != Framing::Close && keep_alive(minor, conn_close, conn_keep);
    Ok(Some(ResponseHead { status, head_len: n, framing, keep_alive, content_encoding, headers: fields }))
}

/// Appends a status line, "HTTP/1.<minor> <status> <reason>".
pub fn status_line(out: &mut Vec<u8>, minor: u8, status: u16) {
    let v: &[u8] = if minor == 0 { b"HTTP/1.0 " } else { b"HTTP/1.1 " };
    out.extend_from_slice(v);
    out.extend_from_slice(format!("{status} {}\r\n", reason(status)).as_bytes());
}

/// Appends the lines that end a head: the body's framing (Content-Length or
/// Transfer-Encoding: chunked; nothing for `Empty` or `Close`), Connection, the blank line.
pub fn end_head(out: &mut Vec<u8>, framing: Framing, keep_alive: bool) {
    match framing {
        Framing::Length(n) => out.extend_from_slice(format!("Content-Length: {n}\r\n").as_bytes()),
        Framing::Chunked => out.extend_from_slice(b"Transfer-Encoding: chunked\r\n"),
        Framing::Empty | Framing::Close => {}
    }
    out.extend_from_slice(if keep_alive { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
}

/// A whole short response: status line, Content-Type, Content-Length, Connection, body.
pub fn text(status: u16, content_type: &str, body: &[u8], keep_alive: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    status_line(&mut out, 1, status);
    out.extend_from_slice(format!("Content-Type: {content_type}\r\n").as_bytes());
    end_head(&mut out, Framing::Length(body.len() as u64), keep_alive);
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::{encode_chunked, BodyDecoder};

    fn head(raw: &str) -> ResponseHead {
        parse_response_head(raw.as_bytes(), false).unwrap().unwrap()
    }

    #[test]
    fn content_length() {
        let h = head("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloEXTRA");
        assert_eq!((h.status, h.head_len, h.framing), (200, 38, Framing::Length(5)));
        assert_eq!(h.headers, vec![("Content-Length".to_string(), "5".to_string())]);
        assert!(h.keep_alive);
        assert!(parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false).is_err());
        let two = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n";
        assert!(parse_response_head(two.as_bytes(), false).is_err());
    }

    #[test]
    fn partial_and_malformed_heads() {
        assert!(parse_response_head(b"HTTP/1.1 200 OK\r\nContent-Le", false).unwrap().is_none());
        assert!(parse_response_head(b"garbage\r\n\r\n", false).is_err());
        let big = format!("HTTP/1.1 200 OK\r\nX: {}", "a".repeat(MAX_HEAD_BYTES));
        assert!(parse_response_head(big.as_bytes(), false).is_err());
    }

    #[test]
    fn chunked_wins_over_length() {
        let h = head("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n");
        assert_eq!(h.framing, Framing::Chunked);
        let h = head("HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\ncontent-encoding: br\r\n\r\n");
        assert_eq!(h.content_encoding, "gzip, br");
    }

    #[test]
    fn close_delimited_and_keepalive_rules() {
        let h = head("HTTP/1.1 200 OK\r\n\r\n");
        assert_eq!(h.framing, Framing::Close);
        assert!(!h.keep_alive);
        assert!(!head("HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\n").keep_alive);
        assert!(head("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\n").keep_alive);
        assert!(!head("HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 1\r\n\r\n").keep_alive);
        for (s, head_req) in [("204 No Content", false), ("304 Not Modified", false), ("200 OK", true)] {
            let raw = format!("HTTP/1.1 {s}\r\nContent-Length: 10\r\n\r\n");
            let h = parse_response_head(raw.as_bytes(), head_req).unwrap().unwrap();
            assert_eq!(h.framing, Framing::Empty, "{s}");
            assert!(BodyDecoder::new(h.framing).is_done());
        }
    }

    #[test]
    fn written_heads_parse_back() {
        for (framing, keep) in [(Framing::Length(7), true), (Framing::Chunked, false), (Framing::Empty, true)] {
            let mut out = Vec::new();
            status_line(&mut out, 1, 200);
            out.extend_from_slice(b"X-A: 1\r\n");
            end_head(&mut out, framing, keep);
            let h = parse_response_head(&out, false).unwrap().unwrap();
            assert_eq!(h.head_len, out.len());
            // no framing header on a 200: the body runs to the close
            let want = if framing == Framing::Empty { Framing::Close } else { framing };
            assert_eq!((h.framing, h.keep_alive), (want, keep && want != Framing::Close));
        }
        let mut out = Vec::new();
        status_line(&mut out, 0, 404);
        assert_eq!(out, b"HTTP/1.0 404 Not Found\r\n");
        let t = text(400, "text/plain", b"no\n", false);
        assert_eq!(t, b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nno\n");
        let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        wire.extend_from_slice(&encode_chunked(b"hello", 2));
        let h = parse_response_head(&wire, false).unwrap().unwrap();
        let mut d = BodyDecoder::new(h.framing);
        assert_eq!(d.feed(&wire[h.head_len..]).unwrap(), wire.len() - h.head_len);
        assert!(d.is_done() && d.body_bytes == 5);
    }
}
