//! Packet buffers and a recycling pool (no allocation per packet in steady state).
//!
//! Every buffer reserves `VNET` bytes in front of the IP packet for the
//! virtio-net header used with TUN offload; without offload they stay zero.

/// Size of struct virtio_net_hdr.
pub const VNET: usize = 10;
/// Capacity of small buffers (MTU-sized packets).
pub const SMALL: usize = 2048;
/// Capacity of large buffers (GSO super-packets, jumbo frames).
pub const LARGE: usize = 65536 + 512;

pub struct Pkt {
    pub buf: Vec<u8>,
    /// Bytes used in `buf`, virtio header included.
    pub len: usize,
}

impl std::fmt::Debug for Pkt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Pkt({} bytes)", self.wire_len())
    }
}

impl Pkt {
    /// The IP packet.
    pub fn ip(&self) -> &[u8] {
        &self.buf[VNET..self.len]
    }
    pub fn ip_mut(&mut self) -> &mut [u8] {
        &mut self.buf[VNET..self.len]
    }
    pub fn wire_len(&self) -> usize {
        self.len - VNET
    }
    /// A packet holding `ip` with a zero virtio header.
    #[cfg(test)]
    pub fn from_ip(ip: &[u8]) -> Pkt {
        let mut buf = vec![0u8; VNET + ip.len()];
        buf[VNET..].copy_from_slice(ip);
        Pkt { len: buf.len(), buf }
    }
}

#[derive(Default)]
pub struct Pool {
    small: Vec<Vec<u8>>,
    large: Vec<Vec<u8>>,
    pub allocated: u64,
}

const KEEP_SMALL: usize = 65536;
const KEEP_LARGE: usize = 1024;

impl Pool {
    /// A buffer able to hold `n` bytes (virtio header included).
    pub fn get(&mut self, n: usize) -> Pkt {
        let (list, cap) = if n <= SMALL { (&mut self.small, SMALL) } else { (&mut self.large, LARGE.max(n)) };
        let buf = match list.pop() {
            Some(b) if b.len() >= n => b,
            _ => {
                self.allocated += 1;
                vec![0u8; cap]
            }
        };
        Pkt { buf, len: n }
    }
    pub fn put(&mut self, p: Pkt) {
        let b = p.buf;
        if b.len() == SMALL {
            if self.small.len() < KEEP_SMALL {
                self.small.push(b);
            }
        } else if b.len() >= LARGE && self.large.len() < KEEP_LARGE {
            self.large.push(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn pool_recycles() {
        let mut p = Pool::default();
        let a = p.get(1500);
        let b = p.get(60000);
        assert_eq!(a.buf.len(), SMALL);
        assert_eq!(b.buf.len(), LARGE);
        p.put(a);
        p.put(b);
        let _a = p.get(100);
        let _b = p.get(40000);
        assert_eq!(p.allocated, 2);
    }
}
