//! QUIC, the transport under HTTP/3 (h3.rs): one `quinn::Endpoint` (one UDP socket) per
//! connection, as a browser uses one socket per QUIC connection, so each connection is its own
//! 4-tuple in the pcap; TLS from `certs::quic` (the load's own client configuration and ticket
//! store, apart from TCP's); and what quinn tells of a connection (`QuicStats`).
//!
//! * Transport settings: PLPMTUD off (`mtu_discovery_config(None)`: 1200-byte packets, no
//!   probes in the counts), receive windows as h2's (stream 6 MiB, connection 15 MiB: Chromium's),
//!   the plan's `quic_cc` and `quic_icw` (packets of 1200 bytes; quinn's defaults without them),
//!   segmentation offload on (quinn's default).
//! * Address validation tokens (NEW_TOKEN) kept from the visit before the load (`tokens()`),
//!   as Chromium keeps them with its sessions: a returning connection's Initial carries one.
//! * 0-RTT (tls_mode "0rtt", a ticket allowing it): `into_0rtt()` returns at once and the h3
//!   client's streams and the first requests go as 0-RTT packets in the Initial's flight;
//!   `ZeroRttAccepted` says whether the server took them (h3.rs sends them again if not).
//! * How the handshake went (`TlsSeen`, the same record keys as TLS over TCP): full or resumed
//!   from the ServerHello the client received (`certs::quic::quic_client_config_noting`: it
//!   carries `pre_shared_key` exactly when the server accepted the ticket), per connection;
//!   early data accepted or rejected from `ZeroRttAccepted`.
//! * No fallback to TCP: a handshake that fails, or gets no answer within the handshake
//!   deadline (10 s, at most half the load's timeout), fails the load naming the address.
use anyhow::{anyhow, bail, Result};
use serde::Serialize;
use std::cell::Cell;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use super::tls::TlsSeen;

/// The size of a packet for `quic_icw` (quinn's initial MTU; PLPMTUD is off).
pub const PACKET: u64 = 1200;
/// Receive windows, stream and connection: Chromium's, as h2.rs sets them.
pub const STREAM_WINDOW: u32 = 6 << 20;
pub const CONNECTION_WINDOW: u32 = 15 << 20;
/// Chromium's QUIC handshake deadline (kMaxTimeForCryptoHandshakeSecs).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The load's QUIC settings: the client configuration every connection of the phase uses.
pub struct Quic {
    cfg: quinn::ClientConfig,
    zero_rtt: bool,
    handshake_timeout: Duration,
}

impl Quic {
    /// `tls`: the load's QUIC TLS configuration (`certs::quic::quic_client_tls`, made once per
    /// load: its clones share the ticket store and the verifier tickets resume under);
    /// `zero_rtt`: offer early data and send the first requests as 0-RTT (tls_mode "0rtt",
    /// measured load; false in "resume": rustls would offer early data on every resumption);
    /// `cc`, `icw`: the plan's `quic_cc`, `quic_icw`; `tokens`: the load's store of address
    /// validation tokens (`tokens()`), shared by the visit before the load and the load, as the
    /// ticket store is.
    pub fn new(
        tls: &rustls::ClientConfig,
        zero_rtt: bool,
        cc: Option<&str>,
        icw: Option<u32>,
        handshake_timeout: Duration,
        tokens: Arc<dyn quinn::TokenStore>,
    ) -> Result<Quic> {
        let mut cfg = crate::certs::quic::quic_client_config_noting(tls, zero_rtt)?;
        cfg.transport_config(Arc::new(transport(cc, icw)?));
        cfg.token_store(tokens);
        Ok(Quic { cfg, zero_rtt, handshake_timeout })
    }

    /// A QUIC connection to `addr` for `host` (SNI; names it in errors) from a UDP socket of its
    /// own: returns once the handshake is done, or at once when the first requests may go as
    /// 0-RTT data (`zero_rtt`: the server's answer to come).
    pub async fn connect(&self, addr: SocketAddr, host: &str) -> Result<QuicConn> {
        let any = if addr.is_ipv4() { IpAddr::V4(Ipv4Addr::UNSPECIFIED) } else { IpAddr::V6(Ipv6Addr::UNSPECIFIED) };
        let endpoint = quinn::Endpoint::client(SocketAddr::new(any, 0))
            .map_err(|e| anyhow!("QUIC to {addr} ({host}): no UDP socket: {e}"))?;
        let connecting = endpoint
            .connect_with(self.cfg.clone(), addr, host)
            .map_err(|e| anyhow!("QUIC handshake with {addr} ({host}) failed: {e}"))?;
        let connecting = if self.zero_rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => {
                    let hs = self.handshake_timeout;
                    return Ok(QuicConn { conn, zero_rtt: Some(accepted), endpoint, handshake_timeout: hs });
                }
                Err(c) => c,
            }
        } else {
            connecting
        };
        let conn = match tokio::time::timeout(self.handshake_timeout, connecting).await {
            Ok(Ok(c)) => c,
            Ok(Err(e)) => bail!("QUIC handshake with {addr} ({host}) failed: {e}"),
            Err(_) => bail!(
                "QUIC handshake with {addr} ({host}) failed: no answer over UDP within {:.1} s",
                self.handshake_timeout.as_secs_f64()
            ),
        };
        Ok(QuicConn { conn, zero_rtt: None, endpoint, handshake_timeout: self.handshake_timeout })
    }
}

/// A load's store of the address validation tokens servers send (NEW_TOKEN frames, RFC 9000
/// §8.1.3): the next connection to the same server name sends one in its Initial, which
/// validates its address at once (the server's answer to 0-RTT requests is then not held to 3x
/// the client's bytes until the handshake completes), as Chromium does with the tokens it keeps
/// beside its sessions. quinn's memory cache: 2 tokens for each of 256 server names.
pub fn tokens() -> Arc<dyn quinn::TokenStore> {
    Arc::new(quinn::TokenMemoryCache::default())
}

/// quinn's transport settings for the loader's connections.
fn transport(cc: Option<&str>, icw: Option<u32>) -> Result<quinn::TransportConfig> {
    use quinn::congestion::{BbrConfig, CubicConfig, NewRenoConfig};
    let mut t = quinn::TransportConfig::default();
    t.mtu_discovery_config(None);
    t.stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW));
    t.receive_window(quinn::VarInt::from_u32(CONNECTION_WINDOW));
    let window = icw.map(|w| u64::from(w) * PACKET);
    match cc {
        None if window.is_none() => {}
        None | Some("cubic") => {
            let mut c = CubicConfig::default();
            if let Some(w) = window {
                c.initial_window(w);
            }
            t.congestion_controller_factory(Arc::new(c));
        }
        Some("newreno") => {
            let mut c = NewRenoConfig::default();
            if let Some(w) = window {
                c.initial_window(w);
            }
            t.congestion_controller_factory(Arc::new(c));
        }
        Some("bbr") => {
            let mut c = BbrConfig::default();
            if let Some(w) = window {
                c.initial_window(w);
            }
            t.congestion_controller_factory(Arc::new(c));
        }
        Some(other) => bail!("quic_cc {other:?} is none of \"cubic\", \"newreno\", \"bbr\""),
    }
    Ok(t)
}

/// A QUIC connection as `Quic::connect` returns it.
pub struct QuicConn {
    pub conn: quinn::Connection,
    /// The first requests go as 0-RTT data: resolves to whether the server accepted them
    /// (None: the handshake is already done, no 0-RTT).
    pub zero_rtt: Option<quinn::ZeroRttAccepted>,
    /// Its UDP socket (kept with the connection).
    pub endpoint: quinn::Endpoint,
    /// How long the server's answer to a 0-RTT handshake is waited for.
    pub handshake_timeout: Duration,
}

/// Notes in `seen` how `conn`'s handshake went, once it completed: resumed (the ServerHello the
/// client received) and, if 0-RTT was tried, whether the server accepted it.
pub fn note_handshake(conn: &quinn::Connection, seen: &Cell<TlsSeen>, early_tried: bool, early_accepted: bool) {
    let resumed = crate::certs::quic::handshake_data(conn).is_some_and(|d| d.facts.resumed());
    seen.set(TlsSeen { early_tried, done: true, resumed, early_accepted });
}

/// What quinn tells of one QUIC connection (in its record, flattened; read after each response,
/// so the record has them as of the connection's last response).
#[derive(Serialize, schemars::JsonSchema, Debug, Clone, Copy, Default, PartialEq)]
pub struct QuicStats {
    /// Always false: TFO is TCP's (the key TCP connections have, for the same readers).
    pub tfo: bool,
    /// quinn's smoothed round-trip estimate, ms.
    pub rtt_ms: f64,
    /// Packets quinn declared lost.
    pub lost_packets: u64,
    /// UDP datagrams sent and received (coalesced QUIC packets count once).
    pub datagrams_out: u64,
    pub datagrams_in: u64,
    /// UDP payload bytes sent and received.
    pub udp_bytes_out: u64,
    pub udp_bytes_in: u64,
}

impl QuicStats {
    pub fn of(conn: &quinn::Connection) -> QuicStats {
        let s = conn.stats();
        QuicStats {
            tfo: false,
            rtt_ms: s.path.rtt.as_secs_f64() * 1e3,
            lost_packets: s.path.lost_packets,
            datagrams_out: s.udp_tx.datagrams,
            datagrams_in: s.udp_rx.datagrams,
            udp_bytes_out: s.udp_tx.bytes,
            udp_bytes_in: s.udp_rx.bytes,
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    /// The lab's largest bandwidth-delay product QUIC must not be window-limited at: 250 Mbit/s
    /// (above every shaped rate of examples/*.toml, at most 20 Mbit/s) at 200 ms (the
    /// handshakes study's largest RTT) = 6.25 MB. A window below it caps a transfer at
    /// window / RTT, which h2 over kernel TCP (autotuned buffers) is not.
    pub const LAB_BDP: u64 = 250_000_000 / 8 * 200 / 1000;

    /// A window quinn's transport settings carry, read from their Debug form (the fields are
    /// private).
    pub fn window(t: &quinn::TransportConfig, name: &str) -> u64 {
        let d = format!("{t:?}");
        let at = d.find(&format!("{name}: ")).unwrap_or_else(|| panic!("no {name} in {d}"));
        d[at + name.len() + 2..].chars().take_while(char::is_ascii_digit).collect::<String>().parse().unwrap()
    }

    #[test]
    fn the_loaders_receive_windows_cover_the_labs_largest_bdp() {
        for (cc, icw) in [(None, None), (Some("cubic"), Some(10)), (Some("bbr"), None), (Some("newreno"), Some(32))] {
            let t = super::transport(cc, icw).unwrap();
            for name in ["stream_receive_window", "receive_window"] {
                let w = window(&t, name);
                assert!(w >= LAB_BDP, "{name} {w} below the lab's largest BDP {LAB_BDP} ({cc:?})");
            }
        }
    }
}
