//! The replay server's TLS stream: rustls' ServerConnection over a TCP socket, with TLS 1.3
//! early data (0-RTT) served as it arrives.
//!
//! tokio-rustls' acceptor completes the whole handshake (the client's Finished, one round trip
//! after the server's flight) before the application can read, and never hands it early data:
//! a request sent as 0-RTT would be answered a round trip late, exactly as without 0-RTT. Here
//! `accept` returns as soon as the server's flight is on the socket when early data was
//! accepted; reads yield the early data first, then the ordinary application data (the client's
//! Finished is processed by the reads in between), and writes go out at once as "0.5-RTT" data
//! (`send_half_rtt_data`, certs.rs). Without early data `accept` returns after the handshake,
//! as usual. Counts: early data bytes read (`early_bytes`, shared with the server's stats).
//! Writes are encrypted at once and reach the socket together: a flush only marks them due and
//! wakes the task, whose next poll of this stream (h2 reads first; the HTTP/1.1 loop reads the
//! next request) writes everything due in one go (past COALESCE bytes a write goes out at once;
//! shutdown writes at once). h2's codec flushes after every DATA frame: a batch of responses
//! would otherwise leave as a burst of partial segments, and Linux counts its congestion window
//! in segments. A server (nginx, a CDN) writes such a batch at once; so does this one.
//! h2 connections (`write_when_idle`) keep what is due a little longer: until a flush with
//! nothing added since the last read (h2 reads first and flushes last in every poll of its
//! connection: a poll that had nothing more to send) or COALESCE bytes. With server priorities a response hands the crate one 16 KiB chunk per poll,
//! the next once the last has left its buffer: written at the next poll, every chunk went out
//! alone (a syscall, a loopback delivery and a wake-up of the reader each). The frames' order
//! is set before (as the crate takes them), so this changes where writes split, not the order.
use rustls::ServerConnection;
use std::io::{self, Read, Write};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub struct TlsServerStream<IO> {
    io: IO,
    pub conn: ServerConnection,
    eof: bool,
    early_bytes: Arc<AtomicU64>,
    /// Plaintext handed to rustls since the socket last took everything (see COALESCE).
    pending: usize,
    /// What is due goes out at a flush that adds nothing, not at the next read (h2).
    idle_writes: bool,
    /// Plaintext handed to rustls since the last read.
    fresh: bool,
}

/// How a connection's handshake went, as the server saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handshake {
    pub resumed: bool,
    pub early_data: bool,
}

/// std::io adapters over the async socket for rustls' read_tls/write_tls: Pending is WouldBlock.
struct SyncIo<'a, 'b, IO> {
    io: &'a mut IO,
    cx: &'a mut Context<'b>,
}

impl<IO: AsyncRead + Unpin> Read for SyncIo<'_, '_, IO> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<IO: AsyncWrite + Unpin> Write for SyncIo<'_, '_, IO> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn pending_on_wouldblock<T>(r: io::Result<T>) -> Poll<io::Result<T>> {
    match r {
        Err(e) if e.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        r => Poll::Ready(r),
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> TlsServerStream<IO> {
    /// Reads what the socket has into rustls and processes it; Ok(0) at the socket's end.
    fn poll_read_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<usize>> {
        let n = ready!(pending_on_wouldblock(self.conn.read_tls(&mut SyncIo { io: &mut self.io, cx })))?;
        if n == 0 {
            self.eof = true;
        }
        if let Err(e) = self.conn.process_new_packets() {
            // rustls queued an alert: best effort to send it before giving up
            let _ = self.conn.write_tls(&mut SyncIo { io: &mut self.io, cx });
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
        }
        Poll::Ready(Ok(n))
    }

    /// Writes everything rustls has queued to the socket.
    fn poll_write_tls(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.conn.wants_write() {
            let n = ready!(pending_on_wouldblock(self.conn.write_tls(&mut SyncIo { io: &mut self.io, cx })))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
        }
        self.pending = 0;
        Poll::Ready(Ok(()))
    }

    /// Drives the handshake until it completes, or until the server's flight is out and the
    /// client's early data was accepted (the early data is then readable at once).
    fn poll_handshake(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        loop {
            ready!(self.poll_write_tls(cx))?;
            if !self.conn.is_handshaking() || self.conn.early_data().is_some() {
                return Pin::new(&mut self.io).poll_flush(cx);
            }
            if self.eof {
                return Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "client closed during the handshake",
                )));
            }
            ready!(self.poll_read_tls(cx))?;
        }
    }

    /// Full or resumed handshake, early data accepted or not (known once `accept` returned).
    pub fn handshake(&mut self) -> Handshake {
        Handshake {
            resumed: self.conn.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
            early_data: self.conn.early_data().is_some(),
        }
    }

    /// For a protocol that flushes at the end of every poll (h2): see the module comment.
    pub fn write_when_idle(&mut self) {
        self.idle_writes = true;
    }

    pub fn get_ref(&self) -> (&IO, &ServerConnection) {
        (&self.io, &self.conn)
    }
}

/// Accepts a TLS connection on `io` (see the module comment for when it returns).
pub async fn accept<IO: AsyncRead + AsyncWrite + Unpin>(
    cfg: Arc<rustls::ServerConfig>,
    io: IO,
    early_bytes: Arc<AtomicU64>,
) -> io::Result<TlsServerStream<IO>> {
    let conn = ServerConnection::new(cfg).map_err(io::Error::other)?;
    let mut s = TlsServerStream { io, conn, eof: false, early_bytes, pending: 0, idle_writes: false, fresh: false };
    std::future::poll_fn(|cx| s.poll_handshake(cx)).await?;
    Ok(s)
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for TlsServerStream<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.fresh = false;
        loop {
            // early data precedes everything the client sends after its Finished
            if let Some(mut early) = this.conn.early_data() {
                let n = early.read(buf.initialize_unfilled())?;
                if n > 0 {
                    buf.advance(n);
                    this.early_bytes.fetch_add(n as u64, Relaxed);
                    return Poll::Ready(Ok(()));
                }
            }
            match this.conn.reader().read(buf.initialize_unfilled()) {
                Ok(n) => {
                    buf.advance(n); // 0: close_notify received
                    return Poll::Ready(Ok(()));
                }
                // the client closed without close_notify: an end like any other
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Poll::Ready(Ok(())),
                Err(e) if e.kind() != io::ErrorKind::WouldBlock => return Poll::Ready(Err(e)),
                Err(_) => {}
            }
            // what is due (responses flushed, tickets after the client's Finished) goes out first
            if !this.idle_writes {
                if let Poll::Ready(Err(e)) = this.poll_write_tls(cx) {
                    return Poll::Ready(Err(e));
                }
            }
            if this.eof {
                return Poll::Ready(Ok(()));
            }
            ready!(this.poll_read_tls(cx))?;
        }
    }
}

/// Encrypted bytes kept back before a flush: small writes (h2 frames, a head and its body)
/// leave together as full segments. Linux counts its congestion window in segments: a burst of
/// small ones, one per TLS record, would use it up long before its bytes do.
const COALESCE: usize = 64 * 1024;

impl<IO: AsyncRead + AsyncWrite + Unpin> TlsServerStream<IO> {
    /// Writes what rustls accepts of `bufs` (0: its buffer is full: write some out first).
    fn poll_write_some(&mut self, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        loop {
            let n = self.conn.writer().write_vectored(bufs)?;
            if n > 0 || bufs.iter().all(|b| b.is_empty()) {
                if self.conn.wants_write() && self.pending + n >= COALESCE {
                    if let Poll::Ready(Err(e)) = self.poll_write_tls(cx) {
                        return Poll::Ready(Err(e));
                    }
                }
                return Poll::Ready(Ok(n));
            }
            ready!(self.poll_write_tls(cx))?; // rustls' buffer is full: drain it first
        }
    }
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TlsServerStream<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.poll_write_some(cx, &[io::IoSlice::new(buf)]);
        if let Poll::Ready(Ok(n)) = r {
            this.pending += n;
            this.fresh |= n > 0;
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = this.poll_write_some(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.pending += n;
            this.fresh |= n > 0;
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Marks what was written due: it goes out at the task's next poll of this stream (see the
    /// module comment), which this wake-up makes sure of; with `idle_writes`, at once if nothing
    /// was added since the last read.
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.writer().flush()?;
        if this.idle_writes && !this.fresh {
            // Pending: the socket is full; its writability wakes the task, whose next flush retries
            if let Poll::Ready(Err(e)) = this.poll_write_tls(cx) {
                return Poll::Ready(Err(e));
            }
        } else if this.conn.wants_write() {
            cx.waker().wake_by_ref();
        }
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.conn.send_close_notify();
        ready!(this.poll_write_tls(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
