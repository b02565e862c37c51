//! Small syscall wrappers: prctl, SCHED_FIFO, signalfd, epoll.
use anyhow::{Context, Result};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// PR_SET_PDEATHSIG=SIGTERM and PR_SET_TIMERSLACK=1 ns.
pub fn prctl_setup() -> Result<()> {
    // SAFETY: plain prctl calls.
    unsafe {
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) < 0 {
            return Err(io::Error::last_os_error()).context("PR_SET_PDEATHSIG");
        }
        if libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) < 0 {
            return Err(io::Error::last_os_error()).context("PR_SET_TIMERSLACK");
        }
    }
    Ok(())
}

/// Tries SCHED_FIFO; returns the error text on failure.
pub fn sched_fifo(prio: i32) -> std::result::Result<(), String> {
    let p = libc::sched_param { sched_priority: prio };
    // SAFETY: valid pointer.
    if unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &p) } < 0 {
        return Err(io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// Pins the calling thread to one CPU; returns the error text on failure.
pub fn pin_cpu(cpu: usize) -> std::result::Result<(), String> {
    // SAFETY: cpu_set_t is plain data; cpu < CPU_SETSIZE (validated).
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            return Err(io::Error::last_os_error().to_string());
        }
    }
    Ok(())
}

/// Locks all current and future pages in memory; returns the error text on failure.
pub fn mlockall() -> std::result::Result<(), String> {
    // SAFETY: plain syscall.
    if unsafe { libc::mlockall(libc::MCL_CURRENT | libc::MCL_FUTURE) } < 0 {
        return Err(io::Error::last_os_error().to_string());
    }
    Ok(())
}

/// This thread's run delay (ns spent runnable but not running, from
/// /proc/thread-self/schedstat): how long its wake-ups waited for a CPU.
pub struct RunDelay {
    fd: Option<OwnedFd>,
}

impl RunDelay {
    pub fn open() -> RunDelay {
        let path = c"/proc/thread-self/schedstat";
        // SAFETY: valid C string.
        let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
        // SAFETY: fresh fd we own.
        RunDelay { fd: (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) }) }
    }
    /// Total run delay so far (0 when the kernel does not tell).
    pub fn now(&self) -> u64 {
        let Some(fd) = &self.fd else { return 0 };
        let mut b = [0u8; 96];
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::pread(fd.as_raw_fd(), b.as_mut_ptr() as *mut _, b.len(), 0) };
        if n <= 0 {
            return 0;
        }
        parse_run_delay(&b[..n as usize])
    }
}

/// The run delay field of a schedstat line: "<runtime ns> <run delay ns> <timeslices>\n".
fn parse_run_delay(b: &[u8]) -> u64 {
    std::str::from_utf8(b).ok().and_then(|t| t.split_whitespace().nth(1)).and_then(|v| v.parse().ok()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_delay_is_read_from_schedstat() {
        assert_eq!(parse_run_delay(b"123 4567 8\n"), 4567);
        assert_eq!(parse_run_delay(b"garbage"), 0);
        let rd = RunDelay::open();
        if std::path::Path::new("/proc/thread-self/schedstat").exists() {
            assert!(rd.fd.is_some());
            let a = rd.now();
            std::thread::sleep(std::time::Duration::from_millis(2));
            assert!(rd.now() >= a);
        }
    }
}

/// Blocks SIGTERM/SIGINT/SIGUSR1 and returns a non-blocking signalfd for them.
pub fn signalfd() -> Result<OwnedFd> {
    // SAFETY: sigset manipulation on a local, then syscalls.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGUSR1);
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
