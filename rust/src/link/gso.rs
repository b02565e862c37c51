//! virtio-net header handling for TUN offload: software TCP segmentation of
//! GSO super-packets (IPv4) and completion of partial checksums.
use super::buf::{Pkt, Pool, VNET};

pub const F_NEEDS_CSUM: u8 = 1;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
pub const GSO_ECN: u8 = 0x80;

#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct VnetHdr {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHdr {
    pub fn read(b: &[u8]) -> VnetHdr {
        let u = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        VnetHdr { flags: b[0], gso_type: b[1], hdr_len: u(2), gso_size: u(4), csum_start: u(6), csum_offset: u(8) }
    }
    pub fn write(&self, b: &mut [u8]) {
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }
}

/// One's-complement sum of `data` (big-endian 16-bit words) added to `acc`.
pub fn sum(data: &[u8], mut acc: u64) -> u64 {
    let mut it = data.chunks_exact(4);
    for c in &mut it {
        acc += u32::from_be_bytes([c[0], c[1], c[2], c[3]]) as u64;
    }
    let r = it.remainder();
    let mut i = 0;
    while i + 1 < r.len() {
        acc += u16::from_be_bytes([r[i], r[i + 1]]) as u64;
        i += 2;
    }
    if i < r.len() {
        acc += (r[i] as u64) << 8;
    }
    acc
}

/// Folds and complements a sum into a checksum.
pub fn fold(mut acc: u64) -> u16 {
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    !(acc as u16)
}

pub fn ipv4_header_csum(h: &mut [u8]) {
    h[10] = 0;
    h[11] = 0;
    let c = fold(sum(h, 0));
    h[10..12].copy_from_slice(&c.to_be_bytes());
}

/// Full TCP/UDP checksum of an IPv4 packet (L4 checksum field at `l4 + field`).
pub fn ipv4_l4_csum(ip: &mut [u8], l4: usize, field: usize) {
    ip[l4 + field] = 0;
    ip[l4 + field + 1] = 0;
    let len = ip.len() - l4;
    let mut acc = sum(&ip[12..20], 0);
    acc += ip[9] as u64 + len as u64;
    let c = fold(sum(&ip[l4..], acc));
    ip[l4 + field..l4 + field + 2].copy_from_slice(&c.to_be_bytes());
}

/// Completes a partial checksum (VIRTIO_NET_HDR_F_NEEDS_CSUM) in place and
/// clears the flag. Only for non-GSO packets.
pub fn finalize_csum(p: &mut Pkt) {
    let mut h = VnetHdr::read(&p.buf[..VNET]);
    if h.flags & F_NEEDS_CSUM == 0 || h.gso_type != GSO_NONE {
        return;
    }
    let ip = p.ip_mut();
    let (s, o) = (h.csum_start as usize, h.csum_offset as usize);
    if s + o + 2 > ip.len() {
        return;
    }
    let c = fold(sum(&ip[s..], 0));
    ip[s + o..s + o + 2].copy_from_slice(&c.to_be_bytes());
    h.flags &= !F_NEEDS_CSUM;
    h.write(&mut p.buf[..VNET]);
}

/// True if `p` is an IPv4 TCP GSO super-packet that `segment` handles.
pub fn is_tcp4_gso(p: &Pkt) -> bool {
    let t = p.buf[1] & !GSO_ECN;
    t == GSO_TCPV4 && p.wire_len() >= 40 && p.buf[VNET] >> 4 == 4 && p.buf[VNET + 9] == 6
}

/// Splits an IPv4 TCP GSO packet into wire packets of at most gso_size
/// payload bytes, like the kernel's tcp_gso_segment: consecutive IP IDs,
/// advancing sequence numbers, FIN/PSH only on the last segment, CWR only on
/// the first, full IP and TCP checksums, zero virtio header.
/// Returns false (and emits nothing) if the packet is malformed.
pub fn segment(p: &Pkt, pool: &mut Pool, mut emit: impl FnMut(Pkt)) -> bool {
    let h = VnetHdr::read(&p.buf[..VNET]);
    let ip = p.ip();
    let ihl = (ip[0] & 0x0f) as usize * 4;
    if ihl < 20 || ip.len() < ihl + 20 {
        return false;
    }
    let doff = (ip[ihl + 12] >> 4) as usize * 4;
    let hl = ihl + doff;
    if doff < 20 || ip.len() < hl {
        return false;
    }
    let tot = (u16::from_be_bytes([ip[2], ip[3]]) as usize).clamp(hl, ip.len());
    let payload = &ip[hl..tot];
    let mss = if h.gso_size == 0 { payload.len().max(1) } else { h.gso_size as usize };
    let id0 = u16::from_be_bytes([ip[4], ip[5]]);
    let seq0 = u32::from_be_bytes([ip[ihl + 4], ip[ihl + 5], ip[ihl + 6], ip[ihl + 7]]);
    let flags = ip[ihl + 13];
    let n = payload.len().div_ceil(mss).max(1);
    for i in 0..n {
        let chunk = &payload[(i * mss).min(payload.len())..((i + 1) * mss).min(payload.len())];
        let len = hl + chunk.len();
        let mut s = pool.get(VNET + len);
        s.buf[..VNET].fill(0);
        let o = &mut s.buf[VNET..VNET + len];
        o[..hl].copy_from_slice(&ip[..hl]);
        o[hl..].copy_from_slice(chunk);
        o[2..4].copy_from_slice(&(len as u16).to_be_bytes());
        o[4..6].copy_from_slice(&id0.wrapping_add(i as u16).to_be_bytes());
        ipv4_header_csum(&mut o[..ihl]);
        let seq = seq0.wrapping_add((i * mss) as u32);
        o[ihl + 4..ihl + 8].copy_from_slice(&seq.to_be_bytes());
        let mut f = flags;
        if i + 1 < n {
            f &= !(0x01 | 0x08); // FIN, PSH
        }
        if i > 0 {
            f &= !0x80; // CWR
        }
        o[ihl + 13] = f;
        ipv4_l4_csum(o, ihl, 16);
        emit(s);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A TCP/IPv4 packet with timestamps option (32-byte TCP header).
    fn tcp_packet(payload: usize, flags: u8) -> Vec<u8> {
        let hl = 20 + 32;
        let mut ip = vec![0u8; hl + payload];
        ip[0] = 0x45;
        let tot = ip.len() as u16;
        ip[2..4].copy_from_slice(&tot.to_be_bytes());
        ip[4..6].copy_from_slice(&0xfffeu16.to_be_bytes());
        ip[6] = 0x40; // DF
        ip[8] = 64;
        ip[9] = 6;
        ip[12..16].copy_from_slice(&[198, 19, 0, 1]);
        ip[16..20].copy_from_slice(&[198, 18, 0, 1]);
        ip[20..22].copy_from_slice(&80u16.to_be_bytes());
        ip[22..24].copy_from_slice(&40000u16.to_be_bytes());
        ip[24..28].copy_from_slice(&0xffff_f000u32.to_be_bytes());
        ip[28..32].copy_from_slice(&1234u32.to_be_bytes());
        ip[32] = 8 << 4;
        ip[33] = flags;
        ip[34..36].copy_from_slice(&512u16.to_be_bytes());
        ip[40..52].copy_from_slice(&[1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        for (i, b) in ip[hl..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        ip
    }

    fn verify(ip: &[u8]) {
        assert_eq!(fold(sum(&ip[..20], 0)), 0, "ip checksum");
        let mut acc = sum(&ip[12..20], 0) + 6 + (ip.len() - 20) as u64;
        acc = sum(&ip[20..], acc);
        assert_eq!(fold(acc), 0, "tcp checksum");
    }

    #[test]
    fn checksum_known_value() {
        // Example header from RFC 1071 style references (Wikipedia IPv4 checksum).
        let mut h = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        ipv4_header_csum(&mut h);
        assert_eq!(&h[10..12], &[0xb8, 0x61]);
        assert_eq!(fold(sum(&[0xff], 0)), !0xff00);
    }

    #[test]
    fn segmentation() {
        let mss = 1448;
        let pay = 3 * mss + 100;
        let ip = tcp_packet(pay, 0x18 | 0x01 | 0x80); // PSH|ACK|FIN|CWR
        let mut p = Pkt::from_ip(&ip);
        VnetHdr {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: mss as u16,
            csum_start: 20,
            csum_offset: 16,
        }
        .write(&mut p.buf[..VNET]);
        assert!(is_tcp4_gso(&p));
        let mut pool = Pool::default();
        let mut segs = vec![];
        assert!(segment(&p, &mut pool, |s| segs.push(s)));
        assert_eq!(segs.len(), 4);
        let mut joined = vec![];
        for (i, s) in segs.iter().enumerate() {
            assert_eq!(&s.buf[..VNET], &[0u8; VNET]);
            let o = s.ip();
            let want = if i < 3 { 52 + mss } else { 52 + 100 };
            assert_eq!(o.len(), want);
            assert_eq!(u16::from_be_bytes([o[2], o[3]]) as usize, want);
            assert_eq!(u16::from_be_bytes([o[4], o[5]]), 0xfffeu16.wrapping_add(i as u16));
            let seq = u32::from_be_bytes([o[24], o[25], o[26], o[27]]);
            assert_eq!(seq, 0xffff_f000u32.wrapping_add((i * mss) as u32));
            let f = o[33];
            assert_eq!(f & 0x10, 0x10, "ACK kept");
            assert_eq!(f & 0x09 != 0, i == 3, "FIN/PSH only on last");
            assert_eq!(f & 0x80 != 0, i == 0, "CWR only on first");
            assert_eq!(&o[40..52], &ip[40..52], "options copied");
            verify(o);
            joined.extend_from_slice(&o[52..]);
        }
        assert_eq!(joined, ip[52..]);
    }

    #[test]
    fn finalize_partial_checksum() {
        let mut ip = tcp_packet(333, 0x18);
        // Partial checksum as the kernel leaves it: folded pseudo-header sum.
        let pseudo = sum(&ip[12..20], 6 + (ip.len() - 20) as u64);
        let partial = !fold(pseudo);
        ip[36..38].copy_from_slice(&partial.to_be_bytes());
        let mut p = Pkt::from_ip(&ip);
        VnetHdr { flags: F_NEEDS_CSUM, csum_start: 20, csum_offset: 16, ..Default::default() }
            .write(&mut p.buf[..VNET]);
        finalize_csum(&mut p);
        assert_eq!(p.buf[0] & F_NEEDS_CSUM, 0);
        ipv4_header_csum(&mut p.ip_mut()[..20]);
        verify(p.ip());
    }
}
