//! A small epoll wrapper: readable fds registered with a token, ready tokens as a bit mask.
use anyhow::{Context, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

pub struct Epoll {
    fd: OwnedFd,
}

impl Epoll {
    pub fn new() -> Result<Epoll> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error()).context("epoll_create1");
        }
        // SAFETY: fresh fd.
        Ok(Epoll { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }
    pub fn add(&self, fd: RawFd, token: u64) -> Result<()> {
        let mut ev = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: valid fds and pointer.
        if unsafe { libc::epoll_ctl(self.fd.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err(io::Error::last_os_error()).context("epoll_ctl");
        }
        Ok(())
    }
    /// Waits (timeout ms, -1 = forever); returns the ready tokens as a bit mask.
    pub fn wait(&self, timeout_ms: i32) -> Result<u64> {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 8];
        // SAFETY: valid buffer.
        let n = unsafe { libc::epoll_wait(self.fd.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, timeout_ms) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                return Ok(0);
            }
            return Err(e).context("epoll_wait");
        }
        Ok(evs[..n as usize].iter().fold(0, |m, e| m | (1 << e.u64)))
    }
}
