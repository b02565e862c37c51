//! The answers service: what answers a request, whichever protocol carried it (h1.rs, h2.rs; a
//! new protocol calls it the same way). Given what was asked (method, scheme, target, host, SNI,
//! body digest) it matches the manifest's recordings (matcher.rs: cache-key matching, repeated
//! URLs in recorded order per session, request-body digests) and returns the recording prepared
//! at start (manifest.rs: its HTTP/1.1 head, its h2 header fields, its body bytes) or a 404's
//! text quoting the URL cut to a few hundred bytes, counting the match in the stats. The
//! protocol frames the answer and counts what it sent (`Stats::note_service`, `bytes_out`).
use anyhow::Result;
use std::borrow::Cow;
use std::sync::atomic::Ordering::Relaxed;

use super::manifest::{self, Manifest, Prepared};
use super::matcher::{self, Match, Matcher, Scheme};
use super::stats::Stats;

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

/// The body of a 404 (text/plain), quoting the method and URL cut to a few hundred bytes.
pub fn not_found_body(method: &str, url: &str) -> String {
    format!(
        "pltlab replay: no recorded response for {} {}\n",
        quote(method, MAX_QUOTED_METHOD),
        quote(url, MAX_QUOTED_URL)
    )
}

/// A request as the answers service sees it, whatever carried it.
pub struct Asked<'a> {
    pub method: &'a str,
    pub scheme: Scheme,
    /// As on the request line (HTTP/1.1) or the :path (h2): origin- or absolute-form.
    pub target: &'a str,
    /// The Host header (HTTP/1.1) or :authority (h2).
    pub host: Option<&'a str>,
    /// The TLS server name.
    pub sni: Option<&'a str>,
    /// SHA-256 of the request body (de-chunked); None without a body.
    pub body_sha256: Option<[u8; 32]>,
}

/// What answers a request.
pub enum Answer<'a> {
    /// A recorded response, prepared at start.
    Recorded(&'a Prepared),
    /// No recording: a 404 with this text/plain body.
    NotFound(String),
}

/// The recorded responses and their matcher.
pub struct Answers {
    responses: Vec<Prepared>,
    matcher: Matcher,
}

impl Answers {
    /// Every response of the manifest prepared (heads serialized, bodies loaded) and indexed.
    pub fn new(m: &Manifest) -> Result<Answers> {
        let responses = manifest::prepare(m)?;
        let mut matcher = Matcher::default();
        for (i, (r, p)) in m.responses.iter().zip(&responses).enumerate() {
            let e = matcher::Entry {
                method: &r.method,
                scheme: p.scheme,
                cross_scheme: r.cross_scheme,
                host: &r.host,
                path: &r.path,
                query: &r.query,
                body_sha256: p.body_sha256,
            };
            matcher.add(&e, i);
        }
        Ok(Answers { responses, matcher })
    }

    /// A new load begins: repeated URLs start again from their first recording.
    pub fn new_session(&self) {
        self.matcher.new_session();
    }

    /// The answer to `q`, counted in `st` (exact, fallback, cross-scheme matches; 404s): its
    /// host from an absolute target, else the Host header (:authority), else the SNI.
    pub fn answer(&self, st: &Stats, q: &Asked) -> Answer<'_> {
        let (thost, path, query) = matcher::split_target(q.target);
        let host = thost.or_else(|| q.host.map(str::to_string)).or_else(|| q.sni.map(str::to_string));
        let m = self.matcher.lookup(&matcher::Request {
            method: q.method,
            scheme: q.scheme,
            host: host.as_deref(),
            path: &path,
            query: &query,
            body_sha256: q.body_sha256,
        });
        let url = || {
            let q = if query.is_empty() { String::new() } else { format!("?{query}") };
            format!("{}{}{}", host.as_deref().map(matcher::normalize_host).unwrap_or_default(), path, q)
        };
        if matches!(m, Match::CrossScheme(_) | Match::Fallback { cross: true, .. }) {
            st.cross_scheme_matches.fetch_add(1, Relaxed);
        }
        match m {
            Match::Exact(i) | Match::CrossScheme(i) => {
                st.responses_exact.fetch_add(1, Relaxed);
                Answer::Recorded(&self.responses[i])
            }
            Match::Fallback { idx, .. } => {
                st.note_fallback(&quote(&url(), MAX_QUOTED_URL), idx);
                Answer::Recorded(&self.responses[idx])
            }
            Match::None => {
                let u = url();
                st.note_404(&quote(&u, MAX_QUOTED_URL));
                Answer::NotFound(not_found_body(q.method, &u))
            }
        }
    }
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
        // cutting what was cut changes nothing (the stats' URL lists take cut URLs)
        assert_eq!(quote(&q, 256), q);
    }

    #[test]
    fn not_found_bodies_are_bounded() {
        let body = not_found_body(&"M".repeat(100), &"u".repeat(10_000));
        assert!(body.len() < MAX_QUOTED_URL + MAX_QUOTED_METHOD + 50, "{body}");
        assert!(body.starts_with("pltlab replay: no recorded response for MMMM"), "{body}");
    }
}
