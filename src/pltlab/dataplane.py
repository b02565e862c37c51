"""The Rust data-plane binary (`pltlab-dp`): locating it, the documents written for it, reading its
results, stopping it."""

import dataclasses
import functools
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from pltlab.errors import PltError

BINARY = "pltlab-dp"


class Absent:
    """The value of a document's field that is not written: the data plane's default applies
    (a key left out; None is a JSON null)."""

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False


ABSENT: Any = Absent()


def document(obj) -> Any:
    """A document for pltlab-dp as JSON data. The documents (link config, replay manifest, loader
    plan) are dataclasses of keyword fields that mirror the Rust types reading them
    (`pltlab-dp schema`, docs/dataplane-interfaces.md): each becomes an object of its fields in
    their order, a field that is ABSENT left out; lists and tuples become lists."""
    t = type(obj)
    if t in _SCALARS:  # the common case (a plan or manifest of 20,000 objects: ~300,000 values)
        return obj
    names = _FIELDS.get(t, _UNKNOWN)
    if names is _UNKNOWN:
        names = _FIELDS[t] = _field_names(t)
    if names is not None:
        out = {}
        for name in names:
            v = getattr(obj, name)
            if v is not ABSENT:
                out[name] = v if type(v) in _SCALARS else document(v)
        return out
    if isinstance(obj, (list, tuple)):
        return [v if type(v) in _SCALARS else document(v) for v in obj]
    if isinstance(obj, dict):
        return {k: v if type(v) in _SCALARS else document(v) for k, v in obj.items()}
    return obj


_SCALARS = frozenset({str, int, float, bool, type(None)})
_FIELDS: dict[type, tuple[str, ...] | None] = {}  # type -> its dataclass fields' names (None: no dataclass)
_UNKNOWN = object()


def _field_names(t: type) -> tuple[str, ...] | None:
    """The names of a dataclass's fields in their order (dataclasses.fields), None for any other
    type; worked out once per type."""
    if dataclasses.is_dataclass(t) and not issubclass(t, type):
        return tuple(f.name for f in dataclasses.fields(t))
    return None


def schemas() -> dict[str, dict]:
    """The JSON Schema of every document pltlab-dp reads or writes, by name (`pltlab-dp schema`:
    link-config, manifest, plan, schedule-*, link-stats, link-snapshot, replay-stats, load-report,
    probe-*)."""
    return _schemas(binary())


@functools.cache
def _schemas(path: str) -> dict[str, dict]:
    cp = subprocess.run([path, "schema"], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if cp.returncode != 0:
        result(cp, "pltlab-dp schema")  # raises, with its error line
    return json.loads(cp.stdout)


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


class Conversation:
    """A pltlab-dp subcommand spoken to one JSON line at a time (`pltlab-dp schedule`): ``tell``
    writes a line it does not answer, ``ask`` one it answers with a line, ``close`` ends the input
    and returns its last line. A failure is a PltError with its last error line. A context
    manager: leaving it kills the process if it is still running."""

    def __init__(self, args: list[str], what: str):
        self.what = what
        self.p = subprocess.Popen(
            [binary(), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def tell(self, doc) -> None:
        try:
            self.p.stdin.write(json.dumps(doc, separators=(",", ":")) + "\n")
            self.p.stdin.flush()
        except BrokenPipeError:
            self._failed()

    def ask(self, doc) -> dict:
        self.tell(doc)
        return self._line()

    def close(self) -> dict:
        try:
            self.p.stdin.close()
        except BrokenPipeError:
            self._failed()
        last = self._line()
        self.p.wait()
        return last

    def _line(self) -> dict:
        line = self.p.stdout.readline()
        if not line:
            self._failed()
        return json.loads(line)

    def _failed(self):
        self.p.kill()
        err = [ln.strip() for ln in self.p.stderr.read().splitlines() if ln.strip()]
        rc = self.p.wait()
        # a panic: its message is the line after "thread 'main' panicked at FILE:LINE:COL:"
        panic = next((k for k, ln in enumerate(err) if " panicked at " in ln), None)
        if panic is not None and panic + 1 < len(err):
            where = err[panic].split(" panicked at ", 1)[1].rstrip(":")
            raise PltError(f"{self.what} failed: {err[panic + 1]} ({where})")
        raise PltError(f"{self.what} failed: {err[-1] if err else f'exit code {rc}'}")

    def __enter__(self) -> "Conversation":
        return self

    def __exit__(self, *exc) -> None:
        if self.p.poll() is None:
            self.p.kill()
        self.p.wait()
        for f in (self.p.stdin, self.p.stdout, self.p.stderr):
            try:
                f.close()
            except OSError:
                pass


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
    return ask(p, signal.SIGUSR1, "snapshot", timeout)


def ask(p, sig: int, event: str, timeout: float = 5.0) -> dict | None:
    """Send ``sig`` to a running data-plane process and return its answer: the next stdout line
    with ``"event": event`` (other lines are skipped). None if it has exited or does not answer."""
    if p is None or p.poll() is not None:
        return None
    os.kill(p.pid, sig)
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
        if msg.get("event") == event:
            return msg
    return None
