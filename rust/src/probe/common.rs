//! Shared helpers: deadlines, connecting with context, JSON output, stats.
use anyhow::{anyhow, Context, Result};
use socket2::{Domain, Protocol, SockAddr, Socket, Type};
use std::io::Write;
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

/// Absolute deadline for a client run (from `--timeout-s`).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    end: Instant,
    total: f64,
}

impl Deadline {
    pub fn new(timeout_s: f64) -> Deadline {
        let t = if timeout_s.is_finite() && timeout_s > 0.0 { timeout_s } else { 30.0 };
        Deadline { end: Instant::now() + Duration::from_secs_f64(t), total: t }
    }
    /// Time left, or a "timed out" error mentioning `what`.
    pub fn remaining(&self, what: &str) -> Result<Duration> {
        let now = Instant::now();
        if now >= self.end {
            return Err(anyhow!("{what}: timed out (--timeout-s {})", self.total));
        }
        // never hand a zero timeout to the kernel (it means "block forever")
        Ok((self.end - now).max(Duration::from_millis(1)))
    }
    /// Set SO_RCVTIMEO/SO_SNDTIMEO to the remaining time.
    pub fn arm(&self, s: &TcpStream, what: &str) -> Result<()> {
        let r = self.remaining(what)?;
        s.set_read_timeout(Some(r)).context("set SO_RCVTIMEO")?;
        s.set_write_timeout(Some(r)).context("set SO_SNDTIMEO")?;
        Ok(())
    }
    pub fn total_s(&self) -> f64 {
        self.total
    }
}

/// Map a timeout errno from a blocking socket op to a clear message.
pub fn io_ctx(e: std::io::Error, what: &str, dl: &Deadline) -> anyhow::Error {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            anyhow!("{what}: timed out (--timeout-s {})", dl.total_s())
        }
        _ => anyhow::Error::new(e).context(what.to_string()),
    }
}

/// Last-resort watchdog: if the process is still running shortly after the
/// deadline, print an error and exit non-zero.
pub fn watchdog(timeout_s: f64) {
    let t = if timeout_s.is_finite() && timeout_s > 0.0 { timeout_s } else { 30.0 };
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs_f64(t + 2.0));
        eprintln!("pltlab-dp: error: timed out after {t} s (watchdog)");
        std::process::exit(1);
    });
}

/// Create a TCP socket for `addr` (not yet connected).
pub fn tcp_socket(addr: &SocketAddr) -> Result<Socket> {
    Socket::new(Domain::for_address(*addr), Type::STREAM, Some(Protocol::TCP)).context("socket(SOCK_STREAM)")
}

/// connect() with the deadline; error context "connect ADDR: ...".
pub fn connect(sock: Socket, addr: &SocketAddr, dl: &Deadline) -> Result<TcpStream> {
    let what = format!("connect {addr}");
    let r = dl.remaining(&what)?;
    sock.connect_timeout(&SockAddr::from(*addr), r).map_err(|e| io_ctx(e, &what, dl))?;
    Ok(sock.into())
}

/// Plain TCP connection with TCP_NODELAY.
pub fn connect_nodelay(addr: &SocketAddr, dl: &Deadline) -> Result<TcpStream> {
    let s = tcp_socket(addr)?;
    s.set_nodelay(true).context("set TCP_NODELAY")?;
    let st = connect(s, addr, dl)?;
    dl.arm(&st, &format!("connect {addr}"))?;
    Ok(st)
}

/// Print one JSON object + newline on stdout and flush.
pub fn print_json(v: &serde_json::Value) -> Result<()> {
    let mut out = std::io::stdout().lock();
    serde_json::to_writer(&mut out, v)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Nearest-rank percentile of a sorted slice (p in 0..=100).
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Round to 3 decimals (keeps JSON readable).
pub fn r3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Read exactly `n` bytes (discarding them) into a scratch buffer; returns
/// the instant the first byte arrived (None when n == 0).
pub fn read_discard(
    s: &mut TcpStream,
    mut n: u64,
    buf: &mut [u8],
    dl: &Deadline,
    what: &str,
) -> Result<Option<Instant>> {
    use std::io::Read;
    let mut first = None;
    while n > 0 {
        let want = buf.len().min(n as usize);
        let k = s.read(&mut buf[..want]).map_err(|e| io_ctx(e, what, dl))?;
        if k == 0 {
            return Err(anyhow!("{what}: connection closed by peer with {n} bytes outstanding"));
        }
        if first.is_none() {
            first = Some(Instant::now());
        }
        n -= k as u64;
    }
    Ok(first)
}
