//! Bodies in every Content-Encoding the loader undoes, for its tests (decode.rs, loads).
use std::io::Write;

pub fn gzip(d: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(d).unwrap();
    e.finish().unwrap()
}
pub fn zlib(d: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(d).unwrap();
    e.finish().unwrap()
}
pub fn raw_deflate(d: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(d).unwrap();
    e.finish().unwrap()
}
pub fn br(d: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    brotli::BrotliCompress(&mut &d[..], &mut out, &brotli::enc::BrotliEncoderParams::default()).unwrap();
    out
}
pub fn zstd(d: &[u8]) -> Vec<u8> {
    ruzstd::encoding::compress_to_vec(d, ruzstd::encoding::CompressionLevel::Fastest)
}
