//! Request matching, keyed like a browser's HTTP cache: method + scheme +
//! host + path + query. In order:
//! (a) the exact key recorded with the request's scheme (then recorded without
//!     a scheme: such entries match either scheme);
//! (b) the exact key recorded under the other scheme, entries with
//!     `cross_scheme` only (a browser upgrades an http URL to https by HSTS);
//! (c) the same method + scheme + host + path with the closest query (most
//!     equal `k=v` pairs, then most equal keys, then the shortest edit distance
//!     between the raw query strings, then manifest order): the request's
//!     scheme first (entries without a scheme included), then the other
//!     scheme's `cross_scheme` entries;
//! (d) no match (404).
//! Several recordings of one exact key are served in manifest (= recorded)
//! order, each once per session, then the last one again (Web Page Replay's
//! ServeResponseInChronologicalSequence); a request with a body prefers the
//! next of those whose recorded body digest equals its own. A session ends at
//! `new_session` (SIGUSR2). HEAD falls back to the GET recordings (without
//! using them up). Requests without a Host header (and without SNI) match on
//! method + path against every host, first in manifest order.
//! Every lookup is a few hash lookups plus a pass over the candidates of one
//! key (or of one path, for the query fallback; its edit distance looks at the
//! first EDIT_PREFIX bytes of each query).
use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering::Relaxed};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    Http,
    Https,
}

impl Scheme {
    pub fn parse(s: &str) -> Option<Scheme> {
        match s.to_ascii_lowercase().as_str() {
            "http" => Some(Scheme::Http),
            "https" => Some(Scheme::Https),
            _ => None,
        }
    }
    pub fn other(self) -> Scheme {
        match self {
            Scheme::Http => Scheme::Https,
            Scheme::Https => Scheme::Http,
        }
    }
    fn tag(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// The exact key, recorded with the request's scheme (or without one).
    Exact(usize),
    /// The exact key, recorded under the other scheme (step b).
    CrossScheme(usize),
    /// The closest query (step c), `cross` when found under the other scheme.
    Fallback {
        idx: usize,
        cross: bool,
    },
    None,
}

/// One recorded response, as the matcher sees it.
pub struct Entry<'a> {
    pub method: &'a str,
    /// None: recorded without a scheme (matches either).
    pub scheme: Option<Scheme>,
    pub cross_scheme: bool,
    pub host: &'a str,
    pub path: &'a str,
    pub query: &'a str,
    pub body_sha256: Option<[u8; 32]>,
}

/// One request to match.
pub struct Request<'a> {
    pub method: &'a str,
    pub scheme: Scheme,
    pub host: Option<&'a str>,
    pub path: &'a str,
    pub query: &'a str,
    /// SHA-256 of the request body, None without a body.
    pub body_sha256: Option<[u8; 32]>,
}

type Candidates = Vec<(String, usize)>;

#[derive(Default)]
pub struct Matcher {
    /// exact key (scheme tag "http", "https", or "*" = recorded without scheme) -> indices
    /// in manifest order.
    exact: HashMap<String, Vec<usize>>,
    /// exact key (explicit scheme) -> its `cross_scheme` entries.
    cross_exact: HashMap<String, Vec<usize>>,
    /// path key (scheme "http"/"https") -> [(query, index)] of that scheme and the
    /// scheme-less entries, manifest order.
    by_path: HashMap<String, Candidates>,
    /// path key (explicit scheme) -> its `cross_scheme` entries.
    cross_path: HashMap<String, Candidates>,
    /// (method, path) -> [(query, index)] for host-less requests.
    any_host: HashMap<(String, String), Candidates>,
    /// Per entry: its request body digest.
    body: Vec<Option<[u8; 32]>>,
    /// Per entry: the session in which it was last served (0 = never).
    served: Vec<AtomicU32>,
    session: AtomicU32,
}

fn path_key(method: &str, scheme: &str, host: &str, path: &str) -> String {
    let mut k = String::with_capacity(method.len() + scheme.len() + host.len() + path.len() + 3);
    for (n, part) in [method, scheme, host, path].into_iter().enumerate() {
        if n > 0 {
            k.push('\0');
        }
        k.push_str(part);
    }
    k
}

fn exact_key(path_key: &str, query: &str) -> String {
    let mut k = String::with_capacity(path_key.len() + query.len() + 1);
    k.push_str(path_key);
    k.push('\0');
    k.push_str(query);
    k
}

/// Lower-case host without port and trailing dot ("[::1]:80" -> "::1").
pub fn normalize_host(h: &str) -> String {
    let h = h.trim();
    let h = if let Some(rest) = h.strip_prefix('[') {
        rest.split(']').next().unwrap_or(rest)
    } else if h.matches(':').count() == 1 {
        h.split(':').next().unwrap_or(h)
    } else {
        h
    };
    h.trim_end_matches('.').to_ascii_lowercase()
}

/// Splits a request target into (host from absolute-form, path, query).
pub fn split_target(target: &str) -> (Option<String>, String, String) {
    let mut t = target;
    let mut host = None;
    for scheme in ["http://", "https://"] {
        // bytes, not str slicing: the target may have multi-byte characters anywhere
        if t.as_bytes().get(..scheme.len()).is_some_and(|p| p.eq_ignore_ascii_case(scheme.as_bytes())) {
            let rest = &t[scheme.len()..];
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            host = Some(normalize_host(&rest[..end]));
            t = &rest[end..];
            break;
        }
    }
    let t = t.split('#').next().unwrap_or("");
    let (p, q) = match t.find('?') {
        Some(i) => (&t[..i], &t[i + 1..]),
        None => (t, ""),
    };
    let p = if p.is_empty() { "/" } else { p };
    (host, p.to_string(), q.to_string())
}

fn pairs(q: &str) -> Vec<(&str, &str)> {
    q.split('&')
        .filter(|s| !s.is_empty())
        .map(|kv| match kv.find('=') {
            Some(i) => (&kv[..i], &kv[i + 1..]),
            None => (kv, ""),
        })
        .collect()
}

/// Size of the multiset intersection.
fn common<T: Ord + Clone>(a: &[T], b: &[T]) -> usize {
    let mut a = a.to_vec();
    let mut b = b.to_vec();
    a.sort();
    b.sort();
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

pub fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for i in 1..=a.len() {
        cur[0] = i;
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// The edit distance compares at most this many leading bytes of each query
/// (it is quadratic; a request head may carry a 64 KiB query).
const EDIT_PREFIX: usize = 1024;

fn cut(q: &str) -> &[u8] {
    &q.as_bytes()[..q.len().min(EDIT_PREFIX)]
}

/// Picks the closest recorded query; ties go to the earliest entry.
fn closest(query: &str, candidates: &[(String, usize)]) -> Option<usize> {
    let qp = pairs(query);
    let qk: Vec<&str> = qp.iter().map(|p| p.0).collect();
    // (shared pairs, shared keys, nearness), entry
    type Score = (usize, usize, std::cmp::Reverse<usize>);
    let mut best: Option<(Score, usize)> = None;
    for (cq, idx) in candidates {
        let cp = pairs(cq);
        let ck: Vec<&str> = cp.iter().map(|p| p.0).collect();
        let score = (common(&qp, &cp), common(&qk, &ck), std::cmp::Reverse(edit_distance(cut(query), cut(cq))));
        if best.as_ref().is_none_or(|(s, _)| score > *s) {
            best = Some((score, *idx));
        }
    }
    best.map(|b| b.1)
}

impl Matcher {
    /// Adds entry `idx` (entries must come in manifest order: 0, 1, 2, ...).
    pub fn add(&mut self, e: &Entry, idx: usize) {
        assert_eq!(idx, self.served.len(), "entries in manifest order");
        let m = e.method.to_ascii_uppercase();
        let host = normalize_host(e.host);
        let path = if e.path.is_empty() { "/" } else { e.path };
        let cand = (e.query.to_string(), idx);
        let tag = e.scheme.map_or("*", Scheme::tag);
        let pk = path_key(&m, tag, &host, path);
        self.exact.entry(exact_key(&pk, e.query)).or_default().push(idx);
        match e.scheme {
            Some(_) => {
                self.by_path.entry(pk.clone()).or_default().push(cand.clone());
                if e.cross_scheme {
                    self.cross_exact.entry(exact_key(&pk, e.query)).or_default().push(idx);
                    self.cross_path.entry(pk).or_default().push(cand.clone());
                }
            }
            None => {
                for s in [Scheme::Http, Scheme::Https] {
                    self.by_path.entry(path_key(&m, s.tag(), &host, path)).or_default().push(cand.clone());
                }
            }
        }
        self.any_host.entry((m, path.to_string())).or_default().push(cand);
        self.body.push(e.body_sha256);
        self.served.push(AtomicU32::new(0));
    }

    /// A new session (a new page load): every recording may be served again.
    pub fn new_session(&self) {
        self.session.fetch_add(1, Relaxed);
    }

    /// Matches `r`; a HEAD request without HEAD recordings gets the GET one.
    pub fn lookup(&self, r: &Request) -> Match {
        let m = self.find(r, &r.method.to_ascii_uppercase(), true);
        if m == Match::None && r.method.eq_ignore_ascii_case("HEAD") {
            return self.find(r, "GET", false);
        }
        m
    }

    fn find(&self, r: &Request, method: &str, consume: bool) -> Match {
        let path = if r.path.is_empty() { "/" } else { r.path };
        let Some(h) = r.host else {
            let Some(c) = self.any_host.get(&(method.to_string(), path.to_string())) else { return Match::None };
            if let Some((_, i)) = c.iter().find(|(q, _)| q == r.query) {
                return Match::Exact(*i);
            }
            return closest(r.query, c).map_or(Match::None, |idx| Match::Fallback { idx, cross: false });
        };
        let host = normalize_host(h);
        let own = path_key(method, r.scheme.tag(), &host, path);
        let other = path_key(method, r.scheme.other().tag(), &host, path);
        let any = path_key(method, "*", &host, path);
        let pick = |list: &Vec<usize>| self.pick(list, r.body_sha256.as_ref(), consume);
        if let Some(l) = self.exact.get(&exact_key(&own, r.query)).or_else(|| self.exact.get(&exact_key(&any, r.query)))
        {
            return Match::Exact(pick(l));
        }
        if let Some(l) = self.cross_exact.get(&exact_key(&other, r.query)) {
            return Match::CrossScheme(pick(l));
        }
        if let Some(idx) = self.by_path.get(&own).and_then(|c| closest(r.query, c)) {
            return Match::Fallback { idx, cross: false };
        }
        if let Some(idx) = self.cross_path.get(&other).and_then(|c| closest(r.query, c)) {
            return Match::Fallback { idx, cross: true };
        }
        Match::None
    }

    /// The recording to serve among those of one exact key (non-empty, manifest order):
    /// the first not yet served this session, else the last; with a body digest, the same
    /// rule among the recordings with that digest first.
    fn pick(&self, list: &[usize], body: Option<&[u8; 32]>, consume: bool) -> usize {
        let session = self.session.load(Relaxed) + 1;
        let fresh = |i: usize| self.served[i].load(Relaxed) != session;
        let in_sequence = |it: &mut dyn Iterator<Item = usize>| {
            let mut last = None;
            for i in it {
                if fresh(i) {
                    return Some(i);
                }
                last = Some(i);
            }
            last
        };
        let same_body =
            body.and_then(|d| in_sequence(&mut list.iter().copied().filter(|&i| self.body[i].as_ref() == Some(d))));
        let i = same_body.or_else(|| in_sequence(&mut list.iter().copied())).expect("non-empty candidate list");
        if consume {
            self.served[i].store(session, Relaxed);
        }
        i
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Scheme::{Http, Https};

    /// (method, scheme, cross_scheme, host, path, query, body digest byte)
    type Row = (&'static str, Option<Scheme>, bool, &'static str, &'static str, &'static str, Option<u8>);

    fn build(rows: &[Row]) -> Matcher {
        let mut m = Matcher::default();
        for (i, &(method, scheme, cross_scheme, host, path, query, body)) in rows.iter().enumerate() {
            m.add(&Entry { method, scheme, cross_scheme, host, path, query, body_sha256: body.map(|b| [b; 32]) }, i);
        }
        m
    }

    fn req<'a>(method: &'a str, scheme: Scheme, host: Option<&'a str>, path: &'a str, query: &'a str) -> Request<'a> {
        Request { method, scheme, host, path, query, body_sha256: None }
    }

    fn get(m: &Matcher, scheme: Scheme, host: &str, path: &str, query: &str) -> Match {
        m.lookup(&req("GET", scheme, Some(host), path, query))
    }

    fn m() -> Matcher {
        build(&[
            ("GET", None, true, "www.a.com", "/", "", None),
            ("GET", None, true, "www.a.com", "/x.js", "v=1&t=100", None),
            ("GET", None, true, "www.a.com", "/x.js", "v=2&t=100", None),
            ("GET", None, true, "www.a.com", "/x.js", "v=2&t=200&extra=1", None),
            ("POST", None, true, "www.a.com", "/x.js", "v=9", None),
            ("GET", None, true, "cdn.b.com", "/x.js", "", None),
        ])
    }

    #[test]
    fn exact() {
        let m = m();
        assert_eq!(get(&m, Http, "www.a.com", "/", ""), Match::Exact(0));
        assert_eq!(get(&m, Https, "WWW.A.COM:8080", "/x.js", "v=2&t=100"), Match::Exact(2));
        assert_eq!(m.lookup(&req("get", Http, Some("cdn.b.com."), "/x.js", "")), Match::Exact(5));
        assert_eq!(m.lookup(&req("POST", Https, Some("www.a.com"), "/x.js", "v=9")), Match::Exact(4));
    }

    #[test]
    fn query_fallback() {
        let m = m();
        let fb = |idx| Match::Fallback { idx, cross: false };
        // most equal k=v pairs: v=2 and t=200 -> 3
        assert_eq!(get(&m, Http, "www.a.com", "/x.js", "t=200&v=2"), fb(3));
        // pairs tie (t=100 with 1 and 2), keys tie -> edit distance: "v=1&t=100" vs "v=3&t=100" ties -> first
        assert_eq!(get(&m, Http, "www.a.com", "/x.js", "v=3&t=100"), fb(1));
        // equal keys beat nothing in common: extra key matches 3
        assert_eq!(get(&m, Http, "www.a.com", "/x.js", "extra=7"), fb(3));
        // no query at all still falls back by edit distance
        assert_eq!(get(&m, Https, "www.a.com", "/x.js", ""), fb(1));
        // cache-buster value: same keys, different value
        assert_eq!(get(&m, Http, "www.a.com", "/x.js", "v=2&t=101"), fb(2));
    }

    #[test]
    fn misses_and_head() {
        let m = m();
        assert_eq!(get(&m, Http, "www.a.com", "/nope", ""), Match::None);
        assert_eq!(get(&m, Http, "other.com", "/", ""), Match::None);
        assert_eq!(m.lookup(&req("DELETE", Http, Some("www.a.com"), "/", "")), Match::None);
        assert_eq!(m.lookup(&req("HEAD", Http, Some("www.a.com"), "/", "")), Match::Exact(0));
        // host-less: any host, first in manifest order
        assert_eq!(m.lookup(&req("GET", Http, None, "/x.js", "")), Match::Exact(5));
    }

    #[test]
    fn scheme_rules() {
        let m = build(&[
            ("GET", Some(Https), true, "a.com", "/", "", None),         // 0
            ("GET", Some(Http), true, "a.com", "/", "", None),          // 1
            ("GET", Some(Http), true, "old.com", "/p", "q=1", None),    // 2 http only, HSTS-upgradable
            ("GET", Some(Http), false, "loop.com", "/", "", None),      // 3 http -> https self-redirect
            ("GET", Some(Https), true, "loop.com", "/other", "", None), // 4
            ("GET", Some(Https), false, "s.com", "/f", "a=1", None),    // 5
            ("GET", None, true, "any.com", "/z", "", None),             // 6
        ]);
        // (a) the request's own scheme wins over the other one
        assert_eq!(get(&m, Https, "a.com", "/", ""), Match::Exact(0));
        assert_eq!(get(&m, Http, "a.com", "/", ""), Match::Exact(1));
        // (b) recorded over http only, requested over https (HSTS upgrade)
        assert_eq!(get(&m, Https, "old.com", "/p", "q=1"), Match::CrossScheme(2));
        // cross_scheme false: never answers the other scheme, exact or fallback
        assert_eq!(get(&m, Https, "loop.com", "/", ""), Match::None);
        assert_eq!(get(&m, Http, "loop.com", "/", ""), Match::Exact(3));
        assert_eq!(get(&m, Http, "s.com", "/f", "a=2"), Match::None);
        assert_eq!(get(&m, Https, "s.com", "/f", "a=2"), Match::Fallback { idx: 5, cross: false });
        // (c) closest query under the own scheme, then the other one
        assert_eq!(get(&m, Https, "old.com", "/p", "q=2"), Match::Fallback { idx: 2, cross: true });
        assert_eq!(get(&m, Http, "old.com", "/p", "q=2"), Match::Fallback { idx: 2, cross: false });
        // recorded without a scheme: either scheme, as its own
        assert_eq!(get(&m, Https, "any.com", "/z", ""), Match::Exact(6));
        assert_eq!(get(&m, Http, "any.com", "/z", ""), Match::Exact(6));
        assert_eq!(get(&m, Http, "any.com", "/z", "x"), Match::Fallback { idx: 6, cross: false });
    }

    #[test]
    fn exact_beats_cross_and_fallback_order() {
        // an exact https recording with another query exists: (b) exact http beats (c) https fallback
        let m = build(&[
            ("GET", Some(Https), true, "a.com", "/x", "v=1", None),
            ("GET", Some(Http), true, "a.com", "/x", "v=2", None),
        ]);
        assert_eq!(get(&m, Https, "a.com", "/x", "v=2"), Match::CrossScheme(1));
        assert_eq!(get(&m, Https, "a.com", "/x", "v=3"), Match::Fallback { idx: 0, cross: false });
    }

    #[test]
    fn repeated_urls_in_sequence_per_session() {
        let m = build(&[
            ("GET", Some(Https), true, "a.com", "/poll", "", None),  // 0
            ("GET", Some(Https), true, "a.com", "/other", "", None), // 1
            ("GET", Some(Https), true, "a.com", "/poll", "", None),  // 2
            ("GET", Some(Https), true, "a.com", "/poll", "", None),  // 3
        ]);
        let poll = |s| get(&m, s, "a.com", "/poll", "");
        let seq: Vec<Match> = (0..5).map(|_| poll(Https)).collect();
        assert_eq!(seq, [0, 2, 3, 3, 3].map(Match::Exact));
        // HEAD peeks at the GET recordings without using them up
        m.new_session();
        assert_eq!(m.lookup(&req("HEAD", Https, Some("a.com"), "/poll", "")), Match::Exact(0));
        assert_eq!(poll(Https), Match::Exact(0));
        // cross-scheme requests use up the same recordings
        assert_eq!(poll(Http), Match::CrossScheme(2));
        assert_eq!(poll(Https), Match::Exact(3));
        // fallbacks do not use them up
        m.new_session();
        assert_eq!(get(&m, Https, "a.com", "/poll", "x=1"), Match::Fallback { idx: 0, cross: false });
        assert_eq!(poll(Https), Match::Exact(0));
    }

    #[test]
    fn request_body_digest() {
        let m = build(&[
            ("POST", Some(Https), true, "a.com", "/api", "", Some(1)), // 0
            ("POST", Some(Https), true, "a.com", "/api", "", Some(2)), // 1
            ("POST", Some(Https), true, "a.com", "/api", "", Some(1)), // 2
            ("POST", Some(Https), true, "a.com", "/api", "", None),    // 3
        ]);
        let post = |b: Option<u8>| {
            let mut r = req("POST", Https, Some("a.com"), "/api", "");
            r.body_sha256 = b.map(|b| [b; 32]);
            m.lookup(&r)
        };
        // the body picks among the recordings, each once, then its last one repeats
        assert_eq!(post(Some(2)), Match::Exact(1));
        assert_eq!(post(Some(1)), Match::Exact(0));
        assert_eq!(post(Some(1)), Match::Exact(2));
        assert_eq!(post(Some(1)), Match::Exact(2));
        // an unknown body (or none): the sequence rule over all of them
        assert_eq!(post(Some(9)), Match::Exact(3));
        assert_eq!(post(None), Match::Exact(3));
        m.new_session();
        assert_eq!(post(None), Match::Exact(0));
        assert_eq!(post(Some(9)), Match::Exact(1));
        assert_eq!(post(Some(1)), Match::Exact(2));
    }

    #[test]
    fn targets_and_hosts() {
        assert_eq!(split_target("/a/b?x=1#frag"), (None, "/a/b".into(), "x=1".into()));
        assert_eq!(split_target("http://WWW.A.com:80/p?q"), (Some("www.a.com".into()), "/p".into(), "q".into()));
        assert_eq!(split_target("https://a.com"), (Some("a.com".into()), "/".into(), "".into()));
        // multi-byte characters where a scheme would end (sliced as str this panicked)
        assert_eq!(split_target("éééé?q"), (None, "éééé".into(), "q".into()));
        assert_eq!(split_target("http:/é"), (None, "http:/é".into(), "".into()));
        assert_eq!(normalize_host("[::1]:443"), "::1");
        assert_eq!(normalize_host("198.19.0.1:80"), "198.19.0.1");
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
        assert_eq!((Scheme::parse("HTTPS"), Scheme::parse("ftp")), (Some(Https), None));
    }
}
