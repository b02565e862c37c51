"""Entering network namespaces from this process and from child processes."""

import contextlib
import ctypes
import os
import signal
import subprocess

from pltlab.errors import PltError

NETNS_DIR = "/run/netns"
_CLONE_NEWNET = 0x40000000
_PR_SET_PDEATHSIG = 1
_libc = ctypes.CDLL(None, use_errno=True)


def ns_path(name: str) -> str:
    return os.path.join(NETNS_DIR, name)


def _setns_fd(fd: int) -> None:
    if _libc.setns(fd, _CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"setns: {os.strerror(err)}")


@contextlib.contextmanager
def in_netns(name: str):
    """Run the body with this thread inside namespace ``name``; always switch back."""
    orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        target = os.open(ns_path(name), os.O_RDONLY)
    except FileNotFoundError:
        os.close(orig)
        raise PltError(f"network namespace {name} does not exist") from None
    try:
        _setns_fd(target)
        try:
            yield
        finally:
            _setns_fd(orig)
    finally:
        os.close(target)
        os.close(orig)


_MS_BIND, _MS_SHARED, _MS_REC = 4096, 1 << 20, 16384
_MNT_DETACH = 2


def _mount(src: str, dst: str, flags: int) -> None:
    if _libc.mount(src.encode(), dst.encode(), b"none", flags, None) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"mount {src} {dst}: {os.strerror(err)}")


def _netns_dir_ready() -> None:
    """/run/netns as a shared mount point, as iproute2 sets it up (so other tools see our names)."""
    os.makedirs(NETNS_DIR, exist_ok=True)
    try:
        _mount("none", NETNS_DIR, _MS_SHARED | _MS_REC)
    except OSError:
        _mount(NETNS_DIR, NETNS_DIR, _MS_BIND | _MS_REC)
        _mount("none", NETNS_DIR, _MS_SHARED | _MS_REC)


def create_netns(name: str) -> None:
    """A named network namespace, made by this thread (no fork: ~0.3 ms instead of ~11 ms)."""
    _netns_dir_ready()
    path = ns_path(name)
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL, 0))
    orig = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        if _libc.unshare(_CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"unshare(CLONE_NEWNET): {os.strerror(err)}")
        try:
            _mount("/proc/thread-self/ns/net", path, _MS_BIND)
        finally:
            _setns_fd(orig)
    except BaseException:
        os.unlink(path)
        raise
    finally:
        os.close(orig)


def remove_netns(name: str) -> None:
    path = ns_path(name)
    _libc.umount2(path.encode(), _MNT_DETACH)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _child_setup(ns: str | None, new_group: bool = False):
    def setup():
        # Die with the runner, so a SIGKILLed runner leaves no orphans behind.
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
        if ns is not None:
            fd = os.open(ns_path(ns), os.O_RDONLY)
            _setns_fd(fd)
            os.close(fd)
        if new_group:
            os.setpgrp()  # keep the terminal's Ctrl-C away; the runner stops it in order

    return setup


def popen(ns: str | None, argv: list[str], new_group: bool = False, **kw) -> subprocess.Popen:
    """Start ``argv`` inside namespace ``ns`` (None = this namespace), tied to this process."""
    try:
        return subprocess.Popen(argv, preexec_fn=_child_setup(ns, new_group), **kw)
    except FileNotFoundError:
        raise PltError(f"command not found: {argv[0]}") from None


def run(ns: str | None, argv: list[str], check: bool = True, **kw) -> subprocess.CompletedProcess:
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    try:
        cp = subprocess.run(argv, preexec_fn=_child_setup(ns), **kw)
    except FileNotFoundError:
        raise PltError(f"command not found: {argv[0]}") from None
    if check and cp.returncode != 0:
        msg = (cp.stderr or cp.stdout or "").strip().splitlines()
        raise PltError(f"{' '.join(argv)} failed in {ns or 'host'}: {msg[-1] if msg else cp.returncode}")
    return cp


def sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def sysctl_set(ns: str, key: str, value) -> None:
    with in_netns(ns):
        with open(sysctl_path(key), "w") as f:
            f.write(str(value))


def sysctl_get(ns: str | None, key: str) -> str:
    if ns is None:
        with open(sysctl_path(key)) as f:
            return f.read().strip()
    with in_netns(ns):
        with open(sysctl_path(key)) as f:
            return f.read().strip()


def netstat_counters(ns: str, group: str = "TcpExt") -> dict[str, int]:
    """Kernel counters of one group of /proc/net/netstat (and snmp) as seen inside ``ns``."""
    with in_netns(ns):
        text = _read_proc_net("netstat") + _read_proc_net("snmp")
    out: dict[str, int] = {}
    lines = text.splitlines()
    for head, vals in zip(lines[::2], lines[1::2]):
        hk, _, hnames = head.partition(":")
        vk, _, hvals = vals.partition(":")
        if hk == group and vk == group:
            out.update({k: int(v) for k, v in zip(hnames.split(), hvals.split())})
    return out


def _read_proc_net(name: str) -> str:
    # /proc/thread-self/net follows this thread's namespace (/proc/self/net follows the leader's).
    with open(f"/proc/thread-self/net/{name}") as f:
        return f.read()
