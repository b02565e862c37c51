"""The network a page was recorded over, inferred from its recorded timings (HAR `timings`,
DevTools logs as converted to them): what `--network recorded` replays (pltlab.run.recorded,
docs/fidelity.md).

Pure: a Page in, an ``Inference`` out. What is inferred, and from what:

    RTT per host     median over the host's new connections (``connect`` >= 0) of the TCP
                     handshake: ``connect`` minus ``ssl`` (HAR 1.2 counts the TLS time inside
                     connect; where ssl >= connect, as some exporters write it, connect alone).
                     The page's RTT: the median over every new connection; a host without a
                     new connection of its own (reused, coalesced, preconnected) gets it.
    TLS cross-check  each handshake's ``ssl`` in RTTs of its host: ~1 (TLS 1.3), ~2 (TLS 1.2);
                     hosts far from both are noted, never used.
    think time       per response: ``wait`` minus its host's RTT (the request's round trip),
                     clipped at 0 (noted when clipped).
    download rate    every response's bytes over the union of their ``receive`` phases (parallel
                     transfers add up); at least RATE_MIN_BYTES over RATE_MIN_MS. A lower bound of
                     the link's rate: slow start and idle servers count as link time (docs/fidelity.md).
    DNS              per host its first lookup (``dns`` > 0); the page's: their median.

What could not be used is counted once per kind in ``notes`` (entries without timings, reused
connections, -1 values, clipped think times, ...). The recorded timings are kept on each object
at import (``TIMINGS_KEY`` in Obj.extras, the connection id in ``CONNECTION_KEY``) and the page's
onContentLoad in Page.extras (``DCL_KEY``); onLoad is Page.on_load_ms.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pltlab.archive.model import Page
from pltlab.errors import PltError

TIMINGS_KEY = "timings"  # Obj.extras: the entry's recorded timings {phase: ms}, -1 = not applicable
CONNECTION_KEY = "connection"  # Obj.extras: the recorded connection id (HAR `connection`)
DCL_KEY = "on_content_load_ms"  # Page.extras: the recording's onContentLoad
PHASES = ("blocked", "dns", "connect", "ssl", "send", "wait", "receive")
MAX_PHASE_MS = 3_600_000.0  # an hour: a larger phase is a broken recording, read as absent
RATE_MIN_BYTES = 64 * 1024  # fewer bytes received say little of the link's rate
RATE_MIN_MS = 5.0  # a shorter time receiving is near a recording's timer resolution
TLS_RTTS = (0.5, 2.5)  # a handshake outside this many RTTs is noted (neither TLS 1.3 nor 1.2)


def recorded_timings(entry: dict) -> dict | None:
    """An entry's `timings` as {phase: ms} (numbers only; -1 kept: "does not apply"), or None
    when it has none. Values that are not numbers, negative other than -1, or absurd are left out."""
    t = entry.get("timings")
    if not isinstance(t, dict):
        return None
    out = {}
    for k in PHASES:
        v = t.get(k)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v != v:
            continue
        if v == -1 or 0 <= v <= MAX_PHASE_MS:
            out[k] = float(v)
    return out or None


def _phase(t: dict, k: str) -> float | None:
    """A phase's time, None where absent or -1."""
    v = t.get(k)
    return v if v is not None and v >= 0 else None


@dataclass
class HostNet:
    host: str
    rtt_ms: float | None  # None: no new connection of its own (the page's RTT applies)
    connections: int = 0  # new connections sampled
    tls_rtts: float | None = None  # median TLS handshake in RTTs (cross-check)
    dns_ms: float | None = None


@dataclass
class Inference:
    rtt_ms: float  # the page's: median over every new connection
    hosts: dict[str, HostNet]
    think_ms: list[float | None]  # per page object (None: no wait recorded)
    rate_bps: int | None  # None: not inferred
    rate_samples: int
    dns_ms: float | None  # median first lookup over hosts (None: none recorded)
    timed: int  # objects with recorded timings
    on_load_ms: float | None
    on_content_load_ms: float | None
    notes: list[str] = field(default_factory=list)

    def host_rtt_ms(self, host: str) -> float:
        h = self.hosts.get(host)
        return h.rtt_ms if h is not None and h.rtt_ms is not None else self.rtt_ms

    def summary(self) -> dict:
        return {
            "rtt_ms": round(self.rtt_ms, 3),
            "host_rtt_ms": {h: None if v.rtt_ms is None else round(v.rtt_ms, 3) for h, v in sorted(self.hosts.items())},
            "rate_bps": self.rate_bps,
            "rate_samples": self.rate_samples,
            "dns_ms": None if self.dns_ms is None else round(self.dns_ms, 3),
            "think_ms_total": round(sum(t for t in self.think_ms if t), 3),
            "timed_objects": self.timed,
            "notes": list(self.notes),
        }


def infer(page: Page, where: str = "") -> Inference:
    """The recorded network of ``page``; one PltError line naming ``where`` (the file) when its
    recording has no timings to infer an RTT from."""
    where = where or page.id or page.url
    notes: dict[str, int] = {}

    def note(kind: str, n: int = 1) -> None:
        notes[kind] = notes.get(kind, 0) + n

    tcp: dict[str, list[float]] = {}
    ssl: dict[str, list[float]] = {}
    dns: dict[str, float] = {}
    timed = 0
    for o in page.objects:
        t = o.extras.get(TIMINGS_KEY)
        if not isinstance(t, dict) or not t:
            note("no_timings")
            continue
        timed += 1
        if any(t.get(k) == -1 for k in ("wait", "receive")):
            note("minus_one")
        d = _phase(t, "dns")
        if d is not None and d > 0 and o.host not in dns:
            dns[o.host] = d
        c = _phase(t, "connect")
        if c is None or c == 0:
            note("reused")  # -1: an open connection; 0: one the browser had opened before
            continue
        s = _phase(t, "ssl")
        if s is not None and 0 < s < c:
            tcp.setdefault(o.host, []).append(c - s)
            ssl.setdefault(o.host, []).append(s)
        else:
            if s is not None and s >= c:
                note("ssl_outside")
            tcp.setdefault(o.host, []).append(c)
    samples = [v for vs in tcp.values() for v in vs]
    if not samples:
        why = "no entry has timings" if not timed else "no entry records a new connection's connect time"
        raise PltError(f"{where}: cannot replay the recorded network: {why} (RTTs cannot be inferred)")
    page_rtt = statistics.median(samples)
    hosts: dict[str, HostNet] = {}
    for h in sorted({o.host for o in page.objects}):
        rtt = statistics.median(tcp[h]) if h in tcp else None
        hn = HostNet(h, rtt, len(tcp.get(h, [])), dns_ms=dns.get(h))
        if rtt is None:
            note("host_without_connection")
        if ssl.get(h) and rtt:
            hn.tls_rtts = statistics.median(ssl[h]) / rtt
            if not TLS_RTTS[0] <= hn.tls_rtts <= TLS_RTTS[1]:
                note("tls_disagrees")
        hosts[h] = hn

    think: list[float | None] = []
    for o in page.objects:
        t = o.extras.get(TIMINGS_KEY)
        w = _phase(t, "wait") if isinstance(t, dict) else None
        if w is None or o.from_cache:
            think.append(None)
            continue
        rtt = hosts[o.host].rtt_ms if hosts[o.host].rtt_ms is not None else page_rtt
        if w < rtt:
            note("think_clipped")
        think.append(max(0.0, w - rtt))

    rate, rate_n = _rate(page)
    if rate is None:
        note("no_rate")
    lookups = list(dns.values())
    dcl = page.extras.get(DCL_KEY)
    return Inference(
        rtt_ms=page_rtt,
        hosts=hosts,
        think_ms=think,
        rate_bps=rate,
        rate_samples=rate_n,
        dns_ms=statistics.median(lookups) if lookups else None,
        timed=timed,
        on_load_ms=page.on_load_ms,
        on_content_load_ms=dcl if isinstance(dcl, (int, float)) and not isinstance(dcl, bool) else None,
        notes=[_NOTES[k].format(n=n) for k, n in notes.items()],
    )


def _rate(page: Page) -> tuple[int | None, int]:
    """(bit/s, responses) of the aggregate download rate: every response's bytes over the time
    during which at least one response was being received (the union of the receive phases, each
    placed after its entry's earlier phases), so that parallel transfers add up. None where the
    responses are too few bytes or too short to tell."""
    spans, total = [], 0
    for o in page.objects:
        t = o.extras.get(TIMINGS_KEY)
        r = _phase(t, "receive") if isinstance(t, dict) else None
        if r is None or r <= 0 or o.start_ms is None or o.from_cache or o.wire_size <= 0:
            continue
        begin = o.start_ms + sum(v for k in ("blocked", "dns", "connect", "send", "wait") if (v := _phase(t, k)))
        spans.append((begin, begin + r))
        total += o.wire_size
    busy, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            busy += b - max(a, end)
            end = b
    if total < RATE_MIN_BYTES or busy < RATE_MIN_MS:
        return None, 0
    return round(total * 8 / (busy / 1000)), len(spans)


_NOTES = {
    "no_timings": "{n} entries without recorded timings: no sample, no think time (the replay answers at once)",
    "minus_one": "{n} entries with wait or receive -1 (not recorded): no think time or rate sample from them",
    "reused": "{n} requests on connections already open (connect -1 or 0): no RTT sample",
    "ssl_outside": "{n} new connections whose ssl is not inside connect: their connect taken as the TCP handshake",
    "host_without_connection": "{n} hosts without a new connection of their own: the page's median RTT",
    "tls_disagrees": f"{{n}} hosts whose TLS handshake is outside {TLS_RTTS[0]:g}-{TLS_RTTS[1]:g} of their RTT "
    "(neither TLS 1.3 nor 1.2: a slow server or a congested link; the RTT is from TCP's handshake)",
    "think_clipped": "{n} responses whose wait is shorter than their host's RTT: think time 0",
    "no_rate": f"fewer than {RATE_MIN_BYTES // 1024} KiB received, or over less than {RATE_MIN_MS:g} ms: "
    "the download rate is not inferred",
}
