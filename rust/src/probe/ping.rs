//! `probe ping`: TCP request/response RTT on one persistent connection
//! (TCP_NODELAY on both ends), 1-byte ping -> 8-byte reply (`PINGMODE`).
//!
//! Two figures per round trip: the application's (send -> read returns) and
//! the link's: from the client's ping entering its TUN (software transmit
//! timestamp) to the reply's kernel receive timestamp, minus the server's
//! turnaround measured the same way. The second excludes the wake-ups and
//! system calls of the measuring programs, which belong to the machine, not
//! to the emulated link.
//!
//! `--flows N` runs N such connections at once (threads, started 1 ms apart),
//! each doing its share of the rounds: the same samples in 1/N of the time.
use super::common::{connect_nodelay, io_ctx, percentile, r3, Deadline};
use crate::os::stamp;
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = super::parse_addr)]
    pub connect: SocketAddr,
    /// Number of measured round trips.
    #[arg(long, default_value_t = 100)]
    pub count: usize,
    /// Pause between round trips (ms).
    #[arg(long, default_value_t = 0.0)]
    pub interval_ms: f64,
    /// Unmeasured round trips before the measured ones.
    #[arg(long, default_value_t = 2)]
    pub warmup: usize,
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
    /// Parallel connections sharing the rounds (1..=64).
    #[arg(long, default_value_t = 1)]
    pub flows: usize,
}

#[derive(Serialize, schemars::JsonSchema, Debug)]
pub struct Out {
    /// Link RTT per round trip (kernel timestamps, see above), us.
    pub samples_us: Vec<f64>,
    pub p50_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    /// Application RTT per round trip (send -> read returns), us.
    pub app_samples_us: Vec<f64>,
    pub app_p50_us: f64,
    pub app_p99_us: f64,
    /// When each measured round trip began: the ping's transmit timestamp
    /// (CLOCK_REALTIME ns; the application's clock where the stamp is missing),
    /// so a sample can be matched with what the machine did meanwhile.
    pub at_ns: Vec<u64>,
    /// Round trips where a kernel timestamp was missing (app time used).
    pub unstamped: usize,
    pub count: usize,
    pub flows: usize,
}

/// The samples of one connection.
#[derive(Default)]
struct Flow {
    net: Vec<f64>,
    app: Vec<f64>,
    at: Vec<u64>,
    unstamped: usize,
}

fn realtime_ns() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(0)
}

fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(|x, y| x.partial_cmp(y).unwrap());
    s
}

pub fn run(a: &Args) -> Result<Out> {
    if a.count == 0 {
        return Err(anyhow!("--count must be >= 1"));
    }
    if !(1..=64).contains(&a.flows) {
        return Err(anyhow!("--flows must be 1..=64"));
    }
    let dl = Deadline::new(a.timeout_s);
    let flows = a.flows.min(a.count);
    let results: Vec<Result<Flow>> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..flows)
            .map(|k| {
                // flow k does count/flows rounds (the first ones one more for the remainder)
                let n = a.count / flows + (k < a.count % flows) as usize;
                sc.spawn(move || {
                    std::thread::sleep(Duration::from_millis(k as u64));
                    flow(a, n, &dl)
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap_or_else(|_| Err(anyhow!("ping flow panicked")))).collect()
    });
    let mut all = Flow::default();
    for r in results {
        let f = r?;
        all.net.extend(f.net);
        all.app.extend(f.app);
        all.at.extend(f.at);
        all.unstamped += f.unstamped;
    }
    let (sn, sa) = (sorted(&all.net), sorted(&all.app));
    let mean = sn.iter().sum::<f64>() / sn.len() as f64;
    Ok(Out {
        p50_us: percentile(&sn, 50.0),
        p99_us: percentile(&sn, 99.0),
        min_us: sn[0],
        max_us: *sn.last().unwrap(),
        mean_us: r3(mean),
        app_p50_us: percentile(&sa, 50.0),
        app_p99_us: percentile(&sa, 99.0),
        unstamped: all.unstamped,
        count: all.net.len(),
        samples_us: all.net,
        app_samples_us: all.app,
        at_ns: all.at,
        flows,
    })
}

/// `count` measured round trips on one connection.
fn flow(a: &Args, count: usize, dl: &Deadline) -> Result<Flow> {
    let dl = *dl;
    let mut s = connect_nodelay(&a.connect, &dl)?;
    let what = format!("ping {}", a.connect);
    let io = |e| io_ctx(e, &what, &dl);
    stamp::enable(&s).map_err(|e| anyhow!("{what}: SO_TIMESTAMPNS: {e}"))?;
    s.write_all(b"PINGMODE\n").map_err(io)?;
    let mut ok = [0u8; 3];
    s.read_exact(&mut ok).map_err(io)?;
    if &ok != b"OK\n" {
        return Err(anyhow!("{what}: server does not speak PINGMODE (got {:?})", String::from_utf8_lossy(&ok)));
    }
    stamp::enable_tx(&s).map_err(|e| anyhow!("{what}: SO_TIMESTAMPING: {e}"))?;
    let _ = stamp::tx(&s, 0); // stamps of PINGMODE
    let mut f = Flow::default();
    let mut b = [0u8; 8];
    // (client's link-level time of the previous round, its application time, its start)
    let mut prev: Option<(Option<i128>, f64, u64)> = None;
    let rounds = a.warmup + count + 1; // reply i carries the server turnaround of round i-1
    for i in 0..rounds {
        if i > 0 && a.interval_ms > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(a.interval_ms / 1000.0));
        }
        dl.arm(&s, &what)?;
        let t0 = Instant::now();
        let wall0 = realtime_ns();
        s.write_all(b"p").map_err(io)?;
        let sent = stamp::tx(&s, 5).map_err(io)?;
        let (mut got, mut at) = (0, None);
        while got < b.len() {
            let (n, t) = stamp::recv(&s, &mut b[got..]).map_err(io)?;
            if n == 0 {
                return Err(anyhow!("{what}: connection closed by peer"));
            }
            got += n;
            at = t.or(at);
        }
        let app_us = (Instant::now() - t0).as_secs_f64() * 1e6;
        let turn = u64::from_le_bytes(b) as i128;
        if let Some((client, app_prev, start)) = prev.take() {
            let link = match client {
                Some(c) if turn > 0 => Some((c - turn) as f64 / 1e3),
                _ => None,
            };
            if i > a.warmup {
                f.unstamped += link.is_none() as usize;
                f.net.push(r3(link.unwrap_or(app_prev)));
                f.app.push(r3(app_prev));
                f.at.push(start);
            }
        }
        let start = sent.map(|t| t as u64).unwrap_or(wall0);
        prev = Some((sent.zip(at).map(|(s0, r)| r - s0), app_us, start));
    }
    Ok(f)
}
