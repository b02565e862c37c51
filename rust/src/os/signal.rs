//! SIGTERM/SIGINT/SIGUSR1 read through a signalfd (the link's event loop polls it).
use anyhow::{Context, Result};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Blocks SIGTERM/SIGINT/SIGUSR1 and returns a non-blocking signalfd for them.
pub fn signalfd() -> Result<OwnedFd> {
    // SAFETY: sigset manipulation on a local, then syscalls.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGUSR1);
        libc::sigaddset(&mut set, libc::SIGUSR2);
        if libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) < 0 {
            return Err(io::Error::last_os_error()).context("sigprocmask");
        }
        let fd = libc::signalfd(-1, &set, libc::SFD_NONBLOCK | libc::SFD_CLOEXEC);
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("signalfd");
        }
        Ok(OwnedFd::from_raw_fd(fd))
    }
}

/// The next pending signal's number from the signalfd (consumed), if any.
pub fn read_signal(fd: RawFd) -> Option<u32> {
    let mut b = [0u8; 128];
    // SAFETY: valid buffer of sizeof(signalfd_siginfo).
    let n = unsafe { libc::read(fd, b.as_mut_ptr() as *mut _, b.len()) };
    // ssi_signo is the struct's first field
    (n >= 4).then(|| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}
