//! TLS over a byte-stream transport (TCP), with rustls: the handshake, and how it went as the
//! client saw it (`TlsSeen`: full or resumed, early data accepted or rejected).
//!
//! TLS 1.3 early data (plan tls_mode "0rtt", a ticket at hand): `connect` returns before the
//! handshake, the first request is written as early data (with TFO, in the SYN with the
//! ClientHello when it fits) and the handshake completes on the flush; a rejected early data
//! is sent again by tokio-rustls after the handshake (1-RTT). The stream (`Watched`) notes the
//! handshake's outcome once it has ended.
use anyhow::{anyhow, Result};
use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// How a TLS connection's handshake went, as the client saw it.
#[derive(Clone, Copy, Default, Debug)]
pub struct TlsSeen {
    /// The first request was written as early data.
    pub early_tried: bool,
    /// The handshake ended: then `resumed`, `early_accepted`.
    pub done: bool,
    pub resumed: bool,
    pub early_accepted: bool,
}

impl TlsSeen {
    /// "full" or "resumed" once the handshake ended (None: no TLS, or not ended).
    pub fn handshake(&self) -> Option<String> {
        self.done.then(|| if self.resumed { "resumed" } else { "full" }.to_string())
    }
    /// "accepted" or "rejected" once the handshake ended, if early data was tried.
    pub fn early_data(&self) -> Option<String> {
        (self.done && self.early_tried).then(|| if self.early_accepted { "accepted" } else { "rejected" }.to_string())
    }
}

/// A client TLS stream noting in `seen` how its handshake went, once it has ended (with early
/// data the handshake ends during the first request's flush, after the stream was handed on).
pub struct Watched<S> {
    inner: tokio_rustls::client::TlsStream<S>,
    seen: Rc<Cell<TlsSeen>>,
}

impl<S: AsyncRead + AsyncWrite + Unpin> Watched<S> {
    fn note(&self) {
        let mut s = self.seen.get();
        let c = self.inner.get_ref().1;
        if !s.done && !c.is_handshaking() {
            s.done = true;
            s.resumed = c.handshake_kind() == Some(rustls::HandshakeKind::Resumed);
            s.early_accepted = c.is_early_data_accepted();
            self.seen.set(s);
        }
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for Watched<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_read(cx, buf);
        self.note();
        r
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write(cx, buf);
        self.note();
        r
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        let r = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        self.note();
        r
    }
    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_flush(cx);
        self.note();
        r
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        let r = Pin::new(&mut self.inner).poll_shutdown(cx);
        self.note();
        r
    }
}

/// A TLS connection as `connect` returns it.
pub struct Connected<S> {
    pub stream: Watched<S>,
    /// The first request goes as early data (0-RTT): the handshake is not over yet.
    pub early: bool,
    /// The server picked h2 (ALPN; with early data: the protocol offered first, the ticket's).
    pub h2: bool,
}

/// TLS over `stream` to `addr`, `host` its server name: returns once the handshake is done, or
/// at once when the first request may go as early data.
pub async fn connect<S: AsyncRead + AsyncWrite + Unpin>(
    connector: &tokio_rustls::TlsConnector,
    stream: S,
    addr: SocketAddr,
    host: &str,
    offer_h2: bool,
    seen: Rc<Cell<TlsSeen>>,
) -> Result<Connected<S>> {
    let name = match host.parse::<IpAddr>() {
        Ok(ip) => rustls::pki_types::ServerName::IpAddress(ip.into()),
        Err(_) => rustls::pki_types::ServerName::try_from(host.to_string())
            .map_err(|e| anyhow!("bad TLS server name {host:?}: {e}"))?,
    };
    let conn =
        connector.connect(name, stream).await.map_err(|e| anyhow!("TLS handshake with {addr} ({host}) failed: {e}"))?;
    // returned mid-handshake: early data accepted for writing (tokio-rustls' 0-RTT state);
    // the server's choice of protocol is the ticket's, the one offered first
    let early = conn.get_ref().1.is_handshaking();
    let h2 = if early { offer_h2 } else { conn.get_ref().1.alpn_protocol() == Some(b"h2") };
    seen.set(TlsSeen { early_tried: early, ..Default::default() });
    let w = Watched { inner: conn, seen };
    w.note();
    Ok(Connected { stream: w, early, h2 })
}
