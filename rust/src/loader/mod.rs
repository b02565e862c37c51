//! `pltlab-dp load --plan FILE`: deterministic browser-like HTTP/1.1 loader.
//!
//! * at most `max_conns_per_host` persistent connections per (scheme, host,
//!   port), a FIFO request queue per host, one request at a time per
//!   connection (no pipelining), late binding: a request goes to whichever
//!   connection of its host is free first (most recently freed first), and a
//!   new connection is opened only while queued requests outnumber the
//!   connections being set up;
//! * an object becomes requestable when its parent's last byte arrived, plus
//!   its `delay_ms`; objects without parent at t = 0;
//! * optional DNS delay, paid once per host before its first connection;
//! * TFO via TCP_FASTOPEN_CONNECT set before connect() when `tfo` is true;
//!   per-connection TFO use from TCP_INFO (tcpi_options & 32, SYN data acked).
//! Single-threaded tokio runtime; all times in ms since the load started
//! (object 0 requested, before its DNS delay).
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use std::cell::Cell;
use std::collections::{HashMap, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::os::fd::AsRawFd;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use crate::sockopt as sock;

pub mod decode;
pub mod http;
#[cfg(test)]
mod tests;

#[derive(clap::Args)]
pub struct Args {
    /// Plan (JSON, see docs/dataplane-interfaces.md).
    #[arg(long)]
    pub plan: PathBuf,
}

fn get() -> String {
    "GET".into()
}
fn six() -> usize {
    6
}
fn timeout_default() -> f64 {
    120.0
}

#[derive(Deserialize, Debug, Clone)]
pub struct Object {
    pub url: String,
    #[serde(default = "get")]
    pub method: String,
    pub host: String,
    pub ip: IpAddr,
    pub port: u16,
    #[serde(default)]
    pub tls: bool,
    #[serde(default)]
    pub parent: Option<usize>,
    #[serde(default)]
    pub delay_ms: f64,
    /// Requestable at the parent's first response byte instead of its last (a browser's
    /// parser/preload scanner sees the references at the start of a document).
    #[serde(default)]
    pub at_first_byte: bool,
    /// Further objects that must all have arrived (last byte) before this one is requestable
    /// (script execution order, body reached).
    #[serde(default)]
    pub after: Vec<usize>,
    /// Low priority (Chromium: images): subject to `delayable_limit`/`tight_limit`, and behind
    /// every other queued request of its pool.
    #[serde(default)]
    pub delayable: bool,
    /// The tight phase (index into `tight_phases`) that limits this delayable request: its
    /// frame's (Chromium schedules per frame). None: the `tight_until` phase, if any.
    #[serde(default)]
    pub tight_phase: Option<usize>,
}

/// One frame's tight mode: until every object of `until` has arrived, and `delay_ms` more, at
/// most `tight_limit` of its delayable requests are released at once.
#[derive(Deserialize, Debug, Clone)]
pub struct TightPhase {
    pub until: Vec<usize>,
    #[serde(default)]
    pub delay_ms: f64,
}

#[derive(Deserialize, Debug, Clone)]
pub struct Plan {
    pub objects: Vec<Object>,
    #[serde(default = "six")]
    pub max_conns_per_host: usize,
    #[serde(default)]
    pub tfo: bool,
    #[serde(default)]
    pub dns_delay_ms: f64,
    #[serde(default)]
    pub ca: Option<PathBuf>,
    #[serde(default = "timeout_default")]
    pub timeout_s: f64,
    /// At most this many delayable requests released (queued for or on a connection) at once;
    /// None = no limit.
    #[serde(default)]
    pub delayable_limit: Option<usize>,
    /// While some object of `tight_until` has not arrived: at most this many delayable
    /// requests released at once (None = only `delayable_limit`).
    #[serde(default)]
    pub tight_limit: Option<usize>,
    #[serde(default)]
    pub tight_until: Vec<usize>,
    /// Tight mode lasts this long after the last object of `tight_until` arrived (the
    /// renderer's time until its parser inserts <body>: Blink leaves tight mode then).
    #[serde(default)]
    pub tight_delay_ms: f64,
    /// Further tight phases (per frame), chosen by each object's `tight_phase`.
    #[serde(default)]
    pub tight_phases: Vec<TightPhase>,
}

impl Plan {
    pub fn validate(&self) -> Result<()> {
        let n = self.objects.len();
        if n == 0 {
            bail!("plan has no objects");
        }
        if self.max_conns_per_host == 0 {
            bail!("max_conns_per_host must be >= 1");
        }
        for (i, o) in self.objects.iter().enumerate() {
            if let Some(p) = o.parent {
                if p >= n || p == i {
                    bail!("object {i}: bad parent {p}");
                }
            }
            if !(o.delay_ms >= 0.0) {
                bail!("object {i}: delay_ms must be >= 0");
            }
            if let Some(&a) = o.after.iter().find(|&&a| a >= n || a == i) {
                bail!("object {i}: bad \"after\" index {a}");
            }
        }
        if let Some(&t) = self.tight_until.iter().find(|&&t| t >= n) {
            bail!("bad \"tight_until\" index {t}");
        }
        for (k, ph) in self.tight_phases.iter().enumerate() {
            if let Some(&t) = ph.until.iter().find(|&&t| t >= n) {
                bail!("tight phase {k}: bad \"until\" index {t}");
            }
            if !(ph.delay_ms >= 0.0 && ph.delay_ms.is_finite()) {
                bail!("tight phase {k}: delay_ms must be a number >= 0");
            }
        }
        if let Some((i, _)) = self.objects.iter().enumerate()
            .find(|(_, o)| o.tight_phase.is_some_and(|k| k >= self.tight_phases.len())) {
            bail!("object {i}: bad \"tight_phase\"");
        }
        if !(self.tight_delay_ms >= 0.0 && self.tight_delay_ms.is_finite()) {
            bail!("tight_delay_ms must be a number >= 0");
        }
        if self.delayable_limit == Some(0) || self.tight_limit == Some(0) {
            bail!("delayable_limit and tight_limit must be >= 1");
        }
        // acyclic over the parent and "after" edges (Kahn's algorithm)
        let mut indeg: Vec<usize> = self.objects.iter().map(|o| o.parent.is_some() as usize + o.after.len()).collect();
        let mut out = vec![Vec::new(); n];
        for (i, o) in self.objects.iter().enumerate() {
            for p in o.parent.iter().chain(o.after.iter()) {
                out[*p].push(i);
            }
        }
        let mut stack: Vec<usize> = (0..n).filter(|&i| indeg[i] == 0).collect();
        let mut seen = 0;
        while let Some(k) = stack.pop() {
            seen += 1;
            for &c in &out[k] {
                indeg[c] -= 1;
                if indeg[c] == 0 {
                    stack.push(c);
                }
            }
        }
        if seen < n {
            bail!("parents and \"after\" lists form a cycle");
        }
        if self.objects.iter().any(|o| o.tls) && self.ca.is_none() {
            bail!("plan has https objects but no \"ca\"");
        }
        Ok(())
    }
}

/// Request target (origin-form) of a URL: "/path?query" (fragment dropped).
pub fn target_of(url: &str) -> String {
    let rest = match url.find("://") {
        Some(i) => &url[i + 3..],
        None => return if url.starts_with('/') { url.split('#').next().unwrap().to_string() } else { "/".into() },
    };
    let t = match rest.find(['/', '?']) {
        Some(i) => &rest[i..],
        None => "/",
    };
    let t = t.split('#').next().unwrap_or("/");
    if t.starts_with('?') {
        format!("/{t}")
    } else {
        t.to_string()
    }
}

#[derive(Serialize, Debug, Clone, Default)]
pub struct Rec {
    pub index: usize,
    pub url: String,
    pub host: String,
    pub conn_id: usize,
    pub new_conn: bool,
    pub tfo: bool,
    pub ready_ms: f64,
    /// When the delayable-request limits let it go to its pool (= ready_ms if not held).
    pub released_ms: f64,
    pub connect_start_ms: Option<f64>,
    pub connect_end_ms: Option<f64>,
    pub tls_end_ms: Option<f64>,
    pub request_ms: f64,
    pub first_byte_ms: f64,
    pub last_byte_ms: f64,
    /// Body bytes after de-chunking, still content-encoded.
    pub bytes: u64,
    pub header_bytes: u64,
    /// Everything received for this response: heads (1xx ones too) + body as on the wire
    /// (chunk framing included).
    pub transfer_bytes: u64,
    /// The body once its Content-Encoding is undone (= `bytes` for identity or a decode error).
    pub body_bytes: u64,
    /// Content-Encoding as received, "" if none.
    pub encoding: String,
    /// Why the body could not be decoded (the load goes on).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decode_error: Option<String>,
    pub status: u16,
}

#[derive(Serialize, Debug, Clone, Default)]
pub struct ConnRec {
    pub id: usize,
    pub host: String,
    pub ip: String,
    pub port: u16,
    pub tls: bool,
    pub dns_end_ms: f64,
    pub connect_start_ms: f64,
    pub connect_end_ms: f64,
    pub tls_end_ms: Option<f64>,
    /// SYN data sent and acked (tcpi_options & 32).
    pub tfo: bool,
    /// tcpi_fastopen_client_fail (0 none, 1 no cookie, 2/3 SYN data not acked).
    pub tfo_client_fail: u8,
    pub requests: Vec<usize>,
}

#[derive(Serialize, Debug, Clone)]
pub struct Output {
    pub plt_ms: f64,
    pub objects: usize,
    pub bytes: u64,
    pub tfo_requested: bool,
    /// TCP_FASTOPEN_CONNECT was accepted by the kernel (always false if not requested).
    pub tfo_available: bool,
    pub max_conns_per_host: usize,
    pub requests: Vec<Rec>,
    pub connections: Vec<ConnRec>,
    pub errors: Vec<String>,
}

struct Group {
    host: String,
    addr: SocketAddr,
    tls: bool,
    queue: VecDeque<usize>,
    idle: Vec<usize>,
    open: usize,
    connecting: usize,
    /// None = not started, Some(false) = pending, Some(true) = done
    dns: Option<bool>,
    dns_end_ms: f64,
}

struct Conn {
    group: usize,
    tx: UnboundedSender<usize>,
    busy: Option<usize>,
    rec: ConnRec,
}

enum Ev {
    Ready(usize),
    DnsDone(usize),
    Connected { cid: usize, cs: f64, ce: f64, tls: Option<f64> },
    FirstByte(usize),
    Done { cid: usize, rec: Rec, keep: bool, tfo: Option<(bool, u8)> },
    Closed { cid: usize },
    TightEnd(usize),
    Fatal(String),
}

struct Ctx {
    t0: Instant,
    tfo: bool,
    tfo_refused: Cell<Option<String>>,
    tls: Option<tokio_rustls::TlsConnector>,
}

impl Ctx {
    fn ms(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1000.0
    }
}

trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

async fn open_stream(ctx: &Ctx, addr: SocketAddr, host: &str, tls: bool) -> Result<(Box<dyn Io>, i32, f64, f64, Option<f64>)> {
    let cs = ctx.ms();
    let s = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    let fd = s.as_raw_fd();
    if ctx.tfo {
        if let Err(e) = sock::set_tcp_int(fd, sock::TCP_FASTOPEN_CONNECT, 1) {
            let why = if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                format!("TCP_FASTOPEN_CONNECT refused ({e}): net.ipv4.tcp_fastopen does not allow client TFO here; loaded without TFO")
            } else {
                format!("TCP_FASTOPEN_CONNECT refused ({e}); loaded without TFO")
            };
            ctx.tfo_refused.set(Some(why));
        }
    }
    s.set_nodelay(true)?;
    let tcp = s
        .connect(addr)
        .await
        .map_err(|e| anyhow!("connect to {addr} ({host}) failed: {e}"))?;
    let ce = ctx.ms();
    if !tls {
        return Ok((Box::new(tcp), fd, cs, ce, None));
    }
    let name = match host.parse::<IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(host.to_string()).map_err(|e| anyhow!("bad TLS server name {host:?}: {e}"))?,
    };
    let conn = ctx.tls.as_ref().expect("tls connector").connect(name, tcp).await.map_err(|e| anyhow!("TLS handshake with {addr} ({host}) failed: {e}"))?;
    Ok((Box::new(conn), fd, cs, ce, Some(ctx.ms())))
}

/// One request/response exchange; returns (record, keep_alive).
async fn exchange(ctx: &Ctx, s: &mut Box<dyn Io>, buf: &mut Vec<u8>, req: &[u8], head_req: bool, url: &str, first_byte: impl FnOnce()) -> Result<(Rec, bool)> {
    let mut first_byte = Some(first_byte);
    let mut rec = Rec { request_ms: ctx.ms(), ..Default::default() };
    s.write_all(req).await.map_err(|e| anyhow!("sending request for {url}: {e}"))?;
    s.flush().await.map_err(|e| anyhow!("sending request for {url}: {e}"))?;
    let mut len = 0usize;
    let head = 'head: loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        let n = s.read(&mut buf[len..]).await.map_err(|e| anyhow!("reading response for {url}: {e}"))?;
        if n == 0 {
            bail!("connection closed by the server before the response to {url} ({len} bytes received)");
        }
        if len == 0 {
            rec.first_byte_ms = ctx.ms();
            if let Some(f) = first_byte.take() {
                f();
            }
        }
        len += n;
        // drop informational (1xx) heads, then take the final head
        loop {
            match http::parse_response_head(&buf[..len], head_req).map_err(|e| anyhow!("{url}: {e:#}"))? {
                Some(h) if (100..200).contains(&h.status) && h.status != 101 => {
                    rec.transfer_bytes += h.head_len as u64;
                    buf.copy_within(h.head_len..len, 0);
                    len -= h.head_len;
                }
                Some(h) => break 'head h,
                None => break,
            }
        }
    };
    rec.status = head.status;
    rec.header_bytes = head.head_len as u64;
    // an encoded body is kept (de-chunked) and decoded at its end; an identity one is only counted
    let encoded = !decode::codings(&head.content_encoding).is_empty();
    let mut body: Vec<u8> = Vec::new();
    let mut keep = |p: &[u8]| {
        if encoded {
            body.extend_from_slice(p);
        }
    };
    let mut dec = http::BodyDecoder::new(head.framing);
    let first = dec.feed_with(&buf[head.head_len..len], &mut keep).map_err(|e| anyhow!("{url}: {e:#}"))?;
    let mut wire = first as u64;
    let mut used = first + head.head_len;
    while !dec.is_done() {
        let n = s.read(&mut buf[..]).await.map_err(|e| anyhow!("reading response body of {url}: {e}"))?;
        if n == 0 {
            dec.eof().map_err(|e| anyhow!("{url}: {e:#}"))?;
            len = 0;
            used = 0;
            break;
        }
        len = n;
        used = dec.feed_with(&buf[..n], &mut keep).map_err(|e| anyhow!("{url}: {e:#}"))?;
        wire += used as u64;
    }
    rec.last_byte_ms = ctx.ms();
    if used < len {
        bail!("{url}: {} unexpected bytes after the response", len - used);
    }
    rec.bytes = dec.body_bytes;
    rec.transfer_bytes += head.head_len as u64 + wire;
    rec.body_bytes = rec.bytes;
    if encoded {
        match decode::decoded_len(&head.content_encoding, &body) {
            Ok(n) => rec.body_bytes = n,
            Err(e) => rec.decode_error = Some(format!("Content-Encoding {:?}: {e}", head.content_encoding)),
        }
    }
    rec.encoding = head.content_encoding;
    Ok((rec, head.keep_alive))
}

#[allow(clippy::too_many_arguments)]
async fn conn_task(ctx: Rc<Ctx>, plan: Rc<Plan>, reqs: Rc<Vec<Vec<u8>>>, cid: usize, addr: SocketAddr, host: String, tls: bool, tx: UnboundedSender<Ev>, mut rx: UnboundedReceiver<usize>) {
    let res: Result<()> = async {
        let (mut s, fd, cs, ce, te) = open_stream(&ctx, addr, &host, tls).await?;
        let _ = tx.send(Ev::Connected { cid, cs, ce, tls: te });
        let mut buf = vec![0u8; 64 * 1024];
        let mut first = true;
        loop {
            let idx = tokio::select! {
                biased;
                m = rx.recv() => match m { Some(i) => i, None => return Ok(()) },
                r = s.read(&mut buf[..]) => {
                    // idle connection: closed (or spoke out of turn) -> drop it
                    let _ = r;
                    let _ = tx.send(Ev::Closed { cid });
                    return Ok(());
                }
            };
            let o = &plan.objects[idx];
            let head_req = o.method.eq_ignore_ascii_case("HEAD");
            let fb_tx = tx.clone();
            let (mut rec, keep) = exchange(&ctx, &mut s, &mut buf, &reqs[idx], head_req, &o.url, move || {
                let _ = fb_tx.send(Ev::FirstByte(idx));
            })
            .await?;
            rec.index = idx;
            let tfo = if first {
                first = false;
                sock::tcp_info_tfo(fd).ok().map(|(opt, fail)| (opt & sock::TCPI_OPT_SYN_DATA != 0, fail))
            } else {
                None
            };
            let _ = tx.send(Ev::Done { cid, rec, keep, tfo });
            if !keep {
                let _ = s.shutdown().await;
                return Ok(());
            }
        }
    }
    .await;
    if let Err(e) = res {
        let _ = tx.send(Ev::Fatal(format!("{e:#}")));
    }
}

fn build_request(o: &Object) -> Vec<u8> {
    let default_port = if o.tls { 443 } else { 80 };
    let host = if o.port == default_port { o.host.clone() } else { format!("{}:{}", o.host, o.port) };
    format!(
        "{} {} HTTP/1.1\r\nHost: {}\r\nUser-Agent: pltlab-loader/0.1\r\nAccept: */*\r\nAccept-Encoding: gzip, deflate, br, zstd\r\nConnection: keep-alive\r\n\r\n",
        o.method.to_ascii_uppercase(),
        target_of(&o.url),
        host
    )
    .into_bytes()
}

struct Sched {
    ctx: Rc<Ctx>,
    plan: Rc<Plan>,
    reqs: Rc<Vec<Vec<u8>>>,
    groups: Vec<Group>,
    obj_group: Vec<usize>,
    /// Objects waiting for this one's last byte (as parent or in `after`).
    children: Vec<Vec<usize>>,
    /// Objects waiting for this one's first byte (`at_first_byte`).
    fb_children: Vec<Vec<usize>>,
    /// Prerequisites (parent, `after`) not yet met, per object.
    waiting: Vec<usize>,
    conns: Vec<Conn>,
    recs: Vec<Option<Rec>>,
    ready_ms: Vec<f64>,
    released_ms: Vec<f64>,
    /// Ready delayable requests held back by the limits, FIFO per phase slot (`slot`).
    held: Vec<VecDeque<usize>>,
    /// Delayable requests released and not yet arrived.
    delayable_out: usize,
    /// The tight phases (`tight_phases`, then the `tight_until` one) and their state.
    phases: Vec<Phase>,
    /// Per object: the phases whose `until` it is part of.
    in_tight: Vec<Vec<usize>>,
    /// Per object: its held-queue slot (its phase; phases.len() = none).
    slot: Vec<usize>,
    done: usize,
    tx: UnboundedSender<Ev>,
}

struct Phase {
    /// Objects of `until` not yet arrived.
    left: usize,
    /// Tight mode in force (until `delay_ms` after the last of `until`).
    on: bool,
    /// Its delayable requests released and not yet arrived.
    out: usize,
    delay_ms: f64,
}

impl Sched {
    fn assign(&mut self, cid: usize, idx: usize) {
        let c = &mut self.conns[cid];
        c.busy = Some(idx);
        let _ = c.tx.send(idx);
    }

    fn dispatch(&mut self, g: usize) {
        while !self.groups[g].queue.is_empty() {
            let Some(cid) = self.groups[g].idle.pop() else { break };
            let idx = self.groups[g].queue.pop_front().unwrap();
            self.assign(cid, idx);
        }
        let grp = &mut self.groups[g];
        if grp.queue.is_empty() {
            return;
        }
        match grp.dns {
            None if self.plan.dns_delay_ms > 0.0 => {
                grp.dns = Some(false);
                self.later(self.plan.dns_delay_ms, Ev::DnsDone(g));
                return;
            }
            None => {
                grp.dns = Some(true);
                grp.dns_end_ms = self.ctx.ms();
            }
            Some(false) => return,
            Some(true) => {}
        }
        while self.groups[g].queue.len() > self.groups[g].connecting
            && self.groups[g].open + self.groups[g].connecting < self.plan.max_conns_per_host
        {
            self.open_conn(g);
        }
    }

    fn open_conn(&mut self, g: usize) {
        let cid = self.conns.len();
        let (ctx_tx, rx) = unbounded_channel();
        let grp = &mut self.groups[g];
        grp.connecting += 1;
        let rec = ConnRec {
            id: cid,
            host: grp.host.clone(),
            ip: grp.addr.ip().to_string(),
            port: grp.addr.port(),
            tls: grp.tls,
            dns_end_ms: grp.dns_end_ms,
            ..Default::default()
        };
        self.conns.push(Conn { group: g, tx: ctx_tx, busy: None, rec });
        tokio::task::spawn_local(conn_task(
            self.ctx.clone(),
            self.plan.clone(),
            self.reqs.clone(),
            cid,
            grp.addr,
            grp.host.clone(),
            grp.tls,
            self.tx.clone(),
            rx,
        ));
    }

    /// Sends `ev` to the scheduler after `ms` milliseconds.
    fn later(&self, ms: f64, ev: Ev) {
        let tx = self.tx.clone();
        tokio::task::spawn_local(async move {
            tokio::time::sleep(Duration::from_secs_f64(ms / 1000.0)).await;
            let _ = tx.send(ev);
        });
    }

    /// Every prerequisite of `idx` met: ready after its delay.
    fn requestable(&mut self, idx: usize) {
        let d = self.plan.objects[idx].delay_ms;
        if d > 0.0 {
            self.later(d, Ev::Ready(idx));
        } else {
            self.ready(idx);
        }
    }

    /// One prerequisite of `idx` met.
    fn prereq_met(&mut self, idx: usize) {
        self.waiting[idx] -= 1;
        if self.waiting[idx] == 0 {
            self.requestable(idx);
        }
    }

    /// A delayable request of phase slot `k` may be released now (Chromium's ResourceScheduler
    /// / Blink tight mode, per frame).
    fn gate_open(&self, k: usize) -> bool {
        let global = self.plan.delayable_limit.map_or(true, |d| self.delayable_out < d);
        let tight = match (self.phases.get(k), self.plan.tight_limit) {
            (Some(ph), Some(t)) if ph.on => ph.out < t,
            _ => true,
        };
        global && tight
    }

    fn ready(&mut self, idx: usize) {
        let now = self.ctx.ms();
        self.ready_ms[idx] = now;
        let k = self.slot[idx];
        if self.plan.objects[idx].delayable && (!self.held[k].is_empty() || !self.gate_open(k)) {
            self.held[k].push_back(idx);
            return;
        }
        self.release(idx, now);
    }

    fn release(&mut self, idx: usize, now: f64) {
        self.released_ms[idx] = now;
        let g = self.obj_group[idx];
        if self.plan.objects[idx].delayable {
            self.delayable_out += 1;
            if let Some(ph) = self.phases.get_mut(self.slot[idx]) {
                ph.out += 1;
            }
            self.groups[g].queue.push_back(idx);
        } else {
            // a pool serves its queued requests by priority: ahead of every delayable one
            let objs = &self.plan.objects;
            let q = &mut self.groups[g].queue;
            let pos = q.iter().position(|&k| objs[k].delayable).unwrap_or(q.len());
            q.insert(pos, idx);
        }
        self.dispatch(g);
    }

    /// The last object of phase `k`'s `until` arrived: the phase ends after its delay.
    fn end_tight(&mut self, k: usize) {
        let d = self.phases[k].delay_ms;
        if d > 0.0 {
            self.later(d, Ev::TightEnd(k));
        } else {
            self.phases[k].on = false;
        }
    }

    fn release_held(&mut self) {
        for k in 0..self.held.len() {
            while !self.held[k].is_empty() && self.gate_open(k) {
                let idx = self.held[k].pop_front().unwrap();
                let now = self.ctx.ms();
                self.release(idx, now);
            }
        }
    }

    fn free(&mut self, cid: usize) {
        let g = self.conns[cid].group;
        self.conns[cid].busy = None;
        if let Some(idx) = self.groups[g].queue.pop_front() {
            self.assign(cid, idx);
        } else {
            self.groups[g].idle.push(cid);
        }
    }

    /// Handles one event; Ok(true) when every object has arrived.
    fn handle(&mut self, ev: Ev) -> Result<bool> {
        match ev {
            Ev::Fatal(e) => bail!("{e}"),
            Ev::Ready(i) => self.ready(i),
            Ev::TightEnd(k) => {
                self.phases[k].on = false;
                self.release_held();
            }
            Ev::FirstByte(i) => {
                for k in 0..self.fb_children[i].len() {
                    let ch = self.fb_children[i][k];
                    self.prereq_met(ch);
                }
            }
            Ev::DnsDone(g) => {
                self.groups[g].dns = Some(true);
                self.groups[g].dns_end_ms = self.ctx.ms();
                self.dispatch(g);
            }
            Ev::Connected { cid, cs, ce, tls } => {
                let c = &mut self.conns[cid];
                c.rec.connect_start_ms = cs;
                c.rec.connect_end_ms = ce;
                c.rec.tls_end_ms = tls;
                let g = c.group;
                self.groups[g].connecting -= 1;
                self.groups[g].open += 1;
                self.free(cid);
            }
            Ev::Done { cid, mut rec, keep, tfo } => {
                let idx = rec.index;
                let c = &mut self.conns[cid];
                if let Some((t, fail)) = tfo {
                    c.rec.tfo = t;
                    c.rec.tfo_client_fail = fail;
                }
                rec.new_conn = c.rec.requests.is_empty();
                c.rec.requests.push(idx);
                rec.conn_id = cid;
                rec.ready_ms = self.ready_ms[idx];
                rec.released_ms = self.released_ms[idx];
                rec.url = self.plan.objects[idx].url.clone();
                rec.host = self.plan.objects[idx].host.clone();
                self.recs[idx] = Some(rec);
                self.done += 1;
                if keep {
                    self.free(cid);
                } else {
                    let g = self.conns[cid].group;
                    self.conns[cid].busy = None;
                    self.groups[g].open -= 1;
                    self.dispatch(g);
                }
                if self.plan.objects[idx].delayable {
                    self.delayable_out -= 1;
                    if let Some(ph) = self.phases.get_mut(self.slot[idx]) {
                        ph.out -= 1;
                    }
                }
                for k in 0..self.in_tight[idx].len() {
                    let p = self.in_tight[idx][k];
                    self.phases[p].left -= 1;
                    if self.phases[p].left == 0 {
                        self.end_tight(p);
                    }
                }
                for k in 0..self.children[idx].len() {
                    let ch = self.children[idx][k];
                    self.prereq_met(ch);
                }
                self.release_held();
                return Ok(self.done == self.plan.objects.len());
            }
            Ev::Closed { cid } => {
                let g = self.conns[cid].group;
                self.groups[g].idle.retain(|&c| c != cid);
                self.groups[g].open -= 1;
                if let Some(idx) = self.conns[cid].busy.take() {
                    // assigned while the server closed the idle connection: requeue first
                    self.groups[g].queue.push_front(idx);
                }
                self.dispatch(g);
            }
        }
        Ok(false)
    }
}

async fn load_inner(plan: Rc<Plan>, ctx: Rc<Ctx>) -> Result<Output> {
    let n = plan.objects.len();
    let mut gmap: HashMap<(bool, String, u16), usize> = HashMap::new();
    let mut groups = Vec::new();
    let mut obj_group = Vec::with_capacity(n);
    for o in &plan.objects {
        let key = (o.tls, o.host.to_ascii_lowercase(), o.port);
        let g = *gmap.entry(key).or_insert_with(|| {
            groups.push(Group {
                host: o.host.clone(),
                addr: SocketAddr::new(o.ip, o.port),
                tls: o.tls,
                queue: VecDeque::new(),
                idle: Vec::new(),
                open: 0,
                connecting: 0,
                dns: None,
                dns_end_ms: 0.0,
            });
            groups.len() - 1
        });
        obj_group.push(g);
    }
    let mut children = vec![Vec::new(); n];
    let mut fb_children = vec![Vec::new(); n];
    let mut waiting = vec![0usize; n];
    for (i, o) in plan.objects.iter().enumerate() {
        if let Some(p) = o.parent {
            if o.at_first_byte { fb_children[p].push(i) } else { children[p].push(i) }
            waiting[i] += 1;
        }
        for &a in &o.after {
            children[a].push(i);
            waiting[i] += 1;
        }
    }
    let mut defs: Vec<TightPhase> = plan.tight_phases.clone();
    let legacy = (!plan.tight_until.is_empty()).then(|| {
        defs.push(TightPhase { until: plan.tight_until.clone(), delay_ms: plan.tight_delay_ms });
        defs.len() - 1
    });
    let mut in_tight = vec![Vec::new(); n];
    let mut phases = Vec::new();
    for (k, d) in defs.iter().enumerate() {
        let mut until = d.until.clone();
        until.sort_unstable();
        until.dedup();
        for &t in &until {
            in_tight[t].push(k);
        }
        phases.push(Phase { left: until.len(), on: !until.is_empty(), out: 0, delay_ms: d.delay_ms });
    }
    let slot: Vec<usize> = plan.objects.iter()
        .map(|o| o.tight_phase.or(legacy).unwrap_or(phases.len()))
        .collect();
    let reqs = Rc::new(plan.objects.iter().map(build_request).collect::<Vec<_>>());
    let (tx, mut rx) = unbounded_channel();
    let mut s = Sched {
        ctx: ctx.clone(),
        plan: plan.clone(),
        reqs,
        groups,
        obj_group,
        children,
        fb_children,
        waiting,
        conns: Vec::new(),
        recs: vec![None; n],
        ready_ms: vec![0.0; n],
        released_ms: vec![0.0; n],
        held: vec![VecDeque::new(); phases.len() + 1],
        delayable_out: 0,
        phases,
        in_tight,
        slot,
        done: 0,
        tx,
    };
    for i in 0..n {
        if s.waiting[i] == 0 {
            s.requestable(i);
        }
    }
    loop {
        let ev = rx.recv().await.ok_or_else(|| anyhow!("internal: event channel closed"))?;
        if s.handle(ev)? {
            break;
        }
    }
    // Close every connection (drop the command channels).
    let conns: Vec<ConnRec> = s.conns.drain(..).map(|c| c.rec).collect();
    let mut requests: Vec<Rec> = s.recs.into_iter().map(|r| r.expect("all done")).collect();
    for r in &mut requests {
        let c = &conns[r.conn_id];
        r.tfo = c.tfo;
        if r.new_conn {
            r.connect_start_ms = Some(c.connect_start_ms);
            r.connect_end_ms = Some(c.connect_end_ms);
            r.tls_end_ms = c.tls_end_ms;
        }
    }
    let plt = requests.iter().map(|r| r.last_byte_ms).fold(0.0, f64::max);
    let mut errors = Vec::new();
    let refused = ctx.tfo_refused.take();
    if let Some(e) = &refused {
        errors.push(e.clone());
    }
    Ok(Output {
        plt_ms: plt,
        objects: n,
        bytes: requests.iter().map(|r| r.bytes).sum(),
        tfo_requested: plan.tfo,
        tfo_available: plan.tfo && refused.is_none(),
        max_conns_per_host: plan.max_conns_per_host,
        requests,
        connections: conns,
        errors,
    })
}

/// Runs a load on a fresh single-threaded runtime.
pub fn load(plan: Plan) -> Result<Output> {
    plan.validate()?;
    let tls = match &plan.ca {
        Some(ca) if plan.objects.iter().any(|o| o.tls) => Some(tokio_rustls::TlsConnector::from(crate::certs::client_config(ca)?)),
        _ => None,
    };
    let timeout = Duration::from_secs_f64(plan.timeout_s.max(0.001));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let local = tokio::task::LocalSet::new();
    let plan = Rc::new(plan);
    let n = plan.objects.len();
    let res = local.block_on(&rt, async {
        let ctx = Rc::new(Ctx { t0: Instant::now(), tfo: plan.tfo, tfo_refused: Cell::new(None), tls });
        match tokio::time::timeout(timeout, load_inner(plan.clone(), ctx)).await {
            Ok(r) => r,
            Err(_) => Err(anyhow!("load timed out after {:.1} s ({n} objects planned)", timeout.as_secs_f64())),
        }
    });
    drop(local);
    drop(rt);
    res
}

pub fn run(a: Args) -> Result<()> {
    let data = std::fs::read(&a.plan).with_context(|| format!("cannot read plan {}", a.plan.display()))?;
    let plan: Plan = serde_json::from_slice(&data).with_context(|| format!("bad plan {}", a.plan.display()))?;
    let out = load(plan).context("load failed")?;
    println!("{}", serde_json::to_string(&out)?);
    Ok(())
}
