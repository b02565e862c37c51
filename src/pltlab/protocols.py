"""HTTP versions: one table, the one place a protocol is named. A row: the `protocol` knob's value,
its ALPN id (also the name loaders report per request), its transport, whether it multiplexes
requests on a connection, the recorded protocols (HAR `httpVersion`) replayed as it, and the
knobs that apply to it alone. HTTP/3 is a row of its own (transport udp), its replay and loader
their own modules (docs/dataplane-interfaces.md "HTTP/3 over QUIC").

Knobs by transport (``TRANSPORT_KNOBS``): the kernel's TCP settings apply to the tcp rows only,
QUIC's own to the udp row; a row's own knobs (``Protocol.knobs``) apply under it only (``ROW_KNOBS``:
those refused elsewhere: keepalive under h1, server_priority under h2 and h3). ``applies`` answers from the table; ``not_applying``
says which knobs of a run are set where they do not apply (refused where the run or experiment is
built: the knobs of ``EXCLUSIVE``), and such a knob holds ``NA`` in its results column.

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
    title: str = ""  # its name in words ("HTTP/3")

    def offers(self) -> list[str]:
        """The ALPN ids a replay address of this protocol offers, preferred first (the fallback
        always: a client without this protocol still loads)."""
        return [self.alpn] + ([FALLBACK_ALPN] if self.alpn != FALLBACK_ALPN else [])


FALLBACK_ALPN = "http/1.1"
PROTOCOLS = (
    Protocol("h1", FALLBACK_ALPN, "tcp", False, ("http/1.0", "http/1.1"), knobs=("keepalive",), title="HTTP/1.1"),
    Protocol("h2", "h2", "tcp", True, ("h2", "spdy"), knobs=("server_priority",), title="HTTP/2"),
    # QUIC on UDP 443 beside TCP: the address's TCP keeps offering the latest tcp row (``over_tcp``)
    Protocol("h3", "h3", "udp", True, ("h3",), knobs=("server_priority",), title="HTTP/3"),
)
BY_NAME = {p.name: p for p in PROTOCOLS}
RECORDED = "recorded"  # the knob's value: each origin over what its page recorded
NA = "n/a"  # a results column's value where its knob does not apply (another transport's)

# The knobs of one transport, each with why it is that transport's alone (the refusal's words).
TRANSPORT_KNOBS: dict[str, dict[str, str]] = {
    "tcp": {
        "tfo": "TFO is TCP's; QUIC's handshake is its own",
        "warm": "TFO cookies are TCP's",
        "icw": "the kernel's initial congestion window is TCP's; QUIC's is quic_icw",
        "cc": "the kernel's congestion control is TCP's; QUIC's is quic_cc",
        "client_rmem": "the client's TCP receive buffer (net.ipv4.tcp_rmem) is TCP's; QUIC's windows are its own",
        "initrwnd": "the client's initial TCP receive window (a route metric) is TCP's",
        # the kernel's TCP sysctls (pltlab.net.wan.TCP_SYSCTLS); quinn has its own loss recovery
        "rack": "RACK (net.ipv4.tcp_recovery) is the kernel TCP's loss detection",
        "tlp": "tail loss probes (net.ipv4.tcp_early_retrans) are the kernel TCP's",
        "ss_after_idle": "net.ipv4.tcp_slow_start_after_idle is the kernel TCP's",
        "sack": "net.ipv4.tcp_sack is the kernel TCP's",
        "frto": "net.ipv4.tcp_frto is the kernel TCP's",
        "wscale": "net.ipv4.tcp_window_scaling is the kernel TCP's",
        "timestamps": "net.ipv4.tcp_timestamps is the kernel TCP's",
    },
    "udp": {
        "quic_cc": "QUIC's congestion control (the replay's and the loader's, in user space); TCP's is cc",
        "quic_icw": "QUIC's initial window; TCP's is icw",
        "h3_discovery": "how a client comes to use HTTP/3 on an h3 address (QUIC's)",
    },
}
KNOB_TRANSPORT = {k: t for t, ks in TRANSPORT_KNOBS.items() for k in ks}
# Knobs a row claims (``Protocol.knobs``) that are refused under the other rows off their default,
# as a transport's are, each with why.
ROW_KNOBS: dict[str, str] = {
    "keepalive": "connection reuse is HTTP/1.1's to forbid (Connection: close); h2 and h3 carry an "
    "origin's requests on one connection",
    "server_priority": "the order of the responses multiplexed on one connection (h2, h3); HTTP/1.1 "
    "carries one response at a time per connection",
}
# Every knob refused where it does not apply (off its default), its results column then ``NA``.
EXCLUSIVE = frozenset(KNOB_TRANSPORT) | frozenset(ROW_KNOBS)
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


def over_tcp(p: Protocol) -> Protocol:
    """What an address offering ``p`` offers over TCP: ``p`` itself, or for a udp row the latest
    tcp row (an h3 address keeps serving h2 and HTTP/1.1 over TCP)."""
    return p if p.transport == "tcp" else [q for q in PROTOCOLS if q.transport == "tcp"][-1]


def speakable(p: Protocol, spoken) -> Protocol:
    """``p``, or if a loader does not speak it (``spoken``: the rows' names it speaks; None: all)
    the latest row before it that it speaks: what "recorded" replays a recording as."""
    if spoken is None or p.name in spoken:
        return p
    before = [q for q in PROTOCOLS[: PROTOCOLS.index(p)] if q.name in spoken]
    return before[-1] if before else FALLBACK


def applies(protocol: str, knob: str) -> bool:
    """Whether ``knob`` matters under the protocol knob's value ``protocol``: a knob a row claims
    only under it, a transport's knob only under that transport's rows, any other always.
    "recorded": wherever some row could (its origins may be of either transport)."""
    if protocol == RECORDED:
        return True
    p = get(protocol)
    claimed = [q for q in PROTOCOLS if knob in q.knobs]
    if claimed and p not in claimed:
        return False
    return KNOB_TRANSPORT.get(knob, p.transport) == p.transport


def not_applying(protocol: str, knob: str) -> str | None:
    """Why ``knob`` does not apply under ``protocol`` (one line: "tfo does not apply to protocol
    h3: TFO is TCP's; ..."), or None where it does."""
    if applies(protocol, knob):
        return None
    why = TRANSPORT_KNOBS.get(KNOB_TRANSPORT.get(knob, ""), {}).get(knob) or ROW_KNOBS.get(knob)
    if why is None:
        rows = ", ".join(q.name for q in PROTOCOLS if knob in q.knobs)
        why = f"it is {rows}'s"
    return f"{knob} does not apply to protocol {protocol}: {why}"
