//! Message bodies: the framing of a message (RFC 9112 6), an incremental decoder that finds
//! where a body ends (Content-Length, chunked, close-delimited) and hands out its payload, and
//! the chunked encoder the replay server uses.
use anyhow::{anyhow, bail, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (HEAD, 1xx, 204, 304).
    Empty,
    Length(u64),
    Chunked,
    /// Body ends when the peer closes the connection.
    Close,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Chunk {
    Size,
    Data(u64),
    DataEnd,
    Trailer,
    Done,
}

/// Incremental body decoder. `feed` consumes bytes of the body (and its
/// chunked framing) and tells when the message is complete; bytes after the
/// end are left unconsumed. `body_bytes` counts payload bytes (without framing).
#[derive(Debug)]
pub struct BodyDecoder {
    framing: Framing,
    remaining: u64,
    chunk: Chunk,
    line: Vec<u8>,
    pub body_bytes: u64,
    done: bool,
}

impl BodyDecoder {
    pub fn new(framing: Framing) -> Self {
        let (remaining, done) = match framing {
            Framing::Empty => (0, true),
            Framing::Length(n) => (n, n == 0),
            _ => (0, false),
        };
        BodyDecoder { framing, remaining, chunk: Chunk::Size, line: Vec::new(), body_bytes: 0, done }
    }

    pub fn is_done(&self) -> bool {
        self.done
    }

    /// Feeds bytes; returns how many were consumed. Once done, consumes nothing.
    #[cfg(test)]
    pub fn feed(&mut self, data: &[u8]) -> Result<usize> {
        self.feed_with(data, |_| {})
    }

    /// Like `feed`, and hands every piece of payload (framing removed) to `payload`.
    pub fn feed_with(&mut self, data: &[u8], mut payload: impl FnMut(&[u8])) -> Result<usize> {
        if self.done {
            return Ok(0);
        }
        match self.framing {
            Framing::Empty => Ok(0),
            Framing::Length(_) => {
                let n = (data.len() as u64).min(self.remaining) as usize;
                self.remaining -= n as u64;
                self.body_bytes += n as u64;
                self.done = self.remaining == 0;
                payload(&data[..n]);
                Ok(n)
            }
            Framing::Close => {
                self.body_bytes += data.len() as u64;
                payload(data);
                Ok(data.len())
            }
            Framing::Chunked => self.feed_chunked(data, &mut payload),
        }
    }

    /// The peer closed the connection: fine only for close-delimited bodies.
    pub fn eof(&mut self) -> Result<()> {
        if self.done {
            return Ok(());
        }
        if self.framing == Framing::Close {
            self.done = true;
            return Ok(());
        }
        bail!("connection closed before the end of the response body ({} bytes received)", self.body_bytes)
    }

    fn take_line(&mut self, data: &[u8], pos: &mut usize) -> Result<Option<Vec<u8>>> {
        while *pos < data.len() {
            let b = data[*pos];
            *pos += 1;
            if b == b'\n' {
                let mut l = std::mem::take(&mut self.line);
                if l.last() == Some(&b'\r') {
                    l.pop();
                }
                return Ok(Some(l));
            }
            if self.line.len() >= 8192 {
                bail!("chunked encoding: line too long");
            }
            self.line.push(b);
        }
        Ok(None)
    }

    fn feed_chunked(&mut self, data: &[u8], payload: &mut impl FnMut(&[u8])) -> Result<usize> {
        let mut pos = 0;
        while pos < data.len() && self.chunk != Chunk::Done {
            match self.chunk {
                Chunk::Size => {
                    if let Some(l) = self.take_line(data, &mut pos)? {
                        let s = std::str::from_utf8(&l).map_err(|_| anyhow!("chunked encoding: bad size line"))?;
                        let hex = s.split(';').next().unwrap_or("").trim();
                        let n = u64::from_str_radix(hex, 16)
                            .map_err(|_| anyhow!("chunked encoding: bad chunk size {hex:?}"))?;
                        self.chunk = if n == 0 { Chunk::Trailer } else { Chunk::Data(n) };
                    }
                }
                Chunk::Data(n) => {
                    let k = ((data.len() - pos) as u64).min(n);
                    payload(&data[pos..pos + k as usize]);
                    pos += k as usize;
                    self.body_bytes += k;
                    self.chunk = if k == n { Chunk::DataEnd } else { Chunk::Data(n - k) };
                }
                Chunk::DataEnd => {
                    if let Some(l) = self.take_line(data, &mut pos)? {
                        if !l.is_empty() {
                            bail!("chunked encoding: missing CRLF after chunk data");
                        }
                        self.chunk = Chunk::Size;
                    }
                }
                Chunk::Trailer => {
                    if let Some(l) = self.take_line(data, &mut pos)? {
                        if l.is_empty() {
                            self.chunk = Chunk::Done;
                        }
                    }
                }
                Chunk::Done => unreachable!(),
            }
        }
        self.done = self.chunk == Chunk::Done;
        Ok(pos)
    }
}

/// Chunked wire form of `body` (chunks of at most `chunk` bytes + last-chunk).
pub fn encode_chunked(body: &[u8], chunk: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + body.len() / chunk.max(1) * 10 + 16);
    for c in body.chunks(chunk.max(1)) {
        out.extend_from_slice(format!("{:x}\r\n", c.len()).as_bytes());
        out.extend_from_slice(c);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed_all(d: &mut BodyDecoder, data: &[u8], step: usize) -> usize {
        let mut used = 0;
        for c in data.chunks(step) {
            let mut off = 0;
            while off < c.len() && !d.is_done() {
                let n = d.feed(&c[off..]).unwrap();
                if n == 0 {
                    break;
                }
                off += n;
            }
            used += off;
            if d.is_done() {
                break;
            }
        }
        used
    }

    #[test]
    fn content_length_stops_at_the_end() {
        let mut d = BodyDecoder::new(Framing::Length(5));
        assert_eq!(d.feed(b"hel").unwrap(), 3);
        assert_eq!(d.feed(b"loEXTRA").unwrap(), 2);
        assert!(d.is_done());
        assert_eq!(d.body_bytes, 5);
        assert!(BodyDecoder::new(Framing::Length(0)).is_done());
        assert!(BodyDecoder::new(Framing::Empty).is_done());
    }

    #[test]
    fn chunked_any_split() {
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let mut wire = encode_chunked(&body, 777);
        // chunk extension + trailer
        wire.truncate(wire.len() - 5);
        wire.extend_from_slice(b"0;ext=1\r\nX-Trailer: 1\r\n\r\nNEXT");
        for step in [1, 2, 3, 7, 100, 4096, wire.len()] {
            let mut d = BodyDecoder::new(Framing::Chunked);
            let mut payload = Vec::new();
            let mut used = 0;
            for c in wire.chunks(step) {
                if d.is_done() {
                    break;
                }
                used += d.feed_with(c, |p| payload.extend_from_slice(p)).unwrap();
            }
            assert!(d.is_done(), "step {step}");
            assert_eq!(d.body_bytes, body.len() as u64);
            assert_eq!(payload, body, "step {step}");
            assert_eq!(used, wire.len() - 4, "step {step}");
            let mut d = BodyDecoder::new(Framing::Chunked);
            assert_eq!(feed_all(&mut d, &wire, step), wire.len() - 4, "step {step}");
        }
    }

    #[test]
    fn chunked_errors() {
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert!(d.feed(b"zz\r\n").is_err());
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert!(d.feed(b"3\r\nabcX\r\n").is_err());
        let mut d = BodyDecoder::new(Framing::Chunked);
        d.feed(b"3\r\nab").unwrap();
        assert!(d.eof().is_err());
        let mut d = BodyDecoder::new(Framing::Chunked);
        assert!(d.feed(&[b'1'; 9000]).is_err(), "size line without end");
    }

    #[test]
    fn close_delimited_ends_at_eof() {
        let mut d = BodyDecoder::new(Framing::Close);
        d.feed(b"abc").unwrap();
        d.feed(b"de").unwrap();
        assert!(!d.is_done());
        d.eof().unwrap();
        assert!(d.is_done());
        assert_eq!(d.body_bytes, 5);
        let mut d = BodyDecoder::new(Framing::Length(3));
        d.feed(b"ab").unwrap();
        assert!(d.eof().is_err());
    }
}
