//! User-space link emulator between two TUN devices (Mahimahi-style):
//! per direction random loss, a queue (drop-tail; link/qdisc), rate or delivery-trace
//! serialization, propagation delay, per-origin overrides; precise release
//! timing (timerfd + busy-wait), optional pcap, JSON statistics.
//! Contract: docs/dataplane-interfaces.md.
mod buf;
pub(crate) mod config;
mod emulator;
mod gso;
mod loss;
mod pcap;
mod pipeline;
mod qdisc;
mod shaper;
pub(crate) mod stats;
mod trace;
mod tun;

use anyhow::{Context, Result};
use std::io::{BufWriter, Write};

use crate::os::{clock, process, signal};
use emulator::{Emulator, DOWN, UP};

#[derive(clap::Args)]
pub struct Args {
    /// JSON configuration file, or - for stdin.
    #[arg(long)]
    pub config: String,
}

pub fn run(a: Args) -> Result<()> {
    let cfg = config::Config::parse(&config::read(&a.config)?)?;
    let (up, down) = cfg.validate()?;
    process::set_pdeathsig().context("PR_SET_PDEATHSIG")?;
    process::set_timerslack(1).context("PR_SET_TIMERSLACK")?;
    // Signals are blocked and read through a signalfd from here on.
    let sigfd = signal::signalfd()?;
    let client = tun::attach(&cfg.client.netns, &cfg.client.tun, cfg.offload).context("client")?;
    let server = tun::attach(&cfg.server.netns, &cfg.server.tun, cfg.offload).context("server")?;
    let pcap = match &cfg.pcap {
        Some(path) => {
            let f = std::fs::File::create(path).with_context(|| format!("cannot create pcap {path}"))?;
            Some(pcap::Pcap::new(BufWriter::with_capacity(1 << 20, f)).with_context(|| format!("pcap {path}"))?)
        }
        None => None,
    };
    let fifo = if cfg.sched_fifo { Some(process::sched_fifo(10)) } else { None };
    let pinned = cfg.cpu.map(process::pin_cpu);
    let locked = if cfg.mlock { Some(process::mlockall()) } else { None };
    // held until the process ends (closing it drops the request, also on a crash)
    let idle_poll = if cfg.idle_poll { Some(process::cpu_latency_qos_zero()) } else { None };
    fn err<T>(r: Option<&std::result::Result<T, String>>) -> Option<String> {
        r.and_then(|r| r.as_ref().err().cloned())
    }
    let aids = stats::Aids {
        sched_fifo_requested: cfg.sched_fifo,
        sched_fifo_applied: matches!(fifo, Some(Ok(()))),
        sched_fifo_error: err(fifo.as_ref()),
        cpu: cfg.cpu,
        cpu_error: err(pinned.as_ref()),
        mlock_applied: matches!(locked, Some(Ok(()))),
        mlock_error: err(locked.as_ref()),
        idle_poll_requested: cfg.idle_poll,
        idle_poll_applied: matches!(idle_poll, Some(Ok(_))),
        idle_poll_error: err(idle_poll.as_ref()),
    };
    let t0 = clock::now_ns();
    let dirs = [pipeline::Direction::new(&up, true, t0), pipeline::Direction::new(&down, false, t0)];
    let mut emu = Emulator::new([client, server], dirs, pcap, clock::realtime_offset(), cfg.busy_wait_us * 1000);
    emu.linger_ns = cfg.linger_us * 1000;
    emu.late = stats::LateLog::new(cfg.late_event_us * 1000);
    emu.standby.tick_ns = cfg.standby_us * 1000;
    let pid = std::process::id();
    let stall = (cfg.stall_us * 1000, cfg.stall_every_ms * 1_000_000);
    emu.run(
        &sigfd,
        || {
            let mut o = std::io::stdout().lock();
            let ready = stats::Ready { event: stats::ReadyEvent::Ready, pid, aids: &aids };
            let _ = writeln!(o, "{}", serde_json::to_string(&ready).unwrap_or_default());
            let _ = o.flush();
        },
        stall,
    )?;
    let run_time = (clock::now_ns() - t0) as f64 / 1e9;
    let pcap_packets = match &mut emu.pcap {
        Some(p) => {
            p.flush().context("flushing pcap")?;
            Some(p.packets)
        }
        None => None,
    };
    let stats = stats::LinkStats {
        event: stats::StatsEvent::Stats,
        pid,
        run_time_s: run_time,
        busy_wait_us: cfg.busy_wait_us,
        offload: cfg.offload,
        aids,
        pcap_packets,
        standby: stats::StandbyReport {
            tick_us: cfg.standby_us,
            started: emu.standby.started,
            looks: emu.standby.looks,
            rescues: emu.standby.rescues,
            packets: emu.standby.packets,
        },
        buffers_allocated: emu.pool.allocated,
        uplink: emu.dirs[UP].st.report(emu.dirs[UP].in_flight()),
        downlink: emu.dirs[DOWN].st.report(emu.dirs[DOWN].in_flight()),
        late_events: emu.late.report(),
    };
    let line = serde_json::to_string(&stats)?;
    let res = match &cfg.stats {
        Some(path) => {
            let tmp = format!("{path}.tmp");
            std::fs::write(&tmp, format!("{line}\n"))
                .and_then(|_| std::fs::rename(&tmp, path))
                .with_context(|| format!("cannot write stats {path}"))
        }
        None => Ok(()),
    };
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{line}");
    let _ = o.flush();
    res
}
