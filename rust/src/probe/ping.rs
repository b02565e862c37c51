//! `probe ping`: TCP request/response RTT on one persistent connection
//! (TCP_NODELAY on both ends): N x (`GET 1\n` -> 1 byte).
use super::common::{connect_nodelay, io_ctx, percentile, r3, Deadline};
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
}

#[derive(Serialize, Debug)]
pub struct Out {
    pub samples_us: Vec<f64>,
    pub p50_us: f64,
    pub p99_us: f64,
    pub min_us: f64,
    pub max_us: f64,
    pub mean_us: f64,
    pub count: usize,
}

pub fn run(a: &Args) -> Result<Out> {
    if a.count == 0 {
        return Err(anyhow!("--count must be >= 1"));
    }
    let dl = Deadline::new(a.timeout_s);
    let mut s = connect_nodelay(&a.connect, &dl)?;
    let what = format!("ping {}", a.connect);
    let mut samples = Vec::with_capacity(a.count);
    let mut b = [0u8; 16];
    for i in 0..a.warmup + a.count {
        if i > 0 && a.interval_ms > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(a.interval_ms / 1000.0));
        }
        dl.arm(&s, &what)?;
        let t0 = Instant::now();
        s.write_all(b"GET 1\n").map_err(|e| io_ctx(e, &what, &dl))?;
        let n = s.read(&mut b).map_err(|e| io_ctx(e, &what, &dl))?;
        let t1 = Instant::now();
        if n != 1 {
            return Err(anyhow!(
                "{what}: expected 1 byte, got {}",
                if n == 0 { "EOF".to_string() } else { format!("{n} bytes ({:?})", String::from_utf8_lossy(&b[..n])) }
            ));
        }
        if i >= a.warmup {
            samples.push(r3((t1 - t0).as_secs_f64() * 1e6));
        }
    }
    let mut sorted = samples.clone();
    sorted.sort_by(|x, y| x.partial_cmp(y).unwrap());
    let mean = sorted.iter().sum::<f64>() / sorted.len() as f64;
    Ok(Out {
        p50_us: percentile(&sorted, 50.0),
        p99_us: percentile(&sorted, 99.0),
        min_us: sorted[0],
        max_us: *sorted.last().unwrap(),
        mean_us: r3(mean),
        count: samples.len(),
        samples_us: samples,
    })
}
