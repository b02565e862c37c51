"""Kernel netem backend: a veth pair between client and server namespaces with netem on each end.

Used where the kernel has sch_netem (`--backend netem`); `auto` falls back to the user-space
emulator when it does not (as on the machines this project is developed on).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pltlab.net import nsutil

if TYPE_CHECKING:  # the spec module names the backends (pltlab.net.backends), which import this
    from pltlab.net.wan import LinkSpec

_available: bool | None = None


def available(probe_ns: str) -> bool:
    """Whether this kernel can create a netem qdisc (probed once, in a namespace of ours)."""
    global _available
    if _available is None:
        cp = nsutil.run(probe_ns, ["tc", "qdisc", "add", "dev", "lo", "root", "netem", "delay", "1ms"], check=False)
        _available = cp.returncode == 0
        if _available:
            nsutil.run(probe_ns, ["tc", "qdisc", "del", "dev", "lo", "root"], check=False)
    return _available


def _netem_args(delay_us: int, rate: int | None, loss: float, link: LinkSpec) -> list[str]:
    """Queues in packets only, no traces: pltlab.net.backends refuses the rest before."""
    args = ["delay", f"{delay_us}us", "limit", str(link.queue_packets or 1000)]
    if rate:
        args += ["rate", f"{rate}bit"]
    if loss:
        args += ["loss", f"{loss * 100:.6f}%"]
    return args


class NetemLink:
    name = "netem"

    def __init__(self, client_ns: str, server_ns: str, dev: str, link: LinkSpec):
        self.client_ns, self.server_ns, self.dev, self.link = client_ns, server_ns, dev, link
        self.stats = None

    def start(self) -> None:
        up = _netem_args(self.link.delay_up_us, self.link.rate_up_bps, self.link.loss_up, self.link)
        down = _netem_args(self.link.delay_down_us, self.link.rate_down_bps, self.link.loss_down, self.link)
        nsutil.run(self.client_ns, ["tc", "qdisc", "replace", "dev", self.dev, "root", "netem", *up])
        nsutil.run(self.server_ns, ["tc", "qdisc", "replace", "dev", self.dev, "root", "netem", *down])

    def alive(self) -> bool:
        return True

    def stop(self) -> dict:
        self.stats = {"event": "stats", "backend": "netem"}
        return self.stats
