//! The loader's driver: carries out the scheduler's actions (connections as tokio tasks,
//! requests handed to them, timers) and feeds it what happened, keeping the records.
//!
//! A connection task connects (TCP_FASTOPEN_CONNECT set before connect() when the plan asks
//! for TFO; TLS with rustls), then serves one request at a time (exchange.rs) until the
//! scheduler drops it or the server closes it; after its first response it reads TCP_INFO
//! for the connection's TFO use (tcpi_options & 32: SYN data acked). A connection whose server
//! picked h2 (ALPN; offered for plan objects with protocol "h2") runs hyperium's h2 client
//! instead (h2conn.rs): every request handed to it is a stream of its own. Single-threaded:
//! every task runs on the load's LocalSet.
//!
//! TLS 1.3 early data (plan tls_mode "0rtt", a ticket at hand): the TLS connect returns before
//! the handshake, the first request is written as early data (with TFO, in the SYN with the
//! ClientHello when it fits) and the handshake completes on the flush; a rejected early data
//! is sent again by tokio-rustls after the handshake (1-RTT). `TlsSeen` records per connection
//! how its handshake went; an early-data connection's `tls_end_ms` is its connect end (the
//! request left at once).
use anyhow::{anyhow, bail, Result};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::exchange::{exchange, request};
use super::output::{ConnRec, Output, Rec};
use super::plan::Plan;
use super::scheduler::{Action, Event, Scheduler, Timer};
use crate::os::{sock, tcpinfo};

/// What every task of a load shares.
pub struct Ctx {
    pub t0: Instant,
    pub tfo: bool,
    pub tfo_refused: Cell<Option<String>>,
    pub tls: Option<tokio_rustls::TlsConnector>,
    /// The same offering ALPN h2 first (plan objects with protocol "h2").
    pub tls_h2: Option<tokio_rustls::TlsConnector>,
}

impl Ctx {
    /// Ms since the load started.
    pub fn ms(&self) -> f64 {
        self.t0.elapsed().as_secs_f64() * 1000.0
    }
}

pub trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// What the tasks tell the driver.
pub(crate) enum Msg {
    Timer(Timer),
    Connected {
        cid: usize,
        cs: f64,
        ce: f64,
        tls: Option<f64>,
        /// h2 picked: the connection multiplexes; its TFO use, read at once.
        h2: Option<Option<(bool, u8)>>,
    },
    /// A response on an h2 connection arrived completely.
    StreamDone {
        cid: usize,
        rec: Box<Rec>,
    },
    FirstByte(usize),
    /// An early-data h2 connection's TFO use, read after its first response.
    Tfo {
        cid: usize,
        tfo: (bool, u8),
    },
    /// `tfo`: (SYN data acked, tcpi_fastopen_client_fail) after the connection's first response.
    Done {
        cid: usize,
        rec: Box<Rec>,
        keep: bool,
        tfo: Option<(bool, u8)>,
    },
    Closed {
        cid: usize,
    },
    Fatal(String),
}

/// A connection as the driver sees it: where to hand its requests, its record.
struct Conn {
    tx: UnboundedSender<usize>,
    rec: ConnRec,
    tls: Rc<Cell<TlsSeen>>,
}

/// How a TLS connection's handshake went, as the client saw it.
#[derive(Clone, Copy, Default, Debug)]
pub(crate) struct TlsSeen {
    /// The first request was written as early data.
    pub early_tried: bool,
    /// The handshake ended: then `resumed`, `early_accepted`.
    pub done: bool,
    pub resumed: bool,
    pub early_accepted: bool,
}

impl TlsSeen {
    fn handshake(&self) -> Option<String> {
        self.done.then(|| if self.resumed { "resumed" } else { "full" }.to_string())
    }
    fn early_data(&self) -> Option<String> {
        (self.done && self.early_tried).then(|| if self.early_accepted { "accepted" } else { "rejected" }.to_string())
    }
}

type ClientTls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A client TLS stream noting in `seen` how its handshake went, once it has ended (with early
/// data the handshake ends during the first request's flush, after the stream was handed on).
struct Watched {
    inner: ClientTls,
    seen: Rc<Cell<TlsSeen>>,
}

impl Watched {
    fn note(&self) {
        let mut s = self.seen.get();
        let c = self.inner.get_ref().1;
        if !s.done && !c.is_handshaking() {
            s.done = true;
            s.resumed = c.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            s.early_accepted = c.is_early_data_accepted();
            self.seen.set(s);
        }
    }
}

impl AsyncRead for Watched {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.note();
        r
    }
}

impl AsyncWrite for Watched {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note();
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note();
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.note();
        r
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.note();
        r
    }
}

pub(crate) struct Stream {
    pub(crate) io: Box<dyn Io>,
    pub(crate) tcp: SocketRef,
    connect_start_ms: f64,
    connect_end_ms: f64,
    tls_end_ms: Option<f64>,
    /// The server picked h2 (ALPN; with early data: offered, the ticket's protocol).
    h2: bool,
    /// The first request goes as early data (0-RTT).
    early: bool,
}

/// The TCP socket under a (maybe TLS) stream, for TCP_INFO: its fd, valid as long as the
/// stream that owns it.
pub(crate) struct SocketRef(std::os::fd::RawFd);

impl std::os::fd::AsRawFd for SocketRef {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

async fn open_stream(
    ctx: &Ctx,
    addr: SocketAddr,
    host: &str,
    tls: bool,
    offer_h2: bool,
    seen: Rc<Cell<TlsSeen>>,
) -> Result<Stream> {
    use std::os::fd::AsRawFd;
    let cs = ctx.ms();
    let s = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    if ctx.tfo {
        if let Err(e) = sock::set_tcp_int(&s, sock::TCP_FASTOPEN_CONNECT, 1) {
            let why = if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                format!("TCP_FASTOPEN_CONNECT refused ({e}): net.ipv4.tcp_fastopen does not allow client TFO here; loaded without TFO")
            } else {
                format!("TCP_FASTOPEN_CONNECT refused ({e}); loaded without TFO")
            };
            ctx.tfo_refused.set(Some(why));
        }
    }
    s.set_nodelay(true)?;
    let tcp_ref = SocketRef(s.as_raw_fd());
    let tcp = s.connect(addr).await.map_err(|e| anyhow!("connect to {addr} ({host}) failed: {e}"))?;
    let ce = ctx.ms();
    if !tls {
        return Ok(Stream {
            io: Box::new(tcp),
            tcp: tcp_ref,
            connect_start_ms: cs,
            connect_end_ms: ce,
            tls_end_ms: None,
            h2: false,
            early: false,
        });
    }
    let name = match host.parse::<IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("bad TLS server name {host:?}: {e}"))?,
    };
    let connector = if offer_h2 { ctx.tls_h2.as_ref() } else { ctx.tls.as_ref() };
    let conn = connector
        .expect("tls connector")
        .connect(name, tcp)
        .await
        .map_err(|e| anyhow!("TLS handshake with {addr} ({host}) failed: {e}"))?;
    // returned mid-handshake: early data accepted for writing (tokio-rustls' 0-RTT state);
    // the server's choice of protocol is the ticket's, the one offered first
    let early = conn.get_ref().1.is_handshaking();
    let h2 = if early { offer_h2 } else { conn.get_ref().1.alpn_protocol() == Some(b"h2") };
    seen.set(TlsSeen { early_tried: early, ..Default::default() });
    let w = Watched { inner: conn, seen };
    w.note();
    Ok(Stream {
        io: Box::new(w),
        tcp: tcp_ref,
        connect_start_ms: cs,
        connect_end_ms: ce,
        tls_end_ms: Some(if early { ce } else { ctx.ms() }),
        h2,
        early,
    })
}

/// Everything a connection task needs to know about its connection.
struct Target {
    cid: usize,
    addr: SocketAddr,
    host: String,
    tls: bool,
    /// Offer h2 (ALPN).
    h2: bool,
    seen: Rc<Cell<TlsSeen>>,
}

async fn conn_task(
    ctx: Rc<Ctx>,
    plan: Rc<Plan>,
    reqs: Rc<Vec<Vec<u8>>>,
    t: Target,
    tx: UnboundedSender<Msg>,
    mut rx: UnboundedReceiver<usize>,
) {
    let cid = t.cid;
    let res: Result<()> = async {
        let mut s = open_stream(&ctx, t.addr, &t.host, t.tls, t.h2, t.seen).await?;
        if s.h2 {
            // with early data nothing has been sent yet: TFO's outcome is read after the first stream
            let tfo = (!s.early)
                .then(|| tcpinfo::get(&s.tcp).ok().map(|ti| (ti.syn_data_acked(), ti.fastopen_client_fail())))
                .flatten();
            let (cs, ce, tls) = (s.connect_start_ms, s.connect_end_ms, s.tls_end_ms);
            let (send, conn) = super::h2conn::handshake(s.io).await?;
            let _ = tx.send(Msg::Connected { cid, cs, ce, tls, h2: Some(tfo) });
            let tcp = s.early.then_some(s.tcp);
            return super::h2conn::serve(ctx.clone(), plan.clone(), send, conn, cid, tx.clone(), rx, tcp).await;
        }
        let _ =
            tx.send(Msg::Connected { cid, cs: s.connect_start_ms, ce: s.connect_end_ms, tls: s.tls_end_ms, h2: None });
        let mut buf = vec![0u8; 64 * 1024];
        let mut first = true;
        loop {
            let idx = tokio::select! {
                biased;
                m = rx.recv() => match m { Some(i) => i, None => return Ok(()) },
                r = s.io.read(&mut buf[..]) => {
                    // idle connection: closed (or spoke out of turn) -> drop it
                    let _ = r;
                    let _ = tx.send(Msg::Closed { cid });
                    return Ok(());
                }
            };
            let o = &plan.objects[idx];
            let head_req = o.method.eq_ignore_ascii_case("HEAD");
            let fb_tx = tx.clone();
            let (mut rec, keep) = exchange(&ctx, s.io.as_mut(), &mut buf, &reqs[idx], head_req, &o.url, move || {
                let _ = fb_tx.send(Msg::FirstByte(idx));
            })
            .await?;
            rec.index = idx;
            let tfo = if first {
                first = false;
                tcpinfo::get(&s.tcp).ok().map(|ti| (ti.syn_data_acked(), ti.fastopen_client_fail()))
            } else {
                None
            };
            let _ = tx.send(Msg::Done { cid, rec: Box::new(rec), keep, tfo });
            if !keep {
                let _ = s.io.shutdown().await;
                return Ok(());
            }
        }
    }
    .await;
    if let Err(e) = res {
        let _ = tx.send(Msg::Fatal(format!("{e:#}")));
    }
}

/// The load's event loop: until every object has arrived, or an error.
pub async fn drive(plan: Rc<Plan>, ctx: Rc<Ctx>) -> Result<Output> {
    let n = plan.objects.len();
    let reqs = Rc::new(plan.objects.iter().map(request).collect::<Vec<_>>());
    let (tx, mut rx) = unbounded_channel();
    let mut sched = Scheduler::new(&plan);
    let mut conns: Vec<Conn> = Vec::new();
    let mut recs: Vec<Option<Rec>> = vec![None; n];
    let mut actions = sched.start(ctx.ms());
    loop {
        for a in actions.drain(..) {
            match a {
                Action::Open { conn, pool, dns_end_ms } => {
                    let o = &plan.objects[sched.pool_object(pool)];
                    let (ctx_tx, ctx_rx) = unbounded_channel();
                    let addr = SocketAddr::new(o.ip, o.port);
                    let rec = ConnRec {
                        id: conn,
                        hosts: vec![o.host.clone()],
                        host: o.host.clone(),
                        ip: o.ip.to_string(),
                        port: o.port,
                        tls: o.tls,
                        dns_end_ms,
                        ..Default::default()
                    };
                    debug_assert_eq!(conn, conns.len());
                    let tls = Rc::new(Cell::new(TlsSeen::default()));
                    conns.push(Conn { tx: ctx_tx, rec, tls: tls.clone() });
                    let t = Target { cid: conn, addr, host: o.host.clone(), tls: o.tls, h2: o.wants_h2(), seen: tls };
                    tokio::task::spawn_local(conn_task(ctx.clone(), plan.clone(), reqs.clone(), t, tx.clone(), ctx_rx));
                }
                // a connection closed meanwhile reports it (Msg::Closed): the request is requeued
                Action::Send { conn, object } => {
                    let _ = conns[conn].tx.send(object);
                }
                Action::Timer { at, timer } => {
                    let tx = tx.clone();
                    let when = tokio::time::Instant::from_std(ctx.t0 + Duration::from_secs_f64(at.max(0.0) / 1000.0));
                    tokio::task::spawn_local(async move {
                        tokio::time::sleep_until(when).await;
                        let _ = tx.send(Msg::Timer(timer));
                    });
                }
            }
        }
        if sched.is_done() {
            break;
        }
        let msg = rx.recv().await.ok_or_else(|| anyhow!("internal: event channel closed"))?;
        let ev = match msg {
            Msg::Fatal(e) => bail!("{e}"),
            Msg::Timer(t) => Event::Timer(t),
            Msg::FirstByte(i) => Event::FirstByte(i),
            Msg::Connected { cid, cs, ce, tls, h2 } => {
                let c = &mut conns[cid].rec;
                c.connect_start_ms = cs;
                c.connect_end_ms = ce;
                c.tls_end_ms = tls;
                match h2 {
                    Some(tfo) => {
                        c.protocol = "h2".into();
                        if let Some((t, fail)) = tfo {
                            c.tfo = t;
                            c.tfo_client_fail = fail;
                        }
                        Event::ConnectedH2(cid)
                    }
                    None => {
                        c.protocol = "http/1.1".into();
                        Event::Connected(cid)
                    }
                }
            }
            Msg::StreamDone { cid, mut rec } => {
                let c = &mut conns[cid].rec;
                rec.new_conn = c.requests.is_empty();
                c.requests.push(rec.index);
                let host = &plan.objects[rec.index].host;
                if !c.hosts.contains(host) {
                    c.hosts.push(host.clone());
                }
                rec.conn_id = cid;
                let i = rec.index;
                recs[i] = Some(*rec);
                Event::StreamDone { conn: cid, object: i }
            }
            Msg::Done { cid, mut rec, keep, tfo } => {
                let c = &mut conns[cid].rec;
                if let Some((t, fail)) = tfo {
                    c.tfo = t;
                    c.tfo_client_fail = fail;
                }
                rec.new_conn = c.requests.is_empty();
                c.requests.push(rec.index);
                rec.conn_id = cid;
                let i = rec.index;
                recs[i] = Some(*rec);
                Event::Done { conn: cid, keep_alive: keep }
            }
            Msg::Closed { cid } => Event::Closed(cid),
            Msg::Tfo { cid, tfo: (t, fail) } => {
                let c = &mut conns[cid].rec;
                c.tfo = t;
                c.tfo_client_fail = fail;
                continue;
            }
        };
        actions = sched.handle(ctx.ms(), ev);
    }
    // Dropping the request channels closes every connection.
    let conns: Vec<ConnRec> = conns
        .into_iter()
        .map(|c| {
            let mut rec = c.rec;
            let seen = c.tls.get();
            rec.tls_handshake = seen.handshake();
            rec.early_data = seen.early_data();
            rec
        })
        .collect();
    let requests: Vec<Rec> = recs
        .into_iter()
        .enumerate()
        .map(|(i, r)| {
            let mut r = r.expect("all done");
            let o = &plan.objects[i];
            r.url = o.url.clone();
            r.host = o.host.clone();
            r.ready_ms = sched.ready_ms(i);
            r.released_ms = sched.released_ms(i);
            r
        })
        .collect();
    let refused = ctx.tfo_refused.take();
    Ok(Output::new(&plan, requests, conns, refused))
}
