"""Link backends: the one registry of what can emulate the link between the client and the
origins, what each supports, and its hooks used by net/topology.py (the device each side gets,
the link process). `auto` resolves through it; a backend refuses what it does not support in
one line, from its declared capabilities."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pltlab.errors import PltError
from pltlab.net import netem
from pltlab.net.emulator import UserspaceLink

# What a run may ask of a link beyond delay, rate and random loss, as messages name it.
CAPABILITIES = {
    "overrides": "per-origin RTT overrides",
    "traces": "delivery traces",
    "queue_bytes": "queue limits in bytes",
    "pcap": "pcaps of the link",
    "stats": "the emulator's figures (lateness, queue waits)",
    "bursty_loss": "bursty (Gilbert-Elliott) loss",
}


def needs(spec) -> list[str]:
    """The capabilities a TopologySpec asks for (figures are welcome, never needed)."""
    link = spec.link
    asked = {
        "overrides": bool(spec.overrides),
        "traces": bool(link.trace_up or link.trace_down),
        "queue_bytes": link.queue_bytes is not None,
        "pcap": bool(spec.pcap),
        "bursty_loss": link.loss_burst != 1 and bool(link.loss_up or link.loss_down),
    }
    return [c for c, on in asked.items() if on]


@dataclass(frozen=True)
class LinkBackend:
    name: str
    what: str  # for --help
    supports: frozenset[str]  # of CAPABILITIES
    available: Callable[[str], bool]  # probed in a namespace of the run (the client's)
    missing: str  # why it is not available, when it is not
    # The link device on one side (netlink session `ipr` in that namespace): `peer_ns` is the
    # server namespace when called from the client side, None on the server side.
    make_device: Callable[[object, str, str | None], None]
    link: Callable[[object], object]  # the Topology -> its link, to start (start, alive, stop)


def _tun(ipr, name: str, peer_ns: str | None) -> None:
    ipr.link("add", ifname=name, kind="tuntap", mode="tun")


def _veth(ipr, name: str, peer_ns: str | None) -> None:
    if peer_ns is not None:  # one veth pair, made from the client side
        ipr.link("add", ifname=name, kind="veth", peer={"ifname": name, "net_ns_fd": peer_ns})


def _userspace(topo) -> UserspaceLink:
    cfg = topo.link_config()
    return UserspaceLink(cfg, topo.workdir, topo.server_ns)


def _netem(topo) -> netem.NetemLink:
    return netem.NetemLink(topo.client_ns, topo.server_ns, topo.tun, topo.spec.link)


# In the order `auto` prefers them.
BACKENDS: tuple[LinkBackend, ...] = (
    LinkBackend(
        "netem",
        "the kernel's netem qdisc on a veth pair",
        frozenset(),
        netem.available,
        "this kernel has no netem qdisc",
        _veth,
        _netem,
    ),
    LinkBackend(
        "userspace",
        "the TUN emulator pltlab-dp link",
        frozenset(CAPABILITIES),
        lambda ns: True,
        "",
        _tun,
        _userspace,
    ),
)
BY_NAME = {b.name: b for b in BACKENDS}
CHOICES = ("auto", *BY_NAME)


def _refusal(b: LinkBackend, spec) -> str | None:
    missing = [c for c in needs(spec) if c not in b.supports]
    if not missing:
        return None
    others = [o.name for o in BACKENDS if missing[0] in o.supports]
    return f"{CAPABILITIES[missing[0]]} need the {' or '.join(others)} backend, not {b.name}"


def resolve(spec, probe_ns: str) -> LinkBackend:
    """The backend a TopologySpec runs on: the one it names, or for `auto` the first available
    one that supports what it asks; one PltError line otherwise."""
    if spec.backend != "auto":
        b = BY_NAME[spec.backend]
        if not b.available(probe_ns):
            usable = [o.name for o in BACKENDS if o is not b]
            raise PltError(f"--backend {b.name}: {b.missing} (use --backend {' or '.join(usable)} or auto)")
        why = _refusal(b, spec)
        if why:
            raise PltError(why)
        return b
    found = [b for b in BACKENDS if b.available(probe_ns)]
    for b in found:
        if _refusal(b, spec) is None:
            return b
    raise PltError(_refusal(found[0], spec) if found else "no link backend is available here")
