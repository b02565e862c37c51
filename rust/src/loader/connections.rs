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
use anyhow::{anyhow, bail, Result};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
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
}

pub(crate) struct Stream {
    pub(crate) io: Box<dyn Io>,
    pub(crate) tcp: SocketRef,
    connect_start_ms: f64,
    connect_end_ms: f64,
    tls_end_ms: Option<f64>,
    /// The server picked h2 (ALPN).
    h2: bool,
}

/// The TCP socket under a (maybe TLS) stream, for TCP_INFO: its fd, valid as long as the
/// stream that owns it.
pub(crate) struct SocketRef(std::os::fd::RawFd);

impl std::os::fd::AsRawFd for SocketRef {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0
    }
}

async fn open_stream(ctx: &Ctx, addr: SocketAddr, host: &str, tls: bool, offer_h2: bool) -> Result<Stream> {
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
    let h2 = conn.get_ref().1.alpn_protocol() == Some(b"h2");
    Ok(Stream {
        io: Box::new(conn),
        tcp: tcp_ref,
        connect_start_ms: cs,
        connect_end_ms: ce,
        tls_end_ms: Some(ctx.ms()),
        h2,
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
        let mut s = open_stream(&ctx, t.addr, &t.host, t.tls, t.h2).await?;
        if s.h2 {
            let tfo = tcpinfo::get(&s.tcp).ok().map(|ti| (ti.syn_data_acked(), ti.fastopen_client_fail()));
            let (cs, ce, tls) = (s.connect_start_ms, s.connect_end_ms, s.tls_end_ms);
            let send = super::h2conn::handshake(s.io, cid, tx.clone()).await?;
            let _ = tx.send(Msg::Connected { cid, cs, ce, tls, h2: Some(tfo) });
            return super::h2conn::serve(ctx.clone(), plan.clone(), send, cid, tx.clone(), rx).await;
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
                    conns.push(Conn { tx: ctx_tx, rec });
                    let t = Target { cid: conn, addr, host: o.host.clone(), tls: o.tls, h2: o.wants_h2() };
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
        };
        actions = sched.handle(ctx.ms(), ev);
    }
    // Dropping the request channels closes every connection.
    let conns: Vec<ConnRec> = conns.into_iter().map(|c| c.rec).collect();
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
