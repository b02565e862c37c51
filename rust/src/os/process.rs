//! Process settings: dying with the parent, timer slack, the open-file limit, real-time
//! scheduling, CPU pinning, locked memory, and the run delay the scheduler inflicted.
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

/// PR_SET_PDEATHSIG = SIGTERM: the process ends when its parent does.
pub fn set_pdeathsig() -> io::Result<()> {
    // SAFETY: plain prctl call.
    if unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM as libc::c_ulong, 0, 0, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// PR_SET_TIMERSLACK: timers of this thread fire at most `ns` late (default 50 us).
pub fn set_timerslack(ns: u64) -> io::Result<()> {
    // SAFETY: plain prctl call.
    if unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, ns as libc::c_ulong, 0, 0, 0) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Raises the soft RLIMIT_NOFILE to the hard limit (a server with many
/// connections should not stop at the usual 1024); returns (old soft, new soft).
pub fn raise_nofile_limit() -> io::Result<(u64, u64)> {
    let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain getrlimit/setrlimit on a live struct.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let old = r.rlim_cur;
    if r.rlim_cur < r.rlim_max {
        r.rlim_cur = r.rlim_max;
        // SAFETY: as above.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &r) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((old, r.rlim_cur))
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

/// The CPU the calling thread runs on (None if unknown).
pub fn current_cpu() -> Option<usize> {
    // SAFETY: plain call.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}

/// Lets the calling thread run on every CPU it may use now except `cpu` (no change when that
/// would leave none).
pub fn avoid_cpu(cpu: usize) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; cpu < CPU_SETSIZE is checked.
    unsafe {
        let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for c in 0..n.min(libc::CPU_SETSIZE as usize) {
            if c != cpu {
                libc::CPU_SET(c, &mut set);
            }
        }
        if libc::CPU_COUNT(&set) == 0 {
            return Ok(());
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Asks the kernel's PM QoS for a CPU wake-up latency of 0 (the cpuidle governor then polls
/// instead of halting) for as long as the returned file stays open; the error text on failure.
pub fn cpu_latency_qos_zero() -> std::result::Result<std::fs::File, String> {
    use std::io::Write;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/cpu_dma_latency")
        .map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    f.write_all(&0i32.to_ne_bytes()).map_err(|e| format!("/dev/cpu_dma_latency: {e}"))?;
    Ok(f)
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
    fn nofile_limit_is_raised_to_the_hard_limit() {
        let (_, new) = raise_nofile_limit().unwrap();
        let mut r = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: plain getrlimit on a live struct.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) }, 0);
        assert_eq!((new, r.rlim_cur), (r.rlim_max, r.rlim_max));
    }

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
