//! `probe udp`: N paced, numbered datagrams; the server counts them per
//! session and reports over TCP (`UDPSTAT <session>`).
//!
//! Datagram payload (big-endian), padded with zeros to --size:
//!   magic "PLTU" (4) | session u64 | seq u64 (0..N-1) | total u64 (N)
use super::common::{connect_nodelay, io_ctx, r3, Deadline};
use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, UdpSocket};
use std::time::{Duration, Instant};

pub const MAGIC: &[u8; 4] = b"PLTU";
pub const HEADER_LEN: usize = 28;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Header {
    pub session: u64,
    pub seq: u64,
    pub total: u64,
}

impl Header {
    pub fn encode(&self, buf: &mut [u8]) {
        buf[..4].copy_from_slice(MAGIC);
        buf[4..12].copy_from_slice(&self.session.to_be_bytes());
        buf[12..20].copy_from_slice(&self.seq.to_be_bytes());
        buf[20..28].copy_from_slice(&self.total.to_be_bytes());
    }
    pub fn decode(buf: &[u8]) -> Option<Header> {
        if buf.len() < HEADER_LEN || &buf[..4] != MAGIC {
            return None;
        }
        let u = |r: std::ops::Range<usize>| u64::from_be_bytes(buf[r].try_into().unwrap());
        Some(Header { session: u(4..12), seq: u(12..20), total: u(20..28) })
    }
}

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = super::parse_addr)]
    pub connect: SocketAddr,
    /// Number of datagrams.
    #[arg(long, default_value_t = 1000)]
    pub count: u64,
    /// Send rate (packets/s), paced on a fixed schedule.
    #[arg(long, default_value_t = 20000.0)]
    pub pps: f64,
    /// UDP payload size in bytes (>= 28).
    #[arg(long, default_value_t = 512)]
    pub size: usize,
    /// Session id (default: random).
    #[arg(long)]
    pub session: Option<u64>,
    /// Wait after the last datagram before asking the server (ms).
    #[arg(long, default_value_t = 300.0)]
    pub wait_ms: f64,
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
}

#[derive(Serialize, schemars::JsonSchema, Debug)]
pub struct Out {
    pub sent: u64,
    pub received: u64,
    pub loss: f64,
    pub missing: Vec<u64>,
    pub duplicates: u64,
    pub reordered: u64,
    pub session: u64,
    /// sendmsg errors (counted in `sent`; e.g. ICMP-induced ECONNREFUSED)
    pub send_errors: u64,
    /// Achieved send rate (packets/s).
    pub send_pps: f64,
}

pub fn run(a: &Args) -> Result<Out> {
    if a.size < HEADER_LEN || a.size > 65507 {
        return Err(anyhow!("--size must be in {HEADER_LEN}..=65507"));
    }
    if a.pps.is_nan() || a.pps <= 0.0 {
        return Err(anyhow!("--pps must be > 0"));
    }
    let dl = Deadline::new(a.timeout_s);
    let session = a.session.unwrap_or_else(|| rand::random::<u64>() >> 11); // < 2^53
    let bind: SocketAddr = if a.connect.is_ipv4() { "0.0.0.0:0" } else { "[::]:0" }.parse().unwrap();
    let sock = UdpSocket::bind(bind).context("bind udp socket")?;
    sock.connect(a.connect).with_context(|| format!("udp connect {}", a.connect))?;
    {
        let s2 = socket2::SockRef::from(&sock);
        let _ = s2.set_send_buffer_size(4 << 20);
    }
    let what = format!("udp {}", a.connect);
    let mut buf = vec![0u8; a.size];
    let period = Duration::from_secs_f64(1.0 / a.pps);
    let start = Instant::now();
    let mut send_errors = 0u64;
    for seq in 0..a.count {
        let target = start + period.mul_f64(seq as f64);
        loop {
            let now = Instant::now();
            if now >= target {
                break;
            }
            let left = target - now;
            if left > Duration::from_micros(300) {
                std::thread::sleep(left - Duration::from_micros(200));
            } else {
                std::hint::spin_loop();
            }
        }
        if seq % 1024 == 0 {
            dl.remaining(&what)?;
        }
        Header { session, seq, total: a.count }.encode(&mut buf);
        if sock.send(&buf).is_err() {
            send_errors += 1;
        }
    }
    let send_secs = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs_f64(a.wait_ms.max(0.0) / 1000.0));

    // ask the server over TCP
    let st = connect_nodelay(&a.connect, &dl)?;
    (&st).write_all(format!("UDPSTAT {session}\n").as_bytes()).map_err(|e| io_ctx(e, &what, &dl))?;
    let mut line = String::new();
    BufReader::new(&st).read_line(&mut line).map_err(|e| io_ctx(e, &what, &dl))?;
    if line.starts_with("ERR") || line.is_empty() {
        return Err(anyhow!("{what}: UDPSTAT failed: {:?}", line.trim_end()));
    }
    let v: serde_json::Value =
        serde_json::from_str(&line).with_context(|| format!("{what}: bad UDPSTAT reply {:?}", line.trim_end()))?;
    let received = v["received"].as_u64().unwrap_or(0);
    let mut missing: Vec<u64> = match v["missing"].as_array() {
        Some(m) => m.iter().filter_map(|x| x.as_u64()).collect(),
        None => (0..a.count).collect(), // nothing arrived: everything missing
    };
    missing.sort_unstable();
    Ok(Out {
        sent: a.count,
        received,
        loss: if a.count > 0 { 1.0 - (received.min(a.count) as f64 / a.count as f64) } else { 0.0 },
        missing,
        duplicates: v["duplicates"].as_u64().unwrap_or(0),
        reordered: v["reordered"].as_u64().unwrap_or(0),
        session,
        send_errors,
        send_pps: if send_secs > 0.0 { r3(a.count as f64 / send_secs) } else { 0.0 },
    })
}
