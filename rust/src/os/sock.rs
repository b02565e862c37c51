//! Socket options and socket inspection: TCP Fast Open on listeners and connects, forced
//! receive buffers, and a peek at what a freshly accepted TFO connection carried in its SYN.
use std::os::fd::AsRawFd;

pub const TCP_FASTOPEN: libc::c_int = 23;
pub const TCP_FASTOPEN_CONNECT: libc::c_int = 30;

fn set_int<S: AsRawFd>(s: &S, level: libc::c_int, opt: libc::c_int, val: libc::c_int) -> std::io::Result<()> {
    // SAFETY: pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            level,
            opt,
            &val as *const libc::c_int as *const libc::c_void,
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// setsockopt(IPPROTO_TCP, opt, int val)
pub fn set_tcp_int<S: AsRawFd>(s: &S, opt: libc::c_int, val: libc::c_int) -> std::io::Result<()> {
    set_int(s, libc::IPPROTO_TCP, opt, val)
}

/// SO_RCVBUFFORCE (root) or, failing that, SO_RCVBUF (capped by rmem_max).
pub fn set_rcvbuf_force(s: &socket2::Socket, bytes: usize) {
    if set_int(s, libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, bytes as libc::c_int).is_err() {
        let _ = s.set_recv_buffer_size(bytes);
    }
}

/// Peek at the bytes already queued on a socket (up to 16 KB). FIONREAD would not do: it
/// reports 0 while a TFO child socket is still in SYN_RECV.
pub fn peek_pending<S: AsRawFd>(s: &S) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; 16384];
    // SAFETY: valid buffer and length; MSG_PEEK leaves the data queued.
    let n = unsafe {
        libc::recv(s.as_raw_fd(), buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::WouldBlock { Ok(Vec::new()) } else { Err(e) };
    }
    buf.truncate(n as usize);
    Ok(buf)
}

/// What the SYN of a TLS connection carried.
#[derive(Debug, PartialEq, Eq)]
pub struct SynTls {
    /// Bytes in the SYN.
    pub bytes: usize,
    /// Length of the TLS handshake record (the ClientHello) they start, if they start one.
    pub hello: Option<usize>,
    /// A whole early data record (0-RTT) followed the hello, past any ChangeCipherSpec.
    pub early_data: bool,
}

/// The TLS records at the start of `data`: see SynTls.
pub fn tls_records(data: &[u8]) -> SynTls {
    let record = |at: usize| -> Option<(u8, usize)> {
        let h = data.get(at..at + 5)?;
        (h[1] == 3).then(|| (h[0], 5 + u16::from_be_bytes([h[3], h[4]]) as usize))
    };
    let hello = record(0).filter(|r| r.0 == 22).map(|r| r.1);
    let mut early_data = false;
    if let Some(mut at) = hello.filter(|&h| h <= data.len()) {
        // compatibility-mode ChangeCipherSpec records (type 20), then application data (23)
        while let Some((kind, len)) = record(at) {
            if kind == 23 {
                early_data = at + len <= data.len();
                break;
            }
            if kind != 20 {
                break;
            }
            at += len;
        }
    }
    SynTls { bytes: data.len(), hello, early_data }
}

/// For a TFO connection just accepted: what came in the SYN (see SynTls). Read right at accept
/// time, before any later segment can arrive (that takes a round trip).
pub fn syn_tls_records<S: AsRawFd>(s: &S) -> Option<SynTls> {
    peek_pending(s).ok().map(|d| tls_records(&d))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn syn_tls_records_reads_queued_bytes_and_record_length() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(syn_tls_records(&s).unwrap().bytes, 0); // nothing queued yet
                                                           // a TLS handshake record announcing 2000 bytes, of which 100 have arrived
        let mut msg = vec![22u8, 3, 1, (2000u16 >> 8) as u8, (2000u16 & 0xff) as u8];
        msg.extend(std::iter::repeat_n(1u8, 100));
        c.write_all(&msg).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(syn_tls_records(&s), Some(SynTls { bytes: 105, hello: Some(2005), early_data: false }));
        c.write_all(b"GET / HTTP/1.1\r\n").unwrap(); // still queued behind: peek does not consume
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(syn_tls_records(&s).unwrap().bytes, 105 + 16);
    }

    #[test]
    fn early_data_after_the_hello_counts_only_when_whole() {
        let rec = |kind: u8, len: usize| {
            let mut r = vec![kind, 3, 3, (len >> 8) as u8, len as u8];
            r.extend(std::iter::repeat_n(0u8, len));
            r
        };
        let hello = rec(22, 300);
        let with = |parts: &[Vec<u8>]| tls_records(&parts.concat());
        assert!(with(&[hello.clone(), rec(20, 1), rec(23, 400)]).early_data);
        assert!(with(&[hello.clone(), rec(23, 400)]).early_data);
        let cut = [hello.clone(), rec(20, 1), rec(23, 400)].concat();
        assert!(!tls_records(&cut[..cut.len() - 1]).early_data); // the rest came later
        assert!(!with(&[hello.clone(), rec(21, 2)]).early_data); // an alert is no early data
        assert!(!with(std::slice::from_ref(&hello)).early_data);
        assert_eq!(tls_records(b"GET / HTTP/1.1\r\n").hello, None);
    }

    #[test]
    fn tcp_options_and_receive_buffer() {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        set_tcp_int(&s, libc::TCP_NODELAY, 1).unwrap();
        assert!(s.nodelay().unwrap());
        assert!(set_tcp_int(&s, 12345, 1).is_err());
        set_rcvbuf_force(&s, 1 << 20);
        assert!(s.recv_buffer_size().unwrap() > 0);
    }
}
