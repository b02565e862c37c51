//! The HTTP/1.1 codec shared by the replay server, the loader and the probe server's HTTP face:
//! request and response heads (parsing with httparse, then RFC 9112's framing and keep-alive
//! rules; writing), and message bodies (Content-Length, chunked, close-delimited). No I/O here.
pub mod body;
pub mod request;
pub mod response;

pub use body::{encode_chunked, BodyDecoder, Framing};
pub use request::{parse_request, Reject};
pub use response::parse_response_head;

/// Reason phrase of a status code ("Unknown" for codes not listed).
pub fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        410 => "Gone",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        _ => "Unknown",
    }
}

/// Whether a comma-separated header value lists `token` (case-insensitive; bytes that are
/// not UTF-8 only spoil the item they are in).
pub fn has_token(v: &[u8], token: &str) -> bool {
    String::from_utf8_lossy(v).split(',').any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The persistence rule of RFC 9112 9.3: HTTP/1.1 keeps the connection unless a Connection
/// header says close; HTTP/1.0 only when it says keep-alive (and not close).
pub fn keep_alive(minor: u8, conn_close: bool, conn_keep: bool) -> bool {
    if minor == 0 {
        conn_keep && !conn_close
    } else {
        !conn_close
    }
}

/// Whether a status has no body whatever its framing headers say (1xx, 204, 304).
pub fn status_has_no_body(status: u16) -> bool {
    (100..200).contains(&status) || status == 204 || status == 304
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_and_persistence() {
        assert!(has_token(b"Keep-Alive, Upgrade", "keep-alive"));
        assert!(!has_token(b"keep-alive-ish", "keep-alive"));
        assert!(has_token(b"\xff\xfe, close", "close") && !has_token(b"clos\xff", "close"));
        assert!(keep_alive(1, false, false) && !keep_alive(1, true, true));
        assert!(!keep_alive(0, false, false) && keep_alive(0, false, true) && !keep_alive(0, true, true));
        assert!(status_has_no_body(304) && status_has_no_body(101) && !status_has_no_body(200));
        assert_eq!((reason(431), reason(299)), ("Request Header Fields Too Large", "Unknown"));
    }
}
