//! The event loop: reads both TUNs in batches, runs each packet through its
//! direction's pipeline, writes released packets at their deadline.
//!
//! Waiting: if the next release is more than busy_wait away, a timerfd is
//! armed at (deadline - busy_wait) and the loop blocks in epoll (TUN fds,
//! timerfd, signalfd); inside the busy-wait window it spins, still draining
//! the TUNs non-blockingly, until the deadline. With a linger time it also
//! spins for that long after the last packet read or written: the peer's
//! reply (an ACK, a response) then enters the emulator without a wake-up,
//! whose latency would otherwise add to the emulated delay.
//!
//! What the machine adds is measured on both ends of a packet's stay:
//! release lateness (written after its release time) and ingress delay (how
//! long it may have sat in the TUN unread: after a blocking wait, the
//! wake-up's run delay from schedstat; while running, the time since the
//! previous look at the TUNs). Delays above a threshold are logged with their
//! wall-clock time (`LateLog`).
use anyhow::{Context, Result};
use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

use super::buf::{Pkt, Pool, LARGE, SMALL, VNET};
use super::gso;
use super::pcap::Pcap;
use super::pipeline::Direction;
use super::stats::{LateKind, LateLog, Snapshot, SnapshotEvent, Unimpaired, UnimpairedEvent};
use super::tun::Tun;
use crate::os::clock::{now_ns, sleep_until, Timer};
use crate::os::epoll::Epoll;
use crate::os::process::{self, RunDelay};
use crate::os::signal;

const BATCH: usize = 16;
const T_CLIENT: u64 = 0;
const T_SERVER: u64 = 1;
const T_TIMER: u64 = 2;
const T_SIGNAL: u64 = 3;

pub const UP: usize = 0;
pub const DOWN: usize = 1;

pub struct Emulator {
    /// [client, server]
    pub tuns: [Tun; 2],
    /// [uplink (client -> server), downlink (server -> client)]
    pub dirs: [Direction; 2],
    pub pool: Pool,
    pub pcap: Option<Pcap<BufWriter<File>>>,
    /// CLOCK_MONOTONIC -> wall clock offset for pcap timestamps.
    pub rt_off: u64,
    pub busy_ns: u64,
    pub linger_ns: u64,
    pub late: LateLog,
    /// Ingress delay bound of the packets read in this round (ns).
    ingress_ns: u64,
    /// When the TUNs were last read (by either thread).
    last_look: u64,
    pub standby: Standby,
    rbuf: Pkt,
    segs: Vec<Pkt>,
    /// Both directions unimpaired (SIGUSR2).
    unimpaired: bool,
}

/// What the standby thread did (see `run`).
#[derive(Default, Debug, Clone, Copy)]
pub struct Standby {
    pub tick_ns: u64,
    pub started: bool,
    pub looks: u64,
    /// Looks that found work the main loop had left: packets read or released.
    pub rescues: u64,
    pub packets: u64,
}

/// Published by the main loop after each round, read by the standby thread.
struct Beat {
    /// When the main loop last finished a round, and the next release then due.
    at: AtomicU64,
    next: AtomicU64,
    /// When the main loop last moved a packet.
    active: AtomicU64,
    cpu: AtomicUsize,
    stop: AtomicBool,
}

impl Emulator {
    pub fn new(
        tuns: [Tun; 2],
        dirs: [Direction; 2],
        pcap: Option<Pcap<BufWriter<File>>>,
        rt_off: u64,
        busy_ns: u64,
    ) -> Self {
        let mut pool = Pool::default();
        let rbuf = pool.get(LARGE);
        Emulator {
            tuns,
            dirs,
            pool,
            pcap,
            rt_off,
            busy_ns,
            linger_ns: 0,
            late: LateLog::new(0),
            ingress_ns: 0,
            last_look: now_ns(),
            standby: Standby::default(),
            rbuf,
            segs: Vec::new(),
            unimpaired: false,
        }
    }

    /// Side `i` (0 client, 1 server) feeds direction `i`. Returns packets read.
    fn read_side(&mut self, i: usize) -> Result<usize> {
        let vnet = self.tuns[i].vnet;
        let off = if vnet { 0 } else { VNET };
        for k in 0..BATCH {
            let n = match self.tuns[i].read(&mut self.rbuf.buf[off..]) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(k),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).with_context(|| format!("read from {} TUN", ["client", "server"][i])),
            };
            let now = now_ns();
            let len = off + n;
            if len <= VNET {
                continue;
            }
            if k == 0 {
                self.late.note(self.rt_off.wrapping_add(now), self.ingress_ns, LateKind::Ingress, i);
            }
            if !vnet {
                self.rbuf.buf[..VNET].fill(0);
            }
            let pkt = if len <= SMALL {
                let mut s = self.pool.get(len);
                s.buf[..len].copy_from_slice(&self.rbuf.buf[..len]);
                s
            } else {
                let mut big = std::mem::replace(&mut self.rbuf, self.pool.get(LARGE));
                big.len = len;
                big
            };
            self.ingest(i, now, pkt);
        }
        Ok(BATCH)
    }

    fn ingest(&mut self, i: usize, now: u64, pkt: Pkt) {
        if pkt.buf[1] != gso::GSO_NONE {
            if self.dirs[i].segment && gso::is_tcp4_gso(&pkt) {
                let mut segs = std::mem::take(&mut self.segs);
                if gso::segment(&pkt, &mut self.pool, |s| segs.push(s)) {
                    self.dirs[i].st.gso_segmented += 1;
                    self.pool.put(pkt);
                    for s in segs.drain(..) {
                        self.enter(i, now, s);
                    }
                    self.segs = segs;
                    return;
                }
                self.segs = segs;
            }
            self.dirs[i].st.gso_passthrough += 1;
        }
        self.enter(i, now, pkt);
    }

    fn enter(&mut self, i: usize, now: u64, mut pkt: Pkt) {
        self.dirs[i].st.record_ingress(self.ingress_ns);
        if i == UP {
            if let Some(pc) = &mut self.pcap {
                gso::finalize_csum(&mut pkt);
                let _ = pc.write(self.rt_off.wrapping_add(now), pkt.ip());
            }
        }
        if let Err((p, _)) = self.dirs[i].arrive(now, pkt) {
            self.pool.put(p);
        }
    }

    /// Writes every packet of direction `i` due at `now`. Returns the count.
    fn release(&mut self, i: usize, now: u64) -> usize {
        let out = &self.tuns[1 - i];
        let mut k = 0;
        while let Some((rel, mut p)) = self.dirs[i].pop_due(now) {
            let t = now_ns();
            if i == DOWN {
                if let Some(pc) = &mut self.pcap {
                    gso::finalize_csum(&mut p);
                    let _ = pc.write(self.rt_off.wrapping_add(t), p.ip());
                }
            }
            let data = if out.vnet { &p.buf[..p.len] } else { &p.buf[VNET..p.len] };
            let st = &mut self.dirs[i].st;
            match out.write(data) {
                Ok(_) => {
                    st.packets_out += 1;
                    st.bytes_out += p.wire_len() as u64;
                    let late = t.saturating_sub(rel);
                    st.record_release(late);
                    self.late.note(self.rt_off.wrapping_add(t), late, LateKind::Release, i);
                }
                Err(_) => st.write_errors += 1,
            }
            self.pool.put(p);
            k += 1;
        }
        k
    }

    fn next_release(&self) -> Option<u64> {
        match (self.dirs[0].next_release(), self.dirs[1].next_release()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Handles pending signals: SIGUSR1 prints a snapshot (one JSON line:
    /// lateness and packets since the previous one); SIGUSR2 switches both directions between
    /// unimpaired (a warm-up visit's packets: no delay, loss or rate) and as configured, and says
    /// which it now is (one JSON line: the control plane waits for it before it goes on, so two
    /// switches never coalesce); returns true on SIGTERM/SIGINT.
    fn on_signal(&mut self, sigfd: &OwnedFd) -> bool {
        while let Some(sig) = signal::read_signal(sigfd.as_raw_fd()) {
            let line = if sig == libc::SIGUSR1 as u32 {
                let v = Snapshot {
                    event: SnapshotEvent::Snapshot,
                    uplink: self.dirs[UP].st.take_interval(),
                    downlink: self.dirs[DOWN].st.take_interval(),
                };
                serde_json::to_string(&v).expect("snapshot serializes")
            } else if sig == libc::SIGUSR2 as u32 {
                self.unimpaired = !self.unimpaired;
                for d in &mut self.dirs {
                    d.set_unimpaired(self.unimpaired);
                }
                let v = Unimpaired { event: UnimpairedEvent::Unimpaired, on: self.unimpaired };
                serde_json::to_string(&v).expect("unimpaired serializes")
            } else {
                return true;
            };
            use std::io::Write;
            let mut o = io::stdout().lock();
            let _ = writeln!(o, "{line}");
            let _ = o.flush();
        }
        false
    }

    /// One look at the TUNs and the queues: reads what waits, writes what is due. `woke`: the
    /// run delay of the wake-up that led here, if it ended a blocking wait. Returns (packets
    /// read + written, the time after reading).
    fn round(&mut self, woke: Option<u64>) -> Result<(usize, u64)> {
        let look = now_ns();
        self.ingress_ns = woke.unwrap_or(look.saturating_sub(self.last_look));
        self.last_look = look;
        let got = self.read_side(0)? + self.read_side(1)?;
        let now = now_ns();
        let sent = self.release(UP, now) + self.release(DOWN, now);
        Ok((got + sent, now))
    }

    /// Runs until SIGTERM/SIGINT. With `standby.tick_ns` > 0 and more than one CPU, a second
    /// thread (same scheduling policy, kept off the main loop's CPU) looks every tick, and at
    /// each release time plus a tick, whether the main loop has gone on; if it has not (its
    /// CPU stalled: a hypervisor or kernel delay no scheduling setting removes), it does the
    /// round itself. The two never work at once (one lock, held for a round only).
    pub fn run(&mut self, sigfd: &OwnedFd, ready: impl FnOnce(), stall: (u64, u64)) -> Result<()> {
        let ep = Epoll::new()?;
        let mut timer = Timer::new().context("timerfd_create")?;
        ep.add(self.tuns[0].fd(), T_CLIENT)?;
        ep.add(self.tuns[1].fd(), T_SERVER)?;
        ep.add(timer.fd(), T_TIMER)?;
        ep.add(sigfd.as_raw_fd(), T_SIGNAL)?;
        let tick = self.standby.tick_ns;
        let cpus = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let beat = Beat {
            at: AtomicU64::new(now_ns()),
            next: AtomicU64::new(u64::MAX),
            active: AtomicU64::new(0),
            cpu: AtomicUsize::new(usize::MAX),
            stop: AtomicBool::new(false),
        };
        let busy_ns = self.busy_ns;
        let linger_ns = self.linger_ns;
        let emu = Mutex::new(self);
        std::thread::scope(|s| {
            if tick > 0 && cpus > 1 {
                emu.lock().unwrap().standby.started = true;
                s.spawn(|| standby(&emu, &beat, tick));
            }
            ready();
            let r = main_loop(&emu, &beat, &ep, &mut timer, sigfd, (busy_ns, linger_ns), stall);
            beat.stop.store(true, Relaxed);
            r
        })
    }
}

/// `spin`: (busy-wait, linger) ns; `stall`: fault injection, (stall ns, every ns) or zeros.
fn main_loop(
    emu: &Mutex<&mut Emulator>,
    beat: &Beat,
    ep: &Epoll,
    timer: &mut Timer,
    sigfd: &OwnedFd,
    spin: (u64, u64),
    stall: (u64, u64),
) -> Result<()> {
    let (busy_ns, linger_ns) = spin;
    let mut next_stall = now_ns().saturating_add(stall.1);
    let rd = RunDelay::open();
    let mut iter: u64 = 0;
    let mut active = 0u64; // last time a packet was read or written
    let mut woke: Option<u64> = None; // run delay of the wake-up that ended the last wait
    loop {
        let (moved, now, next) = {
            let mut e = emu.lock().unwrap();
            let (moved, now) = e.round(woke.take())?;
            iter = iter.wrapping_add(1);
            if iter.is_multiple_of(256) && e.on_signal(sigfd) {
                return Ok(());
            }
            (moved, now, e.next_release())
        };
        beat.next.store(next.unwrap_or(u64::MAX), Relaxed);
        beat.at.store(now, Relaxed);
        if stall.0 > 0 && now >= next_stall {
            sleep_until(now + stall.0); // injected stall (tests): the lock is free meanwhile
            next_stall = now + stall.1;
        }
        if iter.is_multiple_of(64) {
            if let Some(c) = process::current_cpu() {
                beat.cpu.store(c, Relaxed);
            }
        }
        if moved > 0 {
            if linger_ns > 0 {
                active = now;
            }
            beat.active.store(now, Relaxed);
            continue;
        }
        let now = now_ns();
        if now < active.saturating_add(linger_ns) {
            continue; // lingering after activity: spin
        }
        if let Some(d) = next {
            if d <= now.saturating_add(busy_ns) {
                // busy-wait window: spin, looking at the TUNs every SPIN_LOOK_NS, the lock free
                // in between (a stall of this CPU then rarely holds it from the standby thread)
                let until = d.min(now + SPIN_LOOK_NS);
                while now_ns() < until {
                    std::hint::spin_loop();
                }
                continue;
            }
            timer.arm(d - busy_ns).context("timerfd_settime")?;
        }
        let before = rd.now();
        let m = ep.wait(-1)?;
        woke = Some(rd.now().saturating_sub(before));
        if m & (1 << T_TIMER) != 0 {
            timer.ack();
        }
        if m & (1 << T_SIGNAL) != 0 && emu.lock().unwrap().on_signal(sigfd) {
            return Ok(());
        }
    }
}

/// While spinning before a release, how often the main loop reads the TUNs.
const SPIN_LOOK_NS: u64 = 5_000;

/// How late after a release time the standby thread checks on it.
const STANDBY_SLACK_NS: u64 = 60_000;
/// A link without packets in flight for this long is idle: the standby thread then looks only
/// every STANDBY_IDLE_TICK_NS (a 200 us tick on an idle link costs ~5 % of a CPU).
const STANDBY_IDLE_NS: u64 = 50_000_000;
const STANDBY_IDLE_TICK_NS: u64 = 2_000_000;

/// The standby thread (see Emulator::run): wakes every `tick` (packets waiting in a TUN) and
/// STANDBY_SLACK_NS after each release time; when the main loop has not finished a round for
/// that long, does one.
fn standby(emu: &Mutex<&mut Emulator>, beat: &Beat, tick: u64) {
    let _ = process::set_timerslack(1);
    let slack = STANDBY_SLACK_NS.min(tick);
    let mut avoided = usize::MAX;
    while !beat.stop.load(Relaxed) {
        let cpu = beat.cpu.load(Relaxed);
        if cpu != avoided && cpu != usize::MAX {
            let _ = process::avoid_cpu(cpu);
            avoided = cpu;
        }
        let now = now_ns();
        let queued = beat.next.load(Relaxed);
        let idle = queued == u64::MAX && now.saturating_sub(beat.active.load(Relaxed)) > STANDBY_IDLE_NS;
        let tick_now = if idle { tick.max(STANDBY_IDLE_TICK_NS) } else { tick };
        let next = queued.saturating_add(slack);
        sleep_until(if next > now { next.min(now + tick_now) } else { now + tick_now });
        let now = now_ns();
        if now.saturating_sub(beat.at.load(Relaxed)) < slack {
            continue; // the main loop is going on
        }
        if idle && queued == u64::MAX {
            // Nothing in flight: the main loop sleeps in epoll and wakes for the next packet,
            // measuring its own wake-up. A round here would read that packet with an ingress
            // bound of a whole idle tick (a late-looking load); only watch for activity.
            continue;
        }
        // try_lock: a main loop holding the lock is working (or stalled mid-round: nothing to do)
        if let Ok(mut e) = emu.try_lock() {
            e.standby.looks += 1;
            if let Ok((moved, _)) = e.round(None) {
                if moved > 0 {
                    e.standby.rescues += 1;
                    e.standby.packets += moved as u64;
                }
            }
            // its own next check: the next release (the main loop's beat stays stale)
            beat.next.store(e.next_release().unwrap_or(u64::MAX), Relaxed);
        }
    }
}
