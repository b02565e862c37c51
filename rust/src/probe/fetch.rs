//! `probe fetch`: K sequential fetches of B bytes, each on a new connection,
//! optionally with TCP Fast Open (TCP_FASTOPEN_CONNECT).
//!
//! Timing (all relative to t0 = just before connect()):
//!   connect_ms: connect() returned. With --tfo and a cached cookie the kernel
//!               defers the SYN to the first write, so this is ~0.
//!   ttfb_ms:    first response byte read (null when B = 0).
//!   ms:         last response byte read (B = 0: connection established and
//!               request written).
//! TCP_INFO is read on the client socket after the last byte (see os/tcpinfo.rs
//! for what syn_data / syn_data_acked mean exactly).
use super::common::{io_ctx, r3, read_discard, tcp_socket, Deadline};
use crate::os::sock::{set_tcp_int, TCP_FASTOPEN_CONNECT};
use crate::os::tcpinfo;
use anyhow::{anyhow, Context, Result};
use serde::Serialize;
use std::io::Write;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_parser = super::parse_addr)]
    pub connect: SocketAddr,
    /// Response size in bytes.
    #[arg(long)]
    pub bytes: u64,
    /// Number of sequential fetches.
    #[arg(long, default_value_t = 1)]
    pub count: usize,
    /// Use TCP Fast Open (TCP_FASTOPEN_CONNECT) on the client socket.
    #[arg(long)]
    pub tfo: bool,
    /// Pause between fetches (ms).
    #[arg(long, default_value_t = 0.0)]
    pub gap_ms: f64,
    #[arg(long, default_value_t = 30.0)]
    pub timeout_s: f64,
}

#[derive(Serialize, schemars::JsonSchema, Debug)]
pub struct Fetch {
    pub ms: f64,
    pub connect_ms: f64,
    pub ttfb_ms: Option<f64>,
    /// Data was carried in the SYN (acked, or tcpi_fastopen_client_fail 2/3).
    pub syn_data: bool,
    /// tcpi_options & TCPI_OPT_SYN_DATA: SYN data sent and acked by the SYN-ACK.
    pub syn_data_acked: bool,
    /// tcpi_fastopen_client_fail (0 none/unspec, 1 no cookie, 2 data not acked,
    /// 3 not acked after SYN retransmit).
    pub tfo_fail: u8,
    /// tcpi_total_retrans (client side).
    pub retrans: u32,
    /// tcpi_snd_cwnd (client side, segments).
    pub snd_cwnd: u32,
    /// tcpi_rtt / tcpi_min_rtt (client side, us).
    pub rtt_us: u32,
    pub min_rtt_us: u32,
    pub bytes: u64,
    /// --tfo was asked but the namespace's net.ipv4.tcp_fastopen forbids client TFO
    /// (setsockopt answered EOPNOTSUPP): the fetch went ahead without it.
    pub tfo_unavailable: bool,
}

#[derive(Serialize, schemars::JsonSchema, Debug)]
pub struct Out {
    pub fetches: Vec<Fetch>,
}

pub fn run(a: &Args) -> Result<Out> {
    let dl = Deadline::new(a.timeout_s);
    let mut buf = vec![0u8; 1 << 20];
    let mut fetches = Vec::with_capacity(a.count);
    for i in 0..a.count {
        if i > 0 && a.gap_ms > 0.0 {
            std::thread::sleep(Duration::from_secs_f64(a.gap_ms / 1000.0));
        }
        fetches.push(one(a, &dl, &mut buf).with_context(|| format!("fetch #{}", i + 1))?);
    }
    Ok(Out { fetches })
}

fn ms(d: Duration) -> f64 {
    r3(d.as_secs_f64() * 1000.0)
}

fn one(a: &Args, dl: &Deadline, buf: &mut [u8]) -> Result<Fetch> {
    let addr = a.connect;
    let what = format!("fetch {addr}");
    let sock = tcp_socket(&addr)?;
    sock.set_nodelay(true).context("set TCP_NODELAY")?;
    let mut tfo_unavailable = false;
    if a.tfo {
        match set_tcp_int(&sock, TCP_FASTOPEN_CONNECT, 1) {
            Err(e) if e.raw_os_error() == Some(libc::EOPNOTSUPP) => tfo_unavailable = true,
            r => r.context("set TCP_FASTOPEN_CONNECT")?,
        }
    }
    let t0 = Instant::now();
    let mut s = super::common::connect(sock, &addr, dl)?;
    let t_conn = Instant::now();
    dl.arm(&s, &what)?;
    // With a deferred TFO connect, this write sends SYN+data (and a connect
    // error such as ECONNREFUSED surfaces here).
    s.write_all(format!("GET {}\n", a.bytes).as_bytes())
        .map_err(|e| io_ctx(e, &format!("{what}: send request"), dl))?;
    let first = read_discard(&mut s, a.bytes, buf, dl, &what)?;
    if a.bytes == 0 {
        // nothing to read: wait until the handshake has completed so that the
        // timing and TCP_INFO (SYN-data acked?) are meaningful.
        loop {
            let ti = tcpinfo::get(&s).context("getsockopt TCP_INFO")?;
            if ti.state == tcpinfo::TCP_ESTABLISHED {
                break;
            }
            if ti.state == tcpinfo::TCP_CLOSE {
                return Err(anyhow!("{what}: connection failed"));
            }
            dl.remaining(&what)?;
            std::thread::sleep(Duration::from_micros(200));
        }
    }
    let t1 = Instant::now();
    let ti = tcpinfo::get(&s).context("getsockopt TCP_INFO")?;
    Ok(Fetch {
        ms: ms(t1 - t0),
        connect_ms: ms(t_conn - t0),
        ttfb_ms: first.map(|f| ms(f - t0)),
        syn_data: ti.syn_data_sent(),
        syn_data_acked: ti.syn_data_acked(),
        tfo_fail: ti.fastopen_client_fail(),
        retrans: ti.total_retrans,
        snd_cwnd: ti.snd_cwnd,
        rtt_us: ti.rtt,
        min_rtt_us: ti.min_rtt,
        bytes: a.bytes,
        tfo_unavailable,
    })
}
