//! How the loader reaches an origin: the connection abstraction under the HTTP code (h1.rs,
//! h2.rs), which sees a byte stream (`Io`) and the transport's facts about it (`Stats`, read
//! through the connection's `Probe`), never a socket.
//!
//! * tcp.rs: TCP, its TFO (TCP_FASTOPEN_CONNECT) and its facts (TCP_INFO: `TcpStats`);
//! * tls.rs: TLS over a byte-stream transport (rustls: resumption, early data);
//! * quic.rs: QUIC (quinn), which is not a byte stream: `Dialer::open_quic` returns the QUIC
//!   connection for h3.rs, its facts `QuicStats`.
//!
//! `Dialer::open` sets a connection up: the transport's connect, TLS when the object is https
//! (ALPN h2 offered first for plan objects with protocol "h2"). A transport's facts are its
//! own: `Stats` has one variant per transport, flattened into the connection's record (its keys
//! are the transport's: TCP's `tfo`, `tfo_client_fail`). A transport that is not a byte stream
//! (QUIC) brings its own connection kind and its HTTP (h3), and its variants of `Stats` and
//! `Probe`; h1.rs and h2.rs stay as they are.
use anyhow::Result;
use serde::Serialize;
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use tokio::io::{AsyncRead, AsyncWrite};

use super::clock::Clock;

pub mod quic;
pub mod tcp;
pub mod tls;

/// A byte stream to an origin (TCP, or TLS over it): what HTTP/1.1 and h2 run on.
pub trait Io: AsyncRead + AsyncWrite + Unpin {}
impl<T: AsyncRead + AsyncWrite + Unpin> Io for T {}

/// A transport's own facts about one connection (in its record, under the transport's keys).
#[derive(Serialize, schemars::JsonSchema, Debug, Clone, Copy, PartialEq)]
#[serde(untagged)]
pub enum Stats {
    Tcp(tcp::TcpStats),
    Quic(quic::QuicStats),
}

/// A connection that never got its facts (it never set up) reports TCP's defaults, as always.
impl Default for Stats {
    fn default() -> Stats {
        Stats::Tcp(tcp::TcpStats::default())
    }
}

impl Stats {
    /// The connection's first request went with the transport's handshake (TCP: in the SYN,
    /// and the SYN-ACK acked it): that request's `tfo`. QUIC: false (its 0-RTT is the
    /// request's `early_data`, as TLS early data is).
    pub fn first_request_in_handshake(&self) -> bool {
        match self {
            Stats::Tcp(t) => t.tfo,
            Stats::Quic(_) => false,
        }
    }

    #[cfg(test)]
    pub fn tcp(&self) -> Option<&tcp::TcpStats> {
        match self {
            Stats::Tcp(t) => Some(t),
            Stats::Quic(_) => None,
        }
    }

    #[cfg(test)]
    pub fn quic(&self) -> Option<&quic::QuicStats> {
        match self {
            Stats::Quic(q) => Some(q),
            Stats::Tcp(_) => None,
        }
    }
}

/// Where a live connection's `Stats` are read from.
pub enum Probe {
    Tcp(tcp::TcpProbe),
    Quic(quinn::Connection),
}

impl Probe {
    /// The connection's facts now (None: they could not be read).
    pub fn stats(&self) -> Option<Stats> {
        match self {
            Probe::Tcp(p) => p.stats().map(Stats::Tcp),
            Probe::Quic(c) => Some(Stats::Quic(quic::QuicStats::of(c))),
        }
    }
}

/// A connection set up, as the HTTP code gets it. Times in ms since the load started.
pub struct Conn {
    pub io: Box<dyn Io>,
    pub probe: Probe,
    pub connect_start_ms: f64,
    pub connect_end_ms: f64,
    /// TLS: when the handshake ended (with early data: `connect_end_ms`, the request left at once).
    pub tls_end_ms: Option<f64>,
    /// The server picked h2 (ALPN; with early data: offered, the ticket's protocol).
    pub h2: bool,
    /// The first request goes as early data (0-RTT).
    pub early: bool,
}

/// The load's transports and TLS client configurations: sets up the connections it opens.
pub struct Dialer {
    pub tcp: tcp::Tcp,
    /// TLS offering ALPN http/1.1; the same offering h2 first (plan objects with protocol "h2").
    tls: Option<tokio_rustls::TlsConnector>,
    tls_h2: Option<tokio_rustls::TlsConnector>,
    /// QUIC (plan objects with protocol "h3").
    quic: Option<quic::Quic>,
}

/// A QUIC connection set up, as h3.rs gets it. Times in ms since the load started: the QUIC
/// handshake is the transport's and TLS' at once, so `connect_end_ms` = `tls_end_ms` = its end
/// (with 0-RTT: when the first requests could go, as for TLS early data).
pub struct QuicOpen {
    pub conn: quic::QuicConn,
    pub probe: Probe,
    pub connect_start_ms: f64,
    pub connect_end_ms: f64,
}

impl Dialer {
    pub fn new(
        tcp: tcp::Tcp,
        tls: Option<tokio_rustls::TlsConnector>,
        tls_h2: Option<tokio_rustls::TlsConnector>,
    ) -> Dialer {
        Dialer { tcp, tls, tls_h2, quic: None }
    }

    /// The same dialing QUIC too (h3 objects).
    pub fn with_quic(mut self, quic: Option<quic::Quic>) -> Dialer {
        self.quic = quic;
        self
    }

    /// A QUIC connection to `addr` (UDP) for `host`; `seen` notes how its handshake went (at
    /// once, or, with 0-RTT, once h3.rs learnt the server's answer).
    pub async fn open_quic(
        &self,
        clock: &Clock,
        addr: SocketAddr,
        host: &str,
        seen: &Cell<tls::TlsSeen>,
    ) -> Result<QuicOpen> {
        let q = self.quic.as_ref().ok_or_else(|| anyhow::anyhow!("internal: an h3 object but no QUIC dialer"))?;
        let cs = clock.ms();
        let conn = q.connect(addr, host).await?;
        let ce = clock.ms();
        if conn.zero_rtt.is_some() {
            seen.set(tls::TlsSeen { early_tried: true, ..Default::default() });
        } else {
            quic::note_handshake(&conn.conn, seen, false, false);
        }
        let probe = Probe::Quic(conn.conn.clone());
        Ok(QuicOpen { conn, probe, connect_start_ms: cs, connect_end_ms: ce })
    }

    /// A connection to `addr` for `host`: TCP, then TLS if `tls` (ALPN h2 first if `offer_h2`;
    /// `seen` notes how its handshake went).
    pub async fn open(
        &self,
        clock: &Clock,
        addr: SocketAddr,
        host: &str,
        tls: bool,
        offer_h2: bool,
        seen: Rc<Cell<tls::TlsSeen>>,
    ) -> Result<Conn> {
        let cs = clock.ms();
        let (tcp, probe) = self.tcp.connect(addr, host, tls).await?;
        let ce = clock.ms();
        let probe = Probe::Tcp(probe);
        if !tls {
            let io = Box::new(tcp);
            return Ok(Conn {
                io,
                probe,
                connect_start_ms: cs,
                connect_end_ms: ce,
                tls_end_ms: None,
                h2: false,
                early: false,
            });
        }
        let connector = if offer_h2 { self.tls_h2.as_ref() } else { self.tls.as_ref() };
        let t = tls::connect(connector.expect("tls connector"), tcp, addr, host, offer_h2, seen).await?;
        Ok(Conn {
            io: Box::new(t.stream),
            probe,
            connect_start_ms: cs,
            connect_end_ms: ce,
            tls_end_ms: Some(if t.early { ce } else { clock.ms() }),
            h2: t.h2,
            early: t.early,
        })
    }
}
