"""Joining a Ray cluster in bounded time, at the address given.

Left to itself, Ray dials this machine's node address instead of a loopback address it is given
(127.0.0.1, localhost), and where nothing answers it retries for many minutes, printing warnings
every few seconds, inside C++ calls where Python's signal handlers (Ctrl-C, SIGTERM) do not run.
Here: the address is checked (HOST:PORT), its port must accept a TCP connection within the
timeout, then ray.init runs in a thread that the caller waits for at most the timeout (after
that it is abandoned: the process is expected to end), with Ray told to keep a loopback address
and its messages (file descriptor 2) in a log file unless PLTLAB_CLUSTER_VERBOSE is set. A
signal while waiting ends the wait at once.
"""

import atexit
import ipaddress
import logging
import os
import signal
import socket
import sys
import threading
import time

import ray
from ray._private import ray_constants, services
from ray._private import worker as ray_worker

from pltlab.errors import PltError

CONNECT_TIMEOUT_S = 20.0  # default of --connect-timeout: the TCP check and ray.init together
LOCAL_START_S = 120.0  # `--cluster local`: starting Ray on this machine
VERBOSE_ENV = "PLTLAB_CLUSTER_VERBOSE"  # set (to anything but 0): Ray's messages on the terminal

_pending: list[threading.Thread] = []  # a ray.init abandoned after its timeout, still running
_terminated: list[int] = []  # SIGTERMs noted (Ray reports them as SystemExit(1))
_noting: list = []  # the handlers that note them
# The thread that started a local Ray waits here until leave(): Ray's processes die with the
# thread that started them (PR_SET_PDEATHSIG follows the thread, not the process).
_release = threading.Event()


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def parse(address: str, what: str, also: str = "") -> tuple[str, int]:
    """HOST:PORT (an IPv6 host in brackets) -> (host, port), or one error line (``also``: the
    other words the option takes, e.g. " or local")."""
    host, sep, port = address.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise PltError(f"{what}: not an address: give HOST:PORT (as `pltlab cluster up` prints it){also}")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def check_port(host: str, port: int, timeout: float, what: str) -> None:
    """Something accepts TCP connections at host:port within ``timeout`` seconds, or one line
    saying what did not answer."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return
    except socket.gaierror as e:
        raise PltError(f"{what}: unknown host {host!r} ({e.strerror})") from None
    except ConnectionRefusedError:
        why = f"nothing listens at {host}:{port} (connection refused)"
    except TimeoutError:
        why = f"no answer from {host}:{port} within {timeout:g} s (a slow network: --connect-timeout)"
    except OSError as e:
        why = f"{host}:{port}: {e.strerror or type(e).__name__}"
    raise PltError(f"{what}: no Ray cluster answers: {why}; is it up (pltlab cluster up), is the address right?")


def auto_address(what: str) -> str:
    """The address of the Ray cluster this machine runs (the one `ray start` last recorded)."""
    try:
        with _loopback_kept(True):
            return services.canonicalize_bootstrap_address_or_die("auto")
    except ConnectionError:
        raise PltError(f"{what}: no Ray cluster runs on this machine: give its address (HOST:PORT)") from None


class _loopback_kept:
    """Ray replaces a loopback address by this machine's node address unless it treats the
    machine as a cluster of its own (RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0, read once at import):
    the same switch, set while ``keep``."""

    def __init__(self, keep: bool):
        self.keep = keep

    def __enter__(self):
        self.old = getattr(ray_constants, "ENABLE_RAY_CLUSTER", None)
        if self.keep and self.old is not None:
            ray_constants.ENABLE_RAY_CLUSTER = False
        return self

    def __exit__(self, *exc):
        if self.keep and self.old is not None:
            ray_constants.ENABLE_RAY_CLUSTER = self.old


def _dialled(address: str, host: str) -> str:
    """The address ray.init dials for ``address`` (with the loopback switch set): the same host,
    or another loopback name of it."""
    canonical = getattr(services, "canonicalize_bootstrap_address", None)
    if canonical is None:  # another Ray: trust it
        return address
    got = canonical(address) or address
    ghost = got.rpartition(":")[0].strip("[]")
    return address if ghost == host or (is_loopback(ghost) and is_loopback(host)) else got


class _RayOutput:
    """Ray's messages (its C++ side writes to file descriptor 2) into ``log`` while connecting.
    Kept there for good if the connection is abandoned (a thread still in ray.init may write
    more), Python's own sys.stderr then going to the terminal through a copy."""

    def __init__(self, log: str | None, address: str):
        self.log, self.address, self.saved = log, address, None

    def __enter__(self):
        if self.log is None:
            return self
        fd = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(fd, f"--- {time.strftime('%Y-%m-%d %H:%M:%S')} pltlab: joining {self.address}\n".encode())
        for f in (sys.stdout, sys.stderr):
            f.flush()
        self.saved = os.dup(2)
        os.dup2(fd, 2)
        os.close(fd)
        return self

    def __exit__(self, *exc):
        self.restore()  # (nothing left to do once restored or abandoned)

    def restore(self) -> None:
        if self.saved is not None:
            sys.stderr.flush()
            os.dup2(self.saved, 2)
            os.close(self.saved)
            self.saved = None

    def abandon(self) -> None:
        if self.saved is None:
            return
        try:
            ours = sys.stderr.fileno() == 2
        except (AttributeError, OSError, ValueError):
            ours = False
        if ours:
            sys.stderr.flush()
            sys.stderr = os.fdopen(self.saved, "w", buffering=1, errors="backslashreplace")
        else:
            os.close(self.saved)
        self.saved = None


def join(
    address: str,
    *,
    what: str,
    timeout: float = CONNECT_TIMEOUT_S,
    log: str | None = None,
    local: dict | None = None,
) -> bool:
    """Connect this process to the Ray cluster at ``address`` (HOST:PORT), or start one here
    (``address`` "local", ray.init's arguments in ``local``), within ``timeout`` seconds
    (a local start: LOCAL_START_S at least). ``what`` begins every error line (the option and
    address, e.g. "--cluster 10.0.0.1:6379"); ``log``: the file for Ray's messages (none with
    PLTLAB_CLUSTER_VERBOSE). Returns whether this call connected (the caller disconnects)."""
    if ray.is_initialized():
        return False
    if not timeout > 0:
        raise PltError(f"invalid --connect-timeout {timeout:g}: must be more than 0 seconds")
    if any(t.is_alive() for t in _pending):
        raise PltError(f"{what}: an earlier attempt to join a Ray cluster is still waiting: start a new process")
    log = None if verbose() else log
    where = f" (Ray's messages: {log})" if log else ""
    t0 = time.monotonic()
    if address == "local":
        host, kw, limit = "", {"address": "local", **(local or {})}, max(timeout, LOCAL_START_S)
    else:
        host, port = parse(address, what, " or local")
        check_port(host, port, timeout, what)
        kw, limit = {"address": address}, timeout
    kw.update(log_to_driver=False, logging_level=logging.WARNING)
    box: dict = {}
    done = threading.Event()

    def init() -> None:
        try:
            with _loopback_kept(is_loopback(host)):
                if host and (dial := _dialled(address, host)) != address:
                    raise PltError(f"{what}: Ray would dial {dial} instead of {address} (another Ray version?)")
                ray.init(**kw)
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box["error"] = e
        finally:
            done.set()
        if address == "local" and "error" not in box:
            _release.wait()  # (until leave(): the local Ray's processes live as long as this thread)

    out = _RayOutput(log, address)
    with out:
        _release.clear()
        th = threading.Thread(target=init, name="pltlab-ray-join", daemon=True)
        th.start()
        try:
            finished = done.wait(max(0.0, limit - (time.monotonic() - t0)))
        except BaseException:  # Ctrl-C, SIGTERM
            _settle(th, done, out, address == "local")
            raise
        if not finished:
            _abandon(th, out)
            if address == "local":
                raise PltError(f"--cluster local: Ray did not start within {limit:g} s{where}")
            if _said(log, ("Unauthenticated", "InvalidAuthToken")):
                raise PltError(
                    f"{what}: the Ray cluster did not accept this machine's token (none given, or another "
                    f"cluster's): copy the head's ~/.ray/auth_token here, or set RAY_AUTH_TOKEN{where}"
                )
            raise PltError(
                f"{what}: {address} accepts connections but no Ray cluster answered within {limit:g} s "
                f"(not a Ray head's port, or this machine is not one of its nodes; a slow network: "
                f"--connect-timeout){where}"
            )
        out.restore()
    _reclaim_sigterm()
    e = box.get("error")
    if isinstance(e, PltError):
        raise e
    if e is not None:
        first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
        raise PltError(f"{what}: cannot join the Ray cluster: {first}{where}") from e
    return True


def _said(log: str | None, words: tuple[str, ...]) -> bool:
    """Ray's messages in ``log`` (its last 64 kB) contain one of ``words``."""
    if log is None:
        return False
    try:
        with open(log, "rb") as f:
            f.seek(max(0, os.path.getsize(log) - 65536))
            text = f.read().decode(errors="replace")
    except OSError:
        return False
    return any(w in text for w in words)


def _reclaim_sigterm() -> None:
    """Ray's C++ side installs its crash handler for SIGTERM too (it prints a crash report and
    the process later aborts): SIGTERM goes back to this process's own handler (the sweep's: an
    orderly stop), as Python knows it."""
    if threading.current_thread() is threading.main_thread():
        own = signal.getsignal(signal.SIGTERM)
        signal.signal(signal.SIGTERM, own if own is not None else signal.SIG_DFL)


def note_sigterm() -> None:
    """Until the SIGTERM handler is replaced, a SIGTERM is noted (terminated()) before the handler
    runs."""
    own = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is not threading.main_thread() or not callable(own) or own in _noting:
        return

    def on_term(signum, frame):
        _terminated.append(signum)
        own(signum, frame)

    _noting.append(on_term)
    signal.signal(signal.SIGTERM, on_term)


def terminated() -> bool:
    """A SIGTERM came (note_sigterm): Ray turns the SystemExit a handler raises inside its waits
    into SystemExit(1), and the caller says 128 + SIGTERM again."""
    return bool(_terminated)


def _settle(th: threading.Thread, done: threading.Event, out: _RayOutput, started_here: bool) -> None:
    """Interrupted while waiting: a local start is let finish (a few seconds) and shut down, so
    none of its processes is left; joining a cluster is abandoned (it started nothing here)."""
    if started_here:
        try:
            if done.wait(LOCAL_START_S) and ray.is_initialized():
                leave()
                out.restore()
                return
        except BaseException:  # noqa: BLE001 - a second signal: give up at once
            pass
    _abandon(th, out)


def leave() -> None:
    """Disconnect from the cluster joined by join(); a local one is shut down."""
    try:
        ray.shutdown()
    finally:
        _release.set()


def _abandon(th: threading.Thread, out: _RayOutput) -> None:
    """Leave a ray.init that does not return: its thread ends with the process, Ray's exit hook
    (which would wait for it) is dropped, its messages stay in the log."""
    _pending.append(th)
    atexit.unregister(ray_worker.shutdown)
    out.abandon()
