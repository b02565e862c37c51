"""HTTP versions: one table, the one place a protocol is named. A row: the `protocol` knob's value,
its ALPN id (also the name loaders report per request), its transport, whether it multiplexes
requests on a connection, the recorded protocols (HAR `httpVersion`) replayed as it, and the
knobs that apply to it alone. HTTP/3 joins as a row (transport udp) plus its own modules.

The validity rule (``expected``): a request to an https origin goes over the protocol its replay
address offers (ALPN), any other over the fallback (HTTP/1.1).
"""

from __future__ import annotations

from dataclasses import dataclass

from pltlab.errors import PltError


@dataclass(frozen=True)
class Protocol:
    name: str  # the protocol knob's value
    alpn: str  # ALPN id; the protocol a loader reports for a request
    transport: str  # "tcp" or "udp"
    multiplexed: bool  # many requests at once on one connection
    recorded: tuple[str, ...]  # recorded protocols (lower case) replayed as this one
    knobs: tuple[str, ...] = ()  # knobs that apply to this protocol only

    def offers(self) -> list[str]:
        """The ALPN ids a replay address of this protocol offers, preferred first (the fallback
        always: a client without this protocol still loads)."""
        return [self.alpn] + ([FALLBACK_ALPN] if self.alpn != FALLBACK_ALPN else [])


FALLBACK_ALPN = "http/1.1"
PROTOCOLS = (
    Protocol("h1", FALLBACK_ALPN, "tcp", False, ("http/1.0", "http/1.1")),
    # (h3 and spdy recordings: replayed as h2 until HTTP/3 is a row of its own)
    Protocol("h2", "h2", "tcp", True, ("h2", "h3", "spdy"), knobs=("server_priority",)),
)
BY_NAME = {p.name: p for p in PROTOCOLS}
RECORDED = "recorded"  # the knob's value: each origin over what its page recorded
CHOICES = (RECORDED, *BY_NAME)
FALLBACK = next(p for p in PROTOCOLS if p.alpn == FALLBACK_ALPN)


def get(name: str) -> Protocol:
    """A protocol by its knob value; one PltError line otherwise."""
    if name not in BY_NAME:
        raise PltError(f"unknown protocol {name!r} (choose from {', '.join(BY_NAME)})")
    return BY_NAME[name]


def of_recorded(recorded: str | None) -> Protocol:
    """The protocol a recorded one (a HAR's httpVersion) is replayed as: the fallback if unknown."""
    r = (recorded or "").lower()
    return next((p for p in PROTOCOLS if r in p.recorded), FALLBACK)


def by_alpn(alpn: str | None) -> Protocol | None:
    """The protocol a loader reported for a request (its ALPN id), or None (not reported, unknown)."""
    a = (alpn or "").lower()
    return next((p for p in PROTOCOLS if p.alpn == a), None)


def expected(scheme: str, offered: Protocol | None) -> str:
    """The ALPN id a request should report: the protocol its https origin's address offers, else
    the fallback (plain http is always HTTP/1.1)."""
    return offered.alpn if scheme == "https" and offered is not None else FALLBACK_ALPN


def preferred(a: Protocol, b: Protocol) -> Protocol:
    """Of two protocols an address could offer, the one it offers (the later row of the table)."""
    return a if PROTOCOLS.index(a) >= PROTOCOLS.index(b) else b


def applies(protocol: str, knob: str) -> bool:
    """Whether ``knob`` matters under the protocol knob's value ``protocol`` (a knob no row claims:
    always; "recorded": wherever some row claims it)."""
    claimed = [p for p in PROTOCOLS if knob in p.knobs]
    if not claimed:
        return True
    return protocol == RECORDED or any(p.name == protocol for p in claimed)
