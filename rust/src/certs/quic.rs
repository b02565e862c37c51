//! TLS for QUIC (issue 26, step 3): the replay server's quinn configuration (the same
//! certificate, key and session store as TLS over TCP), the client's, and how each server
//! handshake went (full, resumed, 0-RTT accepted, early bytes), read per connection.
//!
//! quinn says neither whether a server handshake resumed nor whether it accepted 0-RTT (its
//! `accepted_0rtt` is the client's). quinn-proto's `crypto` traits are public, so the rustls
//! session quinn-proto makes is wrapped (`FactsSession`), not forked:
//! * **0-RTT accepted**: on a server, rustls has 0-RTT keys only once it accepted the client's
//!   early data (`quic::ServerConnection::zero_rtt_keys`: its `early_secret` is cleared when
//!   early data is refused), and quinn-proto asks for them once, after the ClientHello
//!   (`Connection::init_0rtt`). `early_crypto()` returning keys is the fact.
//! * **Early bytes accepted**: the 0-RTT `PacketKey` is wrapped; every 0-RTT packet it decrypts
//!   adds its header, payload and tag (each packet number once: a duplicate is decrypted before
//!   quinn-proto discards it).
//! * **Resumed**: rustls consults the certificate resolver for every ClientHello, resumed or not
//!   (rustls 0.23.46 `server/hs.rs`: the certificate is chosen before the PSK is looked at), so
//!   the plan's resolver wrapper cannot tell. The wrapper reads the server's own ServerHello
//!   instead: quinn-proto's `write_handshake` hands over whole TLS handshake messages (rustls'
//!   `quic` queue holds one message per entry), in plaintext (QUIC encrypts the packet, not the
//!   message), and a TLS 1.3 ServerHello carries `pre_shared_key` exactly when the server
//!   accepted a PSK (RFC 8446 §4.2.11). A HelloRetryRequest (a ServerHello with the special
//!   random) is noted too.
//!
//! The facts are an `Arc<HandshakeFacts>` reached through quinn's `Connection::handshake_data()`
//! (`QuicHandshakeData`, which also carries what quinn-proto's own `HandshakeData` says: ALPN and
//! SNI). They are settled once the server's first flight is written, in the same processing of
//! the client's Initial that makes the handshake data available; the early bytes grow while
//! 0-RTT packets arrive.
use anyhow::{Context, Result};
use bytes::BytesMut;
use quinn_proto::crypto::{self, rustls::HandshakeData, rustls::QuicServerConfig};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectionId, Side, TransportError};
use std::any::Any;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

/// The ALPN of HTTP/3 (RFC 9114 §3.1).
pub const ALPN_H3: &[u8] = b"h3";

/// How one server handshake went. Read through `QuicHandshakeData::facts`.
#[derive(Debug, Default)]
pub struct HandshakeFacts {
    server_hello: AtomicBool,
    resumed: AtomicBool,
    hello_retry: AtomicBool,
    early_data: AtomicBool,
    early_bytes: AtomicU64,
}

impl HandshakeFacts {
    /// The ServerHello was written: `resumed` and `early_data` are final.
    pub fn settled(&self) -> bool {
        self.server_hello.load(Relaxed)
    }
    /// The server accepted the client's ticket (PSK): no certificate was sent.
    pub fn resumed(&self) -> bool {
        self.resumed.load(Relaxed)
    }
    /// The server asked for another key share first (HelloRetryRequest: one more round trip).
    pub fn hello_retry(&self) -> bool {
        self.hello_retry.load(Relaxed)
    }
    /// The server accepted early data: the ClientHello offered it (rustls' client does so on
    /// every resumption when its `enable_early_data` is set) and the ticket allowed it. The
    /// client need not have sent any: see `zero_rtt`.
    pub fn early_data(&self) -> bool {
        self.early_data.load(Relaxed)
    }
    /// 0-RTT packets decrypted so far (each packet number once): header + payload + AEAD tag,
    /// bytes.
    pub fn early_bytes(&self) -> u64 {
        self.early_bytes.load(Relaxed)
    }
    /// 0-RTT was used: early data accepted and 0-RTT packets received (what a count of
    /// "0-RTT connections" should count).
    pub fn zero_rtt(&self) -> bool {
        self.early_data() && self.early_bytes() > 0
    }
}

/// What `quinn::Connection::handshake_data()` returns on a server built by
/// `quic_server_config` (in place of quinn-proto's `HandshakeData`).
#[derive(Debug, Clone)]
pub struct QuicHandshakeData {
    /// The negotiated ALPN protocol (`h3`).
    pub protocol: Option<Vec<u8>>,
    /// The SNI the client sent.
    pub server_name: Option<String>,
    pub facts: Arc<HandshakeFacts>,
}

/// The handshake data of a server connection built by `quic_server_config`; None before the
/// ClientHello was read, or for a connection of another configuration.
pub fn handshake_data(conn: &quinn::Connection) -> Option<QuicHandshakeData> {
    conn.handshake_data()?.downcast::<QuicHandshakeData>().ok().map(|d| *d)
}

/// The replay server's QUIC configuration: TLS 1.3 only, ALPN `h3`, the certificate and key of
/// TLS over TCP (`server_config`), tickets in `sessions` (stateful, single use; the store TLS
/// over TCP uses, so `Sessions::clear`, SIGHUP's ticket rotation, covers QUIC too), 2 tickets
/// per connection. 0-RTT: QUIC allows only 0 or 2^32-1 as TLS' `max_early_data_size` (RFC 9001
/// §4.6.1), so `max_early_data` > 0 means 2^32-1 (the real limit is the flow control the
/// client remembers with its ticket: the transport configuration, step 4) and 0 refuses early
/// data (tickets still resume). Transport settings are quinn's defaults: set them on the result.
pub fn quic_server_config(
    cert: &Path,
    key: &Path,
    sessions: Arc<dyn rustls::server::StoresServerSessions>,
    max_early_data: u32,
) -> Result<quinn::ServerConfig> {
    let certs = super::load_certs(cert)?;
    let key = super::load_key(key)?;
    let mut cfg = rustls::ServerConfig::builder_with_provider(super::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("certificate and key do not match")?;
    cfg.alpn_protocols = vec![ALPN_H3.to_vec()];
    cfg.session_storage = sessions;
    cfg.send_tls13_tickets = 2;
    cfg.max_early_data_size = if max_early_data > 0 { u32::MAX } else { 0 };
    let inner = QuicServerConfig::try_from(Arc::new(cfg)).context("rustls config unfit for QUIC")?;
    Ok(quinn::ServerConfig::with_crypto(Arc::new(FactsServerConfig { inner: Arc::new(inner) })))
}

/// The TLS side of a QUIC client: trusting exactly the CA(s) in `ca`, TLS 1.3 only, ALPN `h3`,
/// tickets kept in `tickets` (QUIC's own store, apart from TCP's, as Chromium keeps them),
/// early data enabled. Made once per client: rustls resumes a ticket only under the verifier
/// it was issued under (`compatible_config` compares the verifier's `Arc`), so configurations
/// meant to share tickets must be clones of one of these (`quic_client_config` takes it by
/// reference); a second `quic_client_tls` on the same store takes the tickets and resumes none.
pub fn quic_client_tls(
    ca: &Path,
    tickets: Arc<dyn rustls::client::ClientSessionStore>,
) -> Result<rustls::ClientConfig> {
    let mut cfg = rustls::ClientConfig::builder_with_provider(super::provider())
        .with_protocol_versions(&[&rustls::version::TLS13])?
        .with_root_certificates(super::root_store(ca)?)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![ALPN_H3.to_vec()];
    cfg.resumption = rustls::client::Resumption::store(tickets);
    cfg.enable_early_data = true;
    Ok(cfg)
}

/// A quinn client configuration from `tls` (`quic_client_tls`). `early_data`: resumed
/// ClientHellos offer early data, and `Connecting::into_0rtt` succeeds when the ticket allows
/// it. Off, a ticket resumes without 0-RTT and the server's facts say so; on, a client not
/// calling `into_0rtt` still offers it (the server's `early_data` is then true, with no early
/// bytes). Transport settings are quinn's defaults: set them on the result.
pub fn quic_client_config(tls: &rustls::ClientConfig, early_data: bool) -> Result<quinn::ClientConfig> {
    let mut cfg = tls.clone();
    cfg.enable_early_data = early_data;
    let quic =
        quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(cfg)).context("rustls config unfit for QUIC")?;
    Ok(quinn::ClientConfig::new(Arc::new(quic)))
}

/// As `quic_client_config`, its connections also saying how their handshake went, as the
/// client saw it: `handshake_data(&conn)` gives `QuicHandshakeData` whose facts say `resumed`
/// and `hello_retry`, read from the ServerHello the client received (`FactsClientSession`),
/// settled once it arrived (by the time the handshake completes). The client's own 0-RTT
/// outcome is quinn's (`ZeroRttAccepted`); `early_data` and `early_bytes` stay false and 0.
pub fn quic_client_config_noting(tls: &rustls::ClientConfig, early_data: bool) -> Result<quinn::ClientConfig> {
    let mut cfg = tls.clone();
    cfg.enable_early_data = early_data;
    let quic =
        quinn::crypto::rustls::QuicClientConfig::try_from(Arc::new(cfg)).context("rustls config unfit for QUIC")?;
    Ok(quinn::ClientConfig::new(Arc::new(FactsClientConfig { inner: Arc::new(quic) })))
}

/// quinn-proto's rustls client configuration, its sessions wrapped in `FactsClientSession`.
struct FactsClientConfig {
    inner: Arc<quinn::crypto::rustls::QuicClientConfig>,
}

impl crypto::ClientConfig for FactsClientConfig {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, quinn_proto::ConnectError> {
        let inner = self.inner.clone().start_session(version, server_name, params)?;
        Ok(Box::new(FactsClientSession { inner, facts: Default::default(), received: Vec::new() }))
    }
}

/// At most this much of the server's first handshake bytes is kept looking for its ServerHello.
const CLIENT_HELLO_SCAN: usize = 1 << 16;

/// A client's rustls session as quinn-proto makes it, noting from the server's ServerHello
/// whether the handshake resumed. quinn-proto hands the CRYPTO stream to `read_handshake` in
/// order but in pieces (a message may span packets): the bytes are kept until the ServerHello
/// (the first message, or the one after a HelloRetryRequest) is whole.
struct FactsClientSession {
    inner: Box<dyn crypto::Session>,
    facts: Arc<HandshakeFacts>,
    received: Vec<u8>,
}

impl crypto::Session for FactsClientSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> crypto::Keys {
        self.inner.initial_keys(dst_cid, side)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let data = self.inner.handshake_data()?;
        Some(match data.downcast::<HandshakeData>() {
            Ok(d) => Box::new(QuicHandshakeData {
                protocol: d.protocol,
                server_name: d.server_name,
                facts: self.facts.clone(),
            }),
            Err(other) => other,
        })
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn crypto::PacketKey>)> {
        self.inner.early_crypto()
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        if !self.facts.settled() && self.received.len() < CLIENT_HELLO_SCAN {
            self.received.extend_from_slice(buf);
            // a HelloRetryRequest is noted again on every pass: harmless (a flag)
            note_server_flight(&self.facts, &self.received);
            if self.facts.settled() {
                self.received = Vec::new();
            }
        }
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<crypto::Keys> {
        self.inner.write_handshake(buf)
    }
    fn next_1rtt_keys(&mut self) -> Option<crypto::KeyPair<Box<dyn crypto::PacketKey>>> {
        self.inner.next_1rtt_keys()
    }
    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), crypto::ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// quinn-proto's rustls server configuration, its sessions wrapped in `FactsSession`.
struct FactsServerConfig {
    inner: Arc<QuicServerConfig>,
}

impl crypto::ServerConfig for FactsServerConfig {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> Result<crypto::Keys, crypto::UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }
    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }
    fn start_session(self: Arc<Self>, version: u32, params: &TransportParameters) -> Box<dyn crypto::Session> {
        Box::new(FactsSession { inner: self.inner.clone().start_session(version, params), facts: Default::default() })
    }
}

/// A server's rustls session as quinn-proto makes it, noting how the handshake went.
struct FactsSession {
    inner: Box<dyn crypto::Session>,
    facts: Arc<HandshakeFacts>,
}

impl crypto::Session for FactsSession {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> crypto::Keys {
        self.inner.initial_keys(dst_cid, side)
    }
    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        let data = self.inner.handshake_data()?;
        Some(match data.downcast::<HandshakeData>() {
            Ok(d) => Box::new(QuicHandshakeData {
                protocol: d.protocol,
                server_name: d.server_name,
                facts: self.facts.clone(),
            }),
            Err(other) => other,
        })
    }
    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }
    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn crypto::PacketKey>)> {
        let (header, packet) = self.inner.early_crypto()?;
        self.facts.early_data.store(true, Relaxed);
        Some((header, Box::new(CountingKey { inner: packet, facts: self.facts.clone(), seen: Default::default() })))
    }
    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }
    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }
    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, TransportError> {
        self.inner.read_handshake(buf)
    }
    fn transport_parameters(&self) -> Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }
    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<crypto::Keys> {
        let start = buf.len();
        let keys = self.inner.write_handshake(buf);
        if !self.facts.settled() {
            note_server_flight(&self.facts, &buf[start..]);
        }
        keys
    }
    fn next_1rtt_keys(&mut self) -> Option<crypto::KeyPair<Box<dyn crypto::PacketKey>>> {
        self.inner.next_1rtt_keys()
    }
    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }
    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), crypto::ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// The 0-RTT packet key, counting the bytes of the packets it decrypts, each packet number
/// once: quinn-proto decrypts a packet before it discards it as a duplicate
/// (`Connection::handle_packet`), so a 0-RTT packet replayed to the live connection (or
/// duplicated on the way) would otherwise count as accepted twice.
struct CountingKey {
    inner: Box<dyn crypto::PacketKey>,
    facts: Arc<HandshakeFacts>,
    seen: std::sync::Mutex<std::collections::HashSet<u64>>,
}

/// At most this many 0-RTT packet numbers remembered per connection (beyond, packets count
/// without the check: a client sends 0-RTT only until its handshake completes).
const SEEN_0RTT_MAX: usize = 1 << 16;

impl crypto::PacketKey for CountingKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        self.inner.encrypt(packet, buf, header_len)
    }
    fn decrypt(&self, packet: u64, header: &[u8], payload: &mut BytesMut) -> Result<(), crypto::CryptoError> {
        let bytes = (header.len() + payload.len()) as u64; // the payload still holds its tag
        self.inner.decrypt(packet, header, payload)?;
        let mut seen = self.seen.lock().unwrap();
        if seen.len() >= SEEN_0RTT_MAX || seen.insert(packet) {
            self.facts.early_bytes.fetch_add(bytes, Relaxed);
        }
        Ok(())
    }
    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }
    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }
    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}

/// TLS handshake message type of a ServerHello (RFC 8446 §4).
const SERVER_HELLO: u8 = 2;
/// Extension type `pre_shared_key` (RFC 8446 §4.2).
const PRE_SHARED_KEY: u16 = 41;
/// The `random` of a HelloRetryRequest: SHA-256("HelloRetryRequest") (RFC 8446 §4.1.3).
const HRR_RANDOM: [u8; 32] = [
    0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11, 0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91, 0xc2, 0xa2, 0x11,
    0x16, 0x7a, 0xbb, 0x8c, 0x5e, 0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c,
];

/// Reads handshake messages the server wrote (whole messages, one after another) for its
/// ServerHello: PSK accepted (resumed), or a HelloRetryRequest.
fn note_server_flight(facts: &HandshakeFacts, mut msgs: &[u8]) {
    while msgs.len() >= 4 {
        let len = u32::from_be_bytes([0, msgs[1], msgs[2], msgs[3]]) as usize;
        let Some(body) = msgs.get(4..4 + len) else { return };
        if msgs[0] == SERVER_HELLO {
            match read_server_hello(body) {
                Some(Hello { retry: true, .. }) => facts.hello_retry.store(true, Relaxed),
                Some(Hello { retry: false, psk }) => {
                    facts.resumed.store(psk, Relaxed);
                    facts.server_hello.store(true, Relaxed);
                    return;
                }
                None => {}
            }
        }
        msgs = &msgs[4 + len..];
    }
}

struct Hello {
    retry: bool,
    psk: bool,
}

/// A ServerHello's body: legacy_version(2) random(32) session_id<1> cipher_suite(2)
/// compression(1) extensions<2> (RFC 8446 §4.1.3).
fn read_server_hello(b: &[u8]) -> Option<Hello> {
    let retry = b.get(2..34)? == HRR_RANDOM;
    let at = 35 + *b.get(34)? as usize + 3;
    let n = u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]) as usize;
    let mut exts = b.get(at + 2..at + 2 + n)?;
    let mut psk = false;
    while exts.len() >= 4 {
        let ty = u16::from_be_bytes([exts[0], exts[1]]);
        let len = u16::from_be_bytes([exts[2], exts[3]]) as usize;
        psk |= ty == PRE_SHARED_KEY;
        exts = exts.get(4 + len..)?;
    }
    Some(Hello { retry, psk })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::SocketAddr;
    use std::time::Duration;
    use tokio::sync::mpsc;

    struct Ca {
        dir: std::path::PathBuf,
    }
    impl Ca {
        fn new(tag: &str) -> Ca {
            let g = super::super::generate(&["localhost".into()]).unwrap();
            let dir = std::env::temp_dir().join(format!("pltlab-quic-{tag}-{}", std::process::id()));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("ca.pem"), &g.ca_pem).unwrap();
            std::fs::write(dir.join("hosts.pem"), &g.leaf_pem).unwrap();
            std::fs::write(dir.join("hosts.key"), &g.leaf_key_pem).unwrap();
            Ca { dir }
        }
    }
    impl Drop for Ca {
        fn drop(&mut self) {
            std::fs::remove_dir_all(&self.dir).ok();
        }
    }

    /// A server answering each bidirectional stream with what it read, sending each
    /// connection's handshake data on `tx` as it is accepted.
    fn serve(cfg: quinn::ServerConfig) -> (quinn::Endpoint, mpsc::UnboundedReceiver<QuicHandshakeData>) {
        let ep = quinn::Endpoint::server(cfg, "127.0.0.1:0".parse().unwrap()).unwrap();
        let (tx, rx) = mpsc::unbounded_channel();
        let accept = ep.clone();
        tokio::spawn(async move {
            while let Some(incoming) = accept.accept().await {
                let tx = tx.clone();
                tokio::spawn(async move {
                    let Ok(connecting) = incoming.accept() else { return };
                    // a server's into_0rtt always succeeds (0.5-RTT)
                    let Ok((conn, _)) = connecting.into_0rtt() else { panic!("server into_0rtt failed") };
                    tx.send(handshake_data(&conn).expect("our handshake data")).unwrap();
                    while let Ok((mut send, mut recv)) = conn.accept_bi().await {
                        let Ok(data) = recv.read_to_end(1 << 20).await else { continue };
                        let _ = send.write_all(&data).await;
                        let _ = send.finish();
                    }
                });
            }
        });
        (ep, rx)
    }

    #[derive(Debug, PartialEq)]
    enum Early {
        /// `into_0rtt` failed: no ticket allowing early data.
        Unavailable,
        Accepted,
        Rejected,
    }

    /// One connection: `msg` sent on a stream and echoed back; with `try_0rtt` it goes as 0-RTT
    /// data if the client can (sent again over 1-RTT if the server refused it).
    async fn exchange(
        ep: &quinn::Endpoint,
        cfg: &quinn::ClientConfig,
        addr: SocketAddr,
        try_0rtt: bool,
        msg: &[u8],
    ) -> Early {
        let connecting = ep.connect_with(cfg.clone(), addr, "localhost").unwrap();
        let (conn, early) = if try_0rtt {
            match connecting.into_0rtt() {
                Ok((conn, accepted)) => {
                    let (mut send, mut recv) = conn.open_bi().await.unwrap();
                    send.write_all(msg).await.unwrap();
                    send.finish().unwrap();
                    if accepted.await {
                        assert_eq!(recv.read_to_end(1 << 20).await.unwrap(), msg);
                        (conn, Early::Accepted)
                    } else {
                        (conn, Early::Rejected)
                    }
                }
                Err(connecting) => (connecting.await.unwrap(), Early::Unavailable),
            }
        } else {
            (connecting.await.unwrap(), Early::Unavailable)
        };
        if early != Early::Accepted {
            let (mut send, mut recv) = conn.open_bi().await.unwrap();
            send.write_all(msg).await.unwrap();
            send.finish().unwrap();
            assert_eq!(recv.read_to_end(1 << 20).await.unwrap(), msg);
        }
        // the tickets follow the handshake: let them arrive before closing
        tokio::time::sleep(Duration::from_millis(100)).await;
        conn.close(0u32.into(), b"done");
        early
    }

    /// A client endpoint and two configurations sharing one ticket store: early data offered,
    /// and not.
    fn client(ca: &Ca) -> (quinn::Endpoint, quinn::ClientConfig, quinn::ClientConfig) {
        let tickets = Arc::new(rustls::client::ClientSessionMemoryCache::new(32));
        let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let tls = quic_client_tls(&ca.dir.join("ca.pem"), tickets).unwrap();
        let (early, no_early) = (quic_client_config(&tls, true).unwrap(), quic_client_config(&tls, false).unwrap());
        (ep, early, no_early)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
    }

    /// Full, resumed, 0-RTT accepted with its bytes counted, then 0-RTT refused after the
    /// sessions were cleared (a ticket rotation): each as the client and the server saw it.
    #[test]
    fn quic_handshakes_full_resumed_0rtt_and_after_rotation() {
        let ca = Ca::new("rot");
        let sessions = Arc::new(super::super::Sessions::default());
        rt().block_on(async {
            let cfg = quic_server_config(&ca.dir.join("hosts.pem"), &ca.dir.join("hosts.key"), sessions.clone(), 16384)
                .unwrap();
            let (server, mut hs) = serve(cfg);
            let addr = server.local_addr().unwrap();
            let (ep, early, no_early) = client(&ca);
            let msg = vec![b'q'; 5000];

            // (1) no ticket yet: full handshake, into_0rtt impossible
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Unavailable);
            let d = hs.recv().await.unwrap();
            assert_eq!(d.protocol.as_deref(), Some(ALPN_H3));
            assert_eq!(d.server_name.as_deref(), Some("localhost"));
            let f = &d.facts;
            assert!(f.settled() && !f.resumed() && !f.early_data() && !f.hello_retry(), "{f:?}");
            assert_eq!(f.early_bytes(), 0);

            // (2) with the ticket, early data not offered: resumed, nothing early
            assert_eq!(exchange(&ep, &no_early, addr, true, &msg).await, Early::Unavailable);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && f.resumed() && !f.early_data() && !f.zero_rtt(), "{f:?}");
            assert_eq!(f.early_bytes(), 0);

            // (2b) early data offered (rustls does on every resumption) but into_0rtt not
            // called: the server accepts early data, none arrives
            assert_eq!(exchange(&ep, &early, addr, false, &msg).await, Early::Unavailable);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && f.resumed() && f.early_data() && !f.zero_rtt(), "{f:?}");
            assert_eq!(f.early_bytes(), 0);

            // (3) 0-RTT: accepted, the request's bytes counted as early bytes
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Accepted);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && f.resumed() && f.early_data() && f.zero_rtt(), "{f:?}");
            let bytes = f.early_bytes();
            assert!(bytes >= msg.len() as u64 && bytes < 3 * msg.len() as u64, "early bytes {bytes}");

            // (4) the server forgets its sessions (SIGHUP's rotation): the client still has
            // tickets and tries 0-RTT, the server refuses it and makes a full handshake
            sessions.clear();
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Rejected);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && !f.resumed() && !f.early_data() && !f.zero_rtt(), "{f:?}");
            assert_eq!(f.early_bytes(), 0);

            // and the tickets of that full handshake resume again
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Accepted);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.resumed() && f.zero_rtt() && f.early_bytes() >= msg.len() as u64, "{f:?}");
            server.close(0u32.into(), b"end");
        });
    }

    /// Early data disabled (`max_early_data` 0): tickets resume, 0-RTT is never possible.
    #[test]
    fn quic_without_early_data_resumes_without_0rtt() {
        let ca = Ca::new("no0rtt");
        let sessions = Arc::new(super::super::Sessions::default());
        rt().block_on(async {
            let cfg = quic_server_config(&ca.dir.join("hosts.pem"), &ca.dir.join("hosts.key"), sessions, 0).unwrap();
            let (server, mut hs) = serve(cfg);
            let addr = server.local_addr().unwrap();
            let (ep, early, _) = client(&ca);
            let msg = vec![b'r'; 3000];
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Unavailable);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && !f.resumed() && !f.early_data(), "{f:?}");
            // the ticket says no early data: into_0rtt fails, the handshake resumes
            assert_eq!(exchange(&ep, &early, addr, true, &msg).await, Early::Unavailable);
            let f = hs.recv().await.unwrap().facts;
            assert!(f.settled() && f.resumed() && !f.early_data(), "{f:?}");
            assert_eq!(f.early_bytes(), 0);
            server.close(0u32.into(), b"end");
        });
    }

    #[test]
    fn server_hello_reading() {
        // legacy_version, random, empty session id, suite, compression, extensions
        let hello = |random: [u8; 32], exts: &[(u16, &[u8])]| {
            let mut e = Vec::new();
            for (ty, data) in exts {
                e.extend_from_slice(&ty.to_be_bytes());
                e.extend_from_slice(&(data.len() as u16).to_be_bytes());
                e.extend_from_slice(data);
            }
            let mut b = vec![3, 3];
            b.extend_from_slice(&random);
            b.extend_from_slice(&[0, 0x13, 0x01, 0]);
            b.extend_from_slice(&(e.len() as u16).to_be_bytes());
            b.extend_from_slice(&e);
            let mut m = vec![SERVER_HELLO];
            m.extend_from_slice(&(b.len() as u32).to_be_bytes()[1..]);
            m.extend_from_slice(&b);
            m
        };
        let versions: (u16, &[u8]) = (43, &[3, 4]);
        let f = HandshakeFacts::default();
        note_server_flight(&f, &hello([7; 32], &[versions, (PRE_SHARED_KEY, &[0, 0])]));
        assert!(f.settled() && f.resumed() && !f.hello_retry());
        let f = HandshakeFacts::default();
        let mut flight = hello(HRR_RANDOM, &[versions, (51, &[0, 29])]);
        flight.extend(hello([7; 32], &[versions, (51, &[0; 8])]));
        note_server_flight(&f, &flight);
        assert!(f.settled() && !f.resumed() && f.hello_retry());
        // truncated: nothing settled
        let f = HandshakeFacts::default();
        let m = hello([7; 32], &[versions, (PRE_SHARED_KEY, &[0, 0])]);
        note_server_flight(&f, &m[..m.len() - 1]);
        assert!(!f.settled() && !f.resumed());
    }
}
