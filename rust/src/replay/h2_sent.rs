//! When an h2 response is on its way: the service time stamped as HTTP/1.1's (request read ->
//! the response's last byte handed to the TLS stream and flushed), whatever the response order.
//! The crate does not say when a stream's frames leave it (round-robin hands a whole body to
//! its buffer at once, rfc9218 a chunk at a time), so the connection's writes are tapped: the
//! h2 frame headers in them are followed, and a response's END_STREAM frame, once written,
//! stamps its time at the flush after it.
use std::collections::BTreeMap;
use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use super::shared::Shared;
use super::stats::Stats;

/// Responses expected at most (a stream reset before its end is forgotten at this bound).
const MAX_EXPECTED: usize = 1024;

/// A response's request read at this instant, and its think time (left out of the figure).
type Started = (Instant, Option<Duration>);

/// The responses of one connection whose END_STREAM is still to be written, by stream id.
#[derive(Default)]
pub struct Expected(Mutex<BTreeMap<u32, Started>>);

impl Expected {
    /// Stream `id`'s response is timed from `t`; the think time `wait` is left out.
    pub fn expect(&self, id: u32, t: Instant, wait: Option<Duration>) {
        let mut m = self.0.lock().unwrap();
        if m.len() >= MAX_EXPECTED {
            m.pop_first(); // the oldest stream: reset, it will never end
        }
        m.insert(id, (t, wait));
    }

    /// Stream `id` will not end normally (reset, connection gone).
    pub fn forget(&self, id: u32) {
        self.0.lock().unwrap().remove(&id);
    }
}

/// Follows the h2 frames in the bytes written: the 9-byte header (length, type, flags, stream
/// id), then the payload.
#[derive(Default)]
struct Frames {
    head: [u8; 9],
    have: usize,
    payload_left: usize,
}

impl Frames {
    /// The streams whose END_STREAM frame (DATA or HEADERS with flag 0x1) ends in `b`.
    fn scan(&mut self, mut b: &[u8], ended: &mut impl FnMut(u32)) {
        while !b.is_empty() {
            if self.have < 9 {
                let k = (9 - self.have).min(b.len());
                self.head[self.have..self.have + k].copy_from_slice(&b[..k]);
                self.have += k;
                b = &b[k..];
                if self.have < 9 {
                    return;
                }
                let h = &self.head;
                self.payload_left = u32::from_be_bytes([0, h[0], h[1], h[2]]) as usize;
            }
            let k = self.payload_left.min(b.len());
            self.payload_left -= k;
            b = &b[k..];
            if self.payload_left == 0 {
                let h = &self.head;
                if h[3] <= 1 && h[4] & 1 == 1 {
                    ended(u32::from_be_bytes([h[5] & 0x7f, h[6], h[7], h[8]]));
                }
                self.have = 0;
            }
        }
    }
}

/// The connection's stream, tapped (see the module comment).
pub struct Tap<S> {
    io: S,
    expected: Arc<Expected>,
    sh: Arc<Shared>,
    frames: Frames,
    /// Responses whose END_STREAM was written, stamped at the next flush.
    written: Vec<Started>,
}

impl<S> Tap<S> {
    pub fn new(io: S, expected: Arc<Expected>, sh: Arc<Shared>) -> Tap<S> {
        Tap { io, expected, sh, frames: Frames::default(), written: Vec::new() }
    }

    /// `n` bytes of `bufs` were written.
    fn wrote(&mut self, bufs: &[io::IoSlice<'_>], mut n: usize) {
        let mut ends = Vec::new();
        for b in bufs {
            let k = n.min(b.len());
            self.frames.scan(&b[..k], &mut |id| ends.push(id));
            n -= k;
            if n == 0 {
                break;
            }
        }
        if !ends.is_empty() {
            let mut m = self.expected.0.lock().unwrap();
            self.written.extend(ends.iter().filter_map(|id| m.remove(id)));
        }
    }
}

fn stamp(st: &Stats, written: &mut Vec<Started>) {
    for (t, wait) in written.drain(..) {
        st.note_service(t, wait);
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Tap<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Tap<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(buf)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.wrote(bufs, n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_flush(cx);
        if let Poll::Ready(Ok(())) = r {
            stamp(&this.sh.stats, &mut this.written);
        }
        r
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(ty: u8, flags: u8, id: u32, len: usize) -> Vec<u8> {
        let l = (len as u32).to_be_bytes();
        let mut f = vec![l[1], l[2], l[3], ty, flags];
        f.extend_from_slice(&id.to_be_bytes());
        f.resize(9 + len, 0xab);
        f
    }

    #[test]
    fn end_stream_frames_found_across_any_split() {
        let mut wire = frame(4, 1, 0, 0); // SETTINGS ACK: flag 1 is no END_STREAM
        wire.extend(frame(1, 4, 1, 30)); // HEADERS of stream 1
        wire.extend(frame(0, 0, 1, 16384));
        wire.extend(frame(6, 1, 0, 8)); // PING ACK
        wire.extend(frame(1, 5, 3, 20)); // HEADERS + END_STREAM of stream 3 (HEAD)
        wire.extend(frame(0, 1, 1, 100)); // DATA + END_STREAM of stream 1
        for cut in [1, 5, 9, 10, 100, 4096, wire.len()] {
            let mut f = Frames::default();
            let mut ends = Vec::new();
            for part in wire.chunks(cut) {
                f.scan(part, &mut |id| ends.push(id));
            }
            assert_eq!(ends, [3, 1], "cut {cut}");
        }
        // the END_STREAM frame counts once its last byte is written
        let mut f = Frames::default();
        let mut ends = Vec::new();
        let last = frame(0, 1, 5, 10);
        f.scan(&last[..18], &mut |id| ends.push(id));
        assert!(ends.is_empty());
        f.scan(&last[18..], &mut |id| ends.push(id));
        assert_eq!(ends, [5]);
    }
}
