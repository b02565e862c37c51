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

pub fn set_pdeathsig() {
    // SAFETY: plain prctl call.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0);
    }
}
