//! The replay server's QUIC sockets (h3.rs): a UDP socket bound to a udp listen entry's address,
//! wrapped for quinn (`TokioRuntime::wrap_udp_socket`: quinn-udp, GSO/GRO) in a socket that
//! counts what passes, for the stats (report.rs):
//! * datagrams and bytes in and out (a GSO send or a GRO receive counted per datagram);
//! * datagrams received that are not QUIC: fixed bit (0x40) clear, or shorter than a header;
//! * long-header packets read one after the other in each received datagram (coalesced packets
//!   follow their Length field): 0-RTT packet bytes (received, whether accepted or not), the
//!   Initial bytes a client sent to the connection ID it chose (its Initial flight: the
//!   ClientHello over QUIC, padding included, retransmissions too), and datagrams of a version
//!   other than QUIC v1 that quinn answers with Version Negotiation (1200 bytes or more).
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};

/// QUIC version 1 (RFC 9000).
const QUIC_V1: u32 = 1;
/// Client Initial flights remembered at once (by the connection ID the client chose); the
/// oldest is forgotten first (a flood of Initials keeps memory flat).
const MAX_FLIGHTS: usize = 1024;
/// The connection IDs the server issues (quinn's default generator: 8 bytes): a short-header
/// packet is at least its first byte and one of them.
const LOCAL_CID_LEN: usize = 8;

/// What every QUIC socket of the server adds to.
#[derive(Default)]
pub struct Counts {
    pub datagrams_in: AtomicU64,
    pub datagrams_out: AtomicU64,
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    /// Datagrams that are not QUIC (fixed bit clear, too short).
    pub bad: AtomicU64,
    /// 0-RTT packet bytes received.
    pub zero_rtt_bytes: AtomicU64,
    /// Datagrams of an unknown version, 1200 bytes or more (answered by Version Negotiation).
    pub unknown_version: AtomicU64,
    flights: Mutex<Flights>,
}

/// Initial bytes per client-chosen destination connection ID, bounded.
#[derive(Default)]
struct Flights {
    bytes: HashMap<Vec<u8>, u64>,
    order: VecDeque<Vec<u8>>,
    max: u64,
}

impl Counts {
    /// The largest client Initial flight seen, bytes.
    pub fn initial_flight_max(&self) -> u64 {
        self.flights.lock().unwrap().max
    }

    /// One received datagram.
    fn datagram_in(&self, d: &[u8]) {
        self.datagrams_in.fetch_add(1, Relaxed);
        self.bytes_in.fetch_add(d.len() as u64, Relaxed);
        let Some(&first) = d.first() else {
            self.bad.fetch_add(1, Relaxed);
            return;
        };
        if first & 0x40 == 0 {
            self.bad.fetch_add(1, Relaxed);
            return;
        }
        if first & 0x80 == 0 {
            if d.len() < 1 + LOCAL_CID_LEN {
                self.bad.fetch_add(1, Relaxed);
            }
            return;
        }
        let mut rest = d;
        let mut first_packet = true;
        while let Some(p) = long_header(rest) {
            if p.version != QUIC_V1 {
                if first_packet && p.version != 0 && d.len() >= 1200 {
                    self.unknown_version.fetch_add(1, Relaxed);
                }
                return;
            }
            match p.kind {
                Kind::Initial => self.initial(p.dcid, p.len as u64),
                Kind::ZeroRtt => {
                    self.zero_rtt_bytes.fetch_add(p.len as u64, Relaxed);
                }
                _ => {}
            }
            first_packet = false;
            rest = &rest[p.len..];
            // what follows a packet in a datagram is another packet (or padding: no fixed bit)
            if rest.first().is_none_or(|b| b & 0xc0 != 0xc0) {
                return;
            }
        }
        if first_packet {
            self.bad.fetch_add(1, Relaxed);
        }
    }

    fn initial(&self, dcid: &[u8], len: u64) {
        let mut f = self.flights.lock().unwrap();
        let n = match f.bytes.get_mut(dcid) {
            Some(n) => {
                *n += len;
                *n
            }
            None => {
                if f.order.len() >= MAX_FLIGHTS {
                    if let Some(old) = f.order.pop_front() {
                        f.bytes.remove(&old);
                    }
                }
                f.bytes.insert(dcid.to_vec(), len);
                f.order.push_back(dcid.to_vec());
                len
            }
        };
        f.max = f.max.max(n);
    }
}

#[derive(Debug, PartialEq)]
enum Kind {
    Initial,
    ZeroRtt,
    Handshake,
    Retry,
}

/// A long-header packet at the start of `b`: its version, type, destination connection ID and
/// length (whole packet; a Retry or another version's packet: the rest of the datagram).
struct Long<'a> {
    version: u32,
    kind: Kind,
    dcid: &'a [u8],
    len: usize,
}

/// RFC 9000 §17.2: first byte, version(4), dcid len(1) + dcid, scid len(1) + scid, then for
/// Initial a token (varint length + token), and for Initial/0-RTT/Handshake a varint Length
/// covering the packet number and payload. None: not a whole long header.
fn long_header(b: &[u8]) -> Option<Long<'_>> {
    let first = *b.first()?;
    if first & 0x80 == 0 {
        return None;
    }
    let version = u32::from_be_bytes(b.get(1..5)?.try_into().ok()?);
    let dlen = *b.get(5)? as usize;
    let dcid = b.get(6..6 + dlen)?;
    let slen = *b.get(6 + dlen)? as usize;
    let mut at = 7 + dlen + slen;
    if at > b.len() {
        return None;
    }
    let kind = match (first >> 4) & 3 {
        0 => Kind::Initial,
        1 => Kind::ZeroRtt,
        2 => Kind::Handshake,
        _ => Kind::Retry,
    };
    if version != QUIC_V1 || kind == Kind::Retry {
        return Some(Long { version, kind, dcid, len: b.len() });
    }
    if kind == Kind::Initial {
        let (token_len, n) = varint(b.get(at..)?)?;
        at = at.checked_add(n)?.checked_add(usize::try_from(token_len).ok()?)?;
    }
    let (len, n) = varint(b.get(at..)?)?;
    let end = at.checked_add(n)?.checked_add(usize::try_from(len).ok()?)?;
    (end <= b.len()).then_some(Long { version, kind, dcid, len: end })
}

/// A QUIC variable-length integer (RFC 9000 §16): its value and its size.
fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let n = 1usize << (first >> 6);
    let bytes = b.get(..n)?;
    let mut v = u64::from(first & 0x3f);
    for &x in &bytes[1..] {
        v = (v << 8) | u64::from(x);
    }
    Some((v, n))
}

/// quinn's tokio socket, counting (`Counts`).
pub struct CountingSocket {
    inner: Arc<dyn AsyncUdpSocket>,
    counts: Arc<Counts>,
}

impl fmt::Debug for CountingSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingSocket").field("inner", &self.inner).finish_non_exhaustive()
    }
}

impl CountingSocket {
    /// `sock` (bound) as quinn's tokio runtime wraps it, counted in `counts`.
    pub fn new(sock: std::net::UdpSocket, counts: Arc<Counts>) -> io::Result<CountingSocket> {
        use quinn::Runtime;
        Ok(CountingSocket { inner: quinn::TokioRuntime.wrap_udp_socket(sock)?, counts })
    }
}

impl AsyncUdpSocket for CountingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, t: &Transmit) -> io::Result<()> {
        self.inner.try_send(t)?;
        let n = match t.segment_size {
            Some(s) if s > 0 => t.contents.len().div_ceil(s),
            _ => 1,
        };
        self.counts.datagrams_out.fetch_add(n as u64, Relaxed);
        self.counts.bytes_out.fetch_add(t.contents.len() as u64, Relaxed);
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let n = match self.inner.poll_recv(cx, bufs, meta) {
            Poll::Ready(Ok(n)) => n,
            other => return other,
        };
        for (buf, m) in bufs.iter().zip(meta.iter()).take(n) {
            let stride = if m.stride == 0 { m.len.max(1) } else { m.stride };
            for d in buf[..m.len].chunks(stride) {
                self.counts.datagram_in(d);
            }
        }
        Poll::Ready(Ok(n))
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A v1 long-header packet of `kind` (0 Initial, 1 0-RTT, 2 Handshake) to `dcid` with a
    /// payload of `n` bytes.
    fn packet(kind: u8, dcid: &[u8], n: usize) -> Vec<u8> {
        let mut p = vec![0xc0 | (kind << 4) | 3];
        p.extend_from_slice(&QUIC_V1.to_be_bytes());
        p.push(dcid.len() as u8);
        p.extend_from_slice(dcid);
        p.push(0); // empty scid
        if kind == 0 {
            p.push(0); // no token
        }
        p.extend_from_slice(&(0x4000u16 | n as u16).to_be_bytes());
        p.extend(std::iter::repeat_n(0u8, n));
        p
    }

    #[test]
    fn datagrams_are_read_for_their_packets() {
        let c = Counts::default();
        // a client's two-datagram Initial flight, the second with a 0-RTT packet after it
        let a = packet(0, b"abcdefgh", 1190); // 1208 bytes, as a padded Initial
        let mut b = packet(0, b"abcdefgh", 600);
        let z = packet(1, b"abcdefgh", 300);
        b.extend_from_slice(&z);
        c.datagram_in(&a);
        c.datagram_in(&b);
        assert_eq!(c.initial_flight_max(), (a.len() + b.len() - z.len()) as u64);
        assert_eq!(c.zero_rtt_bytes.load(Relaxed), z.len() as u64);
        // another connection's smaller flight leaves the maximum
        c.datagram_in(&packet(0, b"zzzzzzzz", 1000));
        assert_eq!(c.initial_flight_max(), (a.len() + b.len() - z.len()) as u64);
        assert_eq!(c.bad.load(Relaxed), 0);
        // not QUIC: fixed bit clear, too short, truncated long header
        c.datagram_in(&[0x00; 50]);
        c.datagram_in(&[0x40, 1, 2]);
        c.datagram_in(&a[..4]);
        c.datagram_in(&[]);
        assert_eq!(c.bad.load(Relaxed), 4);
        // an unknown version, large enough to be answered
        let mut v = a.clone();
        v[1..5].copy_from_slice(&0x1a2a_3a4au32.to_be_bytes());
        c.datagram_in(&v);
        c.datagram_in(&v[..100]);
        assert_eq!(c.unknown_version.load(Relaxed), 1);
        assert_eq!(c.datagrams_in.load(Relaxed), 9);
    }

    #[test]
    fn flights_are_bounded() {
        let c = Counts::default();
        for i in 0..(3 * MAX_FLIGHTS as u32) {
            c.datagram_in(&packet(0, &i.to_be_bytes(), 1180));
        }
        let f = c.flights.lock().unwrap();
        assert_eq!((f.bytes.len(), f.order.len()), (MAX_FLIGHTS, MAX_FLIGHTS));
    }
}
