"""The user-space link emulator (`pltlab-dp link`) as seen from the control plane."""

from __future__ import annotations

import json
import os
import select
import subprocess
import time
from typing import TYPE_CHECKING

from pltlab import dataplane
from pltlab.errors import PltError
from pltlab.net import nsutil

if TYPE_CHECKING:  # the spec module names the backends (pltlab.net.backends), which import this
    from pltlab.net.spec import LinkSpec, OriginOverride


def link_config(
    client_ns: str,
    server_ns: str,
    tun: str,
    link: LinkSpec,
    overrides: list[tuple[str, OriginOverride]],
    busy_wait_us: int,
    sched_fifo: bool,
    pcap: str | None,
    stats: str | None,
    linger_us: int = 0,
    late_event_us: int = 0,
    standby_us: int = 0,
    stall: tuple[int, int] = (0, 0),
    idle_poll: bool = False,
) -> dict:
    def direction(delay, rate, trace, loss, seed):
        return {
            "delay_us": delay,
            "rate_bps": rate,
            "trace": trace,
            "queue_packets": link.queue_packets,
            "queue_bytes": link.queue_bytes,
            "loss": loss,
            "seed": seed,
        }

    ovr = []
    for addr, o in overrides:
        up = o.rtt_us // 2
        ovr.append(
            {"addr": addr, "delay_us_up": up, "delay_us_down": o.rtt_us - up, "loss_up": o.loss, "loss_down": o.loss}
        )
    return {
        "client": {"netns": nsutil.ns_path(client_ns), "tun": tun},
        "server": {"netns": nsutil.ns_path(server_ns), "tun": tun},
        "uplink": direction(link.delay_up_us, link.rate_up_bps, link.trace_up, link.loss_up, link.seed * 2 + 1),
        "downlink": direction(
            link.delay_down_us, link.rate_down_bps, link.trace_down, link.loss_down, link.seed * 2 + 2
        ),
        "overrides": ovr,
        "busy_wait_us": busy_wait_us,
        "linger_us": linger_us,
        "standby_us": standby_us,
        "stall_us": stall[0],
        "stall_every_ms": stall[1],
        "sched_fifo": sched_fifo,
        "idle_poll": idle_poll,
        "late_event_us": late_event_us,
        "pcap": pcap,
        "stats": stats,
    }


class UserspaceLink:
    """Runs `pltlab-dp link` inside the server namespace, attached to both TUN devices."""

    name = "userspace"

    def __init__(self, config: dict, workdir: str, server_ns: str):
        self.config = config
        self.workdir = workdir
        self.server_ns = server_ns
        self.proc: subprocess.Popen | None = None
        self.stats: dict | None = None

    def start(self, timeout: float = 10.0) -> None:
        cfg_path = os.path.join(self.workdir, "link.json")
        with open(cfg_path, "w") as f:
            json.dump(self.config, f, indent=1)
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
                return

    def _stderr_tail(self) -> str:
        return dataplane.stderr_tail(self._err, f"exit code {self.proc.returncode}")

    def stderr_tail(self) -> str | None:
        """The last line the emulator wrote to stderr (None: nothing)."""
        return dataplane.stderr_tail(self._err, "") or None

    def snapshot(self, timeout: float = 5.0) -> dict | None:
        """Lateness and packets per direction since the previous snapshot (SIGUSR1), or None."""
        return dataplane.snapshot(self.proc, timeout)

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
