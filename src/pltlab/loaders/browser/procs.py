"""Finding and killing the browser's processes, checking which namespace they run in."""

from __future__ import annotations

import os
import shutil
import signal
import time


def pids_with_arg(needle: str) -> list[int]:
    """Processes whose command line mentions ``needle`` (our unique temp profile path)."""
    key = needle.encode()
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if key in f.read():
                    out.append(int(pid))
        except OSError:
            continue
    return out


def children(needle: str) -> list[int]:
    """Our child processes whose command line mentions ``needle``."""
    me, key, out = os.getpid(), needle.encode(), []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid == me:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    if key in f.read():
                        out.append(int(pid))
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_all(pids: list[int], timeout: float = 5.0) -> None:
    """SIGKILL and wait until the processes are dead (gone, or zombies left for their parents)."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    end = time.monotonic() + timeout
    for pid in pids:
        while time.monotonic() < end and _alive(pid):
            time.sleep(0.01)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def netns_id(pid: int | str = "thread-self") -> tuple[int, int] | None:
    try:
        st = os.stat(f"/proc/{pid}/ns/net")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def path_netns_id(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_dev, st.st_ino


def remove_stale_profiles(tmp: str, prefix: str, min_age_s: float = 600) -> None:
    """Temp profiles left by a killed (SIGKILL) recorder: old, and used by no process."""
    try:
        names = [n for n in os.listdir(tmp) if n.startswith(prefix)]
    except OSError:
        return
    for n in names:
        path = os.path.join(tmp, n)
        try:
            old = time.time() - os.stat(path).st_mtime > min_age_s
        except OSError:
            continue
        if old and not pids_with_arg(path):
            shutil.rmtree(path, ignore_errors=True)
