//! An HTTP/3 client for tests (quinn + h3, trusting the test CA): connections that share one
//! ticket store (so a later one resumes, with 0-RTT if asked), and requests on them.
use bytes::{Buf, Bytes};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

/// The client side: one endpoint, one TLS configuration (its tickets shared by every
/// connection: rustls resumes only under the configuration that got the ticket).
pub struct H3Client {
    pub ep: quinn::Endpoint,
    early: quinn::ClientConfig,
    no_early: quinn::ClientConfig,
}

/// How a connection's handshake went, as the client saw it.
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Early {
    /// No 0-RTT tried (not asked, or no ticket allowing it).
    None,
    /// The request went as 0-RTT data and the server accepted it.
    Accepted,
    /// The server refused the 0-RTT data.
    Rejected,
}

/// One h3 connection (its driver on a task of its own).
pub struct H3Conn {
    pub quic: quinn::Connection,
    pub send: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    zero_rtt: Option<quinn::ZeroRttAccepted>,
}

impl H3Client {
    pub fn new(ca: &Path) -> H3Client {
        let tickets = Arc::new(rustls::client::ClientSessionMemoryCache::new(64));
        let tls = crate::certs::quic::quic_client_tls(ca, tickets).unwrap();
        let mut early = crate::certs::quic::quic_client_config(&tls, true).unwrap();
        let mut no_early = crate::certs::quic::quic_client_config(&tls, false).unwrap();
        for c in [&mut early, &mut no_early] {
            let mut t = quinn::TransportConfig::default();
            t.mtu_discovery_config(None);
            c.transport_config(Arc::new(t));
        }
        let ep = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        H3Client { ep, early, no_early }
    }

    /// `new` on a runtime of its own (quinn's endpoint needs one to be made).
    pub fn new_outside(ca: &Path, rt: &tokio::runtime::Runtime) -> H3Client {
        let _guard = rt.enter();
        H3Client::new(ca)
    }

    /// A QUIC connection to `addr` for host a.test, its handshake awaited (no h3): the error
    /// if the server refused or failed it.
    pub async fn handshake(&self, addr: SocketAddr) -> Result<quinn::Connection, quinn::ConnectionError> {
        self.ep.connect_with(self.no_early.clone(), addr, "a.test").unwrap().await
    }

    /// A connection to `addr` for host a.test: with `early_data`, resumed ClientHellos offer
    /// early data and the connection is usable at once (0-RTT) when the ticket allows it.
    pub async fn connect(&self, addr: SocketAddr, early_data: bool) -> H3Conn {
        let cfg = if early_data { &self.early } else { &self.no_early };
        let connecting = self.ep.connect_with(cfg.clone(), addr, "a.test").unwrap();
        let (quic, zero_rtt) = match connecting.into_0rtt() {
            Ok((c, accepted)) if early_data => (c, Some(accepted)),
            Ok((c, _)) => (c, None),
            Err(connecting) => (connecting.await.unwrap(), None),
        };
        let (mut driver, send) = h3::client::new(h3_quinn::Connection::new(quic.clone())).await.unwrap();
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        H3Conn { quic, send, zero_rtt }
    }
}

impl H3Conn {
    /// Whether this connection's 0-RTT data was accepted (once the handshake completed).
    pub async fn early(&mut self) -> Early {
        match self.zero_rtt.take() {
            None => Early::None,
            Some(a) => {
                if a.await {
                    Early::Accepted
                } else {
                    Early::Rejected
                }
            }
        }
    }

    /// (status, headers, body) of one request.
    pub async fn get(&mut self, method: &str, url: &str, body: Option<&[u8]>) -> (u16, http::HeaderMap, Vec<u8>) {
        let req = http::Request::builder().method(method).uri(url).body(()).unwrap();
        let mut s = self.send.send_request(req).await.unwrap();
        if let Some(b) = body {
            s.send_data(Bytes::copy_from_slice(b)).await.unwrap();
        }
        s.finish().await.unwrap();
        let resp = s.recv_response().await.unwrap();
        let mut out = Vec::new();
        while let Some(mut c) = s.recv_data().await.unwrap() {
            while c.has_remaining() {
                let n = c.chunk().len();
                out.extend_from_slice(c.chunk());
                c.advance(n);
            }
        }
        (resp.status().as_u16(), resp.headers().clone(), out)
    }

    /// Closes the connection as an h3 client does (H3_NO_ERROR), after waiting a little for
    /// the tickets that follow the handshake.
    pub async fn close(self) {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        self.quic.close(0x100u32.into(), b"done");
    }
}
