"""One writer per output folder: a sweep, a study, a resume or a report holds the folder's lock.

The lock is an flock(2) on ``DIR/.pltlab-lock``: the kernel drops it when its holder exits, killed
or crashed, so a dead holder never blocks anyone (the rule `pltlab clean` applies to namespaces:
only a live owner counts). The file names the holder (pid, command, since when) for the one-line
refusal. Nesting in one process is allowed (a study's report inside its run); the file is never
removed while in use, since an unlinked lock file could be locked twice.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator

from pltlab.errors import PltError

LOCK_NAME = ".pltlab-lock"

_held: dict[str, list] = {}  # realpath -> [fd, depth] of the locks this process holds


def contents(out_dir: str) -> list[str]:
    """A folder's entries, its lock file left out (a folder holding only the lock is empty)."""
    return [n for n in os.listdir(out_dir) if n != LOCK_NAME]


def holder(out_dir: str) -> str:
    """Who holds (or last held) the lock of ``out_dir``, in words."""
    try:
        with open(os.path.join(out_dir, LOCK_NAME)) as f:
            h = json.loads(f.read() or "{}")
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(h["since"])))
        return f"pid {int(h['pid'])} ({h.get('command') or '?'}, since {since})"
    except (OSError, ValueError, KeyError, TypeError):
        return "another process"


@contextlib.contextmanager
def held(out_dir: str, what: str, create: bool = True) -> Iterator[None]:
    """Hold ``out_dir``'s lock (the folder is made if missing and ``create``) for ``what``
    ("sweep", "report", ...), or a PltError naming the live holder. A folder this call made is
    removed again when the body fails and left nothing but the lock: a refused command leaves
    nothing behind."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PltError(f"{out_dir}: exists and is not a directory: choose another output folder (-o)")
    made = not os.path.isdir(out_dir)
    if made and not create:
        raise PltError(f"{out_dir}: no such folder")
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise PltError(f"{out_dir}: cannot create the output folder ({e.strerror})") from None
    key = os.path.realpath(out_dir)
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    path = os.path.join(out_dir, LOCK_NAME)
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        raise PltError(f"{path}: cannot create the folder's lock file ({e.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise PltError(
            f"{out_dir} is in use by {holder(out_dir)}: one {what} at a time per output folder; "
            f"wait for it to finish or stop it (nothing was run)"
        ) from None
    _held[key] = [fd, 1]
    failed = False
    try:
        with contextlib.suppress(OSError):  # who holds it, for the refusal (a full disk: still locked)
            info = {"pid": os.getpid(), "command": _command(what), "since": time.time()}
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(info).encode(), 0)
        yield
    except BaseException:
        failed = True
        raise
    finally:
        del _held[key]
        if failed and made and not contents(out_dir):
            with contextlib.suppress(OSError):
                os.unlink(path)
                os.rmdir(out_dir)
        os.close(fd)  # releases the lock


def _command(what: str) -> str:
    argv = sys.argv[:]
    if argv and os.path.basename(argv[0]) in ("pltlab", "__main__.py"):
        argv[0] = "pltlab"
    text = shlex.join(argv) if argv and argv[0] == "pltlab" else f"pltlab {what} (Python API)"
    return text if len(text) <= 120 else text[:117] + "..."
