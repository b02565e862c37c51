//! Property tests (proptest) of the request parser and the matcher.
use super::answers::{quote, MAX_QUOTED_URL};
use super::matcher::{self, Entry, Match, Matcher, Scheme};
use crate::http::parse_request;
use crate::http::BodyDecoder;
use proptest::prelude::*;
use std::collections::HashSet;

fn config(cases: u32) -> ProptestConfig {
    // no regression files written into the source tree
    ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() }
}

/// Everything the server does with a request head, on arbitrary input: parse,
/// split the target, match, quote the URL, decode a body from the bytes after the head.
fn serve_offline(m: &Matcher, buf: &[u8]) {
    let Ok(Some(req)) = parse_request(buf) else { return };
    assert!(req.head_len <= buf.len());
    let (thost, path, query) = matcher::split_target(&req.target);
    assert!(path.starts_with('/') || !req.target.starts_with('/'), "{:?} -> {path:?}", req.target);
    let host = thost.or(req.host.clone());
    for scheme in [Scheme::Http, Scheme::Https] {
        let _ = m.lookup(&matcher::Request {
            method: &req.method,
            scheme,
            host: host.as_deref(),
            path: &path,
            query: &query,
            body_sha256: None,
        });
    }
    let url = format!("{}{path}?{query}", host.as_deref().unwrap_or(""));
    assert!(quote(&url, MAX_QUOTED_URL).len() <= MAX_QUOTED_URL);
    let mut d = BodyDecoder::new(req.body);
    let _ = d.feed(&buf[req.head_len..]);
}

fn small_matcher() -> Matcher {
    let mut m = Matcher::default();
    let rows = [("GET", "a.test", "/", "v=1"), ("GET", "a.test", "/", "v=2&x=ü"), ("POST", "é.test", "/é", "")];
    for (i, (method, host, path, query)) in rows.into_iter().enumerate() {
        m.add(&Entry { method, scheme: None, cross_scheme: true, host, path, query, body_sha256: None }, i);
    }
    m
}

/// Pieces that make request-like byte strings, to get past the first byte more often than noise.
fn fragment() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        Just(b"GET ".to_vec()),
        Just(b"POST ".to_vec()),
        Just(b"/".to_vec()),
        Just(b"http://".to_vec()),
        Just(b"HTTPS://".to_vec()),
        Just("é".as_bytes().to_vec()),
        Just(b" HTTP/1.1".to_vec()),
        Just(b" HTTP/1.0".to_vec()),
        Just(b"\r\n".to_vec()),
        Just(b"\n".to_vec()),
        Just(b"Host: ".to_vec()),
        Just(b"Content-Length: ".to_vec()),
        Just(b"Transfer-Encoding: ".to_vec()),
        Just(b"chunked".to_vec()),
        Just(b"gzip, ".to_vec()),
        Just(b"5".to_vec()),
        Just(b"-1".to_vec()),
        Just(b"99999999999999999999999".to_vec()),
        Just(b"?a=1&b".to_vec()),
        Just(b"[::1]:80".to_vec()),
        Just(b", ".to_vec()),
        Just(b":".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ]
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..3000)) {
        serve_offline(&small_matcher(), &bytes);
    }

    #[test]
    fn request_like_bytes_never_panic(parts in proptest::collection::vec(fragment(), 0..40)) {
        serve_offline(&small_matcher(), &parts.concat());
    }
}

/// A valid request head: (method, target, host, bytes) with random header-name
/// case, whitespace around values, LF or CRLF line ends, other headers around Host.
fn valid_request() -> impl Strategy<Value = (String, String, String, Vec<u8>)> {
    (
        "[A-Z]{1,8}",
        "/[A-Za-z0-9._~%/-]{0,40}(\\?[A-Za-z0-9=&%]{0,40})?",
        "[a-z0-9]{1,12}(\\.[a-z0-9]{1,12}){0,3}(:[0-9]{1,5})?",
        proptest::collection::vec(any::<bool>(), 4),
        "[ \t]{0,3}",
        "[ \t]{0,3}",
        proptest::collection::vec(("X-[A-Za-z0-9-]{0,15}", "[!-~]([ !-~]{0,30}[!-~])?"), 0..10),
        any::<prop::sample::Index>(),
        any::<bool>(),
        0u8..=1,
    )
        .prop_map(|(method, target, host, case, ws1, ws2, extra, at, lf, minor)| {
            let eol = if lf { "\n" } else { "\r\n" };
            let name: String =
                "host".chars().zip(case).map(|(c, up)| if up { c.to_ascii_uppercase() } else { c }).collect();
            let mut lines: Vec<String> = extra.iter().map(|(k, v)| format!("{k}: {v}{eol}")).collect();
            lines.insert(at.index(lines.len() + 1), format!("{name}:{ws1}{host}{ws2}{eol}"));
            let raw = format!("{method} {target} HTTP/1.{minor}{eol}{}{eol}", lines.concat());
            (method, target, host, raw.into_bytes())
        })
}

proptest! {
    #![proptest_config(config(500))]

    #[test]
    fn valid_requests_parse_to_their_parts((method, target, host, raw) in valid_request()) {
        let r = parse_request(&raw).unwrap().unwrap();
        prop_assert_eq!(&r.method, &method);
        prop_assert_eq!(&r.target, &target);
        prop_assert_eq!(r.host.as_deref(), Some(host.as_str()));
        prop_assert_eq!(r.head_len, raw.len());
        // every strict prefix is an incomplete head, never an error
        for n in 0..raw.len() {
            prop_assert!(matches!(parse_request(&raw[..n]), Ok(None)), "prefix {}", n);
        }
    }
}

const METHODS: [&str; 3] = ["GET", "POST", "put"];
const HOSTS: [&str; 3] = ["a.test", "B.test", "c.test."];
const PATHS: [&str; 3] = ["/", "/x", "/é/ü"];
const QUERIES: [&str; 4] = ["", "a=1", "a=2&b=3", "b"];
const SCHEMES: [Option<Scheme>; 3] = [None, Some(Scheme::Http), Some(Scheme::Https)];

#[derive(Debug, Clone, Copy)]
struct Row {
    method: usize,
    scheme: usize,
    cross: bool,
    host: usize,
    path: usize,
    query: usize,
}

impl Row {
    fn scheme(&self) -> Option<Scheme> {
        SCHEMES[self.scheme]
    }
    fn same_path(&self, r: &Row) -> bool {
        self.method == r.method && self.host == r.host && self.path == r.path
    }
    fn same_key(&self, r: &Row) -> bool {
        self.same_path(r) && self.query == r.query
    }
}

fn rows() -> impl Strategy<Value = Vec<Row>> {
    let row = (0..METHODS.len(), 0..SCHEMES.len(), any::<bool>(), 0..HOSTS.len(), 0..PATHS.len(), 0..QUERIES.len())
        .prop_map(|(method, scheme, cross, host, path, query)| Row { method, scheme, cross, host, path, query });
    proptest::collection::vec(row, 1..30)
}

fn build(rows: &[Row]) -> Matcher {
    let mut m = Matcher::default();
    for (i, r) in rows.iter().enumerate() {
        let e = Entry {
            method: METHODS[r.method],
            scheme: r.scheme(),
            cross_scheme: r.cross,
            host: HOSTS[r.host],
            path: PATHS[r.path],
            query: QUERIES[r.query],
            body_sha256: None,
        };
        m.add(&e, i);
    }
    m
}

fn lookup(m: &Matcher, q: &Row, s: Scheme) -> Match {
    // the request spells method and host differently from the recording (case, port)
    let host = format!("{}:8080", HOSTS[q.host].to_ascii_uppercase());
    m.lookup(&matcher::Request {
        method: &METHODS[q.method].to_ascii_lowercase(),
        scheme: s,
        host: Some(&host),
        path: PATHS[q.path],
        query: QUERIES[q.query],
        body_sha256: None,
    })
}

/// The recordings an exact request (key of `q`, scheme `s`) is served from, in order:
/// those recorded with scheme `s`, else those recorded without a scheme.
fn own_list(rows: &[Row], q: &Row, s: Scheme) -> Vec<usize> {
    let with = |sc: Option<Scheme>| {
        (0..rows.len()).filter(|&j| rows[j].same_key(q) && rows[j].scheme() == sc).collect::<Vec<_>>()
    };
    let own = with(Some(s));
    if own.is_empty() {
        with(None)
    } else {
        own
    }
}

proptest! {
    #![proptest_config(config(500))]

    /// Every answer agrees with the documented rules (a)-(d), for every key and scheme.
    #[test]
    fn matches_follow_the_rules(rows in rows(), q in rows()) {
        let m = build(&rows);
        for q in q.iter().chain(rows.iter()) {
            for s in [Scheme::Http, Scheme::Https] {
                let own = own_list(&rows, q, s);
                let cross_exact: Vec<usize> = (0..rows.len())
                    .filter(|&j| rows[j].same_key(q) && rows[j].scheme() == Some(s.other()) && rows[j].cross)
                    .collect();
                let own_path = (0..rows.len()).any(|j| rows[j].same_path(q) && rows[j].scheme() != Some(s.other()));
                let cross_path = (0..rows.len()).any(|j| rows[j].same_path(q) && rows[j].scheme() == Some(s.other()) && rows[j].cross);
                match lookup(&m, q, s) {
                    Match::Exact(j) => prop_assert!(own.contains(&j), "{q:?} {s:?} -> {j}"),
                    Match::CrossScheme(j) => prop_assert!(own.is_empty() && cross_exact.contains(&j), "{q:?} {s:?} -> cross {j}"),
                    Match::Fallback { idx, cross: false } => {
                        prop_assert!(own.is_empty() && cross_exact.is_empty());
                        prop_assert!(rows[idx].same_path(q) && rows[idx].scheme() != Some(s.other()));
                    }
                    Match::Fallback { idx, cross: true } => {
                        prop_assert!(own.is_empty() && cross_exact.is_empty() && !own_path);
                        prop_assert!(rows[idx].same_path(q) && rows[idx].scheme() == Some(s.other()) && rows[idx].cross);
                    }
                    Match::None => prop_assert!(own.is_empty() && cross_exact.is_empty() && !own_path && !cross_path, "{q:?} {s:?}"),
                }
            }
        }
    }

    /// Repeated requests for recorded keys get the recordings in manifest order, each once
    /// per session, then the last one again; a new session starts over.
    #[test]
    fn sequence_order_within_a_session(rows in rows(), picks in proptest::collection::vec((any::<prop::sample::Index>(), any::<bool>(), 0u8..12), 1..60)) {
        let m = build(&rows);
        let mut served: HashSet<usize> = HashSet::new();
        for (pick, https, reset) in picks {
            if reset == 0 {
                m.new_session();
                served.clear();
            }
            let q = rows[pick.index(rows.len())];
            let s = match q.scheme() {
                Some(s) => s,
                None if https => Scheme::Https,
                None => Scheme::Http,
            };
            let list = own_list(&rows, &q, s);
            let want = *list.iter().find(|j| !served.contains(j)).unwrap_or(list.last().unwrap());
            served.insert(want);
            prop_assert_eq!(lookup(&m, &q, s), Match::Exact(want));
        }
    }

    /// Arbitrary strings (any host, path, query, method) never panic.
    #[test]
    fn lookup_never_panics(rows in rows(), method in ".{0,8}", host in proptest::option::of(".{0,40}"), path in ".{0,40}", query in ".{0,3000}", https in any::<bool>()) {
        let m = build(&rows);
        let s = if https { Scheme::Https } else { Scheme::Http };
        let _ = m.lookup(&matcher::Request { method: &method, scheme: s, host: host.as_deref(), path: &path, query: &query, body_sha256: Some([7; 32]) });
        let (_, p, q) = matcher::split_target(&format!("{path}?{query}"));
        let _ = m.lookup(&matcher::Request { method: "GET", scheme: s, host: host.as_deref(), path: &p, query: &q, body_sha256: None });
    }
}
