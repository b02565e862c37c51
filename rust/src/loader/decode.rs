//! Content-Encoding decoding for the loader's `body_bytes`: the loader keeps a
//! non-identity body as received (de-chunked) and decodes it here once it is
//! complete, counting the decoded bytes (the output itself is not kept).
//! Codings: gzip/x-gzip (several members allowed), deflate (zlib-wrapped, or
//! raw deflate as some servers send it; told apart by the zlib header, as
//! Chromium does), br, zstd (several frames allowed, skippable frames
//! skipped, checksums verified). Stacked codings are undone last-applied first.
use std::borrow::Cow;
use std::io::{self, Read};

use ruzstd::decoding::errors::{FrameDecoderError, ReadFrameHeaderError};
use ruzstd::decoding::{FrameDecoder, StreamingDecoder};

/// The codings of a Content-Encoding value in the order they were applied
/// ("gzip, br": gzip first), lower-case, "identity" and empty items dropped.
pub fn codings(value: &str) -> Vec<String> {
    value.split(',').map(|c| c.trim().to_ascii_lowercase()).filter(|c| !c.is_empty() && c != "identity").collect()
}

/// Size of `body` once every coding of the Content-Encoding `value` is undone.
/// An empty body is empty whatever its coding (HEAD, 204, 304, empty 200).
pub fn decoded_len(value: &str, body: &[u8]) -> Result<u64, String> {
    let cs = codings(value);
    if cs.is_empty() || body.is_empty() {
        return Ok(body.len() as u64);
    }
    let mut cur: Cow<[u8]> = Cow::Borrowed(body);
    for (k, c) in cs.iter().rev().enumerate() {
        let mut r = reader(c, &cur)?;
        if k + 1 == cs.len() {
            return io::copy(&mut r, &mut io::sink()).map_err(|e| format!("{c}: {e}"));
        }
        let mut next = Vec::new();
        r.read_to_end(&mut next).map_err(|e| format!("{c}: {e}"))?;
        drop(r);
        cur = Cow::Owned(next);
    }
    unreachable!("the loop returns at the last coding")
}

fn reader<'a>(coding: &str, data: &'a [u8]) -> Result<Box<dyn Read + 'a>, String> {
    Ok(match coding {
        "gzip" | "x-gzip" => Box::new(flate2::read::MultiGzDecoder::new(data)),
        "deflate" if zlib_header(data) => Box::new(flate2::read::ZlibDecoder::new(data)),
        "deflate" => Box::new(flate2::read::DeflateDecoder::new(data)),
        "br" => Box::new(brotli_decompressor::Decompressor::new(data, 16 * 1024)),
        "zstd" => Box::new(ZstdFrames { input: data, frame: None }),
        other => return Err(format!("unsupported content coding {other:?}")),
    })
}

/// RFC 1950 header: CM 8 (deflate), CINFO <= 7, FCHECK makes the pair a multiple of 31.
fn zlib_header(d: &[u8]) -> bool {
    d.len() >= 2 && d[0] & 0x0f == 8 && d[0] >> 4 <= 7 && (u16::from(d[0]) << 8 | u16::from(d[1])) % 31 == 0
}

/// Every zstd frame of `input`, one after the other (ruzstd's StreamingDecoder reads one).
struct ZstdFrames<'a> {
    input: &'a [u8],
    frame: Option<StreamingDecoder<&'a [u8], FrameDecoder>>,
}

impl Read for ZstdFrames<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            let Some(f) = self.frame.as_mut() else {
                if self.input.is_empty() {
                    return Ok(0);
                }
                match StreamingDecoder::new(self.input) {
                    Ok(f) => self.frame = Some(f),
                    Err(FrameDecoderError::ReadFrameHeaderError(ReadFrameHeaderError::SkipFrame {
                        length, ..
                    })) => {
                        let skip = 8usize.saturating_add(length as usize);
                        self.input =
                            self.input.get(skip..).ok_or_else(|| io::Error::other("truncated skippable frame"))?;
                    }
                    Err(e) => return Err(io::Error::other(e)),
                }
                continue;
            };
            let n = f.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            // frame finished: check its checksum, go on after it
            let f = self.frame.take().expect("frame");
            let (rest, dec) = f.into_parts();
            if let (Some(want), Some(got)) = (dec.get_checksum_from_data(), dec.get_calculated_checksum()) {
                if want != got {
                    return Err(io::Error::other("zstd frame checksum mismatch"));
                }
            }
            self.input = rest;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::encode::{br, gzip, raw_deflate, zlib, zstd};

    fn text(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"abcdefghij <div class=x> 0123456789\n"[i % 36]).collect()
    }

    #[test]
    fn each_coding() {
        let d = text(100_000);
        for (name, enc) in [
            ("gzip", gzip(&d)),
            ("x-gzip", gzip(&d)),
            ("deflate", zlib(&d)),
            ("deflate", raw_deflate(&d)),
            ("br", br(&d)),
            ("zstd", zstd(&d)),
            ("GZIP", gzip(&d)),
            ("identity", d.clone()),
            ("", d.clone()),
        ] {
            assert!(name.is_empty() || name == "identity" || enc.len() < d.len() / 4, "{name}: {}", enc.len());
            assert_eq!(decoded_len(name, &enc), Ok(d.len() as u64), "{name}");
        }
    }

    #[test]
    fn stacked_and_concatenated() {
        let d = text(5000);
        // "gzip, br": gzip applied first, so br is undone first
        assert_eq!(decoded_len("gzip, br", &br(&gzip(&d))), Ok(5000));
        assert_eq!(decoded_len("identity, deflate ,zstd", &zstd(&zlib(&d))), Ok(5000));
        assert!(decoded_len("br, gzip", &br(&gzip(&d))).is_err());
        // two gzip members, two zstd frames with a skippable frame between them
        assert_eq!(decoded_len("gzip", &[gzip(&d), gzip(&d[..100])].concat()), Ok(5100));
        let skip = [&0x184D2A50u32.to_le_bytes()[..], &3u32.to_le_bytes(), b"abc"].concat();
        assert_eq!(decoded_len("zstd", &[zstd(&d), skip, zstd(&d[..7])].concat()), Ok(5007));
        assert_eq!(codings(" GZip , identity,,br "), vec!["gzip", "br"]);
    }

    #[test]
    fn errors_and_empty() {
        let d = text(3000);
        assert!(decoded_len("gzip", b"not gzip at all").is_err());
        assert!(decoded_len("br", &gzip(&d)).is_err());
        let z = zstd(&d);
        assert!(decoded_len("zstd", &z[..z.len() / 2]).is_err());
        let g = gzip(&d);
        assert!(decoded_len("gzip", &g[..g.len() - 10]).is_err());
        let e = decoded_len("compress", b"xx").unwrap_err();
        assert!(e.contains("unsupported") && e.contains("compress"), "{e}");
        assert_eq!(decoded_len("gzip", b""), Ok(0));
    }
}
