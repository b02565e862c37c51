//! h3's QUIC traits (`h3::quic`) over quinn for the replay server, as h3-quinn 0.0.10 does, with
//! one addition: the request streams' send priorities (`quinn::SendStream::set_priority`), which
//! h3-quinn keeps private. Only what a server uses is ours: the request (bidirectional) streams
//! the client opens; the unidirectional streams (control, QPACK) are h3-quinn's own.
//!
//! A request task sets its response's priority by stream id (`Priorities::set`) before it sends
//! the response; the stream applies it before its next write. quinn then sends, of the streams
//! with data, those of the highest priority first (round robin among equal ones, the default
//! `send_fairness`), packet by packet: data already written but not yet sent is overtaken, data
//! in flight is not.
use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, StreamId, WriteBuf};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicI32, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send + Sync>>;

/// The priority each open request stream of a connection is to have, by stream id.
#[derive(Default)]
pub struct Priorities(Mutex<HashMap<u64, Arc<AtomicI32>>>);

impl Priorities {
    /// Stream `id` (still open) sends at `priority` (quinn's: higher first) from its next write.
    pub fn set(&self, id: u64, priority: i32) {
        if let Some(c) = self.0.lock().unwrap().get(&id) {
            c.store(priority, Relaxed);
        }
    }

    fn open(&self, id: u64) -> Arc<AtomicI32> {
        let c = Arc::new(AtomicI32::new(0));
        self.0.lock().unwrap().insert(id, c.clone());
        c
    }

    fn close(&self, id: u64) {
        self.0.lock().unwrap().remove(&id);
    }
}

/// A server's QUIC connection for h3: h3-quinn's, the request streams ours.
pub struct Connection {
    inner: h3_quinn::Connection,
    conn: quinn::Connection,
    accepting: Option<Boxed<Result<(quinn::SendStream, quinn::RecvStream), quinn::ConnectionError>>>,
    prios: Arc<Priorities>,
}

impl Connection {
    pub fn new(conn: quinn::Connection, prios: Arc<Priorities>) -> Connection {
        Connection { inner: h3_quinn::Connection::new(conn.clone()), conn, accepting: None, prios }
    }
}

/// As h3-quinn's (private) conversion.
fn connection_error(e: quinn::ConnectionError) -> ConnectionErrorIncoming {
    match e {
        quinn::ConnectionError::ApplicationClosed(c) => {
            ConnectionErrorIncoming::ApplicationClose { error_code: c.error_code.into() }
        }
        quinn::ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        e => ConnectionErrorIncoming::Undefined(Arc::new(e)),
    }
}

fn write_error(e: quinn::WriteError) -> StreamErrorIncoming {
    match e {
        quinn::WriteError::Stopped(c) => StreamErrorIncoming::StreamTerminated { error_code: c.into_inner() },
        quinn::WriteError::ConnectionLost(e) => {
            StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(e) }
        }
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn read_error(e: quinn::ReadError) -> StreamErrorIncoming {
    match e {
        quinn::ReadError::Reset(c) => StreamErrorIncoming::StreamTerminated { error_code: c.into_inner() },
        quinn::ReadError::ConnectionLost(e) => {
            StreamErrorIncoming::ConnectionErrorIncoming { connection_error: connection_error(e) }
        }
        e => StreamErrorIncoming::Unknown(Box::new(e)),
    }
}

fn no_bidi() -> StreamErrorIncoming {
    StreamErrorIncoming::Unknown("the replay server opens no request streams".into())
}

impl<B: Buf> quic::Connection<B> for Connection {
    type RecvStream = h3_quinn::RecvStream;
    type OpenStreams = OpenStreams;

    fn poll_accept_recv(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::RecvStream, ConnectionErrorIncoming>> {
        <h3_quinn::Connection as quic::Connection<B>>::poll_accept_recv(&mut self.inner, cx)
    }

    fn poll_accept_bidi(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, ConnectionErrorIncoming>> {
        let accepting = self.accepting.get_or_insert_with(|| {
            let c = self.conn.clone();
            Box::pin(async move { c.accept_bi().await })
        });
        let r = ready!(accepting.as_mut().poll(cx));
        self.accepting = None;
        let (send, recv) = r.map_err(connection_error)?;
        let id = u64::from(send.id());
        let prio = self.prios.open(id);
        Poll::Ready(Ok(BidiStream {
            send: SendStream { stream: send, writing: None, prio, applied: 0, prios: self.prios.clone() },
            recv: RecvStream { stream: Some(recv), reading: None, id },
        }))
    }

    fn opener(&self) -> Self::OpenStreams {
        OpenStreams(<h3_quinn::Connection as quic::Connection<B>>::opener(&self.inner))
    }
}

impl<B: Buf> quic::OpenStreams<B> for Connection {
    type SendStream = h3_quinn::SendStream<B>;
    type BidiStream = BidiStream<B>;

    fn poll_open_bidi(&mut self, _cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        Poll::Ready(Err(no_bidi()))
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        <h3_quinn::Connection as quic::OpenStreams<B>>::poll_open_send(&mut self.inner, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <h3_quinn::Connection as quic::OpenStreams<B>>::close(&mut self.inner, code, reason)
    }
}

/// h3-quinn's opener (unidirectional streams); no request streams.
pub struct OpenStreams(h3_quinn::OpenStreams);

impl<B: Buf> quic::OpenStreams<B> for OpenStreams {
    type SendStream = h3_quinn::SendStream<B>;
    type BidiStream = BidiStream<B>;

    fn poll_open_bidi(&mut self, _cx: &mut Context<'_>) -> Poll<Result<Self::BidiStream, StreamErrorIncoming>> {
        Poll::Ready(Err(no_bidi()))
    }

    fn poll_open_send(&mut self, cx: &mut Context<'_>) -> Poll<Result<Self::SendStream, StreamErrorIncoming>> {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::poll_open_send(&mut self.0, cx)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        <h3_quinn::OpenStreams as quic::OpenStreams<B>>::close(&mut self.0, code, reason)
    }
}

/// A request stream: its request read, its response written at the priority set for it.
pub struct BidiStream<B: Buf> {
    send: SendStream<B>,
    recv: RecvStream,
}

impl<B: Buf> quic::BidiStream<B> for BidiStream<B> {
    type SendStream = SendStream<B>;
    type RecvStream = RecvStream;

    fn split(self) -> (Self::SendStream, Self::RecvStream) {
        (self.send, self.recv)
    }
}

impl<B: Buf> quic::RecvStream for BidiStream<B> {
    type Buf = Bytes;
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        self.recv.poll_data(cx)
    }
    fn stop_sending(&mut self, error_code: u64) {
        self.recv.stop_sending(error_code)
    }
    fn recv_id(&self) -> StreamId {
        self.recv.recv_id()
    }
}

impl<B: Buf> quic::SendStream<B> for BidiStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_ready(cx)
    }
    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        self.send.send_data(data)
    }
    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.send.poll_finish(cx)
    }
    fn reset(&mut self, reset_code: u64) {
        self.send.reset(reset_code)
    }
    fn send_id(&self) -> StreamId {
        self.send.send_id()
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for BidiStream<B> {
    fn poll_send<D: Buf>(&mut self, cx: &mut Context<'_>, buf: &mut D) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.send.poll_send(cx, buf)
    }
}

/// A chunk read, and the stream to read the next one from.
type Read = (quinn::RecvStream, Result<Option<quinn::Chunk>, quinn::ReadError>);

/// A request stream's receiving half (as h3-quinn's: chunks as quinn hands them over).
pub struct RecvStream {
    stream: Option<quinn::RecvStream>,
    reading: Option<Boxed<Read>>,
    id: u64,
}

impl quic::RecvStream for RecvStream {
    type Buf = Bytes;

    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        if let Some(mut s) = self.stream.take() {
            self.reading = Some(Box::pin(async move {
                let r = s.read_chunk(usize::MAX, true).await;
                (s, r)
            }));
        }
        let Some(reading) = self.reading.as_mut() else {
            return Poll::Ready(Err(StreamErrorIncoming::Unknown("stream gone".into())));
        };
        let (s, r) = ready!(reading.as_mut().poll(cx));
        self.reading = None;
        self.stream = Some(s);
        Poll::Ready(r.map(|c| c.map(|c| c.bytes)).map_err(read_error))
    }

    fn stop_sending(&mut self, error_code: u64) {
        if let Some(s) = self.stream.as_mut() {
            let _ = s.stop(quinn::VarInt::from_u64(error_code).unwrap_or(quinn::VarInt::MAX));
        }
    }

    fn recv_id(&self) -> StreamId {
        self.id.try_into().expect("a quinn stream id is an h3 one")
    }
}

/// A request stream's sending half (as h3-quinn's), at the priority set for it.
pub struct SendStream<B: Buf> {
    stream: quinn::SendStream,
    writing: Option<WriteBuf<B>>,
    prio: Arc<AtomicI32>,
    applied: i32,
    prios: Arc<Priorities>,
}

impl<B: Buf> SendStream<B> {
    /// The priority set for this stream, applied before a write.
    fn apply(&mut self) {
        let p = self.prio.load(Relaxed);
        if p != self.applied {
            let _ = self.stream.set_priority(p);
            self.applied = p;
        }
    }
}

impl<B: Buf> Drop for SendStream<B> {
    fn drop(&mut self) {
        self.prios.close(u64::from(self.stream.id()));
    }
}

impl<B: Buf> quic::SendStream<B> for SendStream<B> {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.apply();
        if let Some(data) = self.writing.as_mut() {
            while data.has_remaining() {
                let n = ready!(Pin::new(&mut self.stream).poll_write(cx, data.chunk())).map_err(write_error)?;
                data.advance(n);
            }
        }
        self.writing = None;
        Poll::Ready(Ok(()))
    }

    fn send_data<T: Into<WriteBuf<B>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.writing.is_some() {
            return Err(StreamErrorIncoming::ConnectionErrorIncoming {
                connection_error: ConnectionErrorIncoming::InternalError("send_data while not ready".into()),
            });
        }
        self.writing = Some(data.into());
        Ok(())
    }

    fn poll_finish(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        Poll::Ready(self.stream.finish().map_err(|e| StreamErrorIncoming::Unknown(Box::new(e))))
    }

    fn reset(&mut self, reset_code: u64) {
        let _ = self.stream.reset(quinn::VarInt::from_u64(reset_code).unwrap_or(quinn::VarInt::MAX));
    }

    fn send_id(&self) -> StreamId {
        u64::from(self.stream.id()).try_into().expect("a quinn stream id is an h3 one")
    }
}

impl<B: Buf> quic::SendStreamUnframed<B> for SendStream<B> {
    fn poll_send<D: Buf>(&mut self, cx: &mut Context<'_>, buf: &mut D) -> Poll<Result<usize, StreamErrorIncoming>> {
        self.apply();
        let n = ready!(Pin::new(&mut self.stream).poll_write(cx, buf.chunk())).map_err(write_error)?;
        buf.advance(n);
        Poll::Ready(Ok(n))
    }
}
