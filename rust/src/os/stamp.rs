//! Kernel receive timestamps (SO_TIMESTAMPNS) for the ping-pong probe, so a
//! measured round trip excludes the wake-up latency of the measuring programs.
use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags, SockaddrStorage};
use nix::sys::time::TimeSpec;
use std::io::IoSliceMut;
use std::os::fd::AsFd;

pub fn enable<F: AsFd>(fd: &F) -> std::io::Result<()> {
    setsockopt(fd, sockopt::ReceiveTimestampns, &true).map_err(std::io::Error::from)
}

/// recv() into `buf`; returns (bytes, kernel receive time of the last segment read, ns).
pub fn recv<F: AsFd>(fd: &F, buf: &mut [u8]) -> std::io::Result<(usize, Option<i128>)> {
    use std::os::fd::AsRawFd;
    // room for SCM_TIMESTAMPING too, which TCP adds once transmit stamps are on
    let mut cmsg = nix::cmsg_space!(TimeSpec, [TimeSpec; 3]);
    let mut iov = [IoSliceMut::new(buf)];
    loop {
        match recvmsg::<SockaddrStorage>(fd.as_fd().as_raw_fd(), &mut iov, Some(&mut cmsg), MsgFlags::empty()) {
            Ok(m) => {
                let mut at = None;
                if let Ok(it) = m.cmsgs() {
                    for c in it {
                        if let ControlMessageOwned::ScmTimestampns(t) = c {
                            at = Some(t.tv_sec() as i128 * 1_000_000_000 + t.tv_nsec() as i128);
                        }
                    }
                }
                return Ok((m.bytes, at));
            }
            Err(nix::errno::Errno::EINTR) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Ask for software transmit timestamps: the time the device (here the TUN)
/// took each segment, read back with [`tx`].
pub fn enable_tx<F: AsFd>(fd: &F) -> std::io::Result<()> {
    use nix::sys::socket::TimestampingFlag as T;
    let flags = T::SOF_TIMESTAMPING_TX_SOFTWARE | T::SOF_TIMESTAMPING_SOFTWARE | T::SOF_TIMESTAMPING_OPT_TSONLY;
    setsockopt(fd, sockopt::Timestamping, &flags).map_err(std::io::Error::from)
}

/// The newest transmit timestamp on the socket's error queue (ns), waiting up
/// to `wait_ms` for it: the stamp of a TCP write is normally queued before
/// the write returns.
pub fn tx<F: AsFd>(fd: &F, wait_ms: u16) -> std::io::Result<Option<i128>> {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    use std::os::fd::AsRawFd;
    let raw = fd.as_fd().as_raw_fd();
    let mut last = None;
    for attempt in 0..2 {
        loop {
            let mut cmsg = nix::cmsg_space!(TimeSpec, [TimeSpec; 3], [u8; 64]);
            let mut b = [0u8; 1];
            let mut iov = [IoSliceMut::new(&mut b)];
            match recvmsg::<SockaddrStorage>(
                raw,
                &mut iov,
                Some(&mut cmsg),
                MsgFlags::MSG_ERRQUEUE | MsgFlags::MSG_DONTWAIT,
            ) {
                Ok(m) => {
                    if let Ok(it) = m.cmsgs() {
                        for c in it {
                            if let ControlMessageOwned::ScmTimestampsns(t) = c {
                                let s = t.system;
                                last = Some(s.tv_sec() as i128 * 1_000_000_000 + s.tv_nsec() as i128);
                            }
                        }
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => break,
                Err(nix::errno::Errno::EINTR) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        if last.is_some() || attempt == 1 {
            break;
        }
        // POLLERR is always reported; nothing else is asked for
        let mut p = [PollFd::new(fd.as_fd(), PollFlags::empty())];
        let _ = poll(&mut p, PollTimeout::from(wait_ms));
    }
    Ok(last)
}
