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

use super::buf::{Pkt, Pool, LARGE, SMALL, VNET};
use super::gso;
use super::pcap::Pcap;
use super::pipeline::Direction;
use super::stats::LateLog;
use super::tun::Tun;
use crate::os::clock::{now_ns, Timer};
use crate::os::epoll::Epoll;
use crate::os::process::RunDelay;
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
    rbuf: Pkt,
    segs: Vec<Pkt>,
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
            rbuf,
            segs: Vec::new(),
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
                self.late.note(self.rt_off.wrapping_add(now), self.ingress_ns, "ingress", i);
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
                    self.late.note(self.rt_off.wrapping_add(t), late, "release", i);
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
    /// lateness and packets since the previous one); returns true on SIGTERM/SIGINT.
    fn on_signal(&mut self, sigfd: &OwnedFd) -> bool {
        while let Some(sig) = signal::read_signal(sigfd.as_raw_fd()) {
            if sig != libc::SIGUSR1 as u32 {
                return true;
            }
            let v = serde_json::json!({"event": "snapshot", "uplink": self.dirs[UP].st.take_interval(),
                                       "downlink": self.dirs[DOWN].st.take_interval()});
            use std::io::Write;
            let mut o = io::stdout().lock();
            let _ = writeln!(o, "{v}");
            let _ = o.flush();
        }
        false
    }

    /// Runs until SIGTERM/SIGINT.
    pub fn run(&mut self, sigfd: &OwnedFd, ready: impl FnOnce()) -> Result<()> {
        let ep = Epoll::new()?;
        let mut timer = Timer::new().context("timerfd_create")?;
        ep.add(self.tuns[0].fd(), T_CLIENT)?;
        ep.add(self.tuns[1].fd(), T_SERVER)?;
        ep.add(timer.fd(), T_TIMER)?;
        ep.add(sigfd.as_raw_fd(), T_SIGNAL)?;
        ready();
        let rd = RunDelay::open();
        let mut iter: u64 = 0;
        let mut active = 0u64; // last time a packet was read or written
        let mut last_look = now_ns(); // when the TUNs were last read
        let mut woke: Option<u64> = None; // run delay of the wake-up that ended the last wait
        loop {
            let look = now_ns();
            self.ingress_ns = woke.take().unwrap_or(look.saturating_sub(last_look));
            last_look = look;
            let got = self.read_side(0)? + self.read_side(1)?;
            let now = now_ns();
            let sent = self.release(UP, now) + self.release(DOWN, now);
            iter = iter.wrapping_add(1);
            if iter.is_multiple_of(256) && self.on_signal(sigfd) {
                return Ok(());
            }
            if got + sent > 0 {
                if self.linger_ns > 0 {
                    active = now;
                }
                continue;
            }
            let now = now_ns();
            if now < active.saturating_add(self.linger_ns) {
                continue; // lingering after activity: spin
            }
            let next = self.next_release();
            if let Some(d) = next {
                if d <= now.saturating_add(self.busy_ns) {
                    continue; // busy-wait window: spin
                }
                timer.arm(d - self.busy_ns).context("timerfd_settime")?;
            }
            let before = rd.now();
            let m = ep.wait(-1)?;
            woke = Some(rd.now().saturating_sub(before));
            if m & (1 << T_TIMER) != 0 {
                timer.ack();
            }
            if m & (1 << T_SIGNAL) != 0 && self.on_signal(sigfd) {
                return Ok(());
            }
        }
    }
}
