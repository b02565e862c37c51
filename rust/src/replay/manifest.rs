//! Replay manifest (docs/dataplane-interfaces.md) and its preparation: every
//! response's head is serialized once and every body is loaded once.
use anyhow::{bail, Context, Result};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use super::matcher::Scheme;
use crate::http;

/// One listen socket: an origin address and port, plain or TLS, over TCP or (HTTP/3) UDP.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    pub ip: std::net::IpAddr,
    /// 0: any (the ready line tells which).
    pub port: u16,
    #[serde(default)]
    pub tls: bool,
    /// "tcp" (HTTP/1.1, h2) or "udp" (QUIC: HTTP/3, h3.rs; needs `tls` and `alpn` ["h3"]).
    #[serde(default)]
    pub transport: Transport,
    /// ALPN protocols offered on a TLS address, in preference order: "h2", "http/1.1" over
    /// tcp; "h3" (only) over udp.
    #[serde(default = "http11_only")]
    #[schemars(length(min = 1), extend("uniqueItems" = true, "items" = {"type": "string", "enum": ALPN_PROTOCOLS}))]
    pub alpn: Vec<String>,
}

/// What a listen socket is: TCP, or UDP carrying QUIC.
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    #[default]
    Tcp,
    Udp,
}

fn http11_only() -> Vec<String> {
    vec!["http/1.1".into()]
}

/// The ALPN protocols the replay server speaks ("h3" only on udp entries).
pub const ALPN_PROTOCOLS: &[&str] = &["h2", "http/1.1", "h3"];

/// QUIC's congestion controllers (quinn's).
#[derive(Deserialize, Serialize, Debug, Clone, Copy, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum QuicCc {
    #[default]
    Cubic,
    Newreno,
    /// quinn marks its BBR experimental.
    Bbr,
}

/// QUIC's own settings (udp listen entries, h3.rs).
#[derive(Deserialize, Serialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct QuicSettings {
    /// Congestion controller.
    #[serde(default)]
    pub cc: QuicCc,
    /// Initial congestion window, in packets of 1200 bytes (quinn's default: 10).
    #[serde(default = "default_initial_window_packets")]
    #[schemars(range(min = 2, max = MAX_INITIAL_WINDOW_PACKETS))]
    pub initial_window_packets: u32,
    /// QUIC connections open at once, at most (over: refused, `quic_refused`).
    #[serde(default = "default_max_connections")]
    #[schemars(range(min = 1, max = MAX_QUIC_CONNECTIONS))]
    pub max_connections: u32,
    /// Handshakes in progress from addresses not yet validated above which a new one is sent a
    /// Retry first (address validation, one more round trip; `quic_retries`).
    #[serde(default = "default_retry_above")]
    #[schemars(range(min = 0, max = MAX_QUIC_CONNECTIONS))]
    pub retry_above: u32,
}

impl Default for QuicSettings {
    fn default() -> Self {
        QuicSettings {
            cc: QuicCc::default(),
            initial_window_packets: default_initial_window_packets(),
            max_connections: default_max_connections(),
            retry_above: default_retry_above(),
        }
    }
}

fn default_initial_window_packets() -> u32 {
    10
}
fn default_max_connections() -> u32 {
    10_000
}
fn default_retry_above() -> u32 {
    1000
}
/// `initial_window_packets` from 2 (RFC 9002's minimum window) to this.
pub const MAX_INITIAL_WINDOW_PACKETS: u32 = 1000;
/// `max_connections` and `retry_above` at most.
pub const MAX_QUIC_CONNECTIONS: u32 = 1_000_000;

/// The certificate (every https host a SAN) and its key, PEM.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
    /// Early data (0-RTT) accepted per resumed connection, bytes; 0 refuses it.
    #[serde(default = "default_max_early_data")]
    pub max_early_data: u32,
}

/// As Cloudflare's front ends: 16 KiB, room for the first requests of a page.
fn default_max_early_data() -> u32 {
    16384
}

/// A response body: bytes of a file, or N synthetic bytes.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(untagged, deny_unknown_fields)]
pub enum BodySpec {
    /// `length` bytes of `file` from `offset` (each file read once at start).
    File {
        file: PathBuf,
        #[serde(default)]
        offset: u64,
        length: u64,
    },
    /// `synth` deterministic bytes (printable for text types); `mime` becomes Content-Type
    /// unless the headers have one.
    Synth {
        synth: u64,
        #[serde(default)]
        mime: Option<String>,
    },
}

fn get() -> String {
    "GET".into()
}
fn default_status() -> u16 {
    200
}
fn yes() -> bool {
    true
}

/// One recorded response and the request it answers.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResponseSpec {
    #[serde(default = "get")]
    pub method: String,
    /// "http" or "https"; None: answers either scheme.
    #[serde(default)]
    pub scheme: Option<String>,
    /// May answer the same URL requested with the other scheme (HSTS upgrade).
    #[serde(default = "yes")]
    pub cross_scheme: bool,
    /// Lower-case hex SHA-256 of the recorded request body (None: no body).
    #[serde(default)]
    #[schemars(regex(pattern = r"^[0-9a-fA-F]{64}$"))]
    pub body_sha256: Option<String>,
    pub host: String,
    pub path: String,
    #[serde(default)]
    pub query: String,
    #[serde(default = "default_status")]
    pub status: u16,
    /// Header fields as recorded, `[name, value]` in order.
    #[serde(default)]
    pub headers: Vec<(String, String)>,
    /// null: an empty body.
    #[serde(default)]
    pub body: Option<BodySpec>,
    /// Sent with `Transfer-Encoding: chunked` (HTTP/1.1).
    #[serde(default)]
    pub chunked: bool,
    /// Server think time (HAR `timings.wait`), slept only with `think_time`.
    #[serde(default)]
    pub wait_ms: Option<f64>,
}

fn default_tfo_queue() -> u32 {
    4096
}

/// `pltlab-dp replay --manifest`: what the replay server listens on and answers.
#[derive(Deserialize, Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Manifest {
    #[schemars(length(min = 1))]
    pub listen: Vec<Listen>,
    #[serde(default)]
    pub tls: Option<TlsFiles>,
    /// TCP_FASTOPEN queue of every listen socket (0: no TFO).
    #[serde(default = "default_tfo_queue")]
    pub tfo_queue: u32,
    /// Responses wait their `wait_ms` before being sent.
    #[serde(default)]
    pub think_time: bool,
    /// Order of the responses on an h2 connection (h2.rs, priority.rs): "rfc9218" or
    /// "round-robin" (the default here; the control plane asks for rfc9218 by default).
    #[serde(default)]
    pub h2_priority: crate::replay::priority::Scheme,
    pub responses: Vec<ResponseSpec>,
    /// File receiving the statistics object at exit.
    #[serde(default)]
    pub stats: Option<PathBuf>,
    /// A connection's TLS handshake and the head of its first request (h2: preface, SETTINGS
    /// and first HEADERS) must be complete this long after its accept, a later HTTP/1.1 head
    /// this long after its first byte; else the connection is closed (mod.rs).
    #[serde(default = "default_request_timeout_ms")]
    #[schemars(range(min = 1, max = MAX_REQUEST_TIMEOUT_MS))]
    pub request_timeout_ms: u64,
    /// HTTP/1.x connections are kept alive between requests as the client asks (true), or
    /// every response says `Connection: close` and ends its connection (false: the control
    /// plane's knob keepalive off; h1.rs).
    #[serde(default = "yes")]
    pub keep_alive: bool,
    /// QUIC's settings, for the udp listen entries.
    #[serde(default)]
    pub quic: QuicSettings,
}

/// 120 s: over Chromium's 60 s lifetime of an unused (preconnected) socket plus the slowest
/// handshake of the emulated range (docs/dataplane-interfaces.md).
fn default_request_timeout_ms() -> u64 {
    120_000
}

/// `request_timeout_ms` from 1 ms to a day.
pub const MAX_REQUEST_TIMEOUT_MS: u64 = 86_400_000;

/// A body: a slice of a shared buffer (file contents or synthetic bytes).
#[derive(Clone)]
pub struct Body {
    pub data: Arc<Vec<u8>>,
    pub start: usize,
    pub end: usize,
}

impl Body {
    pub fn bytes(&self) -> &[u8] {
        &self.data[self.start..self.end]
    }
}

pub struct Prepared {
    /// Status line + recorded headers (hop-by-hop and framing headers removed),
    /// without the terminating empty line.
    pub head: Vec<u8>,
    pub body: Body,
    /// Chunked wire form of the body, when the recording was chunked.
    pub chunked_wire: Option<Vec<u8>>,
    pub wait: Option<std::time::Duration>,
    /// The status forbids a body (1xx/204/304).
    pub no_body: bool,
    pub scheme: Option<Scheme>,
    pub body_sha256: Option<[u8; 32]>,
    /// The same response for HTTP/2 (h2.rs): status and the recorded headers, names lower-case,
    /// connection-specific ones left out (RFC 9113 8.2.2) like the h1 head's hop-by-hop ones.
    pub status: u16,
    pub h2_headers: ::http::HeaderMap,
}

const HOP_BY_HOP: &[&str] = &[
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "content-length",
    "te",
    "trailer",
    "upgrade",
];

/// Deterministic synthetic content: printable for text types, a byte ramp otherwise.
fn synth_bytes(n: usize, text: bool) -> Vec<u8> {
    if text {
        const P: &[u8] = b"/* pltlab synthetic body */ abcdefghijklmnopqrstuvwxyz0123456789\n";
        P.iter().cycle().take(n).copied().collect()
    } else {
        (0..n).map(|i| (i.wrapping_mul(31) % 251) as u8).collect()
    }
}

pub fn load(path: &std::path::Path) -> Result<Manifest> {
    let data = std::fs::read(path).with_context(|| format!("cannot read manifest {}", path.display()))?;
    let m: Manifest = serde_json::from_slice(&data).with_context(|| format!("bad manifest {}", path.display()))?;
    if m.listen.is_empty() {
        bail!("manifest has no listen addresses");
    }
    if m.listen.iter().any(|l| l.tls) && m.tls.is_none() {
        bail!("manifest has a tls listen address but no \"tls\": {{\"cert\", \"key\"}}");
    }
    for l in &m.listen {
        check_alpn(l).with_context(|| format!("bad manifest {}", path.display()))?;
    }
    if !(1..=MAX_REQUEST_TIMEOUT_MS).contains(&m.request_timeout_ms) {
        bail!(
            "bad manifest {}: request_timeout_ms {} is not from 1 to {MAX_REQUEST_TIMEOUT_MS}",
            path.display(),
            m.request_timeout_ms
        );
    }
    check_quic(&m.quic).with_context(|| format!("bad manifest {}", path.display()))?;
    Ok(m)
}

/// A listen entry's `alpn`: not empty, only protocols the server speaks, no repeats; "h3" alone
/// on a udp entry (which needs `tls`), never on a tcp one.
pub fn check_alpn(l: &Listen) -> Result<()> {
    let at = match l.transport {
        Transport::Tcp => format!("listen {}:{}", l.ip, l.port),
        Transport::Udp => format!("listen {}:{} (udp)", l.ip, l.port),
    };
    if l.alpn.is_empty() {
        bail!("{at}: \"alpn\" is empty (offer at least \"http/1.1\")");
    }
    for (i, p) in l.alpn.iter().enumerate() {
        if !ALPN_PROTOCOLS.contains(&p.as_str()) {
            bail!("{at}: ALPN protocol {p:?} is not one of {ALPN_PROTOCOLS:?}");
        }
        if l.alpn[..i].contains(p) {
            bail!("{at}: ALPN protocol {p:?} listed twice");
        }
    }
    match l.transport {
        Transport::Tcp if l.alpn.iter().any(|p| p == "h3") => {
            bail!("{at}: ALPN protocol \"h3\" is offered only on a \"transport\": \"udp\" entry")
        }
        Transport::Udp if !l.tls => bail!("{at}: a udp entry (QUIC) needs \"tls\": true"),
        Transport::Udp if l.alpn != ["h3"] => {
            bail!("{at}: a udp entry offers \"alpn\": [\"h3\"] only, not {:?}", l.alpn)
        }
        _ => Ok(()),
    }
}

/// The manifest's `quic` settings within their bounds.
pub fn check_quic(q: &QuicSettings) -> Result<()> {
    if !(2..=MAX_INITIAL_WINDOW_PACKETS).contains(&q.initial_window_packets) {
        bail!("quic.initial_window_packets {} is not from 2 to {MAX_INITIAL_WINDOW_PACKETS}", q.initial_window_packets);
    }
    if !(1..=MAX_QUIC_CONNECTIONS).contains(&q.max_connections) {
        bail!("quic.max_connections {} is not from 1 to {MAX_QUIC_CONNECTIONS}", q.max_connections);
    }
    if q.retry_above > MAX_QUIC_CONNECTIONS {
        bail!("quic.retry_above {} is not from 0 to {MAX_QUIC_CONNECTIONS}", q.retry_above);
    }
    Ok(())
}

pub fn prepare(m: &Manifest) -> Result<Vec<Prepared>> {
    let mut files: HashMap<PathBuf, Arc<Vec<u8>>> = HashMap::new();
    let max_text = m.responses.iter().filter_map(|r| match &r.body {
        Some(BodySpec::Synth { synth, mime }) if is_text(mime.as_deref()) => Some(*synth as usize),
        _ => None,
    });
    let max_bin = m.responses.iter().filter_map(|r| match &r.body {
        Some(BodySpec::Synth { synth, mime }) if !is_text(mime.as_deref()) => Some(*synth as usize),
        _ => None,
    });
    let synth_text = Arc::new(synth_bytes(max_text.max().unwrap_or(0), true));
    let synth_bin = Arc::new(synth_bytes(max_bin.max().unwrap_or(0), false));
    let empty = Arc::new(Vec::new());
    let mut out = Vec::with_capacity(m.responses.len());
    for (i, r) in m.responses.iter().enumerate() {
        let p = prepare_one(r, &mut files, &synth_text, &synth_bin, &empty, m.think_time)
            .with_context(|| format!("response {i} ({}{})", r.host, r.path))?;
        out.push(p);
    }
    Ok(out)
}

fn prepare_one(
    r: &ResponseSpec,
    files: &mut HashMap<PathBuf, Arc<Vec<u8>>>,
    synth_text: &Arc<Vec<u8>>,
    synth_bin: &Arc<Vec<u8>>,
    empty: &Arc<Vec<u8>>,
    think_time: bool,
) -> Result<Prepared> {
    let mut synth_mime = None;
    let body = match &r.body {
        None => Body { data: empty.clone(), start: 0, end: 0 },
        Some(BodySpec::File { file, offset, length }) => {
            let data = match files.get(file) {
                Some(d) => d.clone(),
                None => {
                    let d = Arc::new(
                        std::fs::read(file).with_context(|| format!("cannot read body file {}", file.display()))?,
                    );
                    files.insert(file.clone(), d.clone());
                    d
                }
            };
            let (s, e) = (*offset as usize, offset.saturating_add(*length) as usize);
            if e > data.len() {
                bail!("body {}+{} beyond the end of {} ({} bytes)", offset, length, file.display(), data.len());
            }
            Body { data, start: s, end: e }
        }
        Some(BodySpec::Synth { synth, mime }) => {
            synth_mime = mime.clone();
            let d = if is_text(mime.as_deref()) { synth_text } else { synth_bin };
            Body { data: d.clone(), start: 0, end: *synth as usize }
        }
    };
    let scheme = match r.scheme.as_deref() {
        None => None,
        Some(s) => {
            Some(Scheme::parse(s).ok_or_else(|| anyhow::anyhow!("scheme {s:?} is neither \"http\" nor \"https\""))?)
        }
    };
    let body_sha256 = match r.body_sha256.as_deref() {
        None => None,
        Some(h) => Some(parse_sha256(h).ok_or_else(|| anyhow::anyhow!("body_sha256 {h:?} is not 64 hex digits"))?),
    };
    let mut head = Vec::new();
    http::response::status_line(&mut head, 1, r.status);
    let mut has_ct = false;
    let mut h2_headers = ::http::HeaderMap::new();
    let mut add = |head: &mut Vec<u8>, k: &str, piece: &str| {
        head.extend_from_slice(format!("{k}: {piece}\r\n").as_bytes());
        if let (Ok(n), Ok(v)) = (
            ::http::HeaderName::from_bytes(k.to_ascii_lowercase().as_bytes()),
            ::http::HeaderValue::from_bytes(piece.trim().as_bytes()),
        ) {
            h2_headers.append(n, v);
        }
    };
    for (k, v) in &r.headers {
        let lk = k.to_ascii_lowercase();
        if HOP_BY_HOP.contains(&lk.as_str()) || !valid_name(k) {
            continue;
        }
        has_ct |= lk == "content-type";
        // exporters join repeated lines (Set-Cookie, Link) with "\n": one line each
        for piece in v.split('\n') {
            let piece: String = piece.chars().filter(|&c| c == '\t' || !c.is_ascii_control()).collect();
            if !piece.trim().is_empty() {
                add(&mut head, k, &piece);
            }
        }
    }
    if let (false, Some(mime)) = (has_ct, synth_mime) {
        add(&mut head, "Content-Type", &mime);
    }
    let no_body = http::status_has_no_body(r.status);
    let chunked_wire = (r.chunked && !no_body).then(|| http::encode_chunked(body.bytes(), 16 * 1024));
    let wait = match r.wait_ms {
        Some(w) if think_time && w > 0.0 => Some(std::time::Duration::from_secs_f64(w / 1000.0)),
        _ => None,
    };
    Ok(Prepared { head, body, chunked_wire, wait, no_body, scheme, body_sha256, status: r.status, h2_headers })
}

/// A header name that can go on the wire: an RFC 9110 token (so not empty, no pseudo-header
/// like ":path", no whitespace, ':' or control characters). Others are skipped.
fn valid_name(k: &str) -> bool {
    !k.is_empty() && k.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

fn parse_sha256(h: &str) -> Option<[u8; 32]> {
    let h = h.as_bytes();
    if h.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (k, pair) in h.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[k] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

fn is_text(mime: Option<&str>) -> bool {
    match mime {
        None => false,
        Some(m) => {
            let m = m.to_ascii_lowercase();
            m.starts_with("text/") || m.contains("javascript") || m.contains("json") || m.contains("xml")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> std::result::Result<Manifest, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    const RESPONSE: &str = r#"{"host": "a", "path": "/"}"#;

    /// Optional keys take their defaults; an unknown key anywhere is refused, naming it.
    #[test]
    fn unknown_keys_are_refused_by_name() {
        let ok = format!(r#"{{"listen": [{{"ip": "127.0.0.1", "port": 80}}], "responses": [{RESPONSE}]}}"#);
        let m = parse(&ok).unwrap();
        assert_eq!((m.tfo_queue, m.request_timeout_ms, m.responses[0].status), (4096, 120_000, 200));
        for (bad, key) in [
            (r#"{"listen": [], "responses": [], "think_tme": true}"#.to_string(), "think_tme"),
            (r#"{"listen": [{"ip": "127.0.0.1", "port": 80, "tsl": true}], "responses": []}"#.into(), "tsl"),
            (
                r#"{"listen": [], "tls": {"cert": "c", "key": "k", "max_early": 1}, "responses": []}"#.into(),
                "max_early",
            ),
            (
                r#"{"listen": [], "responses": [{"host": "a", "path": "/", "decoded_length": 5}]}"#.into(),
                "decoded_length",
            ),
        ] {
            let e = parse(&bad).unwrap_err();
            assert!(e.contains(&format!("unknown field `{key}`")), "{bad}: {e}");
        }
        // a body is a file slice or synthetic bytes, nothing else (untagged: the error says so)
        let bad = r#"{"listen": [], "responses": [{"host": "a", "path": "/", "body": {"synth": 5, "mim": "x"}}]}"#;
        assert!(parse(bad).unwrap_err().contains("did not match any variant"));
    }
}
