//! `pltlab-dp replay --manifest FILE`: the replay server.
//!
//! One process serves every origin of a manifest: one listen socket per
//! `listen` entry, each with TCP_FASTOPEN (queue `tfo_queue`) and a listen
//! backlog of at least that size. HTTP/1.1 keep-alive and HTTP/1.0, no
//! pipelining needed (but supported: requests are answered in order). Heads
//! are serialized and bodies loaded once at start; answering a request is a
//! few hash lookups (matcher.rs: cache-key matching, repeated URLs in recorded
//! order per session, request-body digests) and one writev. SIGUSR2 starts a
//! new session. Single-threaded tokio runtime.
use anyhow::{Context, Result};
use std::io::IoSlice;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

pub mod manifest;
pub mod matcher;
#[cfg(test)]
mod tests;

use crate::sockopt as sock;
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
    pub tls_connections: AtomicU64,
    pub tls_handshake_errors: AtomicU64,
    pub tfo_connections: AtomicU64,
    /// TLS connections whose SYN carried data; of those, the ones whose
    /// ClientHello was larger than that data (TFO then saves no round trip).
    pub tfo_tls_connections: AtomicU64,
    pub tfo_tls_hello_split: AtomicU64,
    /// Largest ClientHello record seen in a SYN-data connection, and the most SYN data.
    pub tfo_tls_hello_max: AtomicU64,
    pub tfo_syn_bytes_max: AtomicU64,
    pub bytes_out: AtomicU64,
    /// URL -> count, first-seen order (bounded).
    pub not_found_urls: Mutex<Vec<(String, u64)>>,
    /// (URL, response index, count), first-seen order (bounded).
    pub fallback_urls: Mutex<Vec<(String, usize, u64)>>,
    /// Per-response service time in ns: request head parsed -> response handed
    /// to the socket (think time excluded). Bounded sample.
    pub service_ns: Mutex<Vec<u32>>,
}

const MAX_LISTED_URLS: usize = 1000;

impl Stats {
    fn note_404(&self, url: String) {
        self.not_found.fetch_add(1, Relaxed);
        let mut v = self.not_found_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url) {
            e.1 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url, 1));
        }
    }
    fn note_fallback(&self, url: String, idx: usize) {
        self.fallback_matches.fetch_add(1, Relaxed);
        let mut v = self.fallback_urls.lock().unwrap();
        if let Some(e) = v.iter_mut().find(|e| e.0 == url && e.1 == idx) {
            e.2 += 1;
        } else if v.len() < MAX_LISTED_URLS {
            v.push((url, idx, 1));
        }
    }
    fn note_tfo_tls(&self, fd: i32) {
        self.tfo_tls_connections.fetch_add(1, Relaxed);
        if let Some((syn, Some(hello))) = sock::syn_tls_record(fd) {
            self.tfo_syn_bytes_max.fetch_max(syn as u64, Relaxed);
            self.tfo_tls_hello_max.fetch_max(hello as u64, Relaxed);
            if syn < hello {
                self.tfo_tls_hello_split.fetch_add(1, Relaxed);
            }
        }
    }
    fn note_service(&self, t: std::time::Instant, think: Option<std::time::Duration>) {
        let d = t.elapsed().saturating_sub(think.unwrap_or_default());
        let mut v = self.service_ns.lock().unwrap();
        if v.len() < 1_000_000 {
            v.push(d.as_nanos().min(u32::MAX as u128) as u32);
        }
    }
    pub fn json(&self) -> serde_json::Value {
        let mut sv = self.service_ns.lock().unwrap().clone();
        sv.sort_unstable();
        let q = |p: f64| if sv.is_empty() { 0.0 } else { sv[((sv.len() - 1) as f64 * p).round() as usize] as f64 / 1000.0 };
        let nf: Vec<_> = self
            .not_found_urls
            .lock()
            .unwrap()
            .iter()
            .map(|(u, n)| serde_json::json!({"url": u, "count": n}))
            .collect();
        let fb: Vec<_> = self
            .fallback_urls
            .lock()
            .unwrap()
            .iter()
            .map(|(u, i, n)| serde_json::json!({"url": u, "response": i, "count": n}))
            .collect();
        serde_json::json!({
            "event": "stats",
            "requests": self.requests.load(Relaxed),
            "exact_matches": self.responses_exact.load(Relaxed),
            "fallback_matches": self.fallback_matches.load(Relaxed),
            "cross_scheme_matches": self.cross_scheme_matches.load(Relaxed),
            "sessions": self.sessions.load(Relaxed),
            "fallbacks": fb,
            "not_found": self.not_found.load(Relaxed),
            "not_found_urls": nf,
            "bad_requests": self.bad_requests.load(Relaxed),
            "connections": self.connections.load(Relaxed),
            "tls_connections": self.tls_connections.load(Relaxed),
            "tls_handshake_errors": self.tls_handshake_errors.load(Relaxed),
            "tfo_connections": self.tfo_connections.load(Relaxed),
            "tfo_tls_connections": self.tfo_tls_connections.load(Relaxed),
            "tfo_tls_hello_split": self.tfo_tls_hello_split.load(Relaxed),
            "tfo_tls_hello_max": self.tfo_tls_hello_max.load(Relaxed),
            "tfo_syn_bytes_max": self.tfo_syn_bytes_max.load(Relaxed),
            "bytes_out": self.bytes_out.load(Relaxed),
            "service_us": {"n": sv.len(), "p50": q(0.5), "p99": q(0.99), "max": q(1.0)},
        })
    }
}

pub struct Shared {
    pub responses: Vec<Prepared>,
    pub matcher: Matcher,
    pub stats: Stats,
}

impl Shared {
    /// A new load begins: repeated URLs start again from their first recording.
    pub fn new_session(&self) {
        self.matcher.new_session();
        self.stats.sessions.fetch_add(1, Relaxed);
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
    Ok(Arc::new(Shared { responses, matcher, stats: Stats::default() }))
}

/// Listen socket with TCP_FASTOPEN (queue `tfo_queue`), non-blocking.
pub fn tfo_listener(addr: std::net::SocketAddr, tfo_queue: u32) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    s.set_reuse_address(true)?;
    if tfo_queue > 0 {
        sock::set_tcp_int(s.as_raw_fd(), sock::TCP_FASTOPEN, tfo_queue as i32)
            .with_context(|| format!("setsockopt TCP_FASTOPEN({tfo_queue}) on {addr}"))?;
    }
    s.bind(&addr.into()).with_context(|| format!("cannot bind {addr}"))?;
    s.listen(tfo_queue.max(4096).min(i32::MAX as u32) as i32)
        .with_context(|| format!("cannot listen on {addr}"))?;
    s.set_nonblocking(true)?;
    Ok(s.into())
}

pub struct Server {
    pub addrs: Vec<(std::net::SocketAddr, bool)>,
}

/// Binds every listen socket and spawns the accept loops on the current runtime.
pub fn start(m: &manifest::Manifest, shared: Arc<Shared>) -> Result<Server> {
    let tls = match &m.tls {
        Some(t) if m.listen.iter().any(|l| l.tls) => {
            Some(tokio_rustls::TlsAcceptor::from(crate::certs::server_config(&t.cert, &t.key)?))
        }
        _ => None,
    };
    let mut addrs = Vec::new();
    let mut listeners = Vec::new();
    for l in &m.listen {
        let std_l = tfo_listener(std::net::SocketAddr::new(l.ip, l.port), m.tfo_queue)?;
        let local = std_l.local_addr()?;
        addrs.push((local, l.tls));
        listeners.push((tokio::net::TcpListener::from_std(std_l)?, l.tls));
    }
    for (lst, is_tls) in listeners {
        let shared = shared.clone();
        let acceptor = if is_tls { tls.clone() } else { None };
        tokio::spawn(async move {
            loop {
                let (tcp, _) = match lst.accept().await {
                    Ok(x) => x,
                    Err(e) => {
                        eprintln!("pltlab-dp replay: accept: {e}");
                        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
                        continue;
                    }
                };
                let st = &shared.stats;
                st.connections.fetch_add(1, Relaxed);
                if let Ok((opts, _)) = sock::tcp_info_tfo(tcp.as_raw_fd()) {
                    if opts & sock::TCPI_OPT_SYN_DATA != 0 {
                        st.tfo_connections.fetch_add(1, Relaxed);
                        if is_tls {
                            st.note_tfo_tls(tcp.as_raw_fd());
                        }
                    }
                }
                let _ = tcp.set_nodelay(true);
                let shared = shared.clone();
                let acceptor = acceptor.clone();
                tokio::spawn(async move {
                    match acceptor {
                        None => {
                            let _ = serve_conn(tcp, &shared, Scheme::Http, None).await;
                        }
                        Some(acc) => {
                            shared.stats.tls_connections.fetch_add(1, Relaxed);
                            match acc.accept(tcp).await {
                                Ok(tls) => {
                                    let sni = tls.get_ref().1.server_name().map(|s| s.to_string());
                                    let _ = serve_conn(tls, &shared, Scheme::Https, sni).await;
                                }
                                Err(_) => {
                                    shared.stats.tls_handshake_errors.fetch_add(1, Relaxed);
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

struct Req {
    method: String,
    target: String,
    host: Option<String>,
    minor: u8,
    keep_alive: bool,
    body: crate::loader::http::Framing,
    head_len: usize,
    expect_continue: bool,
}

fn parse_request(buf: &[u8]) -> Result<Option<Req>, String> {
    use crate::loader::http::Framing;
    let mut headers = [httparse::EMPTY_HEADER; 100];
    let mut r = httparse::Request::new(&mut headers);
    let n = match r.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(format!("malformed request: {e}")),
    };
    let minor = r.version.unwrap_or(1);
    let mut host = None;
    let mut conn_close = false;
    let mut conn_keep = false;
    let mut body = Framing::Empty;
    let mut expect_continue = false;
    for h in r.headers.iter() {
        let v = std::str::from_utf8(h.value).unwrap_or("");
        if h.name.eq_ignore_ascii_case("host") {
            host = Some(v.trim().to_string());
        } else if h.name.eq_ignore_ascii_case("connection") {
            for t in v.split(',') {
                conn_close |= t.trim().eq_ignore_ascii_case("close");
                conn_keep |= t.trim().eq_ignore_ascii_case("keep-alive");
            }
        } else if h.name.eq_ignore_ascii_case("content-length") {
            let l: u64 = v.trim().parse().map_err(|_| "bad Content-Length".to_string())?;
            if body != Framing::Chunked {
                body = Framing::Length(l);
            }
        } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
            if v.to_ascii_lowercase().contains("chunked") {
                body = Framing::Chunked;
            }
        } else if h.name.eq_ignore_ascii_case("expect") {
            expect_continue = v.trim().eq_ignore_ascii_case("100-continue");
        }
    }
    let keep_alive = if minor == 0 { conn_keep && !conn_close } else { !conn_close };
    Ok(Some(Req {
        method: r.method.unwrap_or("GET").to_string(),
        target: r.path.unwrap_or("/").to_string(),
        host: host.filter(|h| !h.is_empty()),
        minor,
        keep_alive,
        body,
        head_len: n,
        expect_continue,
    }))
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

/// Serves requests on one connection until the client closes it, asks to, or errs.
async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, sh: &Shared, scheme: Scheme, sni: Option<String>) -> std::io::Result<()> {
    use crate::loader::http::{BodyDecoder, Framing};
    let mut buf: Vec<u8> = vec![0; 16 * 1024];
    let mut len = 0usize;
    let mut head: Vec<u8> = Vec::with_capacity(2048);
    loop {
        // Read one request head.
        let req = loop {
            match parse_request(&buf[..len]) {
                Ok(Some(r)) => break r,
                Ok(None) => {}
                Err(e) => {
                    sh.stats.bad_requests.fetch_add(1, Relaxed);
                    let msg = format!("HTTP/1.1 400 Bad Request\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{e}\n", e.len() + 1);
                    let _ = s.write_all(msg.as_bytes()).await;
                    let _ = s.shutdown().await;
                    return Ok(());
                }
            }
            if len == buf.len() {
                if buf.len() >= 256 * 1024 {
                    sh.stats.bad_requests.fetch_add(1, Relaxed);
                    let _ = s.write_all(b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n").await;
                    return Ok(());
                }
                buf.resize(buf.len() * 2, 0);
            }
            let n = s.read(&mut buf[len..]).await?;
            if n == 0 {
                return Ok(());
            }
            len += n;
        };
        sh.stats.requests.fetch_add(1, Relaxed);
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
                Err(_) => return Ok(()),
            };
            buf.copy_within(used..len, 0);
            len -= used;
        }

        let (thost, path, query) = matcher::split_target(&req.target);
        let host = thost.or_else(|| req.host.clone()).or_else(|| sni.clone());
        // an empty body (Content-Length: 0) is no body: recordings without one have no digest
        let body_sha256 = digest.filter(|_| dec.body_bytes > 0).map(|d| {
            let mut out = [0u8; 32];
            out.copy_from_slice(d.finish().as_ref());
            out
        });
        let m = sh.matcher.lookup(&matcher::Request {
            method: &req.method,
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
        let is_head = req.method.eq_ignore_ascii_case("HEAD");
        let keep = req.keep_alive;
        head.clear();
        let idx = match m {
            Match::Exact(i) | Match::CrossScheme(i) => {
                sh.stats.responses_exact.fetch_add(1, Relaxed);
                Some(i)
            }
            Match::Fallback { idx, .. } => {
                sh.stats.note_fallback(url(), idx);
                Some(idx)
            }
            Match::None => {
                let u = url();
                let body = format!("pltlab replay: no recorded response for {} {u}\n", req.method);
                sh.stats.note_404(u);
                head.extend_from_slice(b"HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\n");
                head.extend_from_slice(format!("Content-Length: {}\r\n", body.len()).as_bytes());
                head.extend_from_slice(if keep { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
                let b: &[u8] = if is_head { b"" } else { body.as_bytes() };
                write_all_vectored(&mut s, &[&head, b]).await?;
                sh.stats.bytes_out.fetch_add((head.len() + b.len()) as u64, Relaxed);
                if !keep {
                    let _ = s.shutdown().await;
                    return Ok(());
                }
                continue;
            }
        };
        if matches!(m, Match::CrossScheme(_) | Match::Fallback { cross: true, .. }) {
            sh.stats.cross_scheme_matches.fetch_add(1, Relaxed);
        }
        let p = &sh.responses[idx.unwrap()];
        if let Some(w) = p.wait {
            tokio::time::sleep(w).await;
        }
        head.extend_from_slice(&p.head);
        let body: &[u8] = if p.no_body {
            b""
        } else if let (Some(cw), true) = (&p.chunked_wire, req.minor >= 1) {
            head.extend_from_slice(b"Transfer-Encoding: chunked\r\n");
            cw
        } else {
            head.extend_from_slice(format!("Content-Length: {}\r\n", p.body.end - p.body.start).as_bytes());
            p.body.bytes()
        };
        head.extend_from_slice(if keep { b"Connection: keep-alive\r\n\r\n" } else { b"Connection: close\r\n\r\n" });
        let body = if is_head { &b""[..] } else { body };
        write_all_vectored(&mut s, &[&head, body]).await?;
        sh.stats.note_service(t_req, p.wait);
        sh.stats.bytes_out.fetch_add((head.len() + body.len()) as u64, Relaxed);
        if !keep {
            let _ = s.shutdown().await;
            return Ok(());
        }
    }
}

/// The signals the server answers; registered before the ready line so that none is lost.
struct Signals {
    term: tokio::signal::unix::Signal,
    int: tokio::signal::unix::Signal,
    usr1: tokio::signal::unix::Signal,
    usr2: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> Result<Signals> {
        use tokio::signal::unix::{signal, SignalKind};
        Ok(Signals {
            term: signal(SignalKind::terminate())?,
            int: signal(SignalKind::interrupt())?,
            usr1: signal(SignalKind::user_defined1())?,
            usr2: signal(SignalKind::user_defined2())?,
        })
    }

    /// SIGUSR1: prints a stats snapshot (one JSON line, "event": "snapshot"); SIGUSR2: a new
    /// session (a new load begins); returns at SIGTERM or SIGINT.
    async fn serve(&mut self, shared: &Shared) {
        use std::io::Write;
        loop {
            tokio::select! {
                _ = self.term.recv() => break,
                _ = self.int.recv() => break,
                _ = self.usr2.recv() => shared.new_session(),
                _ = self.usr1.recv() => {
                    let mut st = shared.stats.json();
                    st["event"] = "snapshot".into();
                    println!("{st}");
                    std::io::stdout().flush().ok();
                }
            }
        }
    }
}

pub fn run(a: Args) -> Result<()> {
    sock::set_pdeathsig();
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
        let st = shared.stats.json();
        if let Some(p) = &m.stats {
            std::fs::write(p, serde_json::to_vec_pretty(&st)?).with_context(|| format!("cannot write stats {}", p.display()))?;
        }
        println!("{st}");
        std::io::stdout().flush().ok();
        Ok::<(), anyhow::Error>(())
    })?;
    // Do not wait for open connections.
    std::process::exit(0);
}
