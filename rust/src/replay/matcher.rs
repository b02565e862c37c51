//! Request matching: method + host + path + query exact; else the same
//! method + host + path with the closest query (most equal `k=v` pairs, then
//! most equal keys, then the shortest edit distance between the raw query
//! strings, then manifest order); else no match (404).
//! Requests without a Host header (and without SNI) match on method + path
//! against every host, first in manifest order.
use std::collections::HashMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    Exact(usize),
    Fallback(usize),
    None,
}

#[derive(Default)]
pub struct Matcher {
    /// (method, host, path) -> [(query, index)] in manifest order.
    by_path: HashMap<(String, String, String), Vec<(String, usize)>>,
    /// (method, path) -> [(query, index)] for host-less requests.
    any_host: HashMap<(String, String), Vec<(String, usize)>>,
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
        if t.len() >= scheme.len() && t[..scheme.len()].eq_ignore_ascii_case(scheme) {
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

/// Picks the closest recorded query; ties go to the earliest entry.
pub fn closest(query: &str, candidates: &[(String, usize)]) -> Option<usize> {
    let qp = pairs(query);
    let qk: Vec<&str> = qp.iter().map(|p| p.0).collect();
    let mut best: Option<((usize, usize, std::cmp::Reverse<usize>), usize)> = None;
    for (cq, idx) in candidates {
        let cp = pairs(cq);
        let ck: Vec<&str> = cp.iter().map(|p| p.0).collect();
        let score = (common(&qp, &cp), common(&qk, &ck), std::cmp::Reverse(edit_distance(query.as_bytes(), cq.as_bytes())));
        if best.as_ref().map_or(true, |(s, _)| score > *s) {
            best = Some((score, *idx));
        }
    }
    best.map(|b| b.1)
}

impl Matcher {
    pub fn add(&mut self, method: &str, host: &str, path: &str, query: &str, idx: usize) {
        let m = method.to_ascii_uppercase();
        let path = if path.is_empty() { "/" } else { path };
        self.by_path
            .entry((m.clone(), normalize_host(host), path.to_string()))
            .or_default()
            .push((query.to_string(), idx));
        self.any_host.entry((m, path.to_string())).or_default().push((query.to_string(), idx));
    }

    pub fn lookup(&self, method: &str, host: Option<&str>, path: &str, query: &str) -> Match {
        let m = method.to_ascii_uppercase();
        let cands = match host {
            Some(h) => self.by_path.get(&(m, normalize_host(h), path.to_string())),
            None => self.any_host.get(&(m, path.to_string())),
        };
        let Some(c) = cands else { return Match::None };
        if let Some((_, i)) = c.iter().find(|(q, _)| q == query) {
            return Match::Exact(*i);
        }
        match closest(query, c) {
            Some(i) => Match::Fallback(i),
            None => Match::None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m() -> Matcher {
        let mut m = Matcher::default();
        m.add("GET", "www.a.com", "/", "", 0);
        m.add("GET", "www.a.com", "/x.js", "v=1&t=100", 1);
        m.add("GET", "www.a.com", "/x.js", "v=2&t=100", 2);
        m.add("GET", "www.a.com", "/x.js", "v=2&t=200&extra=1", 3);
        m.add("POST", "www.a.com", "/x.js", "v=9", 4);
        m.add("GET", "cdn.b.com", "/x.js", "", 5);
        m
    }

    #[test]
    fn exact() {
        let m = m();
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/", ""), Match::Exact(0));
        assert_eq!(m.lookup("GET", Some("WWW.A.COM:8080"), "/x.js", "v=2&t=100"), Match::Exact(2));
        assert_eq!(m.lookup("get", Some("cdn.b.com."), "/x.js", ""), Match::Exact(5));
        assert_eq!(m.lookup("POST", Some("www.a.com"), "/x.js", "v=9"), Match::Exact(4));
    }

    #[test]
    fn query_fallback() {
        let m = m();
        // most equal k=v pairs: v=2 and t=200 -> 3
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/x.js", "t=200&v=2"), Match::Fallback(3));
        // pairs tie (t=100 with 1 and 2), keys tie -> edit distance: "v=1&t=100" vs "v=3&t=100" ties -> first
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/x.js", "v=3&t=100"), Match::Fallback(1));
        // equal keys beat nothing in common: extra key matches 3
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/x.js", "extra=7"), Match::Fallback(3));
        // no query at all still falls back by edit distance
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/x.js", ""), Match::Fallback(1));
        // cache-buster value: same keys, different value
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/x.js", "v=2&t=101"), Match::Fallback(2));
    }

    #[test]
    fn misses() {
        let m = m();
        assert_eq!(m.lookup("GET", Some("www.a.com"), "/nope", ""), Match::None);
        assert_eq!(m.lookup("GET", Some("other.com"), "/", ""), Match::None);
        assert_eq!(m.lookup("DELETE", Some("www.a.com"), "/", ""), Match::None);
        // host-less: any host, first in manifest order
        assert_eq!(m.lookup("GET", None, "/x.js", ""), Match::Exact(5));
    }

    #[test]
    fn targets_and_hosts() {
        assert_eq!(split_target("/a/b?x=1#frag"), (None, "/a/b".into(), "x=1".into()));
        assert_eq!(split_target("http://WWW.A.com:80/p?q"), (Some("www.a.com".into()), "/p".into(), "q".into()));
        assert_eq!(split_target("https://a.com"), (Some("a.com".into()), "/".into(), "".into()));
        assert_eq!(normalize_host("[::1]:443"), "::1");
        assert_eq!(normalize_host("198.19.0.1:80"), "198.19.0.1");
        assert_eq!(edit_distance(b"kitten", b"sitting"), 3);
    }
}
