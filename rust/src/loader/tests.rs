//! The scheduler and its policies without sockets: events in, actions out, time made up.
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use super::events::{Action, Event, Timer};
use super::plan::{Object, Plan, TightPhase};
use super::scheduler::Scheduler;
use crate::testutil::loader::{obj, plan};

const A: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 80);

/// Object `i` of host `host` ("a", "b", ...), child of `parent`.
fn o(host: &str, i: usize, parent: Option<usize>) -> Object {
    obj(&format!("http://{host}/{i}"), host, A, false, parent)
}

/// A root on host "a" and `n` children of it on host "a".
fn fan(n: usize) -> Plan {
    plan((0..=n).map(|i| o("a", i, (i > 0).then_some(0))).collect(), None)
}

/// A scheduler and every action it returned, in order.
struct Sim {
    s: Scheduler,
    log: Vec<Action>,
}

impl Sim {
    fn new(p: &Plan) -> Sim {
        p.validate().unwrap();
        let mut s = Scheduler::new(p);
        let log = s.start(0.0);
        Sim { s, log }
    }

    fn ev(&mut self, now: f64, ev: Event) -> Vec<Action> {
        let a = self.s.handle(now, ev);
        self.log.extend(a.iter().copied());
        a
    }

    fn opens(&self) -> Vec<usize> {
        self.log.iter().filter_map(|a| if let Action::Open { pool, .. } = a { Some(*pool) } else { None }).collect()
    }

    /// (connection, object) of every request sent, in order.
    fn sends(&self) -> Vec<(usize, usize)> {
        self.log
            .iter()
            .filter_map(|a| if let Action::Send { conn, object } = a { Some((*conn, *object)) } else { None })
            .collect()
    }

    /// Root 0 on connection 0: connected and answered at `t` (kept alive or not).
    fn root_done(&mut self, t: f64, keep_alive: bool) -> Vec<Action> {
        assert_eq!(self.ev(0.0, Event::Connected(0)), [Action::Send { conn: 0, object: 0 }]);
        self.ev(t, Event::Done { conn: 0, keep_alive })
    }
}

#[test]
fn root_requested_at_start_on_a_new_connection() {
    let mut sim = Sim::new(&fan(0));
    assert_eq!(sim.log, [Action::Open { conn: 0, pool: 0, dns_end_ms: 0.0 }]);
    assert!(!sim.s.is_done());
    sim.root_done(5.0, true);
    assert!(sim.s.is_done());
    assert_eq!((sim.s.ready_ms(0), sim.s.released_ms(0)), (0.0, 0.0));
}

#[test]
fn at_most_max_conns_per_host_and_pools_apart() {
    // 20 children on "a", 20 on "b": "a" reuses the root's connection and opens 5 more
    let mut objs: Vec<Object> = vec![o("a", 0, None)];
    objs.extend((1..=20).map(|i| o("a", i, Some(0))));
    objs.extend((21..=40).map(|i| o("b", i, Some(0))));
    let mut sim = Sim::new(&plan(objs, None));
    let acts = sim.root_done(1.0, true);
    assert_eq!(acts[0], Action::Send { conn: 0, object: 1 });
    assert_eq!(sim.opens(), [0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1]);
    // another ready request does not open a 7th
    let mut p = fan(30);
    p.max_conns_per_host = 2;
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    assert_eq!(sim.opens().len(), 2);
}

#[test]
fn late_binding_to_the_most_recently_freed_connection() {
    // 1 and 2 after the root, 3 after 2: when 3 is ready, connections 0 and 1 are idle and
    // connection 1 (freed last) takes it
    let mut objs: Vec<Object> = (0..3).map(|i| o("a", i, (i > 0).then_some(0))).collect();
    objs.push(o("a", 3, Some(2)));
    let mut sim = Sim::new(&plan(objs, None));
    let acts = sim.root_done(1.0, true);
    assert_eq!(acts, [Action::Send { conn: 0, object: 1 }, Action::Open { conn: 1, pool: 0, dns_end_ms: 0.0 }]);
    assert_eq!(sim.ev(2.0, Event::Connected(1)), [Action::Send { conn: 1, object: 2 }]);
    assert!(sim.ev(3.0, Event::Done { conn: 0, keep_alive: true }).is_empty());
    assert_eq!(sim.ev(4.0, Event::Done { conn: 1, keep_alive: true }), [Action::Send { conn: 1, object: 3 }]);
    assert_eq!(sim.sends(), [(0, 0), (0, 1), (1, 2), (1, 3)]);
}

#[test]
fn new_connections_only_while_queued_requests_outnumber_connecting_ones() {
    // the root's connection closes: 3 children ready at once open 3 connections, not 6
    let mut sim = Sim::new(&fan(3));
    let acts = sim.root_done(1.0, false);
    assert_eq!(acts.len(), 3);
    assert_eq!(sim.opens(), [0, 0, 0, 0]);
    // the first connection up takes the oldest request; the others wait for theirs
    assert_eq!(sim.ev(2.0, Event::Connected(2)), [Action::Send { conn: 2, object: 1 }]);
    assert_eq!(sim.ev(3.0, Event::Connected(1)), [Action::Send { conn: 1, object: 2 }]);
    // a child discovered while a connection is still being set up: one more
    let mut p = fan(2);
    p.objects[2].delay_ms = 0.5;
    let mut sim = Sim::new(&p);
    let acts = sim.root_done(1.0, false);
    assert_eq!(
        acts,
        [Action::Open { conn: 1, pool: 0, dns_end_ms: 0.0 }, Action::Timer { at: 1.5, timer: Timer::Ready(2) }]
    );
    assert_eq!(sim.ev(1.5, Event::Timer(Timer::Ready(2))), [Action::Open { conn: 2, pool: 0, dns_end_ms: 0.0 }]);
    assert_eq!(sim.s.ready_ms(2), 1.5);
}

#[test]
fn dns_delay_once_per_pool() {
    let objs = vec![o("a", 0, None), o("a", 1, Some(0)), o("b", 2, Some(0)), o("a", 3, Some(1))];
    let mut p = plan(objs, None);
    p.dns_delay_ms = 20.0;
    let mut sim = Sim::new(&p);
    assert_eq!(sim.log, [Action::Timer { at: 20.0, timer: Timer::Dns(0) }]);
    assert_eq!(sim.ev(20.0, Event::Timer(Timer::Dns(0))), [Action::Open { conn: 0, pool: 0, dns_end_ms: 20.0 }]);
    assert_eq!(sim.ev(30.0, Event::Connected(0)), [Action::Send { conn: 0, object: 0 }]);
    // "a" again: no DNS; "b": its own
    let acts = sim.ev(40.0, Event::Done { conn: 0, keep_alive: false });
    assert_eq!(
        acts,
        [Action::Open { conn: 1, pool: 0, dns_end_ms: 20.0 }, Action::Timer { at: 60.0, timer: Timer::Dns(1) }]
    );
    assert_eq!(sim.ev(60.0, Event::Timer(Timer::Dns(1))), [Action::Open { conn: 2, pool: 1, dns_end_ms: 60.0 }]);
    assert_eq!(sim.ev(61.0, Event::Connected(1)), [Action::Send { conn: 1, object: 1 }]);
    assert_eq!(sim.ev(70.0, Event::Done { conn: 1, keep_alive: true }), [Action::Send { conn: 1, object: 3 }]);
    // requests queued while the DNS delay runs wait for it without a second timer
    let mut p = plan(vec![o("a", 0, None), o("a", 1, None)], None);
    p.dns_delay_ms = 5.0;
    let sim = Sim::new(&p);
    assert_eq!(sim.log, [Action::Timer { at: 5.0, timer: Timer::Dns(0) }]);
}

#[test]
fn first_byte_discovery_and_after() {
    // 1 at the root's first byte, 2 at its last, 3 after the root and 1 with 7 ms delay
    let mut objs: Vec<Object> = (0..4).map(|i| o("a", i, (i > 0).then_some(0))).collect();
    objs[1].at_first_byte = true;
    objs[3].after = vec![1];
    objs[3].delay_ms = 7.0;
    let mut sim = Sim::new(&plan(objs, None));
    sim.ev(1.0, Event::Connected(0));
    assert_eq!(sim.ev(2.0, Event::FirstByte(0)), [Action::Open { conn: 1, pool: 0, dns_end_ms: 0.0 }]);
    assert_eq!(sim.s.ready_ms(1), 2.0);
    assert_eq!(sim.ev(3.0, Event::Connected(1)), [Action::Send { conn: 1, object: 1 }]);
    // the root arrives: 2 ready, 3 still waits for 1
    assert_eq!(sim.ev(9.0, Event::Done { conn: 0, keep_alive: true }), [Action::Send { conn: 0, object: 2 }]);
    // 1 arrives: 3 ready 7 ms later
    assert_eq!(
        sim.ev(12.0, Event::Done { conn: 1, keep_alive: true }),
        [Action::Timer { at: 19.0, timer: Timer::Ready(3) }]
    );
    assert_eq!(sim.ev(19.0, Event::Timer(Timer::Ready(3))), [Action::Send { conn: 1, object: 3 }]);
    assert_eq!((sim.s.ready_ms(2), sim.s.ready_ms(3)), (9.0, 19.0));
}

#[test]
fn closed_idle_connection_requeues_its_request() {
    let mut sim = Sim::new(&fan(1));
    sim.root_done(1.0, true);
    assert_eq!(sim.sends(), [(0, 0), (0, 1)]);
    // the server had closed connection 0 just before: 1 goes first on a new connection
    assert_eq!(sim.ev(2.0, Event::Closed(0)), [Action::Open { conn: 1, pool: 0, dns_end_ms: 0.0 }]);
    assert_eq!(sim.ev(3.0, Event::Connected(1)), [Action::Send { conn: 1, object: 1 }]);
    sim.ev(4.0, Event::Done { conn: 1, keep_alive: true });
    assert!(sim.s.is_done());
}

/// A root on "a" and `n` delayable images of it on "a" (one connection unless said otherwise).
fn images(n: usize) -> Plan {
    let mut p = fan(n);
    for ob in &mut p.objects[1..] {
        ob.delayable = true;
    }
    p
}

#[test]
fn delayable_limit_holds_images_fifo() {
    let mut p = images(5);
    p.delayable_limit = Some(2);
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    // 1 on the idle connection, 2 queued (a new connection for it), 3-5 held
    assert_eq!(sim.sends(), [(0, 0), (0, 1)]);
    assert_eq!(sim.opens().len(), 2);
    assert_eq!((sim.s.released_ms(2), sim.s.released_ms(3), sim.s.ready_ms(5)), (1.0, 0.0, 1.0));
    // 1 arrives: 3 released, onto connection 0 again; then 2's connection is up
    assert_eq!(sim.ev(4.0, Event::Done { conn: 0, keep_alive: true }), [Action::Send { conn: 0, object: 2 }]);
    assert_eq!(sim.s.released_ms(3), 4.0);
    assert_eq!(sim.ev(5.0, Event::Connected(1)), [Action::Send { conn: 1, object: 3 }]);
    assert_eq!(sim.ev(6.0, Event::Done { conn: 1, keep_alive: true }), [Action::Send { conn: 1, object: 4 }]);
    assert_eq!(sim.ev(7.0, Event::Done { conn: 1, keep_alive: true }), [Action::Send { conn: 1, object: 5 }]);
    assert_eq!((sim.s.released_ms(4), sim.s.released_ms(5)), (6.0, 7.0));
}

#[test]
fn tight_phase_then_delay_then_delayable_limit() {
    // until the stylesheet (1, on "b") arrived and 10 ms more: one image at a time; then 3
    let mut objs = vec![o("a", 0, None), o("b", 1, Some(0))];
    objs.extend((2..8).map(|i| Object { delayable: true, ..o("a", i, Some(0)) }));
    let mut p = plan(objs, None);
    p.delayable_limit = Some(3);
    p.tight_limit = Some(1);
    p.tight_until = vec![1];
    p.tight_delay_ms = 10.0;
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    let released = |s: &Sim| (2..8).filter(|&i| s.s.released_ms(i) > 0.0).count();
    assert_eq!(released(&sim), 1);
    assert_eq!(sim.sends(), [(0, 0), (0, 2)]);
    // image 2 arrives: image 3 goes (still tight)
    assert_eq!(sim.ev(3.0, Event::Done { conn: 0, keep_alive: true }), [Action::Send { conn: 0, object: 3 }]);
    // the stylesheet arrives on its connection (1): tight for 10 ms more
    sim.ev(4.0, Event::Connected(1));
    assert_eq!(
        sim.ev(5.0, Event::Done { conn: 1, keep_alive: true }),
        [Action::Timer { at: 15.0, timer: Timer::TightEnd(0) }]
    );
    assert_eq!(released(&sim), 2);
    // the phase ends: two more released (3 out at once)
    let acts = sim.ev(15.0, Event::Timer(Timer::TightEnd(0)));
    assert_eq!(released(&sim), 4, "{acts:?}");
    assert_eq!((sim.s.released_ms(4), sim.s.released_ms(5), sim.s.released_ms(6)), (15.0, 15.0, 0.0));
}

#[test]
fn tight_phases_per_frame() {
    // images 2-3 count against phase 0 (until 1), images 4-5 against phase 1 (until 0: over
    // when the root arrived)
    let mut objs = vec![o("a", 0, None), o("b", 1, Some(0))];
    objs.extend((2..6).map(|i| Object {
        delayable: true,
        tight_phase: Some(usize::from(i >= 4)),
        ..o("a", i, Some(0))
    }));
    let mut p = plan(objs, None);
    p.tight_limit = Some(1);
    p.tight_phases = vec![
        TightPhase { until: vec![1], delay_ms: 0.0, doc: None },
        TightPhase { until: vec![0], delay_ms: 0.0, doc: None },
    ];
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    let released: Vec<usize> = (2..6).filter(|&i| sim.s.released_ms(i) > 0.0).collect();
    assert_eq!(released, [2, 4, 5]);
    // the stylesheet arrives: phase 0 over at once (no delay), image 3 released
    sim.ev(2.0, Event::Connected(1));
    sim.ev(3.0, Event::Done { conn: 1, keep_alive: true });
    assert_eq!(sim.s.released_ms(3), 3.0);
}

#[test]
fn other_requests_go_ahead_of_queued_images() {
    // one connection: images queued, then a script (delay 2 ms) overtakes them
    let mut p = images(3);
    p.max_conns_per_host = 1;
    p.objects.push(Object { delay_ms: 2.0, ..o("a", 4, Some(0)) });
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    assert_eq!(sim.sends(), [(0, 0), (0, 1)]);
    sim.ev(3.0, Event::Timer(Timer::Ready(4)));
    let mut order = Vec::new();
    for t in 4..7 {
        for a in sim.ev(t as f64, Event::Done { conn: 0, keep_alive: true }) {
            if let Action::Send { object, .. } = a {
                order.push(object);
            }
        }
    }
    assert_eq!(order, [4, 2, 3]);
    // the archive policy keeps a pool's queue FIFO
    let mut p = fan(3);
    p.max_conns_per_host = 1;
    p.objects.push(Object { delay_ms: 2.0, ..o("a", 4, Some(0)) });
    let mut sim = Sim::new(&p);
    sim.root_done(1.0, true);
    sim.ev(3.0, Event::Timer(Timer::Ready(4)));
    for t in 4..7 {
        sim.ev(t as f64, Event::Done { conn: 0, keep_alive: true });
    }
    assert_eq!(sim.sends().iter().map(|s| s.1).collect::<Vec<_>>(), [0, 1, 2, 3, 4]);
}

/// Runs a plan against a made-up network: connections take `connect_ms`, responses
/// `first_ms` to the first byte and `last_ms` to the last (the connection kept alive).
/// Returns per object (ready, released, sent, arrived, connection) and the connections' pools.
fn simulate(p: &Plan, connect_ms: f64, first_ms: f64, last_ms: f64) -> (Vec<[f64; 4]>, Vec<usize>, Vec<usize>) {
    #[derive(Clone, Copy)]
    enum Net {
        Sched(Event),
        FirstByte(usize, usize),
    }
    let n = p.objects.len();
    let mut s = Scheduler::new(p);
    let mut queue: BTreeMap<(u64, u64), Net> = BTreeMap::new();
    let mut seq = 0u64;
    let mut push = |q: &mut BTreeMap<(u64, u64), Net>, at: f64, e: Net| {
        seq += 1;
        q.insert(((at * 1000.0).round() as u64, seq), e);
    };
    let (mut sent, mut arrived, mut conn_of) = (vec![f64::NAN; n], vec![f64::NAN; n], vec![usize::MAX; n]);
    let mut pools = Vec::new();
    let mut acts = s.start(0.0);
    let mut now = 0.0;
    loop {
        for a in acts.drain(..) {
            match a {
                Action::Open { pool, .. } => {
                    push(&mut queue, now + connect_ms, Net::Sched(Event::Connected(pools.len())));
                    pools.push(pool);
                }
                Action::Send { conn, object } => {
                    sent[object] = now;
                    conn_of[object] = conn;
                    push(&mut queue, now + first_ms, Net::FirstByte(conn, object));
                }
                Action::Timer { at, timer } => push(&mut queue, at, Net::Sched(Event::Timer(timer))),
            }
        }
        if s.is_done() {
            break;
        }
        let ((t, _), e) = queue.pop_first().expect("stalled: nothing left to happen");
        now = t as f64 / 1000.0;
        acts = match e {
            Net::Sched(ev) => {
                if let Event::Done { conn, .. } = ev {
                    let i = (0..n).find(|&i| conn_of[i] == conn && arrived[i].is_nan() && !sent[i].is_nan()).unwrap();
                    arrived[i] = now;
                }
                s.handle(now, ev)
            }
            Net::FirstByte(conn, object) => {
                push(&mut queue, now + last_ms - first_ms, Net::Sched(Event::Done { conn, keep_alive: true }));
                s.handle(now, Event::FirstByte(object))
            }
        };
    }
    let rows = (0..n).map(|i| [s.ready_ms(i), s.released_ms(i), sent[i], arrived[i]]).collect();
    (rows, conn_of, pools)
}

#[test]
fn whole_loads_keep_every_rule() {
    // a page: root, 40 children over 3 hosts, 20 grandchildren, some delayable, some late
    let mut objs = vec![o("a", 0, None)];
    for i in 1..=60 {
        let host = ["a", "b", "c"][i % 3];
        let parent = i.saturating_sub(40); // 1-40 children of 0, then of 1-20
        let mut ob = o(host, i, Some(parent));
        ob.delayable = i % 4 == 0;
        ob.delay_ms = (i % 5) as f64;
        ob.at_first_byte = i % 7 == 0;
        if i > 45 {
            ob.after = vec![i - 44];
        }
        objs.push(ob);
    }
    for (max, limits) in [(6, false), (2, false), (6, true), (1, true)] {
        let mut p = plan(objs.clone(), None);
        p.max_conns_per_host = max;
        if limits {
            p.delayable_limit = Some(3);
            p.tight_limit = Some(1);
            p.tight_until = vec![3, 5];
            p.tight_delay_ms = 4.0;
        }
        p.validate().unwrap();
        let (rows, conn_of, pools) = simulate(&p, 10.0, 3.0, 8.0);
        for pool in 0..3 {
            let n = pools.iter().filter(|&&q| q == pool).count();
            assert!(n <= max, "pool {pool}: {n} connections, max {max}");
        }
        for (i, ob) in p.objects.iter().enumerate() {
            let [ready, released, sent, arrived] = rows[i];
            assert!(ready <= released && released <= sent && sent < arrived, "{i}: {:?}", rows[i]);
            // pools in order of first appearance: "a", "b", "c"
            assert_eq!(pools[conn_of[i]], ["a", "b", "c"].iter().position(|h| *h == ob.host).unwrap());
            if let Some(par) = ob.parent {
                let at = if ob.at_first_byte { rows[par][2] + 3.0 } else { rows[par][3] };
                let last = ob.after.iter().map(|&a| rows[a][3]).fold(at, f64::max);
                assert!((ready - (last + ob.delay_ms)).abs() < 1e-6, "{i}: ready {ready}, prerequisites {last}");
            }
            if !ob.delayable && !limits {
                assert_eq!(released, ready);
            }
        }
        // one request at a time per connection
        let mut per_conn: BTreeMap<usize, Vec<(f64, f64)>> = BTreeMap::new();
        for (i, r) in rows.iter().enumerate() {
            per_conn.entry(conn_of[i]).or_default().push((r[2], r[3]));
        }
        for v in per_conn.values_mut() {
            v.sort_by(|a, b| a.partial_cmp(b).unwrap());
            assert!(v.windows(2).all(|w| w[0].1 <= w[1].0), "{v:?}");
        }
        if limits {
            // never more than 3 delayable requests out at once
            let mut ev: Vec<(f64, i32)> = Vec::new();
            for (_, r) in rows.iter().enumerate().filter(|(i, _)| p.objects[*i].delayable) {
                ev.push((r[1], 1));
                ev.push((r[3], -1));
            }
            ev.sort_by(|a, b| a.partial_cmp(b).unwrap());
            let mut cur = 0;
            for (_, d) in ev {
                cur += d;
                assert!(cur <= 3);
            }
        }
    }
}

// --- HTTP/2 ---

/// Object `i` of https host `host` at `addr`, protocol h2, child of `parent`.
fn h2o(host: &str, addr: SocketAddr, i: usize, parent: Option<usize>) -> Object {
    Object { protocol: "h2".into(), ..obj(&format!("https://{host}/{i}"), host, addr, true, parent) }
}

const B: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 443);
const C: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 3)), 443);

fn h2plan(objs: Vec<Object>) -> Plan {
    plan(objs, Some("/ca.pem".into()))
}

#[test]
fn h2_one_connection_carries_every_request_at_once() {
    let mut objs = vec![h2o("a", B, 0, None)];
    objs.extend((1..=20).map(|i| h2o("a", B, i, Some(0))));
    let mut sim = Sim::new(&h2plan(objs));
    assert_eq!(sim.ev(1.0, Event::ConnectedH2(0)), [Action::Send { conn: 0, object: 0 }]);
    let acts = sim.ev(2.0, Event::StreamDone { conn: 0, object: 0 });
    // all 20 children go to connection 0 at once: no other connection is opened
    assert_eq!(acts.iter().filter(|a| matches!(a, Action::Send { conn: 0, .. })).count(), 20);
    assert_eq!(sim.opens(), [0]);
    for i in 1..=20 {
        sim.ev(3.0, Event::StreamDone { conn: 0, object: i });
    }
    assert!(sim.s.is_done());
}

#[test]
fn h2_pool_waits_for_alpn_then_falls_back_to_http11() {
    // two roots on one h2 host: one connection until the server's choice is known
    let objs: Vec<Object> = (0..8).map(|i| h2o("a", B, i, None)).collect();
    let mut sim = Sim::new(&h2plan(objs));
    assert_eq!(sim.opens(), [0]);
    // the server picked http/1.1: up to 6 connections, one request each
    let acts = sim.ev(1.0, Event::Connected(0));
    assert_eq!(acts[0], Action::Send { conn: 0, object: 0 });
    assert_eq!(sim.opens(), [0; 6]);
}

#[test]
fn h2_coalescing_to_an_established_connection_of_the_same_address() {
    // a's document on B; b shares B, c is at C; all h2
    let objs = vec![h2o("a", B, 0, None), h2o("b", B, 1, Some(0)), h2o("c", C, 2, Some(0)), h2o("b", B, 3, Some(0))];
    let mut sim = Sim::new(&h2plan(objs));
    sim.ev(1.0, Event::ConnectedH2(0));
    let acts = sim.ev(2.0, Event::StreamDone { conn: 0, object: 0 });
    // b's requests ride on a's connection; c opens its own
    assert!(acts.contains(&Action::Send { conn: 0, object: 1 }) && acts.contains(&Action::Send { conn: 0, object: 3 }));
    assert_eq!(sim.opens(), [0, 2]);
    assert!(acts.contains(&Action::Open { conn: 1, pool: 2, dns_end_ms: 2.0 }));
}

#[test]
fn h2_coalescing_waits_for_the_dns_delay_and_not_for_a_handshake() {
    let objs = vec![h2o("a", B, 0, None), h2o("b", B, 1, None)];
    let mut p = h2plan(objs);
    p.dns_delay_ms = 5.0;
    let mut sim = Sim::new(&p);
    // both pools start their DNS; b's ends before a's connection is up: b opens its own
    sim.ev(5.0, Event::Timer(Timer::Dns(0)));
    let acts = sim.ev(5.0, Event::Timer(Timer::Dns(1)));
    assert_eq!(acts, [Action::Open { conn: 1, pool: 1, dns_end_ms: 5.0 }]);
    // with a's connection up before b's DNS ends, b takes it
    let mut sim = Sim::new(&p);
    sim.ev(5.0, Event::Timer(Timer::Dns(0)));
    sim.ev(6.0, Event::ConnectedH2(0));
    assert_eq!(sim.ev(7.0, Event::Timer(Timer::Dns(1))), [Action::Send { conn: 0, object: 1 }]);
}

#[test]
fn h2_connection_closed_with_streams_open_requeues_them() {
    let mut objs = vec![h2o("a", B, 0, None)];
    objs.extend((1..=3).map(|i| h2o("a", B, i, Some(0))));
    let mut sim = Sim::new(&h2plan(objs));
    sim.ev(1.0, Event::ConnectedH2(0));
    sim.ev(2.0, Event::StreamDone { conn: 0, object: 0 });
    sim.ev(2.5, Event::StreamDone { conn: 0, object: 2 });
    // closed with 1 and 3 open: a new connection, which then takes both, in order
    assert_eq!(sim.ev(3.0, Event::Closed(0)), [Action::Open { conn: 1, pool: 0, dns_end_ms: 0.0 }]);
    assert_eq!(
        sim.ev(4.0, Event::ConnectedH2(1)),
        [Action::Send { conn: 1, object: 1 }, Action::Send { conn: 1, object: 3 }]
    );
}
