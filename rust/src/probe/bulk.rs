//! `probe bulk`: goodput of one TCP connection receiving `STREAM` data.
use super::common::{connect_nodelay, io_ctx, r3, Deadline};
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = super::parse_addr)]
    pub connect: SocketAddr,
    /// Measurement duration (s).
    #[arg(long, default_value_t = 5.0)]
    pub seconds: f64,
    /// Data discarded before measuring (s).
    #[arg(long, default_value_t = 1.0)]
    pub warmup: f64,
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
}

#[derive(Serialize, schemars::JsonSchema, Debug)]
pub struct Out {
    pub bytes: u64,
    /// Actual measured interval (first read after warmup .. last read).
    pub seconds: f64,
    pub goodput_bps: f64,
    pub warmup_bytes: u64,
}

pub fn run(a: &Args) -> Result<Out> {
    if a.seconds.is_nan() || a.seconds <= 0.0 || a.warmup.is_nan() || a.warmup < 0.0 {
        return Err(anyhow!("--seconds must be > 0 and --warmup >= 0"));
    }
    let dl = Deadline::new(a.timeout_s);
    if a.seconds + a.warmup >= dl.total_s() {
        return Err(anyhow!(
            "--seconds + --warmup ({}) must be below --timeout-s ({})",
            a.seconds + a.warmup,
            dl.total_s()
        ));
    }
    let what = format!("bulk {}", a.connect);
    let mut s = connect_nodelay(&a.connect, &dl)?;
    s.write_all(b"STREAM\n").map_err(|e| io_ctx(e, &what, &dl))?;
    let mut buf = vec![0u8; 4 << 20];
    let start = Instant::now();
    let warm_end = start + Duration::from_secs_f64(a.warmup);
    let mut warmup_bytes = 0u64;
    let mut bytes = 0u64;
    let mut t_meas: Option<Instant> = None;
    let mut end = None;
    let mut last;
    let mut last_arm = start;
    loop {
        let k = s.read(&mut buf).map_err(|e| io_ctx(e, &what, &dl))?;
        if k == 0 {
            return Err(anyhow!("{what}: server closed the stream"));
        }
        let now = Instant::now();
        match t_meas {
            None if now < warm_end => warmup_bytes += k as u64,
            None => {
                // this read ends the warmup; measurement starts here
                warmup_bytes += k as u64;
                t_meas = Some(now);
                end = Some(now + Duration::from_secs_f64(a.seconds));
            }
            Some(_) => {
                bytes += k as u64;
                last = now;
                if now >= end.unwrap() {
                    break;
                }
            }
        }
        if now - last_arm > Duration::from_millis(200) {
            dl.arm(&s, &what)?; // also fails once the deadline has passed
            last_arm = now;
        }
    }
    let secs = (last - t_meas.unwrap()).as_secs_f64();
    Ok(Out {
        bytes,
        seconds: r3(secs * 1000.0) / 1000.0,
        goodput_bps: if secs > 0.0 { (bytes as f64 * 8.0 / secs).round() } else { 0.0 },
        warmup_bytes,
    })
}
