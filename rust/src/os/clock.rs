//! CLOCK_MONOTONIC time in ns and an absolute-deadline timerfd.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: valid pointer; clock ids used here always exist.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

pub fn now_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// Sleeps until CLOCK_MONOTONIC reaches `t_ns` (returns early on a signal).
pub fn sleep_until(t_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (t_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (t_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: valid timespec; no remaining-time output with TIMER_ABSTIME.
    unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) };
}

/// Offset to add to a monotonic time to get wall-clock ns since the epoch.
pub fn realtime_offset() -> u64 {
    let m = now_ns();
    let r = clock(libc::CLOCK_REALTIME);
    r.wrapping_sub(m)
}

pub struct Timer {
    fd: OwnedFd,
    armed: u64,
}

impl Timer {
    pub fn new() -> io::Result<Timer> {
        // SAFETY: plain syscall.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: fresh fd we own.
        Ok(Timer { fd: unsafe { OwnedFd::from_raw_fd(fd) }, armed: 0 })
    }

    /// Arms the timer at absolute monotonic time `at` (ns); no-op if already armed there.
    pub fn arm(&mut self, at: u64) -> io::Result<()> {
        if at == self.armed {
            return Ok(());
        }
        let at = at.max(1);
        let spec = libc::itimerspec {
            it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 },
            it_value: libc::timespec { tv_sec: (at / 1_000_000_000) as _, tv_nsec: (at % 1_000_000_000) as _ },
        };
        // SAFETY: valid fd and pointers.
        let r =
            unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), libc::TFD_TIMER_ABSTIME, &spec, std::ptr::null_mut()) };
        if r < 0 {
            return Err(io::Error::last_os_error());
        }
        self.armed = at;
        Ok(())
    }

    /// Consumes an expiration (call when epoll reports the fd readable).
    pub fn ack(&mut self) {
        let mut v = [0u8; 8];
        // SAFETY: valid fd and buffer.
        unsafe { libc::read(self.fd.as_raw_fd(), v.as_mut_ptr() as *mut _, 8) };
        self.armed = 0;
    }

    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}
