//! Nanosecond-resolution pcap writer (magic a1b23c4d, LINKTYPE_RAW = 101:
//! each record is a bare IPv4/IPv6 packet). Buffered; flushed on exit.
use std::io::{self, Write};

pub const LINKTYPE_RAW: u32 = 101;
pub const SNAPLEN: u32 = 262_144;

pub struct Pcap<W: Write> {
    w: W,
    pub packets: u64,
}

impl<W: Write> Pcap<W> {
    pub fn new(mut w: W) -> io::Result<Self> {
        let mut h = [0u8; 24];
        h[0..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
        h[4..6].copy_from_slice(&2u16.to_le_bytes());
        h[6..8].copy_from_slice(&4u16.to_le_bytes());
        // thiszone, sigfigs = 0
        h[16..20].copy_from_slice(&SNAPLEN.to_le_bytes());
        h[20..24].copy_from_slice(&LINKTYPE_RAW.to_le_bytes());
        w.write_all(&h)?;
        Ok(Pcap { w, packets: 0 })
    }

    /// `ts_ns`: wall-clock time in ns since the Unix epoch.
    pub fn write(&mut self, ts_ns: u64, pkt: &[u8]) -> io::Result<()> {
        let cap = pkt.len().min(SNAPLEN as usize);
        let mut r = [0u8; 16];
        r[0..4].copy_from_slice(&((ts_ns / 1_000_000_000) as u32).to_le_bytes());
        r[4..8].copy_from_slice(&((ts_ns % 1_000_000_000) as u32).to_le_bytes());
        r[8..12].copy_from_slice(&(cap as u32).to_le_bytes());
        r[12..16].copy_from_slice(&(pkt.len() as u32).to_le_bytes());
        self.w.write_all(&r)?;
        self.w.write_all(&pkt[..cap])?;
        self.packets += 1;
        Ok(())
    }

    pub fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_record_layout() {
        let mut p = Pcap::new(Vec::new()).unwrap();
        p.write(1_700_000_000_123_456_789, &[0x45, 1, 2]).unwrap();
        let b = p.w;
        assert_eq!(b.len(), 24 + 16 + 3);
        assert_eq!(&b[0..4], &[0x4d, 0x3c, 0xb2, 0xa1]);
        assert_eq!(&b[4..8], &[2, 0, 4, 0]);
        assert_eq!(&b[8..16], &[0; 8]);
        assert_eq!(u32::from_le_bytes(b[16..20].try_into().unwrap()), SNAPLEN);
        assert_eq!(u32::from_le_bytes(b[20..24].try_into().unwrap()), 101);
        assert_eq!(u32::from_le_bytes(b[24..28].try_into().unwrap()), 1_700_000_000);
        assert_eq!(u32::from_le_bytes(b[28..32].try_into().unwrap()), 123_456_789);
        assert_eq!(u32::from_le_bytes(b[32..36].try_into().unwrap()), 3);
        assert_eq!(u32::from_le_bytes(b[36..40].try_into().unwrap()), 3);
        assert_eq!(&b[40..], &[0x45, 1, 2]);
        assert_eq!(p.packets, 1);
    }
}
