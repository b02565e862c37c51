//! `pltlab-dp replay --manifest FILE`: the replay server.
//!
//! One process serves every origin of a manifest: one listen socket per
//! `listen` entry, each with TCP_FASTOPEN (queue `tfo_queue`) and a listen
//! backlog of at least that size. HTTP/1.1 keep-alive and HTTP/1.0, no
//! pipelining needed (but supported: requests are answered in order). Heads
//! are serialized and bodies loaded once at start; answering a request is a
//! few hash lookups (matcher.rs: cache-key matching, repeated URLs in recorded
//! order per session, request-body digests) and one writev. SIGUSR2 starts a
//! new session. Single-threaded tokio runtime. Hostile input is bounded:
//! request heads (crate::http::request: 64 KiB, 100 header lines, strict
//! framing) are refused with 400/431/501 and a lingering close (answers.rs),
//! quoted URLs are cut to 256 bytes, accept errors back off (accept.rs), and a connection
//! whose TLS handshake or first request head is not in by the manifest's `request_timeout_ms`
//! (a later head: that long after its first byte) is closed; keep-alive idling is not bounded.
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub mod accept;
pub mod answers;
pub mod h2;
#[cfg(test)]
mod h2_tests;
#[cfg(test)]
mod hostile_tests;
pub mod manifest;
pub mod matcher;
pub mod priority;
#[cfg(test)]
mod prop_tests;
pub mod report;
pub mod service;
#[cfg(test)]
pub(crate) mod tests;
pub mod tls;

use crate::http::{request, response, BodyDecoder, Framing, Reject};
use crate::os::{sock, tcpinfo};
use answers::{quote, MAX_QUOTED_URL};
use manifest::Prepared;
use matcher::{Match, Matcher, Scheme};

#[derive(clap::Args)]
pub struct Args {
    /// Manifest (JSON, see docs/dataplane-interfaces.md).
    #[arg(long)]
    pub manifest: PathBuf,
}

#[derive(Default)]
pub struct Stats {
    pub requests: AtomicU64,
    pub responses_exact: AtomicU64,
    pub fallback_matches: AtomicU64,
    /// Exact or fallback matches answered by a recording of the other scheme.
    pub cross_scheme_matches: AtomicU64,
    /// Sessions begun by SIGUSR2 (`Shared::new_session`).
    pub sessions: AtomicU64,
    pub not_found: AtomicU64,
    pub bad_requests: AtomicU64,
    pub connections: AtomicU64,
    /// Failed accept calls (EMFILE/ENFILE when descriptors run out, ECONNABORTED ...).
    pub accept_errors: AtomicU64,
    pub tls_connections: AtomicU64,
    pub tls_handshake_errors: AtomicU64,
    /// Connections closed by `Shared::request_timeout`: in their TLS handshake; without a whole
    /// request head (none, or one trickling in; h2: no preface, SETTINGS and first HEADERS).
    pub handshake_timeouts: AtomicU64,
    pub request_timeouts: AtomicU64,
    /// TLS handshakes completed: full, resumed (PSK from a ticket); of the resumed, those whose
    /// early data (0-RTT) was accepted, and the early data bytes read.
    pub tls_full: AtomicU64,
    pub tls_resumed: AtomicU64,
    pub tls_early_data: AtomicU64,
    pub tls_early_bytes: Arc<AtomicU64>,
    /// The same handshake counts, of the TLS connections that carried at least one request
    /// (a browser's spare connections, never used, left out): a load's proof of what its
    /// requests got.
    pub tls_full_used: AtomicU64,
    pub tls_resumed_used: AtomicU64,
    pub tls_early_used: AtomicU64,
    /// SIGHUP: every session forgotten (a ticket key rotation), how often.
    pub tls_ticket_rotations: AtomicU64,
    /// Connections served as HTTP/1.x (plain or TLS) and as h2 (TLS, ALPN "h2").
    pub h1_connections: AtomicU64,
    pub h2_connections: AtomicU64,
    /// Requests answered over h2 (also counted in `requests`).
    pub h2_streams: AtomicU64,
    /// h2 connections ended by a protocol error (GOAWAY with an error code, either way).
    pub h2_errors: AtomicU64,
    pub tfo_connections: AtomicU64,
    /// TLS connections whose SYN carried data; of those, the ones whose
    /// ClientHello was larger than that data (TFO then saves no round trip).
    pub tfo_tls_connections: AtomicU64,
    pub tfo_tls_hello_split: AtomicU64,
    /// TLS connections whose SYN also carried early data (a whole 0-RTT record after the hello).
    pub tfo_tls_early_in_syn: AtomicU64,
    /// Largest ClientHello record seen in a SYN-data connection, and the most SYN data.
    pub tfo_tls_hello_max: AtomicU64,
    pub tfo_syn_bytes_max: AtomicU64,
    pub bytes_out: AtomicU64,
    /// URL (cut to MAX_QUOTED_URL bytes) -> count, first-seen order (bounded).
    pub not_found_urls: Mutex<Vec<(String, u64)>>,
    /// (URL cut like not_found_urls, response index, count), first-seen order (bounded).
    pub fallback_urls: Mutex<Vec<(String, usize, u64)>>,
    /// Per-response service time in ns: request head parsed -> response handed
    /// to the socket (think time excluded). Bounded sample (service.rs).
    pub service_ns: Mutex<service::ServiceTimes>,
}

const MAX_LISTED_URLS: usize = 1000;

impl Stats {
    fn note_404(&self, url: &str) {
        self.not_found.fetch_add(1, Relaxed);
        let url = quote(url, MAX_QUOTED_URL);
        let mut v = self.not_found_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url) {
            e.1 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url.into_owned(), 1));
        }
    }
    fn note_fallback(&self, url: &str, idx: usize) {
        self.fallback_matches.fetch_add(1, Relaxed);
        let url = quote(url, MAX_QUOTED_URL);
        let mut v = self.fallback_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url && e.1 == idx) {
            e.2 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url.into_owned(), idx, 1));
        }
    }
    fn note_tfo_tls<S: AsRawFd>(&self, s: &S) {
        self.tfo_tls_connections.fetch_add(1, Relaxed);
        if let Some(syn) = sock::syn_tls_records(s) {
            self.tfo_syn_bytes_max.fetch_max(syn.bytes as u64, Relaxed);
            if let Some(hello) = syn.hello {
                self.tfo_tls_hello_max.fetch_max(hello as u64, Relaxed);
                if syn.bytes < hello {
                    self.tfo_tls_hello_split.fetch_add(1, Relaxed);
                }
            }
            if syn.early_data {
                self.tfo_tls_early_in_syn.fetch_add(1, Relaxed);
            }
        }
    }
    fn note_service(&self, t: std::time::Instant, think: Option<std::time::Duration>) {
        let d = t.elapsed().saturating_sub(think.unwrap_or_default());
        self.service_ns.lock().unwrap().add(d.as_nanos().min(u32::MAX as u128) as u32);
    }
}

pub struct Shared {
    pub responses: Vec<Prepared>,
    pub matcher: Matcher,
    pub stats: Stats,
    pub accept_log: accept::ErrorLog,
    /// TLS sessions (tickets) of every https origin.
    pub sessions: Arc<crate::certs::Sessions>,
    /// How an h2 connection orders its responses.
    pub h2_priority: priority::Scheme,
    /// Responses wait their recorded server time (manifest `think_time`).
    pub think_time: bool,
    /// Manifest `request_timeout_ms`: the TLS handshake and the first request head must be in
    /// this long after the accept, a later HTTP/1.1 head this long after its first byte.
    pub request_timeout: std::time::Duration,
}

impl Shared {
    /// A new load begins: repeated URLs start again from their first recording.
    pub fn new_session(&self) {
        self.matcher.new_session();
        self.stats.sessions.fetch_add(1, Relaxed);
    }
    /// Forgets every TLS session, as a ticket key rotation does: tickets clients hold no
    /// longer resume (a full handshake follows, early data is refused and sent again).
    pub fn rotate_tickets(&self) {
        self.sessions.clear();
        self.stats.tls_ticket_rotations.fetch_add(1, Relaxed);
    }
}

pub fn build_shared(m: &manifest::Manifest) -> Result<Arc<Shared>> {
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
    Ok(Arc::new(Shared {
        responses,
        matcher,
        stats: Stats::default(),
        accept_log: Default::default(),
        sessions: Default::default(),
        h2_priority: m.h2_priority,
        think_time: m.think_time,
        request_timeout: std::time::Duration::from_millis(m.request_timeout_ms),
    }))
}

/// Listen socket with TCP_FASTOPEN (queue `tfo_queue`), non-blocking.
pub fn tfo_listener(addr: std::net::SocketAddr, tfo_queue: u32) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if tfo_queue > 0 {
        sock::set_tcp_int(&s, sock::TCP_FASTOPEN, tfo_queue as i32)
            .with_context(|| format!("setsockopt TCP_FASTOPEN({tfo_queue}) on {addr}"))?;
    }
    s.bind(&addr.into()).with_context(|| format!("cannot bind {addr}"))?;
    s.listen(tfo_queue.max(4096).min(i32::MAX as u32) as i32).with_context(|| format!("cannot listen on {addr}"))?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

pub struct Server {
    pub addrs: Vec<(std::net::SocketAddr, bool)>,
}

/// Binds every listen socket and spawns the accept loops on the current runtime.
pub fn start(m: &manifest::Manifest, shared: Arc<Shared>) -> Result<Server> {
    // one TLS acceptor per distinct ALPN list (addresses offering the same protocols share it)
    let mut acceptors: HashMap<Vec<String>, Arc<rustls::ServerConfig>> = HashMap::new();
    if let Some(t) = &m.tls {
        for l in m.listen.iter().filter(|l| l.tls) {
            if !acceptors.contains_key(&l.alpn) {
                let alpn: Vec<&str> = l.alpn.iter().map(String::as_str).collect();
                let sessions = shared.sessions.clone();
                let cfg = crate::certs::server_config(&t.cert, &t.key, &alpn, sessions, t.max_early_data)?;
                acceptors.insert(l.alpn.clone(), cfg);
            }
        }
    }
    let mut addrs = Vec::new();
    let mut listeners = Vec::new();
    for l in &m.listen {
        manifest::check_alpn(l)?;
        let std_l = tfo_listener(std::net::SocketAddr::new(l.ip, l.port), m.tfo_queue)?;
        let local = std_l.local_addr()?;
        addrs.push((local, l.tls));
        let acceptor = if l.tls { acceptors.get(&l.alpn).cloned() } else { None };
        listeners.push((tokio::net::TcpListener::from_std(std_l)?, acceptor));
    }
    for (lst, acceptor) in listeners {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut backoff = accept::Backoff::default();
            let local = lst.local_addr().map(|a| a.to_string()).unwrap_or_default();
            loop {
                let (tcp, _) = match lst.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        shared.stats.accept_errors.fetch_add(1, Relaxed);
                        shared.accept_log.note(&local, &e);
                        tokio::time::sleep(backoff.failed()).await;
                        continue;
                    }
                };
                backoff.succeeded();
                let st = &shared.stats;
                st.connections.fetch_add(1, Relaxed);
                if let Ok(ti) = tcpinfo::get(&tcp) {
                    if ti.syn_data_acked() {
                        st.tfo_connections.fetch_add(1, Relaxed);
                        if acceptor.is_some() {
                            st.note_tfo_tls(&tcp);
                        }
                    }
                }
                let _ = tcp.set_nodelay(true);
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    let st = &shared.stats;
                    // a client that never finishes its handshake or first request (slowloris)
                    // gives its descriptor back at this deadline
                    let deadline = tokio::time::Instant::now() + shared.request_timeout;
                    match acceptor {
                        None => {
                            st.h1_connections.fetch_add(1, Relaxed);
                            let _ = serve_conn(tcp, &shared, Scheme::Http, None, None, deadline).await;
                        }
                        Some(cfg) => {
                            st.tls_connections.fetch_add(1, Relaxed);
                            let hs = tls::accept(cfg, tcp, st.tls_early_bytes.clone());
                            match tokio::time::timeout_at(deadline, hs).await {
                                Err(_) => {
                                    st.handshake_timeouts.fetch_add(1, Relaxed);
                                }
                                Ok(Ok(mut tls)) => {
                                    let hs = tls.handshake();
                                    if hs.resumed { &st.tls_resumed } else { &st.tls_full }.fetch_add(1, Relaxed);
                                    if hs.early_data {
                                        st.tls_early_data.fetch_add(1, Relaxed);
                                    }
                                    let used = Arc::new(TlsUse::new(hs.resumed, hs.early_data));
                                    let (_, conn) = tls.get_ref();
                                    let sni = conn.server_name().map(|s| s.to_string());
                                    if conn.alpn_protocol() == Some(b"h2") {
                                        st.h2_connections.fetch_add(1, Relaxed);
                                        h2::tune_socket(&shared, tls.get_ref().0);
                                        h2::serve(tls, shared.clone(), sni, used, deadline).await;
                                    } else {
                                        st.h1_connections.fetch_add(1, Relaxed);
                                        let used = Some(&*used);
                                        let _ = serve_conn(tls, &shared, Scheme::Https, sni, used, deadline).await;
                                    }
                                }
                                Ok(Err(_)) => {
                                    st.tls_handshake_errors.fetch_add(1, Relaxed);
                                }
                            }
                        }
                    }
                });
            }
        });
    }
    Ok(Server { addrs })
}

async fn write_all_vectored<S: AsyncWrite + Unpin>(s: &mut S, parts: &[&[u8]]) -> std::io::Result<()> {
    let mut idx = 0;
    let mut off = 0;
    while idx < parts.len() {
        if off >= parts[idx].len() {
            idx += 1;
            off = 0;
            continue;
        }
        let mut slices: [IoSlice; 3] = [IoSlice::new(&[]), IoSlice::new(&[]), IoSlice::new(&[])];
        let mut k = 0;
        for (j, p) in parts[idx..].iter().enumerate().take(3) {
            slices[k] = IoSlice::new(if j == 0 { &p[off..] } else { p });
            k += 1;
        }
        let mut n = s.write_vectored(&slices[..k]).await?;
        if n == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        while n > 0 && idx < parts.len() {
            let left = parts[idx].len() - off;
            if n >= left {
                n -= left;
                idx += 1;
                off = 0;
            } else {
                off += n;
                n = 0;
            }
        }
    }
    s.flush().await
}

/// A closing connection is drained for at most this long (and this many bytes)
/// after the server shut its sending side: closing a socket with unread request
/// bytes makes the kernel send a reset, which can destroy the response before
/// the client has read it (RFC 9112 9.6, "lingering close").
const LINGER: std::time::Duration = std::time::Duration::from_secs(2);
const LINGER_BYTES: usize = 64 << 20;

/// Shuts the sending side (TLS: close_notify first), then reads and discards
/// until the client closes, LINGER passes or LINGER_BYTES arrived.
async fn close_lingering<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S) {
    let deadline = tokio::time::Instant::now() + LINGER;
    if tokio::time::timeout_at(deadline, s.shutdown()).await.is_err() {
        return;
    }
    let mut scratch = vec![0u8; 16 * 1024];
    let mut total = 0;
    while total < LINGER_BYTES {
        match tokio::time::timeout_at(deadline, s.read(&mut scratch)).await {
            Ok(Ok(n)) if n > 0 => total += n,
            _ => break,
        }
    }
}

/// Answers a refused request (400/431/501, Connection: close) and closes the connection.
async fn refuse<S: AsyncRead + AsyncWrite + Unpin>(s: &mut S, sh: &Shared, r: &Reject) {
    sh.stats.bad_requests.fetch_add(1, Relaxed);
    let msg = answers::refusal(r);
    let sent = async {
        s.write_all(&msg).await?;
        s.flush().await
    };
    if let Ok(Ok(())) = tokio::time::timeout(LINGER, sent).await {
        sh.stats.bytes_out.fetch_add(msg.len() as u64, Relaxed);
    }
    close_lingering(s).await;
}

/// A TLS connection's handshake, counted in the `*_used` stats at its first request.
pub(crate) struct TlsUse {
    resumed: bool,
    early_data: bool,
    counted: AtomicBool,
}

impl TlsUse {
    pub(crate) fn new(resumed: bool, early_data: bool) -> Self {
        TlsUse { resumed, early_data, counted: AtomicBool::new(false) }
    }

    pub(crate) fn request(&self, st: &Stats) {
        if self.counted.swap(true, Relaxed) {
            return;
        }
        if self.resumed { &st.tls_resumed_used } else { &st.tls_full_used }.fetch_add(1, Relaxed);
        if self.early_data {
            st.tls_early_used.fetch_add(1, Relaxed);
        }
    }
}

/// Serves requests on one connection until the client closes it, asks to, or errs. The first
/// request head must be in by `first_deadline`, a later one `Shared::request_timeout` after its
/// first byte (else the connection closes, counted); between requests a connection may idle.
async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    mut s: S,
    sh: &Shared,
    scheme: Scheme,
    sni: Option<String>,
    used: Option<&TlsUse>,
    first_deadline: tokio::time::Instant,
) -> std::io::Result<()> {
    let mut buf: Vec<u8> = vec![0; 16 * 1024];
    let mut len = 0usize;
    // buf[..len] may hold a whole head: parse it (parsing only then keeps a head
    // arriving byte by byte linear); the first bytes of a head are parsed at once
    // so that garbage is refused without waiting for a blank line
    let mut check = false;
    let mut head: Vec<u8> = Vec::with_capacity(2048);
    // None: idle between requests (keep-alive), no deadline until a head begins
    let mut head_deadline = Some(first_deadline);
    loop {
        // Read one request head (at most request::MAX_HEAD_BYTES).
        let req = loop {
            if check {
                match request::parse_request(&buf[..len]) {
                    Ok(Some(r)) => break r,
                    Ok(None) => {}
                    Err(r) => {
                        refuse(&mut s, sh, &r).await;
                        return Ok(());
                    }
                }
            }
            if len >= request::MAX_HEAD_BYTES {
                refuse(&mut s, sh, &Reject::head_too_large()).await;
                return Ok(());
            }
            if len == buf.len() {
                buf.resize((buf.len() * 2).min(request::MAX_HEAD_BYTES), 0);
            }
            if len > 0 {
                // a head has begun (its first bytes are in): it must be whole within the bound
                head_deadline.get_or_insert_with(|| tokio::time::Instant::now() + sh.request_timeout);
            }
            let read = s.read(&mut buf[len..]);
            let n = match head_deadline {
                None => read.await?,
                Some(d) => match tokio::time::timeout_at(d, read).await {
                    Ok(r) => r?,
                    Err(_) => {
                        sh.stats.request_timeouts.fetch_add(1, Relaxed);
                        return Ok(());
                    }
                },
            };
            if n == 0 {
                return Ok(());
            }
            check = len == 0 || request::may_end_head(&buf[..len + n], len.saturating_sub(2));
            len += n;
        };
        head_deadline = None;
        sh.stats.requests.fetch_add(1, Relaxed);
        if let Some(u) = used {
            u.request(&sh.stats);
        }
        let t_req = std::time::Instant::now();
        // Consume the head, then read any request body into its digest.
        buf.copy_within(req.head_len..len, 0);
        len -= req.head_len;
        if req.expect_continue && req.body != Framing::Empty {
            s.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        }
        let mut dec = BodyDecoder::new(req.body);
        let mut digest = (req.body != Framing::Empty).then(|| ring::digest::Context::new(&ring::digest::SHA256));
        while !dec.is_done() {
            if len == 0 {
                let n = s.read(&mut buf[..]).await?;
                if n == 0 {
                    return Ok(());
                }
                len = n;
            }
            let to_digest = |p: &[u8]| {
                if let Some(d) = digest.as_mut() {
                    d.update(p)
                }
            };
            let used = match dec.feed_with(&buf[..len], to_digest) {
                Ok(u) => u,
                Err(_) => {
                    refuse(&mut s, sh, &Reject::bad_chunked_body()).await;
                    return Ok(());
                }
            };
            buf.copy_within(used..len, 0);
            len -= used;
        }
        check = len > 0;

        // an empty body (Content-Length: 0) is no body: recordings without one have no digest
        let body_sha256 = digest.filter(|_| dec.body_bytes > 0).map(|d| {
            let mut out = [0u8; 32];
            out.copy_from_slice(d.finish().as_ref());
            out
        });
        let is_head = req.method.eq_ignore_ascii_case("HEAD");
        let keep = req.keep_alive;
        head.clear();
        let idx = match choose(sh, &req.method, scheme, &req.target, req.host.as_deref(), sni.as_deref(), body_sha256) {
            Choice::Recorded(i) => i,
            Choice::NotFound(u) => {
                let body = answers::not_found(&mut head, &req.method, &u, keep);
                let b: &[u8] = if is_head { b"" } else { body.as_bytes() };
                write_all_vectored(&mut s, &[&head, b]).await?;
                sh.stats.bytes_out.fetch_add((head.len() + b.len()) as u64, Relaxed);
                if !keep {
                    close_lingering(&mut s).await;
                    return Ok(());
                }
                continue;
            }
        };
        let p = &sh.responses[idx];
        if let Some(w) = p.wait {
            tokio::time::sleep(w).await;
        }
        head.extend_from_slice(&p.head);
        let (framing, body): (Framing, &[u8]) = if p.no_body {
            (Framing::Empty, b"")
        } else if let (Some(cw), true) = (&p.chunked_wire, req.minor >= 1) {
            (Framing::Chunked, cw)
        } else {
            (Framing::Length((p.body.end - p.body.start) as u64), p.body.bytes())
        };
        response::end_head(&mut head, framing, keep);
        let body = if is_head { &b""[..] } else { body };
        write_all_vectored(&mut s, &[&head, body]).await?;
        sh.stats.note_service(t_req, p.wait);
        sh.stats.bytes_out.fetch_add((head.len() + body.len()) as u64, Relaxed);
        if !keep {
            close_lingering(&mut s).await;
            return Ok(());
        }
    }
}

/// What answers a request.
pub(crate) enum Choice {
    /// A recorded response (index into `Shared::responses`).
    Recorded(usize),
    /// None: a 404 quoting this URL (host, path, query).
    NotFound(String),
}

/// The answer to a request, HTTP/1.x or h2 alike, counted in the stats: `target` as on the
/// request line (or h2's :path), its host from an absolute target, else `host` (Host header or
/// h2's :authority), else the TLS SNI.
pub(crate) fn choose(
    sh: &Shared,
    method: &str,
    scheme: Scheme,
    target: &str,
    host: Option<&str>,
    sni: Option<&str>,
    body_sha256: Option<[u8; 32]>,
) -> Choice {
    let (thost, path, query) = matcher::split_target(target);
    let host = thost.or_else(|| host.map(str::to_string)).or_else(|| sni.map(str::to_string));
    let m = sh.matcher.lookup(&matcher::Request {
        method,
        scheme,
        host: host.as_deref(),
        path: &path,
        query: &query,
        body_sha256,
    });
    let url = || {
        let q = if query.is_empty() { String::new() } else { format!("?{query}") };
        format!("{}{}{}", host.as_deref().map(matcher::normalize_host).unwrap_or_default(), path, q)
    };
    if matches!(m, Match::CrossScheme(_) | Match::Fallback { cross: true, .. }) {
        sh.stats.cross_scheme_matches.fetch_add(1, Relaxed);
    }
    match m {
        Match::Exact(i) | Match::CrossScheme(i) => {
            sh.stats.responses_exact.fetch_add(1, Relaxed);
            Choice::Recorded(i)
        }
        Match::Fallback { idx, .. } => {
            sh.stats.note_fallback(&url(), idx);
            Choice::Recorded(idx)
        }
        Match::None => {
            let u = url();
            sh.stats.note_404(&u);
            Choice::NotFound(u)
        }
    }
}

/// The signals the server answers; registered before the ready line so that none is lost.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
    hup: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
            hup: signal(SignalKind::hangup())?,
        })
    }

    /// SIGUSR1: prints a stats snapshot (one JSON line, "event": "snapshot"); SIGUSR2: a new
    /// session (a new load begins); SIGHUP: every TLS session forgotten (ticket key rotation);
    /// returns at SIGTERM or SIGINT.
    async fn serve(&mut self, shared: &Shared) {
        use std::io::Write;
        loop {
            // biased: signals sent one after the other are handled in that order (a snapshot
            // asked after a new session or a rotation counts from it)
            tokio::select! {
                biased;
                _ = self.term.recv() => break,
                _ = self.int.recv() => break,
                _ = self.usr2.recv() => shared.new_session(),
                _ = self.hup.recv() => shared.rotate_tickets(),
                _ = self.usr1.recv() => {
                    let st = shared.stats.report(report::Event::Snapshot);
                    println!("{}", serde_json::to_string(&st).expect("statistics serialize"));
                    std::io::stdout().flush().ok();
                }
            }
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    let _ = crate::os::process::set_pdeathsig(); // best effort: serving works without it
    if let Err(e) = crate::os::process::raise_nofile_limit() {
        eprintln!("pltlab-dp replay: cannot raise the open-file limit: {e}");
    }
    let m = manifest::load(&a.manifest)?;
    let shared = build_shared(&m)?;
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    rt.block_on(async {
        let mut signals = Signals::new()?;
        let srv = start(&m, shared.clone())?;
        println!(
            "{}",
            serde_json::json!({"event": "ready", "pid": std::process::id(), "listen": srv.addrs.iter().map(|(a, t)| serde_json::json!({"addr": a.to_string(), "tls": t})).collect::<Vec<_>>(), "responses": m.responses.len()})
        );
        use std::io::Write;
        std::io::stdout().flush().ok();
        signals.serve(&shared).await;
        let st = shared.stats.report(report::Event::Stats);
        if let Some(p) = &m.stats {
            std::fs::write(p, serde_json::to_vec_pretty(&st)?).with_context(|| format!("cannot write stats {}", p.display()))?;
        }
        println!("{}", serde_json::to_string(&st)?);
        std::io::stdout().flush().ok();
        Ok::<(), anyhow::Error>(())
    })?;
    // Do not wait for open connections.
    std::process::exit(0);
}
