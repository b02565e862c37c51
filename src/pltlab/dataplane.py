"""The Rust data-plane binary (`pltlab-dp`): locating it, reading its results, stopping it."""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from pltlab.errors import PltError

BINARY = "pltlab-dp"


def binary() -> str:
    """Path of pltlab-dp: $PLTLAB_DP, else the newest of the installed copy (next to this Python,
    or on PATH) and the repository's cargo build (development checkout)."""
    env = os.environ.get("PLTLAB_DP")
    if env:
        if not os.access(env, os.X_OK):
            raise PltError(f"PLTLAB_DP={env} is not an executable file")
        return env
    candidates = [Path(sys.executable).parent / BINARY]
    which = shutil.which(BINARY)
    if which:
        candidates.append(Path(which))
    repo = Path(__file__).resolve().parents[2]
    candidates += [repo / "target" / "release" / BINARY]
    found = [c for c in candidates if c.is_file() and os.access(c, os.X_OK)]
    if found:
        # The newest build wins: an editable install keeps a copy that a later cargo build outdates.
        return str(max(found, key=lambda c: c.stat().st_mtime))
    raise PltError(f"{BINARY} not found: install pltlab with 'pip install .' (builds the Rust data plane)")


def result(cp, what: str) -> dict:
    """The JSON object a finished `pltlab-dp` client printed last, or a PltError with its last
    error line."""
    if cp.returncode != 0:
        err = (cp.stderr or "").strip().splitlines()
        raise PltError(f"{what} failed: {err[-1] if err else f'exit code {cp.returncode}'}")
    try:
        return json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise PltError(f"{what} printed no result") from None


def stderr_tail(f, fallback: str) -> str:
    """Last non-empty line of a process's stderr file (opened w+), for one-line errors."""
    f.flush()
    f.seek(0)
    lines = [ln.strip() for ln in f.read().splitlines() if ln.strip()]
    return lines[-1] if lines else fallback


def terminate(p, timeout: float = 10.0) -> str:
    """Stop a data-plane process the way it expects (SIGTERM: it writes its statistics), killing
    it only if it does not exit in time; returns what it printed on stdout."""
    if p.poll() is None:
        p.send_signal(signal.SIGTERM)
    try:
        out, _ = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, _ = p.communicate()
    return out or ""


def snapshot(p, timeout: float = 5.0) -> dict | None:
    """Ask a running process (link emulator, replay server) for its figures so far: SIGUSR1, then
    the stdout line with ``"event": "snapshot"``. None if it has exited or does not answer."""
    if p is None or p.poll() is not None:
        return None
    os.kill(p.pid, signal.SIGUSR1)
    end = time.monotonic() + timeout
    while (left := end - time.monotonic()) > 0:
        ready, _, _ = select.select([p.stdout], [], [], left)
        line = p.stdout.readline() if ready else ""
        if not line:
            return None
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        if msg.get("event") == "snapshot":
            return msg
    return None
