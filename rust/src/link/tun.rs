//! Attaching to an existing TUN device inside another network namespace.
use anyhow::{bail, Context, Result};
use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

const TUNSETIFF: libc::c_ulong = 0x4004_54ca;
const TUNSETOFFLOAD: libc::c_ulong = 0x4004_54d0;
const TUNSETVNETHDRSZ: libc::c_ulong = 0x4004_54d8;
const IFF_TUN: i16 = 0x0001;
const IFF_NO_PI: i16 = 0x1000;
const IFF_VNET_HDR: i16 = 0x4000;
const TUN_F_CSUM: libc::c_uint = 0x01;
const TUN_F_TSO4: libc::c_uint = 0x02;
const TUN_F_TSO6: libc::c_uint = 0x04;

#[repr(C)]
struct IfReq {
    name: [u8; 16],
    flags: i16,
    _pad: [u8; 22],
}

pub struct Tun {
    fd: OwnedFd,
    /// Packets carry a 10-byte virtio-net header.
    pub vnet: bool,
}

fn setns(f: &File) -> io::Result<()> {
    // SAFETY: valid fd; CLONE_NEWNET only changes this (single) thread's netns.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Enters `netns`, opens the existing TUN `name` (IFF_TUN|IFF_NO_PI, plus
/// IFF_VNET_HDR and TSO/CSUM offload if `offload`), non-blocking, and returns
/// to the original namespace.
pub fn attach(netns: &str, name: &str, offload: bool) -> Result<Tun> {
    let target = File::open(netns).with_context(|| format!("cannot open netns {netns}"))?;
    let orig = File::open("/proc/thread-self/ns/net").context("cannot open own netns")?;
    setns(&target).with_context(|| format!("setns({netns})"))?;
    let r = open_tun(name, offload).with_context(|| format!("TUN {name:?} in {netns}"));
    setns(&orig).context("setns back to the original netns")?;
    r
}

fn open_tun(name: &str, offload: bool) -> Result<Tun> {
    let cname = CString::new(name)?;
    // TUNSETIFF would create a missing device: make sure it exists first.
    // SAFETY: valid C string.
    if unsafe { libc::if_nametoindex(cname.as_ptr()) } == 0 {
        bail!("no such device");
    }
    // SAFETY: plain open.
    let fd = unsafe { libc::open(c"/dev/net/tun".as_ptr(), libc::O_RDWR | libc::O_NONBLOCK | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error()).context("open /dev/net/tun");
    }
    // SAFETY: fresh fd we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let mut req = IfReq { name: [0; 16], flags: IFF_TUN | IFF_NO_PI, _pad: [0; 22] };
    if offload {
        req.flags |= IFF_VNET_HDR;
    }
    req.name[..name.len()].copy_from_slice(name.as_bytes());
    // SAFETY: ioctl with a properly sized struct ifreq.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETIFF, &mut req) } < 0 {
        let e = io::Error::last_os_error();
        let hint = match e.raw_os_error() {
            Some(libc::EINVAL) => " (not a TUN device, or a multi-queue one)",
            Some(libc::EBUSY) => " (already attached by another process)",
            Some(libc::EPERM) => " (permission denied: owner/group of the persistent TUN)",
            _ => "",
        };
        bail!("TUNSETIFF: {e}{hint}");
    }
    if offload {
        let sz: libc::c_int = 10;
        // SAFETY: ioctl with a pointer to int.
        if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETVNETHDRSZ, &sz) } < 0 {
            return Err(io::Error::last_os_error()).context("TUNSETVNETHDRSZ");
        }
    }
    // Offload features persist on the device: always set them (cleared
    // without offload, or the kernel would hand us partial checksums).
    let feat = if offload { TUN_F_CSUM | TUN_F_TSO4 | TUN_F_TSO6 } else { 0 };
    // SAFETY: ioctl with an integer argument.
    if unsafe { libc::ioctl(fd.as_raw_fd(), TUNSETOFFLOAD, feat as libc::c_ulong) } < 0 {
        return Err(io::Error::last_os_error()).context("TUNSETOFFLOAD");
    }
    Ok(Tun { fd, vnet: offload })
}

impl Tun {
    pub fn fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
    /// One packet; Err(WouldBlock) when none is pending.
    pub fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), buf.as_mut_ptr() as *mut _, buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
    pub fn write(&self, buf: &[u8]) -> io::Result<usize> {
        // SAFETY: valid fd and buffer.
        let n = unsafe { libc::write(self.fd.as_raw_fd(), buf.as_ptr() as *const _, buf.len()) };
        if n < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(n as usize)
        }
    }
}
