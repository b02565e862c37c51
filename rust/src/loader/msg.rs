//! What a load's tasks tell its driver (driver.rs): the connection tasks (h1.rs, h2.rs) and
//! the timers.
use super::events::Timer;
use super::output::Rec;
use super::transport;

/// The HTTP a connection speaks, as its server picked it (ALPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http1,
    H2,
    /// HTTP/3 over QUIC (plan protocol "h3"; ALPN h3).
    H3,
}

impl Protocol {
    /// As in the records.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Http1 => "http/1.1",
            Protocol::H2 => "h2",
            Protocol::H3 => "h3",
        }
    }

    /// Requests go at once, each a stream of its own (else one at a time).
    pub fn multiplexed(self) -> bool {
        self != Protocol::Http1
    }
}

pub enum Msg {
    Timer(Timer),
    /// Connection `cid` is set up (connect start and end, TLS end: ms since the load started).
    /// `transport`: its facts, when they could be read at once (h2 without early data; the
    /// others send theirs after their first response).
    Connected {
        cid: usize,
        cs: f64,
        ce: f64,
        tls: Option<f64>,
        protocol: Protocol,
        transport: Option<transport::Stats>,
    },
    /// A response on a multiplexed connection arrived completely.
    StreamDone {
        cid: usize,
        rec: Box<Rec>,
    },
    FirstByte(usize),
    /// A multiplexed early-data connection's facts, read after its first response.
    Transport {
        cid: usize,
        stats: transport::Stats,
    },
    /// A response on an HTTP/1.1 connection arrived completely; `keep`: the connection takes
    /// another; `transport`: its facts, after its first response.
    Done {
        cid: usize,
        rec: Box<Rec>,
        keep: bool,
        transport: Option<transport::Stats>,
    },
    Closed {
        cid: usize,
    },
    Fatal(String),
}
