//! `pltlab-dp replay --manifest FILE`: the replay server.
//!
//! One process serves every origin of a manifest: one listen socket per `listen` entry, each
//! with TCP_FASTOPEN (queue `tfo_queue`) and a listen backlog of at least that size. Heads are
//! serialized and bodies loaded once at start; answering a request is a few hash lookups and
//! one write. Single-threaded tokio runtime. This file: the listen sockets, the accept loops
//! (TFO counts from TCP_INFO; errors back off, accept.rs), TLS (tls.rs) and the dispatch of a
//! connection to its protocol by ALPN, and the process (signals, stats, exit). A TLS
//! handshake not done by the manifest's `request_timeout_ms` is closed.
//!
//! * h1.rs: HTTP/1.1 and 1.0 connections; h2.rs: HTTP/2 (ALPN "h2");
//! * h3.rs: HTTP/3 over QUIC on the udp listen entries (its own endpoints and accept loops,
//!   started here next to the TCP ones), on quic_socket.rs's counting UDP sockets;
//! * answers.rs: the answers service both call: matching (matcher.rs) against the recordings
//!   prepared from the manifest (manifest.rs), the 404s, their counts;
//! * shared.rs: what every connection shares (the service, stats.rs's counters, TLS sessions,
//!   settings); service.rs: service-time sample; priority.rs: h2 response order (RFC 9218).
//!
//! SIGUSR1 prints a snapshot of the stats, SIGUSR2 starts a new session, SIGHUP forgets every
//! TLS session; SIGTERM/SIGINT print the stats and exit.
use anyhow::{Context, Result};
use std::collections::HashMap;
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;

pub mod accept;
pub mod answers;
pub mod h1;
pub mod h2;
mod h2_sent;
#[cfg(test)]
mod h2_tests;
pub mod h3;
mod h3_quic;
#[cfg(test)]
mod h3_tests;
#[cfg(test)]
mod hostile_tests;
pub mod manifest;
pub mod matcher;
pub mod priority;
#[cfg(test)]
mod prop_tests;
pub mod quic_socket;
mod quic_tokens;
pub mod report;
pub mod service;
pub mod shared;
pub mod stats;
#[cfg(test)]
mod tests;
pub mod tls;

use crate::os::{sock, tcpinfo};
use manifest::Transport;
use matcher::Scheme;
use shared::{build_shared, Shared};
use stats::{Stats, TlsUse};

#[derive(clap::Args)]
pub struct Args {
    /// Manifest (JSON, see docs/dataplane-interfaces.md).
    #[arg(long)]
    pub manifest: PathBuf,
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
    /// Every listen socket's address, whether it has TLS, and its transport, in manifest order.
    pub addrs: Vec<(std::net::SocketAddr, bool, Transport)>,
    /// The QUIC endpoints (udp entries).
    pub quic: Vec<quinn::Endpoint>,
}

impl Server {
    /// The ready line's listen list: `{"addr", "tls", "transport"}` per socket.
    pub fn listen_json(&self) -> Vec<serde_json::Value> {
        self.addrs
            .iter()
            .map(|(a, t, tr)| serde_json::json!({"addr": a.to_string(), "tls": t, "transport": tr}))
            .collect()
    }

    /// Closes the QUIC connections (CONNECTION_CLOSE sent, not waiting for their peers), as the
    /// process's exit closes the TCP ones.
    pub async fn close(&self) {
        for ep in &self.quic {
            ep.close(0u32.into(), b"server exits");
        }
        for ep in &self.quic {
            let _ = tokio::time::timeout(std::time::Duration::from_millis(50), ep.wait_idle()).await;
        }
    }
}

/// Binds every listen socket and spawns the accept loops on the current runtime.
pub fn start(m: &manifest::Manifest, shared: Arc<Shared>) -> Result<Server> {
    // one TLS acceptor per distinct ALPN list (addresses offering the same protocols share it)
    let mut acceptors: HashMap<Vec<String>, Arc<rustls::ServerConfig>> = HashMap::new();
    if let Some(t) = &m.tls {
        for l in m.listen.iter().filter(|l| l.tls && l.transport == Transport::Tcp) {
            if !acceptors.contains_key(&l.alpn) {
                let alpn: Vec<&str> = l.alpn.iter().map(String::as_str).collect();
                let sessions = shared.sessions.clone();
                let cfg = crate::certs::server_config(&t.cert, &t.key, &alpn, sessions, t.max_early_data)?;
                acceptors.insert(l.alpn.clone(), cfg);
            }
        }
    }
    manifest::check_quic(&m.quic)?;
    // one QUIC configuration for every udp entry
    let quic_cfg = if m.listen.iter().any(|l| l.transport == Transport::Udp) {
        Some(h3::server_config(m, shared.sessions.clone())?)
    } else {
        None
    };
    let mut addrs = Vec::new();
    let mut listeners = Vec::new();
    let mut quic = Vec::new();
    for l in &m.listen {
        manifest::check_alpn(l)?;
        let addr = std::net::SocketAddr::new(l.ip, l.port);
        if let (Transport::Udp, Some(cfg)) = (l.transport, &quic_cfg) {
            let ep = h3::endpoint(addr, cfg.clone(), &shared)?;
            addrs.push((ep.local_addr()?, true, Transport::Udp));
            quic.push(ep);
            continue;
        }
        let std_l = tfo_listener(addr, m.tfo_queue)?;
        let local = std_l.local_addr()?;
        addrs.push((local, l.tls, Transport::Tcp));
        let acceptor = if l.tls { acceptors.get(&l.alpn).cloned() } else { None };
        listeners.push((tokio::net::TcpListener::from_std(std_l)?, acceptor));
    }
    for (lst, acceptor) in listeners {
        tokio::spawn(accept_loop(lst, acceptor, shared.clone()));
    }
    let gate = h3::Gate::new(&m.quic);
    for ep in &quic {
        tokio::spawn(h3::accept_loop(ep.clone(), shared.clone(), gate.clone()));
    }
    Ok(Server { addrs, quic })
}

/// Accepts a listen socket's connections (TFO counted from TCP_INFO), each served on a task of
/// its own; a failed accept backs off (accept.rs).
async fn accept_loop(lst: tokio::net::TcpListener, acceptor: Option<Arc<rustls::ServerConfig>>, shared: Arc<Shared>) {
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
                    note_tfo_tls(st, &tcp);
                }
            }
        }
        let _ = tcp.set_nodelay(true);
        tokio::spawn(serve(tcp, acceptor.clone(), shared.clone()));
    }
}

/// One accepted connection: HTTP/1.1 on a plain address; on a TLS one the handshake, then h2 or
/// HTTP/1.1 as the client picked (ALPN).
async fn serve(tcp: tokio::net::TcpStream, acceptor: Option<Arc<rustls::ServerConfig>>, shared: Arc<Shared>) {
    let st = &shared.stats;
    // a client that never finishes its handshake or first request (slowloris)
    // gives its descriptor back at this deadline
    let deadline = tokio::time::Instant::now() + shared.request_timeout;
    let Some(cfg) = acceptor else {
        st.h1_connections.fetch_add(1, Relaxed);
        let _ = h1::serve(tcp, &shared, Scheme::Http, None, None, deadline).await;
        return;
    };
    st.tls_connections.fetch_add(1, Relaxed);
    let hs = tls::accept(cfg, tcp, st.tls_early_bytes.clone());
    let mut tls = match tokio::time::timeout_at(deadline, hs).await {
        Err(_) => {
            st.handshake_timeouts.fetch_add(1, Relaxed);
            return;
        }
        Ok(Err(_)) => {
            st.tls_handshake_errors.fetch_add(1, Relaxed);
            return;
        }
        Ok(Ok(tls)) => tls,
    };
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
        tls.write_when_idle();
        h2::serve(tls, shared.clone(), sni, used, deadline).await;
    } else {
        st.h1_connections.fetch_add(1, Relaxed);
        let used = Some(&*used);
        let _ = h1::serve(tls, &shared, Scheme::Https, sni, used, deadline).await;
    }
}

/// A TLS connection whose SYN carried data: how much, and whether its ClientHello fit in it.
fn note_tfo_tls<S: AsRawFd>(st: &Stats, s: &S) {
    st.tfo_tls_connections.fetch_add(1, Relaxed);
    if let Some(syn) = sock::syn_tls_records(s) {
        st.tfo_syn_bytes_max.fetch_max(syn.bytes as u64, Relaxed);
        if let Some(hello) = syn.hello {
            st.tfo_tls_hello_max.fetch_max(hello as u64, Relaxed);
            if syn.bytes < hello {
                st.tfo_tls_hello_split.fetch_add(1, Relaxed);
            }
        }
        if syn.early_data {
            st.tfo_tls_early_in_syn.fetch_add(1, Relaxed);
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
            serde_json::json!({"event": "ready", "pid": std::process::id(), "listen": srv.listen_json(), "responses": m.responses.len()})
        );
        use std::io::Write;
        std::io::stdout().flush().ok();
        signals.serve(&shared).await;
        srv.close().await;
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
