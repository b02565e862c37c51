"""Kernel netem backend: a veth pair between client and server namespaces with netem on each end.

Used where the kernel has sch_netem (`--backend netem`); `auto` falls back to the user-space
emulator when it does not (as on the machines this project is developed on).
"""

from pltlab.errors import PltError
from pltlab.net import nsutil
from pltlab.net.spec import LinkSpec

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
    if link.queue_bytes is not None:
        raise PltError("the netem backend limits queues in packets only; use --queue N")
    args = ["delay", f"{delay_us}us", "limit", str(link.queue_packets or 1000)]
    if rate:
        args += ["rate", f"{rate}bit"]
    if loss:
        args += ["loss", f"{loss * 100:.6f}%"]
    return args


class NetemLink:
    name = "netem"

    def __init__(self, client_ns: str, server_ns: str, dev: str, link: LinkSpec):
        if link.trace_up or link.trace_down:
            raise PltError("delivery traces need the userspace backend")
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
