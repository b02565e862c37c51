"""Watching a run's data-plane processes: a death ends what waits on them at once, named.

A run registers every long-lived process it starts (link emulator, replay server, probe server)
with its Supervisor. Whatever waits for a load then waits on the loader *and* on those processes
(pidfds in one select): when one of them dies, the loader is killed and ProcessDied says which
process died and how ("link emulator (pltlab-dp link, pid 812) died: killed by SIGKILL"), within
milliseconds instead of at the load's timeout. Loads run in this process (Chromium through
Playwright) are guarded by a thread that does the same and kills the loader's namespace.
"""

import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from pltlab.errors import PltError

# How a pltlab-dp subcommand is named in messages.
ROLES = {"link": "link emulator", "replay": "replay server", "load": "loader", "serve": "probe server"}


class ProcessDied(PltError):
    """A watched process (or the loader itself) died while a load depended on it."""


@dataclass
class Watched:
    what: str
    proc: subprocess.Popen
    stderr: Callable[[], str | None] | None = None  # its last stderr line, for the message

    def describe(self) -> str:
        return describe(self.proc, self.what, self.stderr)


def command_name(args) -> str:
    """'pltlab-dp link' for [.../pltlab-dp, link, --config, ...]; else the program's name."""
    argv = [args] if isinstance(args, (str, bytes)) else list(args)
    prog = os.path.basename(str(argv[0])) if argv else "?"
    if prog == "pltlab-dp" and len(argv) > 1:
        sub = [str(a) for a in argv[1:3] if not str(a).startswith("-")]
        return " ".join([prog] + sub[: 2 if sub[:1] == ["probe"] else 1])
    return prog


def role(args) -> str:
    """What a process is, for messages: 'loader' for pltlab-dp load, else its command name."""
    words = command_name(args).split()
    return ROLES.get(words[-1], words[0]) if words[0] == "pltlab-dp" and len(words) > 1 else words[0]


def how_it_ended(returncode: int) -> str:
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exited with status {returncode}"


def describe(proc: subprocess.Popen, what: str | None = None, stderr: Callable[[], str | None] | None = None) -> str:
    """One line: who died and how, with the last thing it wrote to stderr if it exited itself."""
    line = (
        f"{what or role(proc.args)} ({command_name(proc.args)}, pid {proc.pid}) died: {how_it_ended(proc.returncode)}"
    )
    tail = None
    if stderr is not None and proc.returncode is not None and proc.returncode > 0:
        try:
            tail = stderr()
        except (OSError, ValueError):
            tail = None
    return f"{line} ({tail})" if tail else line


class Supervisor:
    def __init__(self):
        self._watched: list[Watched] = []
        self._lock = threading.Lock()

    def watch(self, what: str, proc: subprocess.Popen, stderr=None) -> None:
        with self._lock:
            self._watched = [w for w in self._watched if w.proc is not proc]
            self._watched.append(Watched(what, proc, stderr))

    def forget(self, proc=None) -> None:
        """Stop watching ``proc`` (it is being stopped on purpose), or everything."""
        with self._lock:
            self._watched = [] if proc is None else [w for w in self._watched if w.proc is not proc]

    def watched(self) -> list[Watched]:
        with self._lock:
            return list(self._watched)

    def dead(self) -> Watched | None:
        """The first watched process that has exited (reaped here), or None."""
        for w in self.watched():
            if w.proc.poll() is not None:
                return w
        return None

    def check(self) -> None:
        """ProcessDied if a watched process is dead (call before a load starts)."""
        w = self.dead()
        if w is not None:
            raise ProcessDied(w.describe())

    def _pidfds(self) -> dict[int, Watched]:
        """A pidfd per live watched process. A process already reaped (returncode set) gets none:
        its pid may belong to another process by now."""
        fds = {}
        for w in self.watched():
            if w.proc.poll() is not None:
                continue
            try:
                fds[os.pidfd_open(w.proc.pid)] = w
            except ProcessLookupError:
                continue
        return fds

    # ---- a supervised child process ------------------------------------------------------
    def run(
        self,
        argv: list[str],
        popen: Callable[..., subprocess.Popen],
        timeout: float | None = None,
        input: str | None = None,
        on_line: Callable[[str], str | None] | None = None,
    ) -> subprocess.CompletedProcess:
        """Run ``argv`` (started by ``popen(argv, **pipes)``) to completion, its output captured as
        text, like subprocess.run(capture_output=True, text=True). Raises ProcessDied when a
        watched process dies meanwhile (the child is killed at once) or when the child itself is
        killed by a signal; subprocess.TimeoutExpired (child killed) after ``timeout`` s.
        ``on_line``: called with each line of the child's stdout as it arrives; what it returns
        (if not None) is written to the child's stdin (a conversation; not with ``input``)."""
        self.check()
        p = popen(
            argv,
            stdin=subprocess.PIPE if input is not None or on_line is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            out, err = self._wait(p, timeout, input, on_line)
        except BaseException:
            _kill(p)
            raise
        cp = subprocess.CompletedProcess(argv, p.returncode, out, err)
        w = self.dead()  # a loader that failed because a server died: name the server
        if w is not None:
            raise ProcessDied(w.describe())
        if p.returncode < 0:
            raise ProcessDied(describe(p))
        return cp

    def _wait(self, p: subprocess.Popen, timeout: float | None, input: str | None, on_line=None) -> tuple[str, str]:
        deadline = None if timeout is None else time.monotonic() + timeout
        out_fd, err_fd = p.stdout.fileno(), p.stderr.fileno()
        bufs: dict[int, list[bytes]] = {out_fd: [], err_fd: []}
        feeder = None
        if input is not None:  # from a thread: a child may write before it has read everything
            feeder = threading.Thread(target=_feed, args=(p.stdin, input.encode()), daemon=True)
            feeder.start()
        child = os.pidfd_open(p.pid)
        watch = self._pidfds()
        poller = select.poll()  # (not select(): fds beyond 1024 in a long sweep)
        for fd in (out_fd, err_fd, child, *watch):
            poller.register(fd, select.POLLIN)
        seen = b""  # stdout not yet split into lines (on_line)
        try:
            open_fds = {out_fd, err_fd, child}
            while open_fds:
                left = None if deadline is None else max(0.0, deadline - time.monotonic()) * 1000
                ready = poller.poll(left)
                if not ready:
                    _kill(p)
                    raise subprocess.TimeoutExpired(p.args, timeout)
                for fd, _ in ready:
                    if fd in watch:
                        w = watch[fd]
                        w.proc.wait()
                        _kill(p)
                        raise ProcessDied(w.describe())
                    data = os.read(fd, 1 << 16) if fd != child else b""
                    if data:
                        bufs[fd].append(data)
                        if fd == out_fd and on_line is not None:
                            seen = _answer_lines(p, on_line, data, seen)
                    else:  # EOF, or the child exited
                        poller.unregister(fd)
                        open_fds.discard(fd)
            p.wait()
        finally:
            os.close(child)
            for fd in watch:
                os.close(fd)
            for f in (p.stdout, p.stderr):
                f.close()
            if feeder is not None:
                feeder.join(1)
        text = lambda fd: b"".join(bufs[fd]).decode(errors="replace")  # noqa: E731
        return text(out_fd), text(err_fd)

    # ---- work done in this process -------------------------------------------------------
    def guard(self, on_death: Callable[[], None]) -> "Guard":
        """``with supervisor.guard(kill_the_loader): load()``: a watched death calls
        ``on_death`` at once (from a thread) and the block ends in ProcessDied."""
        return Guard(self, on_death)


class Guard:
    def __init__(self, sup: Supervisor, on_death: Callable[[], None]):
        self.sup, self.on_death = sup, on_death
        self.died: Watched | None = None
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._watch, name="pltlab-supervisor", daemon=True)

    def __enter__(self):
        self.sup.check()
        self._fds = self.sup._pidfds()
        self._thread.start()
        return self

    def _watch(self) -> None:
        poller = select.poll()
        for fd in (self._stop_r, *self._fds):
            poller.register(fd, select.POLLIN)
        for fd, _ in poller.poll():
            if fd in self._fds:
                self.died = self._fds[fd]
                self.died.proc.wait()
                try:
                    self.on_death()
                except Exception:  # noqa: BLE001 - the death is reported either way
                    pass
                return

    def __exit__(self, *exc):
        os.write(self._stop_w, b"x")
        self._thread.join()
        for fd in (self._stop_r, self._stop_w, *self._fds):
            os.close(fd)
        if self.died is None:
            self.died = self.sup.dead()
        if self.died is not None:  # replaces whatever the loader raised when it was killed
            raise ProcessDied(self.died.describe()) from (exc[1] if exc[0] else None)
        return False


def _answer_lines(p: subprocess.Popen, on_line, data: bytes, partial: bytes) -> bytes:
    """Feeds each complete stdout line to ``on_line``, writing its answer to the child's stdin;
    returns the incomplete rest."""
    *lines, rest = (partial + data).split(b"\n")
    for line in lines:
        answer = on_line(line.decode(errors="replace"))
        if answer is not None:
            try:
                p.stdin.write(answer.encode())
                p.stdin.flush()
            except (BrokenPipeError, OSError):
                pass  # the child is gone: its exit status tells
    return rest


def _feed(f, data: bytes) -> None:
    try:
        f.write(data)
        f.close()
    except (BrokenPipeError, OSError, ValueError):
        pass


def _kill(p: subprocess.Popen) -> None:
    if p.poll() is None:
        p.kill()
    p.wait()
