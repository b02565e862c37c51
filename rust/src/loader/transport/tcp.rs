//! TCP, the transport under HTTP/1.1 and h2: the connect (TCP_FASTOPEN_CONNECT set before
//! connect() when the plan asks for TFO, TCP_NODELAY) and what TCP_INFO tells of a connection:
//! its TFO use (tcpi_options & 32: SYN data acked; tcpi_fastopen_client_fail).
//!
//! With TFO the connect returns at once and the first write goes in the SYN (with a cookie;
//! without one the SYN asks for it and the data follows the handshake): the facts are read
//! once the SYN-ACK has surely come, after the connection's first response (or its TLS
//! handshake). A kernel refusing TCP_FASTOPEN_CONNECT (EOPNOTSUPP: net.ipv4.tcp_fastopen lacks
//! the client bit) is noted once and the load goes on without TFO.
use anyhow::{anyhow, Result};
use serde::Serialize;
use std::cell::Cell;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};

use crate::os::{sock, tcpinfo};

/// The load's TCP settings, and what the kernel refused of them.
pub struct Tcp {
    tfo: bool,
    tfo_tls: bool,
    tfo_refused: Cell<Option<String>>,
}

impl Tcp {
    /// `tfo`: TCP_FASTOPEN_CONNECT on every socket; with `tfo_tls` false only on those that
    /// will not carry TLS (the plan's `tfo_tls`: a browser whose ClientHello does not fit in a
    /// SYN saves no round trip with TFO over TLS).
    pub fn new(tfo: bool, tfo_tls: bool) -> Tcp {
        Tcp { tfo, tfo_tls, tfo_refused: Cell::new(None) }
    }

    /// A connection to `addr` (`host` names it in errors; `tls`: TLS will run over it) and its
    /// probe.
    pub async fn connect(&self, addr: SocketAddr, host: &str, tls: bool) -> Result<(tokio::net::TcpStream, TcpProbe)> {
        let s = if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
        if self.tfo && (self.tfo_tls || !tls) {
            if let Err(e) = sock::set_tcp_int(&s, sock::TCP_FASTOPEN_CONNECT, 1) {
                let why = if e.raw_os_error() == Some(libc::EOPNOTSUPP) {
                    format!("TCP_FASTOPEN_CONNECT refused ({e}): net.ipv4.tcp_fastopen does not allow client TFO here; loaded without TFO")
                } else {
                    format!("TCP_FASTOPEN_CONNECT refused ({e}); loaded without TFO")
                };
                self.tfo_refused.set(Some(why));
            }
        }
        s.set_nodelay(true)?;
        let probe = TcpProbe(s.as_raw_fd());
        let tcp = s.connect(addr).await.map_err(|e| anyhow!("connect to {addr} ({host}) failed: {e}"))?;
        Ok((tcp, probe))
    }

    /// Why the kernel refused TFO, if it did (the load's `errors`; `tfo_available` false).
    pub fn take_tfo_refused(&self) -> Option<String> {
        self.tfo_refused.take()
    }
}

/// What TCP tells of one connection: in its record, `tfo` and `tfo_client_fail`.
#[derive(Serialize, schemars::JsonSchema, Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TcpStats {
    /// SYN data sent and acked (tcpi_options & 32).
    pub tfo: bool,
    /// tcpi_fastopen_client_fail (0 none, 1 no cookie, 2/3 SYN data not acked).
    pub tfo_client_fail: u8,
}

/// The TCP socket under a (maybe TLS) stream, for TCP_INFO: its fd, valid as long as the
/// stream that owns it.
pub struct TcpProbe(RawFd);

impl AsRawFd for TcpProbe {
    fn as_raw_fd(&self) -> RawFd {
        self.0
    }
}

impl TcpProbe {
    /// The connection's facts now (None: TCP_INFO failed).
    pub fn stats(&self) -> Option<TcpStats> {
        let ti = tcpinfo::get(self).ok()?;
        Some(TcpStats { tfo: ti.syn_data_acked(), tfo_client_fail: ti.fastopen_client_fail() })
    }
}
