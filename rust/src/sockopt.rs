//! Socket-option helpers shared by the data-plane roles (TCP_FASTOPEN*, TCP_INFO, PDEATHSIG).
use std::os::fd::RawFd;

pub const TCP_FASTOPEN: libc::c_int = 23;
pub const TCP_FASTOPEN_CONNECT: libc::c_int = 30;
/// tcpi_options bit: SYN data was acked (client) / SYN carried data (server).
pub const TCPI_OPT_SYN_DATA: u8 = 32;

pub fn set_tcp_int(fd: RawFd, opt: libc::c_int, val: libc::c_int) -> std::io::Result<()> {
    // SAFETY: pointer to a live c_int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
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

/// Prefix of struct tcp_info we need: (tcpi_options, fastopen_client_fail).
pub fn tcp_info_tfo(fd: RawFd) -> std::io::Result<(u8, u8)> {
    let mut buf = [0u8; 104];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: the kernel writes at most `len` bytes into buf.
    let r = unsafe {
        libc::getsockopt(fd, libc::IPPROTO_TCP, libc::TCP_INFO, buf.as_mut_ptr() as *mut libc::c_void, &mut len)
    };
    if r != 0 {
        return Err(std::io::Error::last_os_error());
    }
    // byte 5 = tcpi_options; byte 7 bits 1-2 = tcpi_fastopen_client_fail
    Ok((buf[5], (buf[7] >> 1) & 3))
}

/// Peek at the bytes already queued on a socket (up to 16 KB): (count, first
/// up to 5 bytes). FIONREAD would not do: it reports 0 while a TFO child socket
/// is still in SYN_RECV.
pub fn peek_pending(fd: RawFd) -> std::io::Result<(usize, [u8; 5])> {
    let mut buf = [0u8; 16384];
    // SAFETY: valid buffer and length; MSG_PEEK leaves the data queued.
    let n = unsafe { libc::recv(fd, buf.as_mut_ptr() as *mut libc::c_void, buf.len(), libc::MSG_PEEK | libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = std::io::Error::last_os_error();
        return if e.kind() == std::io::ErrorKind::WouldBlock { Ok((0, [0; 5])) } else { Err(e) };
    }
    let mut head = [0u8; 5];
    head.copy_from_slice(&buf[..5]);
    Ok((n as usize, head))
}

/// For a TFO connection just accepted: (bytes that came in the SYN, length of
/// the TLS record they start, if they start one). Read right at accept time,
/// before any later segment can arrive (that takes a round trip).
pub fn syn_tls_record(fd: RawFd) -> Option<(usize, Option<usize>)> {
    let (avail, h) = peek_pending(fd).ok()?;
    // TLS handshake record: type 22, version 3.x, 2-byte length
    let rec = (avail >= 5 && h[0] == 22 && h[1] == 3).then(|| 5 + u16::from_be_bytes([h[3], h[4]]) as usize);
    Some((avail, rec))
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (a server with many
/// connections should not stop at the usual 1024); returns (old soft, new soft).
pub fn raise_nofile_limit() -> std::io::Result<(u64, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain getrlimit/setrlimit on a live struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let old = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok((old, r.rlim_cur))
}

pub fn set_pdeathsig() {
    // SAFETY: plain prctl call.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    #[test]
    fn syn_tls_record_reads_queued_bytes_and_record_length() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (s, _) = l.accept().unwrap();
        assert_eq!(syn_tls_record(s.as_raw_fd()), Some((0, None))); // nothing queued yet
        // a TLS handshake record announcing 2000 bytes, of which 100 have arrived
        let mut msg = vec![22u8, 3, 1, (2000u16 >> 8) as u8, (2000u16 & 0xff) as u8];
        msg.extend(std::iter::repeat(1u8).take(100));
        c.write_all(&msg).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(syn_tls_record(s.as_raw_fd()), Some((105, Some(2005))));
        c.write_all(b"GET / HTTP/1.1\r\n").unwrap(); // still queued behind: peek does not consume
        std::thread::sleep(std::time::Duration::from_millis(50));
        assert_eq!(syn_tls_record(s.as_raw_fd()).unwrap().0, 105 + 16);
    }
}
