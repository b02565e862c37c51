"""The critical path of one load and its PLT split (pure: request records in, path out; no I/O).

A load's graph is in its request records: each request became requestable when its initiator
(``parent``) arrived (its first byte with ``at_first_byte``) and every request of ``after`` had,
ready ``delay_ms`` (compute) later; a scheduler may hold it back until ``released_ms``; it is sent
(``request_ms``) once a connection is free: a new one's handshake over (``connect_*``,
``tls_end_ms``), or, on a reused HTTP/1.1 connection, the previous response on it arrived; then
one round trip to its first byte and the transfer to its last.

The path is found backwards from the request that ended the load: at each event the walk
follows whichever prerequisite came last (the binding one), so every millisecond from 0 to the
PLT is charged to exactly one kind of work of one request on the path:

  dns       the pool's DNS delay before its first connection
  tcp       a TCP handshake (near 0 with TFO: the request rides in the SYN; none over h3)
  tls       a TLS handshake (and, on h2, the connection preface); over h3 the QUIC handshake,
            TLS inside it: one round trip, full or resumed, ~0 with 0-RTT early data accepted
            (the request goes with the first flight)
  request   a request round trip: sent to first response byte (send + wait)
  transfer  first to last response byte (bandwidth, slow start)
  wait      waits for a connection or a scheduler's priority slot not charged to another request
  compute   delays between an initiator's arrival and the request (parse, script), the tail
            after the last response a calibrated model adds
  other     what the records cannot explain (inconsistent times)

Records without a graph (no ``parent``) still get a path: made only of the request that ended
the load, its connection and the requests before it on that connection.
"""

import json
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pltlab import protocols

KINDS = ("dns", "tcp", "tls", "request", "transfer", "wait", "compute", "other")
LABELS = {
    "dns": "DNS",
    "tcp": "TCP handshakes",
    "tls": "TLS handshakes",
    "request": "request round trips",
    "transfer": "transfer",
    "wait": "waits for a connection",
    "compute": "compute",
    "other": "unexplained",
}
EPS_MS = 1.0  # timestamps of events that follow each other at once differ by up to this


@dataclass
class Req:
    idx: int
    url: str
    host: str
    conn_id: int | None
    new_conn: bool
    tfo: bool
    ready: float
    released: float
    connect_start: float | None
    connect_end: float | None
    tls_end: float | None
    request: float
    first_byte: float
    last_byte: float
    parent: int | None
    after: list[int]
    at_first_byte: bool | None  # None: not known (Chromium): decided by the times
    h2: bool
    quic: bool = False  # h3: the set-up is the QUIC handshake (no TCP)

    @property
    def pool(self) -> tuple:
        p = urlsplit(self.url)
        return (p.scheme, (p.hostname or self.host or "").lower(), p.port)

    @property
    def conn_ready(self) -> float:
        return next(v for v in (self.tls_end, self.connect_end, self.connect_start, self.request) if v is not None)


@dataclass
class Segment:
    kind: str
    idx: int | None
    start_ms: float
    end_ms: float

    @property
    def ms(self) -> float:
        return self.end_ms - self.start_ms


@dataclass
class Path:
    plt_ms: float
    end_ms: float  # the last response byte (plt_ms minus a model's tail)
    segments: list[Segment]  # in time order, covering 0..plt_ms without gaps
    split: dict[str, float]  # ms per kind (KINDS), summing to plt_ms
    objects: list[int]  # idx of the requests on the path, in time order
    handshakes: list[dict]  # connections whose set-up lies on the path (opener's idx, url, ms)
    new_connections: int
    requests: dict[int, Req] = field(repr=False, default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "plt_ms": round(self.plt_ms, 3),
            "end_ms": round(self.end_ms, 3),
            "split_ms": {k: round(v, 3) for k, v in self.split.items()},
            "path": [
                {
                    "idx": i,
                    "url": self.requests[i].url,
                    **{
                        k: round(sum(s.ms for s in self.segments if s.idx == i and s.kind == k), 3)
                        for k in KINDS
                        if any(s.idx == i and s.kind == k for s in self.segments)
                    },
                }
                for i in self.objects
            ],
            "handshakes_on_path": self.handshakes,
            "new_connections": self.new_connections,
        }


def _f(v) -> float | None:
    return None if v is None else float(v)


def _after(v) -> list[int]:
    if v is None or v == "":
        return []
    if isinstance(v, str):
        v = json.loads(v)
    return [int(a) for a in v]


def normalize(records: list[dict]) -> list[Req]:
    """Request records (a loader's, or rows of results.sqlite's requests table) as Req; requests
    that never completed (no last byte) are left out. Missing times fall back on neighbours:
    Chromium's records have no ready_ms (its request start is used) and may lack a send time."""
    out = []
    for r in records:
        last = _f(r.get("last_byte_ms"))
        if last is None:
            continue
        idx = r.get("idx", r.get("index"))
        fb = _f(r.get("first_byte_ms"))
        fb = last if fb is None else min(fb, last)
        req = _f(r.get("request_ms"))
        req = fb if req is None else min(req, fb)
        ready = next(
            (v for v in map(_f, (r.get("ready_ms"), r.get("start_ms"), r.get("released_ms"))) if v is not None), req
        )
        rel = _f(r.get("released_ms"))
        rel = ready if rel is None else max(rel, ready)
        cs, ce, te = _f(r.get("connect_start_ms")), _f(r.get("connect_end_ms")), _f(r.get("tls_end_ms"))
        ts = _f(r.get("tls_start_ms"))
        if ts is not None and ce is not None and ts < ce:  # Chromium: connectEnd includes TLS
            ce, te = ts, (te if te is not None else ce)
        afb = r.get("at_first_byte")
        out.append(
            Req(
                idx=int(idx),
                url=str(r.get("url") or ""),
                host=str(r.get("host") or ""),
                conn_id=None if r.get("conn_id") is None else int(r["conn_id"]),
                new_conn=bool(r.get("new_conn")),
                tfo=bool(r.get("tfo")),
                ready=min(ready, req),
                released=min(rel, req),
                connect_start=cs,
                connect_end=ce,
                tls_end=te,
                request=req,
                first_byte=fb,
                last_byte=last,
                parent=None if r.get("parent") is None else int(r["parent"]),
                after=_after(r.get("after")),
                at_first_byte=None if afb is None else bool(afb),
                h2=getattr(protocols.by_alpn(r.get("protocol")), "multiplexed", False),
                quic=getattr(protocols.by_alpn(r.get("protocol")), "transport", "tcp") == "udp",
            )
        )
    return out


class _Walk:
    def __init__(self, reqs: list[Req], dns_ms: float):
        self.by = {r.idx: r for r in reqs}
        self.dns_ms = dns_ms
        self.segs: list[Segment] = []
        self.setups: list[int] = []  # openers of the connections whose set-up is on the path
        self.t = 0.0
        self.opener: dict[int, Req] = {}
        self.on_conn: dict[int, list[Req]] = {}
        self.pool: dict[tuple, list[Req]] = {}
        for r in sorted(reqs, key=lambda r: (r.request, r.idx)):
            if r.conn_id is not None:
                self.on_conn.setdefault(r.conn_id, []).append(r)
                if r.new_conn and r.connect_start is not None:
                    self.opener.setdefault(r.conn_id, r)
            self.pool.setdefault(r.pool, []).append(r)
        # the first connection of each pool pays its DNS delay
        self.first_conn = {}
        for o in sorted(self.opener.values(), key=lambda o: o.connect_start):
            self.first_conn.setdefault(o.pool, o.idx)

    def add(self, kind: str, idx: int | None, start: float | None) -> None:
        if start is None:
            return
        start = max(start, 0.0)
        if start < self.t:
            self.segs.append(Segment(kind, idx, start, self.t))
            self.t = start

    def sent(self, r: Req) -> tuple[Req, str]:
        """r was sent at self.t: what it waited for last."""
        if r.new_conn and r.connect_start is not None:
            # opened for r (TFO: set-up ~0 ms, still on the path), or r waited for its set-up
            if r.conn_ready > r.released + EPS_MS or r.connect_start >= r.released - EPS_MS:
                return r, "conn"
            self.add("wait", r.idx, r.released)
            return r, "released"
        cands = []
        op = self.opener.get(r.conn_id)
        if op is not None and op is not r:
            cands.append((op.conn_ready, -op.idx, op, "conn"))
        if not r.h2:  # HTTP/1.1: one request at a time; the one before r on its connection
            before = [q for q in self.on_conn.get(r.conn_id, []) if q is not r and q.request < r.request]
            before = [q for q in before if q.last_byte <= self.t + EPS_MS]
            if before:
                q = max(before, key=lambda q: q.last_byte)
                cands.append((q.last_byte, -q.idx, q, "last"))
        if cands:
            when, _, q, point = max(cands, key=lambda c: c[:2])
            if when > r.released + EPS_MS:
                self.add("wait", r.idx, when)
                return q, point
        self.add("wait", r.idx, r.released)
        return r, "released"

    def handshake(self, op: Req) -> tuple[Req, str]:
        """The set-up of op's connection up to self.t, then whoever made the pool open it."""
        self.setups.append(op.idx)
        if op.quic:  # QUIC: no TCP; the whole handshake (TLS in it) is one, ~0 with 0-RTT
            self.add("tls", op.idx, op.connect_start)
        elif op.tls_end is not None:
            self.add("tls", op.idx, op.connect_end)
        self.add("tcp", op.idx, op.connect_start)
        if self.dns_ms > 0 and self.first_conn.get(op.pool) == op.idx:
            self.add("dns", op.idx, op.connect_start - self.dns_ms)
        # the connection was opened when a request of its pool went to it: the latest by then
        cands = [q for q in self.pool.get(op.pool, [op]) if q.released <= self.t + EPS_MS]
        if not cands:
            return op, "released"
        q = max(cands, key=lambda q: (q.released, q is op, -q.idx))
        return q, "released"

    def prerequisite(self, r: Req) -> tuple[float, Req, str] | None:
        pts = []
        par = self.by.get(r.parent) if r.parent is not None else None
        if par is not None:
            first = r.at_first_byte
            if first is None:  # unknown: at the first byte if r started before the initiator's end
                first = r.ready < par.last_byte - EPS_MS and par.first_byte <= r.ready + EPS_MS
            pts.append((par.first_byte, par, "first") if first else (par.last_byte, par, "last"))
        for a in r.after:
            if a in self.by:
                pts.append((self.by[a].last_byte, self.by[a], "last"))
        return max(pts, key=lambda p: (p[0], -p[1].idx)) if pts else None

    def run(self, last: Req) -> None:
        r, p = last, "last"
        self.t = last.last_byte
        seen = set()
        while self.t > 0:
            if (r.idx, p) in seen:  # times that contradict the graph: stop here
                break
            seen.add((r.idx, p))
            if p == "last":
                self.add("transfer", r.idx, r.first_byte)
                p = "first"
            elif p == "first":
                self.add("request", r.idx, r.request)
                p = "sent"
            elif p == "sent":
                r, p = self.sent(r)
            elif p == "conn":
                r, p = self.handshake(r)
            elif p == "released":
                self.add("wait", r.idx, r.ready)
                p = "ready"
            elif p == "ready":
                pre = self.prerequisite(r)
                if pre is None:  # a root: ready when the load began (or, Chromium, its start)
                    self.add("compute", r.idx, 0.0)
                    break
                when, r2, p2 = pre
                self.add("compute", r.idx, when)
                r, p = r2, p2
        self.add("other", None, 0.0)


def critical_path(records: list[dict], plt_ms: float | None = None, dns_ms: float = 0.0) -> Path:
    """The critical path of the load whose requests are ``records`` (normalize()). ``plt_ms``: the
    load's PLT if more than its last response byte (a calibrated model's tail: compute at the
    end); ``dns_ms``: the plan's DNS delay per pool. ValueError for a load without a request
    that completed."""
    reqs = normalize(records)
    if not reqs:
        raise ValueError("the load has no request that completed")
    last = max(reqs, key=lambda r: (r.last_byte, -r.idx))
    w = _Walk(reqs, dns_ms)
    w.run(last)
    segs = list(reversed(w.segs))
    end = last.last_byte
    plt = max(end, plt_ms if plt_ms is not None else end)
    if plt > end:
        segs.append(Segment("compute", last.idx, end, plt))
    split = {k: 0.0 for k in KINDS}
    for s in segs:
        split[s.kind] += s.ms
    objects = []
    for s in segs:
        if s.idx is not None and s.idx not in objects and s.ms > 0:
            objects.append(s.idx)
    handshakes = []
    for i in sorted(set(w.setups), key=lambda i: w.by[i].connect_start or 0.0):
        mine = [s for s in segs if s.idx == i and s.kind in ("dns", "tcp", "tls")]
        r = w.by[i]
        handshakes.append(
            {
                "idx": i,
                "url": r.url,
                "host": r.host,
                "conn_id": r.conn_id,
                "tfo": r.tfo,
                **{f"{k}_ms": round(sum(s.ms for s in mine if s.kind == k), 3) for k in ("dns", "tcp", "tls")},
            }
        )
    return Path(
        plt_ms=plt,
        end_ms=end,
        segments=segs,
        split=split,
        objects=objects,
        handshakes=handshakes,
        new_connections=sum(1 for r in reqs if r.new_conn),
        requests=w.by,
    )
