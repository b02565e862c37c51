//! `probe serve`: TCP server (thread per connection) + UDP sink per address.
//!
//! TCP protocol (request lines, connection persists):
//!   `GET <n>\n`            -> exactly n bytes
//!   `STREAM\n`             -> data forever until the peer closes
//!   `UDPSTAT <session>\n`  -> one JSON line with UDP stats of that session
//!   `PINGMODE\n`           -> `OK\n`, then per 1-byte ping an 8-byte reply: the
//!                            server's turnaround of the previous ping in ns (see ping_loop)
//!   `GET /path HTTP/1.x`   -> HTTP (see http.rs)
//!   anything else          -> `ERR ...\n` and close
//! UDP datagrams: see `udp::Header` (magic, session, seq, total).
use super::udp::Header;
use crate::os::{sock, stamp};
use anyhow::{Context, Result};
use serde_json::json;
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    /// Address to listen on (TCP and UDP), repeatable.
    #[arg(long, value_parser = super::parse_addr, required = true)]
    pub listen: Vec<SocketAddr>,
    /// TCP_FASTOPEN listen queue length (0 = TFO off on the listener).
    #[arg(long, default_value_t = 256)]
    pub tfo_queue: u32,
    /// HTTP requests get `Connection: close` and their connection closes after the response
    /// (the control plane's knob keepalive off, `pltlab shell --keepalive off`).
    #[arg(long)]
    pub no_keep_alive: bool,
}

/// Chunk size of the reusable send buffer.
const CHUNK: usize = 1 << 20;
static DATA: [u8; CHUNK] = [0x5a; CHUNK];
const MAX_LINE: usize = 256;
/// Highest UDP sequence number tracked per session (bounds memory: 8 MB).
const MAX_TRACKED_SEQ: u64 = 1 << 26;
/// Maximum number of sessions remembered (oldest evicted).
const MAX_SESSIONS: usize = 4096;
/// Maximum length of the `missing` list in a UDPSTAT reply.
const MAX_MISSING: usize = 1_000_000;

#[derive(Default)]
struct Session {
    seen: Vec<u64>, // bitset
    received: u64,  // distinct sequence numbers
    duplicates: u64,
    reordered: u64, // arrived with seq < max_seq
    max_seq: Option<u64>,
    total: u64,
    created: Option<Instant>,
}

impl Session {
    fn record(&mut self, seq: u64, total: u64) {
        self.total = self.total.max(total.min(MAX_TRACKED_SEQ));
        if seq >= MAX_TRACKED_SEQ {
            return;
        }
        let (w, b) = ((seq / 64) as usize, seq % 64);
        if self.seen.len() <= w {
            self.seen.resize(w + 1, 0);
        }
        if self.seen[w] & (1 << b) != 0 {
            self.duplicates += 1;
            return;
        }
        self.seen[w] |= 1 << b;
        self.received += 1;
        match self.max_seq {
            Some(m) if seq < m => self.reordered += 1,
            Some(m) if seq == m => {}
            _ => self.max_seq = Some(seq),
        }
    }
    fn has(&self, seq: u64) -> bool {
        let w = (seq / 64) as usize;
        w < self.seen.len() && self.seen[w] & (1 << (seq % 64)) != 0
    }
}

type Stats = Arc<Mutex<HashMap<u64, Session>>>;

/// A running server (threads are detached; they live as long as the process).
pub struct Server {
    pub addrs: Vec<SocketAddr>,
}

fn bind_tcp(addr: &SocketAddr, tfo_queue: u32) -> Result<TcpListener> {
    let s =
        Socket::new(Domain::for_address(*addr), Type::STREAM, Some(Protocol::TCP)).context("socket(SOCK_STREAM)")?;
    s.set_reuse_address(true).context("set SO_REUSEADDR")?;
    if addr.is_ipv6() {
        let _ = s.set_only_v6(true);
    }
    s.bind(&SockAddr::from(*addr)).with_context(|| format!("bind tcp {addr}"))?;
    if tfo_queue > 0 {
        sock::set_tcp_int(&s, sock::TCP_FASTOPEN, tfo_queue as libc::c_int)
            .with_context(|| format!("set TCP_FASTOPEN={tfo_queue} on {addr}"))?;
    }
    s.listen(1024).with_context(|| format!("listen {addr}"))?;
    Ok(s.into())
}

fn bind_udp(addr: &SocketAddr) -> Result<UdpSocket> {
    let s = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP)).context("socket(SOCK_DGRAM)")?;
    s.set_reuse_address(true).context("set SO_REUSEADDR")?;
    if addr.is_ipv6() {
        let _ = s.set_only_v6(true);
    }
    sock::set_rcvbuf_force(&s, 8 << 20);
    s.bind(&SockAddr::from(*addr)).with_context(|| format!("bind udp {addr}"))?;
    Ok(s.into())
}

/// Bind everything and spawn the accept/UDP threads. Port 0 picks a free port
/// that is free for both TCP and UDP.
pub fn start(listen: &[SocketAddr], tfo_queue: u32, keep_alive: bool) -> Result<Server> {
    let stats: Stats = Arc::new(Mutex::new(HashMap::new()));
    let mut bound = Vec::new();
    for addr in listen {
        let mut tries = 0;
        let (tl, us) = loop {
            let tl = bind_tcp(addr, tfo_queue)?;
            let local = tl.local_addr()?;
            match bind_udp(&local) {
                Ok(us) => break (tl, us),
                // port 0: the TCP port may be taken for UDP; pick another
                Err(_) if addr.port() == 0 && tries < 20 => tries += 1,
                Err(e) => return Err(e),
            }
        };
        bound.push((tl, us));
    }
    let mut addrs = Vec::new();
    for (tl, us) in bound {
        addrs.push(tl.local_addr()?);
        let st = stats.clone();
        std::thread::Builder::new().name("probe-accept".into()).spawn(move || accept_loop(tl, st, keep_alive))?;
        let st = stats.clone();
        std::thread::Builder::new().name("probe-udp".into()).spawn(move || udp_loop(us, st))?;
    }
    Ok(Server { addrs })
}

pub fn run(a: Args) -> Result<()> {
    use nix::sys::signal::{SigSet, Signal};
    // Block SIGTERM/SIGINT before spawning threads (they inherit the mask),
    // then wait for one synchronously and exit cleanly.
    let mut set = SigSet::empty();
    set.add(Signal::SIGTERM);
    set.add(Signal::SIGINT);
    set.thread_block().context("block SIGTERM/SIGINT")?;
    let srv = start(&a.listen, a.tfo_queue, !a.no_keep_alive)?;
    let listen: Vec<String> = srv.addrs.iter().map(|a| a.to_string()).collect();
    super::common::print_json(&json!({"event": "ready", "listen": listen, "tfo_queue": a.tfo_queue}))?;
    let _sig = set.wait().context("sigwait")?;
    Ok(())
}

fn accept_loop(l: TcpListener, stats: Stats, keep_alive: bool) {
    loop {
        match l.accept() {
            Ok((s, _peer)) => {
                let st = stats.clone();
                let _ = std::thread::Builder::new().name("probe-conn".into()).spawn(move || {
                    let _ = handle(s, st, keep_alive);
                });
            }
            Err(e) => {
                // EMFILE etc.: back off briefly instead of spinning.
                if e.kind() != std::io::ErrorKind::Interrupted {
                    std::thread::sleep(Duration::from_millis(10));
                }
            }
        }
    }
}

fn udp_loop(s: UdpSocket, stats: Stats) {
    let mut buf = vec![0u8; 65536];
    loop {
        let n = match s.recv(&mut buf) {
            Ok(n) => n,
            Err(_) => continue,
        };
        let Some(h) = Header::decode(&buf[..n]) else { continue };
        let mut m = stats.lock().unwrap();
        if !m.contains_key(&h.session) && m.len() >= MAX_SESSIONS {
            if let Some(oldest) = m.iter().min_by_key(|(_, v)| v.created).map(|(k, _)| *k) {
                m.remove(&oldest);
            }
        }
        let e = m.entry(h.session).or_insert_with(|| Session { created: Some(Instant::now()), ..Default::default() });
        e.record(h.seq, h.total);
    }
}

fn udpstat(stats: &Stats, session: u64) -> serde_json::Value {
    let m = stats.lock().unwrap();
    match m.get(&session) {
        None => json!({"session": session, "received": 0, "max_seq": null, "total": null,
                       "duplicates": 0, "reordered": 0}),
        Some(s) => {
            let mut missing = Vec::new();
            let mut truncated = false;
            for q in 0..s.total {
                if !s.has(q) {
                    if missing.len() >= MAX_MISSING {
                        truncated = true;
                        break;
                    }
                    missing.push(q);
                }
            }
            let mut v = json!({"session": session, "received": s.received,
                "missing": missing, "max_seq": s.max_seq, "total": s.total,
                "duplicates": s.duplicates, "reordered": s.reordered});
            if truncated {
                v["missing_truncated"] = json!(true);
            }
            v
        }
    }
}

enum Req {
    Get(u64),
    Stream,
    UdpStat(u64),
    PingMode,
}

fn parse(line: &str) -> Result<Req, String> {
    let mut it = line.split_ascii_whitespace();
    let verb = it.next().unwrap_or("");
    let arg = it.next();
    if it.next().is_some() {
        return Err("too many fields".into());
    }
    match (verb, arg) {
        ("GET", Some(n)) => n.parse().map(Req::Get).map_err(|_| format!("bad length {n:?}")),
        ("STREAM", None) => Ok(Req::Stream),
        ("PINGMODE", None) => Ok(Req::PingMode),
        ("UDPSTAT", Some(s)) => s.parse().map(Req::UdpStat).map_err(|_| format!("bad session {s:?}")),
        _ => Err("unknown request".into()),
    }
}

fn handle(s: TcpStream, stats: Stats, keep_alive: bool) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    // a peer that stops reading for this long is considered dead
    s.set_write_timeout(Some(Duration::from_secs(120)))?;
    let mut rd = BufReader::with_capacity(4096, &s);
    let mut w = &s;
    let mut line = Vec::with_capacity(MAX_LINE + 1);
    loop {
        line.clear();
        let n = (&mut rd).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut line)?;
        if n == 0 {
            return Ok(()); // clean EOF
        }
        if line.last() != Some(&b'\n') {
            if n > MAX_LINE {
                w.write_all(b"ERR request line too long\n")?;
            }
            return Ok(()); // EOF in the middle of a line
        }
        if let Ok(l) = std::str::from_utf8(&line) {
            let l = l.trim_end_matches(['\n', '\r']);
            if super::http::is_http(l) {
                if !super::http::serve(l, &mut rd, &mut w, &DATA, keep_alive)? {
                    return Ok(());
                }
                continue;
            }
        }
        let req = std::str::from_utf8(&line)
            .map_err(|_| "request is not UTF-8".to_string())
            .and_then(|l| parse(l.trim_end_matches(['\n', '\r'])));
        match req {
            Ok(Req::Get(mut n)) => {
                while n > 0 {
                    let k = (n as usize).min(CHUNK);
                    w.write_all(&DATA[..k])?;
                    n -= k as u64;
                }
            }
            Ok(Req::Stream) => loop {
                w.write_all(&DATA)?; // ends with EPIPE/ECONNRESET when the peer closes
            },
            Ok(Req::UdpStat(sess)) => {
                let mut v = serde_json::to_vec(&udpstat(&stats, sess)).unwrap_or_default();
                v.push(b'\n');
                w.write_all(&v)?;
            }
            Ok(Req::PingMode) => {
                if !rd.buffer().is_empty() {
                    w.write_all(b"ERR data after PINGMODE before OK\n")?;
                    return Ok(());
                }
                return ping_loop(&s);
            }
            Err(e) => {
                w.write_all(format!("ERR {e}\n").as_bytes())?;
                let _ = s.shutdown(std::net::Shutdown::Write);
                return Ok(());
            }
        }
    }
}

/// Ping-pong with the server's turnaround: its TUN transmit timestamp of a
/// reply minus its kernel receive timestamp of the ping. The stamp of a reply
/// exists only once it is sent, so each reply carries the previous round's
/// turnaround (0 = unknown); the client sends one extra ping at the end.
fn ping_loop(s: &TcpStream) -> std::io::Result<()> {
    stamp::enable(s)?;
    stamp::enable_tx(s)?;
    (&*s).write_all(b"OK\n")?;
    let _ = stamp::tx(s, 0); // the OK's stamp
    let mut b = [0u8; 64];
    let mut prev = 0u64;
    loop {
        let (n, at) = stamp::recv(s, &mut b)?;
        if n == 0 {
            return Ok(());
        }
        (&*s).write_all(&prev.to_le_bytes())?;
        let sent = stamp::tx(s, 5)?;
        prev = match (at, sent) {
            (Some(a), Some(t)) => (t - a).max(1) as u64,
            _ => 0,
        };
    }
}
