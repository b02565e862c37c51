"""The user-space link emulator (`pltlab-dp link`) as seen from the control plane."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pltlab import dataplane
from pltlab.dataplane import ABSENT
from pltlab.errors import PltError
from pltlab.net import nsutil
from pltlab.net.loss import gilbert

if TYPE_CHECKING:  # the spec module names the backends (pltlab.net.backends), which import this
    from pltlab.net.wan import TopologySpec


@dataclass(kw_only=True)
class LinkSide:
    """One end of the link: a namespace file and the TUN device in it."""

    netns: str
    tun: str


@dataclass(kw_only=True)
class LinkGilbert:
    """Gilbert-Elliott loss of one direction (rust/src/link/loss.rs): per packet, good -> bad with
    probability p, bad -> good with r; the bad state loses loss_bad of its packets, the good
    loss_good."""

    p: float
    r: float
    loss_good: float
    loss_bad: float


@dataclass(kw_only=True)
class LinkDirection:
    """One direction of the link (durations in us, rates in bit/s; None: unlimited)."""

    delay_us: int
    rate_bps: int | None
    trace: str | None
    queue_packets: int | None
    queue_bytes: int | None
    loss: float
    seed: int
    gilbert: LinkGilbert | None = ABSENT  # bursty loss instead of ``loss`` (then 0)


@dataclass(kw_only=True)
class LinkOverride:
    """One origin address's own delays and loss (None: the direction's)."""

    addr: str
    delay_us_up: int | None
    delay_us_down: int | None
    loss_up: float | None
    loss_down: float | None


@dataclass(kw_only=True)
class LinkConfig:
    """`pltlab-dp link --config` (rust/src/link/config.rs `Config`; `pltlab-dp schema link-config`).
    ABSENT: not written, the emulator's default."""

    client: LinkSide
    server: LinkSide
    uplink: LinkDirection
    downlink: LinkDirection
    overrides: list[LinkOverride]
    busy_wait_us: int
    linger_us: int
    standby_us: int
    stall_us: int
    stall_every_ms: int
    sched_fifo: bool
    idle_poll: bool
    late_event_us: int
    pcap: str | None
    stats: str | None
    cpu: int | None = ABSENT
    mlock: bool = ABSENT
    offload: bool = ABSENT


def link_config(
    spec: TopologySpec, *, client_ns: str, server_ns: str, tun: str, origin_ips: list[str], stats: str | None
) -> LinkConfig:
    """The emulator's configuration for a topology: its link, per-origin overrides (origin i at
    ``origin_ips[i]``) and emulator settings; ``stats``: the file receiving its statistics."""
    link = spec.link

    def direction(delay, rate, trace, loss, seed) -> LinkDirection:
        ge = gilbert(loss, link.loss_burst)  # (None: random loss, as before)
        return LinkDirection(
            delay_us=delay,
            rate_bps=rate,
            trace=trace,
            queue_packets=link.queue_packets,
            queue_bytes=link.queue_bytes,
            loss=loss if ge is None else 0.0,
            seed=seed,
            gilbert=ABSENT if ge is None else LinkGilbert(p=ge[0], r=ge[1], loss_good=0.0, loss_bad=1.0),
        )

    overrides = []
    for o in spec.overrides:
        up = o.rtt_us // 2
        overrides.append(
            LinkOverride(
                addr=origin_ips[o.origin],
                delay_us_up=up,
                delay_us_down=o.rtt_us - up,
                loss_up=o.loss,
                loss_down=o.loss,
            )
        )
    return LinkConfig(
        client=LinkSide(netns=nsutil.ns_path(client_ns), tun=tun),
        server=LinkSide(netns=nsutil.ns_path(server_ns), tun=tun),
        uplink=direction(link.delay_up_us, link.rate_up_bps, link.trace_up, link.loss_up, link.seed * 2 + 1),
        downlink=direction(link.delay_down_us, link.rate_down_bps, link.trace_down, link.loss_down, link.seed * 2 + 2),
        overrides=overrides,
        busy_wait_us=spec.busy_wait_us,
        linger_us=spec.linger_us,
        standby_us=spec.standby_us,
        stall_us=spec.stall_us,
        stall_every_ms=spec.stall_every_ms,
        sched_fifo=spec.sched_fifo,
        idle_poll=spec.idle_poll,
        late_event_us=spec.late_event_us,
        pcap=spec.pcap,
        stats=stats,
    )


# The precision aids `pltlab-dp link` may be asked for (rust/src/link/stats.rs `Aids`), in the
# order they are named: SCHED_FIFO priority, pinning to a CPU, mlockall, the PM QoS request
# that keeps CPUs polling.
AIDS = ("sched_fifo", "cpu", "mlock", "idle_poll")


def aids_missing(doc: dict | None) -> dict[str, str]:
    """The aids asked for and not applied, name -> the emulator's error text, read from its ready
    line or final statistics (the same keys): an aid is missing when its ``<name>_error`` is set
    or its ``<name>_requested`` is true without ``<name>_applied``. Empty: every aid asked for
    applied (or none asked for, or a document that says nothing of them: netem, no emulator)."""
    out = {}
    for name in AIDS:
        err = (doc or {}).get(f"{name}_error")
        refused = (doc or {}).get(f"{name}_requested") is True and (doc or {}).get(f"{name}_applied") is not True
        if err is not None or refused:
            out[name] = str(err) if err is not None else "requested, not applied"
    return out


def aids_column(missing: dict[str, str] | None) -> str | None:
    """The results column ``link_aids_missing``: the missing aids' names, comma-separated ("":
    every aid asked for applied; None: not known)."""
    return None if missing is None else ",".join(missing)


def aid_warning(name: str, error: str) -> str:
    """The one line a run prints the first time an aid is missing (once per aid)."""
    return (
        f"pltlab: warning: link emulator could not apply {name} ({error}): link timing less precise; "
        f"loads still checked for lateness"
    )


class AidWarnings:
    """Which missing aids a run has already warned about: ``new(missing)`` gives the lines of the
    aids not yet reported (each aid once per run, with the first error seen)."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def new(self, missing: dict[str, str] | None) -> list[str]:
        lines = []
        for name, error in (missing or {}).items():
            if name not in self.seen:
                self.seen.add(name)
                lines.append(aid_warning(name, error))
        return lines


class UserspaceLink:
    """Runs `pltlab-dp link` inside the server namespace, attached to both TUN devices."""

    name = "userspace"

    def __init__(self, config: LinkConfig, workdir: str, server_ns: str):
        self.config = config
        self.workdir = workdir
        self.server_ns = server_ns
        self.proc: subprocess.Popen | None = None
        self.stats: dict | None = None
        # the aids asked for and refused (aids_missing), from the ready line: known to every load
        self.aids_missing: dict[str, str] = {}

    def start(self, timeout: float = 10.0) -> None:
        cfg_path = os.path.join(self.workdir, "link.json")
        with open(cfg_path, "w") as f:
            json.dump(dataplane.document(self.config), f, indent=1)
        err_path = os.path.join(self.workdir, "link.stderr")
        self._err = open(err_path, "w+")
        self.proc = nsutil.popen(
            self.server_ns,
            [dataplane.binary(), "link", "--config", cfg_path],
            new_group=True,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([self.proc.stdout], [], [], max(left, 0))
            if not ready:
                self.stop()
                raise PltError(f"link emulator did not become ready within {timeout:.0f} s")
            line = self.proc.stdout.readline()
            if not line:  # exited
                self.proc.wait()
                raise PltError(f"link emulator failed to start: {self._stderr_tail()}")
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("event") == "ready":
                self.aids_missing = aids_missing(msg)
                return

    def _stderr_tail(self) -> str:
        return dataplane.stderr_tail(self._err, f"exit code {self.proc.returncode}")

    def stderr_tail(self) -> str | None:
        """The last line the emulator wrote to stderr (None: nothing)."""
        return dataplane.stderr_tail(self._err, "") or None

    def snapshot(self, timeout: float = 5.0) -> dict | None:
        """Lateness and packets per direction since the previous snapshot (SIGUSR1), or None."""
        return dataplane.snapshot(self.proc, timeout)

    def unimpaired(self, on: bool, timeout: float = 5.0) -> bool:
        """Pass packets unimpaired (no delay, loss or rate: a warm-up visit's) or as configured
        (SIGUSR2 switches, the emulator says which it now is); False if it did not answer."""
        for _ in range(2):  # (it switches: a second time if it was not in the other state)
            got = dataplane.ask(self.proc, signal.SIGUSR2, "unimpaired", timeout)
            if got is None:
                return False
            if got.get("on") is on:
                return True
        return False

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self) -> dict | None:
        """Stop the emulator and return its statistics (None if it had died)."""
        if self.proc is None:
            return self.stats
        p, self.proc = self.proc, None
        for line in reversed(dataplane.terminate(p).splitlines()):
            try:
                msg = json.loads(line)
            except ValueError:
                continue
            if msg.get("event") == "stats":
                self.stats = msg
                break
        self._err.close()
        return self.stats
