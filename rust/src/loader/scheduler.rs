//! The loader's scheduling as a pure state machine (like link/pipeline.rs): the driver
//! (driver.rs) passes `now` (ms since the load started) and what happened, and carries
//! out the actions returned. No sockets, no clock, no tokio here.
//!
//! * an object becomes requestable when its prerequisites are met (its parent's last byte, or
//!   its first byte with `at_first_byte`, and the last byte of every object of `after`; objects
//!   without any at the start), ready `delay_ms` later; the policy (policy.rs: archive or
//!   Chromium) may hold a ready request back before releasing it to its pool;
//! * connections are pooled per (scheme, host, port), at most `max_conns_per_host` each, one
//!   request at a time per connection (no pipelining); a pool's queue is FIFO within the
//!   policy's priorities;
//! * late binding: a released request goes to the idle connection of its pool freed most
//!   recently, else a new connection is opened while queued requests outnumber the
//!   connections being set up; a connection that finishes setting up or a response takes the
//!   head of the queue;
//! * the DNS delay is paid once per pool, before its first connection;
//! * HTTP/2: a pool whose objects may speak h2 (TLS, plan protocol "h2") opens one connection
//!   and waits for its ALPN; if the server picked h2 (`ConnectedH2`), every request of the pool
//!   goes to it at once (multiplexed, `StreamDone` per response), else the pool falls back to
//!   the rules above. Coalescing (Chromium's rule, the replay's certificate covering every
//!   host): a pool whose DNS delay is over takes an established h2 connection to the same
//!   address and port instead of opening its own; one still handshaking is not waited for.
//! * HTTP/3 (plan protocol "h3"): as an h2 pool whose connection always multiplexes (QUIC has
//!   no fallback); pools and coalescing are apart from TCP's (same address and port over UDP).
use std::collections::{HashMap, VecDeque};

use super::events::{Action, Event, Timer};
use super::plan::Plan;
use super::policy::Policy;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Dns {
    NotStarted,
    Pending,
    Done,
}

struct Pool {
    /// The first object of the pool (its host, address and scheme stand for the pool's).
    first: usize,
    queue: VecDeque<usize>,
    /// Idle connections, the most recently freed last.
    idle: Vec<usize>,
    open: usize,
    connecting: usize,
    dns: Dns,
    dns_end_ms: f64,
    /// May speak h2 or h3 (until a connection of it negotiated http/1.1).
    h2: bool,
    /// Address and port of its connections, and QUIC (h3) or not (coalescing key).
    addr: (std::net::IpAddr, u16, bool),
    /// The h2 connection its requests go to (its own or, coalesced, another pool's).
    mux: Option<usize>,
}

struct Conn {
    pool: usize,
    /// The object whose request it carries.
    busy: Option<usize>,
    /// h2: the objects whose streams are open on it.
    streams: Vec<usize>,
    mux: bool,
}

pub struct Scheduler {
    max_conns: usize,
    dns_delay_ms: f64,
    delay_ms: Vec<f64>,
    obj_pool: Vec<usize>,
    pools: Vec<Pool>,
    conns: Vec<Conn>,
    /// Objects waiting for this one's last byte (as parent or in `after`).
    children: Vec<Vec<usize>>,
    /// Objects waiting for this one's first byte (`at_first_byte`).
    fb_children: Vec<Vec<usize>>,
    /// Prerequisites (parent, `after`) not yet met, per object.
    waiting: Vec<usize>,
    ready_ms: Vec<f64>,
    released_ms: Vec<f64>,
    policy: Policy,
    done: usize,
    out: Vec<Action>,
    /// Established h2 connections by address and port (coalescing).
    mux_by_addr: HashMap<(std::net::IpAddr, u16, bool), usize>,
}

impl Scheduler {
    /// For a validated plan.
    pub fn new(plan: &Plan) -> Scheduler {
        let n = plan.objects.len();
        let mut keys: HashMap<(bool, bool, String, u16), usize> = HashMap::new();
        let mut pools = Vec::new();
        let mut obj_pool = Vec::with_capacity(n);
        for (i, o) in plan.objects.iter().enumerate() {
            let p = *keys.entry((o.tls, o.wants_h3(), o.host.to_ascii_lowercase(), o.port)).or_insert_with(|| {
                pools.push(Pool {
                    first: i,
                    queue: VecDeque::new(),
                    idle: Vec::new(),
                    open: 0,
                    connecting: 0,
                    dns: Dns::NotStarted,
                    dns_end_ms: 0.0,
                    h2: false,
                    addr: (o.ip, o.port, o.wants_h3()),
                    mux: None,
                });
                pools.len() - 1
            });
            pools[p].h2 |= o.multiplexed();
            obj_pool.push(p);
        }
        let mut children = vec![Vec::new(); n];
        let mut fb_children = vec![Vec::new(); n];
        let mut waiting = vec![0usize; n];
        for (i, o) in plan.objects.iter().enumerate() {
            if let Some(p) = o.parent {
                if o.at_first_byte {
                    fb_children[p].push(i)
                } else {
                    children[p].push(i)
                }
                waiting[i] += 1;
            }
            for &a in &o.after {
                children[a].push(i);
                waiting[i] += 1;
            }
        }
        Scheduler {
            max_conns: plan.max_conns_per_host,
            dns_delay_ms: plan.dns_delay_ms,
            delay_ms: plan.objects.iter().map(|o| o.delay_ms).collect(),
            obj_pool,
            pools,
            conns: Vec::new(),
            children,
            fb_children,
            waiting,
            ready_ms: vec![0.0; n],
            released_ms: vec![0.0; n],
            policy: Policy::for_plan(plan),
            done: 0,
            out: Vec::new(),
            mux_by_addr: HashMap::new(),
        }
    }

    /// The load starts: objects without prerequisites become requestable.
    pub fn start(&mut self, now: f64) -> Vec<Action> {
        for i in 0..self.waiting.len() {
            if self.waiting[i] == 0 {
                self.requestable(i, now);
            }
        }
        std::mem::take(&mut self.out)
    }

    /// Handles one event at `now`; returns the actions, in order.
    pub fn handle(&mut self, now: f64, ev: Event) -> Vec<Action> {
        match ev {
            Event::Timer(Timer::Ready(i)) => self.ready(i, now),
            Event::Timer(Timer::Dns(p)) => {
                self.pools[p].dns = Dns::Done;
                self.pools[p].dns_end_ms = now;
                self.dispatch(p, now);
            }
            Event::Timer(Timer::TightEnd(k)) => {
                self.policy.phase_ended(k);
                self.release_held(now);
            }
            Event::FirstByte(i) => {
                for k in 0..self.fb_children[i].len() {
                    self.prereq_met(self.fb_children[i][k], now);
                }
            }
            Event::Connected(c) => {
                let p = self.conns[c].pool;
                self.pools[p].connecting -= 1;
                self.pools[p].open += 1;
                // http/1.1 picked on an h2 pool: the usual rules from now on (more connections)
                let fell_back = std::mem::take(&mut self.pools[p].h2);
                self.free(c);
                if fell_back {
                    self.dispatch(p, now);
                }
            }
            Event::ConnectedH2(c) => {
                let p = self.conns[c].pool;
                self.pools[p].connecting -= 1;
                self.pools[p].open += 1;
                self.conns[c].mux = true;
                self.pools[p].mux = Some(c);
                self.mux_by_addr.entry(self.pools[p].addr).or_insert(c);
                self.dispatch(p, now);
            }
            Event::StreamDone { conn, object } => {
                self.conns[conn].streams.retain(|&x| x != object);
                self.arrived(object, now);
            }
            Event::Done { conn, keep_alive } => self.done(conn, keep_alive, now),
            Event::Closed(c) if self.conns[c].mux => {
                let p = self.conns[c].pool;
                self.pools[p].open -= 1;
                self.mux_by_addr.retain(|_, &mut m| m != c);
                let mut affected = vec![p];
                for (q, pool) in self.pools.iter_mut().enumerate() {
                    if pool.mux == Some(c) {
                        pool.mux = None;
                        affected.push(q);
                    }
                }
                // its open streams: first in line again, each in its own pool
                for i in std::mem::take(&mut self.conns[c].streams).into_iter().rev() {
                    self.pools[self.obj_pool[i]].queue.push_front(i);
                }
                affected.dedup();
                for q in affected {
                    self.dispatch(q, now);
                }
            }
            Event::Closed(c) => {
                let p = self.conns[c].pool;
                self.pools[p].idle.retain(|&x| x != c);
                self.pools[p].open -= 1;
                if let Some(i) = self.conns[c].busy.take() {
                    // handed to it while the server closed it: first in line again
                    self.pools[p].queue.push_front(i);
                }
                self.dispatch(p, now);
            }
        }
        std::mem::take(&mut self.out)
    }

    /// Every object has arrived.
    pub fn is_done(&self) -> bool {
        self.done == self.waiting.len()
    }

    /// When object `i` became ready (prerequisites met, delay over).
    pub fn ready_ms(&self, i: usize) -> f64 {
        self.ready_ms[i]
    }

    /// When the policy let object `i` go to its pool (= `ready_ms` unless held).
    pub fn released_ms(&self, i: usize) -> f64 {
        self.released_ms[i]
    }

    /// How many pools the plan's objects make (numbered from 0 in the order of their first object).
    pub fn pools(&self) -> usize {
        self.pools.len()
    }

    /// An object of pool `p` (its first): host, address and scheme of the pool's connections.
    pub fn pool_object(&self, p: usize) -> usize {
        self.pools[p].first
    }

    fn done(&mut self, c: usize, keep_alive: bool, now: f64) {
        let i = self.conns[c].busy.expect("a response on a connection without a request");
        if keep_alive {
            self.free(c);
        } else {
            let p = self.conns[c].pool;
            self.conns[c].busy = None;
            self.pools[p].open -= 1;
            self.dispatch(p, now);
        }
        self.arrived(i, now);
    }

    /// Object `i`'s response arrived: its dependents may go on.
    fn arrived(&mut self, i: usize, now: f64) {
        self.done += 1;
        self.policy.arrived(i, now, &mut self.out);
        for k in 0..self.children[i].len() {
            self.prereq_met(self.children[i][k], now);
        }
        self.release_held(now);
    }

    /// One prerequisite of `i` met.
    fn prereq_met(&mut self, i: usize, now: f64) {
        self.waiting[i] -= 1;
        if self.waiting[i] == 0 {
            self.requestable(i, now);
        }
    }

    /// Every prerequisite of `i` met: ready after its delay.
    fn requestable(&mut self, i: usize, now: f64) {
        let d = self.delay_ms[i];
        if d > 0.0 {
            self.out.push(Action::Timer { at: now + d, timer: Timer::Ready(i) });
        } else {
            self.ready(i, now);
        }
    }

    fn ready(&mut self, i: usize, now: f64) {
        self.ready_ms[i] = now;
        if self.policy.admit(i) {
            self.release(i, now);
        }
    }

    fn release(&mut self, i: usize, now: f64) {
        self.released_ms[i] = now;
        let p = self.obj_pool[i];
        self.policy.enqueue(i, &mut self.pools[p].queue);
        self.dispatch(p, now);
    }

    fn release_held(&mut self, now: f64) {
        while let Some(i) = self.policy.next_held() {
            self.release(i, now);
        }
    }

    fn assign(&mut self, c: usize, i: usize) {
        self.conns[c].busy = Some(i);
        self.out.push(Action::Send { conn: c, object: i });
    }

    /// Connection `c` can take a request: the head of its pool's queue, else it idles.
    fn free(&mut self, c: usize) {
        let p = self.conns[c].pool;
        self.conns[c].busy = None;
        if let Some(i) = self.pools[p].queue.pop_front() {
            self.assign(c, i);
        } else {
            self.pools[p].idle.push(c);
        }
    }

    /// Queued requests of pool `p` to idle connections, then DNS and new connections for the rest.
    fn dispatch(&mut self, p: usize, now: f64) {
        if self.pools[p].h2 || self.pools[p].mux.is_some() {
            return self.dispatch_h2(p, now);
        }
        while !self.pools[p].queue.is_empty() {
            let Some(c) = self.pools[p].idle.pop() else { break };
            let i = self.pools[p].queue.pop_front().unwrap();
            self.assign(c, i);
        }
        let pool = &mut self.pools[p];
        if pool.queue.is_empty() {
            return;
        }
        match pool.dns {
            Dns::NotStarted if self.dns_delay_ms > 0.0 => {
                pool.dns = Dns::Pending;
                self.out.push(Action::Timer { at: now + self.dns_delay_ms, timer: Timer::Dns(p) });
                return;
            }
            Dns::NotStarted => {
                pool.dns = Dns::Done;
                pool.dns_end_ms = now;
            }
            Dns::Pending => return,
            Dns::Done => {}
        }
        while pool.queue.len() > pool.connecting && pool.open + pool.connecting < self.max_conns {
            pool.connecting += 1;
            let conn = self.conns.len();
            self.conns.push(Conn { pool: p, busy: None, streams: Vec::new(), mux: false });
            self.out.push(Action::Open { conn, pool: p, dns_end_ms: pool.dns_end_ms });
        }
    }

    /// An h2 pool: its queue to its h2 connection (its own or a coalesced one, once its DNS
    /// delay is over), else one connection opened to learn the server's protocol.
    fn dispatch_h2(&mut self, p: usize, now: f64) {
        if self.pools[p].queue.is_empty() {
            return;
        }
        match self.pools[p].dns {
            Dns::NotStarted if self.dns_delay_ms > 0.0 => {
                self.pools[p].dns = Dns::Pending;
                self.out.push(Action::Timer { at: now + self.dns_delay_ms, timer: Timer::Dns(p) });
                return;
            }
            Dns::NotStarted => {
                self.pools[p].dns = Dns::Done;
                self.pools[p].dns_end_ms = now;
            }
            Dns::Pending => return,
            Dns::Done => {}
        }
        if self.pools[p].mux.is_none() {
            self.pools[p].mux = self.mux_by_addr.get(&self.pools[p].addr).copied();
        }
        if let Some(c) = self.pools[p].mux {
            while let Some(i) = self.pools[p].queue.pop_front() {
                self.conns[c].streams.push(i);
                self.out.push(Action::Send { conn: c, object: i });
            }
            return;
        }
        let pool = &mut self.pools[p];
        if pool.open + pool.connecting == 0 {
            pool.connecting = 1;
            let conn = self.conns.len();
            self.conns.push(Conn { pool: p, busy: None, streams: Vec::new(), mux: false });
            self.out.push(Action::Open { conn, pool: p, dns_end_ms: pool.dns_end_ms });
        }
    }
}
