//! The short bounded answers of the replay server: refusals of requests it will not serve
//! (400/431/501, then close) and 404s, quoting what was asked for cut to a few hundred bytes.
use std::borrow::Cow;

use crate::http::{response, Framing, Reject};

/// URLs quoted in 404 bodies and in the stats' URL lists are cut to this many bytes.
pub const MAX_QUOTED_URL: usize = 256;
/// Methods quoted in 404 bodies are cut to this many bytes.
pub const MAX_QUOTED_METHOD: usize = 32;

/// `s` cut to at most `max` bytes (at a character boundary), "..." marking a cut.
pub fn quote(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max.saturating_sub(3);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}...", &s[..end]))
}

/// The whole answer to a refused request: status line, Connection: close, the reason as a
/// text body (bounded: reasons are short).
pub fn refusal(r: &Reject) -> Vec<u8> {
    let body = format!("pltlab replay: {}\n", r.reason);
    response::text(r.status, "text/plain", body.as_bytes(), false)
}

/// The body of a 404 (text/plain), quoting the method and URL cut to a few hundred bytes.
pub fn not_found_body(method: &str, url: &str) -> String {
    format!(
        "pltlab replay: no recorded response for {} {}\n",
        quote(method, MAX_QUOTED_METHOD),
        quote(url, MAX_QUOTED_URL)
    )
}

/// The 404 for a request no recording answers: its head appended to `head`, its body returned.
pub fn not_found(head: &mut Vec<u8>, method: &str, url: &str, keep_alive: bool) -> String {
    let body = not_found_body(method, url);
    response::status_line(head, 1, 404);
    head.extend_from_slice(b"Content-Type: text/plain\r\n");
    response::end_head(head, Framing::Length(body.len() as u64), keep_alive);
    body
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_cuts_at_char_boundaries() {
        assert_eq!(quote("abc", 3), "abc");
        assert_eq!(quote("abcdef", 5), "ab...");
        let s = "é".repeat(200);
        let q = quote(&s, 256);
        assert!(q.len() <= 256 && q.ends_with("...") && q.starts_with("éé"), "{q}");
    }

    #[test]
    fn answers_are_bounded() {
        let r = refusal(&Reject::head_too_large());
        assert!(r.starts_with(b"HTTP/1.1 431 Request Header Fields Too Large\r\n") && r.len() < 200);
        assert!(r.ends_with(b"Connection: close\r\n\r\npltlab replay: request head larger than 65536 bytes\n"));
        let mut head = Vec::new();
        let body = not_found(&mut head, &"M".repeat(100), &"u".repeat(10_000), true);
        assert!(body.len() < MAX_QUOTED_URL + MAX_QUOTED_METHOD + 50, "{body}");
        let h = String::from_utf8(head).unwrap();
        assert_eq!(
            h,
            format!("HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: keep-alive\r\n\r\n", body.len())
        );
    }
}
