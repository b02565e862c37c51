//! The loader's driver: carries out the scheduler's actions (connections as tokio tasks,
//! requests handed to them, timers) and feeds it what happened, keeping the records.
//!
//! A connection task sets its connection up (transport/: TCP with TFO when the plan asks for
//! it, TLS for https), then hands it to the HTTP its server picked (ALPN; h2 offered for plan
//! objects with protocol "h2"): h1.rs serves one request at a time until the scheduler drops
//! the connection or the server closes it; h2.rs makes every request handed to it a stream of
//! its own; objects with protocol "h3" go over QUIC instead (transport/quic.rs, h3.rs: streams
//! as h2's). The connection's transport facts (TCP: its TFO use) come with its first response,
//! or at once for h2 without early data. Single-threaded: every task runs on the load's
//! LocalSet.
use anyhow::{anyhow, bail, Result};
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};

use super::clock::Clock;
use super::events::{Action, Event};
use super::msg::{Msg, Protocol};
use super::output::{ConnRec, Output, Rec};
use super::plan::Plan;
use super::scheduler::Scheduler;
use super::transport::tls::TlsSeen;
use super::transport::Dialer;
use super::{h1, h2, h3};

/// What every task of a load shares: its clock, how it opens connections.
pub struct Ctx {
    pub clock: Clock,
    pub dial: Dialer,
}

/// A connection as the driver sees it: where to hand its requests, its record.
struct Conn {
    tx: UnboundedSender<usize>,
    rec: ConnRec,
    tls: Rc<Cell<TlsSeen>>,
}

/// Everything a connection task needs to know about its connection.
struct Target {
    cid: usize,
    addr: SocketAddr,
    host: String,
    tls: bool,
    /// Offer h2 (ALPN).
    h2: bool,
    /// HTTP/3 over QUIC.
    h3: bool,
    seen: Rc<Cell<TlsSeen>>,
}

async fn conn_task(
    ctx: Rc<Ctx>,
    plan: Rc<Plan>,
    reqs: Rc<Vec<Vec<u8>>>,
    t: Target,
    tx: UnboundedSender<Msg>,
    rx: UnboundedReceiver<usize>,
) {
    let cid = t.cid;
    let res: Result<()> = async {
        if plan.conn_setup_delay_ms > 0.0 {
            tokio::time::sleep(std::time::Duration::from_secs_f64(plan.conn_setup_delay_ms / 1000.0)).await;
        }
        if t.h3 {
            let q = ctx.dial.open_quic(&ctx.clock, t.addr, &t.host, &t.seen).await?;
            return h3::serve(ctx.clock, plan.clone(), q, cid, tx.clone(), rx, t.seen).await;
        }
        let c = ctx.dial.open(&ctx.clock, t.addr, &t.host, t.tls, t.h2, t.seen).await?;
        let (cs, ce, tls) = (c.connect_start_ms, c.connect_end_ms, c.tls_end_ms);
        if c.h2 {
            // with early data nothing has been sent yet: the facts are read after the first stream
            let transport = if c.early { None } else { c.probe.stats() };
            let (send, conn) = h2::handshake(c.io).await?;
            let _ = tx.send(Msg::Connected { cid, cs, ce, tls, protocol: Protocol::H2, transport });
            let probe = c.early.then_some(c.probe);
            return h2::serve(ctx.clock, plan.clone(), send, conn, cid, tx.clone(), rx, probe).await;
        }
        let _ = tx.send(Msg::Connected { cid, cs, ce, tls, protocol: Protocol::Http1, transport: None });
        h1::serve(&ctx.clock, &plan, &reqs, c, cid, &tx, rx).await
    }
    .await;
    if let Err(e) = res {
        let _ = tx.send(Msg::Fatal(format!("{e:#}")));
    }
}

/// The load's event loop: until every object has arrived, or an error.
pub async fn drive(plan: Rc<Plan>, ctx: Rc<Ctx>) -> Result<Output> {
    let n = plan.objects.len();
    let reqs = Rc::new(plan.objects.iter().map(h1::request).collect::<Vec<_>>());
    let (tx, mut rx) = unbounded_channel();
    let mut sched = Scheduler::new(&plan);
    let mut conns: Vec<Conn> = Vec::new();
    let mut recs: Vec<Option<Rec>> = vec![None; n];
    let mut actions = sched.start(ctx.clock.ms());
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
                    let t = Target {
                        cid: conn,
                        addr,
                        host: o.host.clone(),
                        tls: o.tls,
                        h2: o.wants_h2(),
                        h3: o.wants_h3(),
                        seen: tls,
                    };
                    tokio::task::spawn_local(conn_task(ctx.clone(), plan.clone(), reqs.clone(), t, tx.clone(), ctx_rx));
                }
                // a connection closed meanwhile reports it (Msg::Closed): the request is requeued
                Action::Send { conn, object } => {
                    let _ = conns[conn].tx.send(object);
                }
                Action::Timer { at, timer } => {
                    let tx = tx.clone();
                    let when = tokio::time::Instant::from_std(ctx.clock.at(at));
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
            Msg::Connected { cid, cs, ce, tls, protocol, transport } => {
                let c = &mut conns[cid].rec;
                c.connect_start_ms = cs;
                c.connect_end_ms = ce;
                c.tls_end_ms = tls;
                c.protocol = protocol.name().into();
                if let Some(s) = transport {
                    c.transport = s;
                }
                if protocol.multiplexed() {
                    Event::ConnectedH2(cid)
                } else {
                    Event::Connected(cid)
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
            Msg::Done { cid, mut rec, keep, transport } => {
                let c = &mut conns[cid].rec;
                if let Some(s) = transport {
                    c.transport = s;
                }
                rec.new_conn = c.requests.is_empty();
                c.requests.push(rec.index);
                rec.conn_id = cid;
                let i = rec.index;
                recs[i] = Some(*rec);
                Event::Done { conn: cid, keep_alive: keep }
            }
            Msg::Closed { cid } => Event::Closed(cid),
            Msg::Transport { cid, stats } => {
                conns[cid].rec.transport = stats;
                continue;
            }
        };
        actions = sched.handle(ctx.clock.ms(), ev);
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
    let refused = ctx.dial.tcp.take_tfo_refused();
    Ok(Output::new(&plan, requests, conns, refused))
}
