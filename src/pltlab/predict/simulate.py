"""A page load predicted from the page's structure, the way Lighthouse's Lantern simulates a
page's graph: the built-in loader's own plan (pltlab.loaders.plan.build, as `pltlab run` builds
it) run through the loader's own scheduling (rust/src/loader/scheduler.rs and policy.rs, in a
`pltlab-dp schedule` process) over modelled connections (predict.tcpmodel: slow start from
initcwnd, the bottleneck rate) with TCP Fast Open, TLS 1.3 (full, resumed, 0-RTT), HTTP/2 and
HTTP/3 (QUIC: no TCP handshake, the QUIC one 1 RTT or none with 0-RTT, slow start from quic_icw
packets of 1200 bytes, the server held to 3 x the client's bytes until its address is validated unless the client
brings a token from its visit before the load: predict.quicwire) handshakes as the loader makes them. No namespace, socket or clock; the same page and
configuration give the same prediction. docs/explain.md "Predict" says what is modelled and what is not.

    predict(page, cfg, tfo=True)   # {"plt_ms", "requests": [...], "connections", ...}
"""

from __future__ import annotations

import heapq
import itertools

from pltlab import dataplane
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.loaders import plan as plans
from pltlab.loaders.browser import hsts
from pltlab.loaders.registry import get as loader_of
from pltlab.net import names
from pltlab.predict import quicwire, tcpmodel
from pltlab.replay import hosts as hostmap
from pltlab.replay import manifest
from pltlab.run.config import RunConfig

DEFAULT_ICW = 10  # the kernel's initcwnd (segments)
TLS_RECORD = 16384  # TLS plaintext per record; the client decrypts a record when all of it arrived
TLS_OVERHEAD = 22  # record header, AEAD tag, content type
H2_FRAME = 16384  # the replay's DATA frames
H2_FRAME_HEADER = 9
SYN_BYTES = 60
SYN_DATA_MAX = plans.SYN_DATA_MAX  # bytes of data a SYN carries
CLIENT_HELLO = 400  # rustls, X25519: fits in a SYN
REQUEST_HEAD = 180  # the built-in loader's request line and headers, without the URL
NO_BODY = (204, 304)
# CPU time on this project's shared 2-core VM (docs/explain.md "Predict"), set from per-request
# records of a first run of benches/bench_predict.py's configurations (benches/notes.md
# "predict"): a TLS 1.3 handshake beyond its round trips (rustls at both ends: key exchange, the
# certificate signed and checked), and a request answered on an open connection beyond its round
# trip (replay server and loader; plain HTTP/1.1 and over TLS). How well the prediction holds:
# `make bench BENCH=predict` (benches/bench_predict.py).
TLS_CPU_MS = 3.0
# The loader from a request's readiness to a new connection's connect(), and to its request on a
# new TFO connection (connect() returns at once).
OPEN_MS = 0.2
TFO_SEND_MS = 0.85
SERVE_CPU_MS = 0.3
SERVE_TLS_CPU_MS = 1.0
TICKETS = 2 * 250  # the replay's two NewSessionTicket records, written before the first answer
# over QUIC the same two tickets in CRYPTO frames, without TLS records: each a NewSessionTicket
# message as rustls writes it with the replay's session store (RFC 8446 §4.6.1: header 4,
# lifetime 4, age_add 4, a 32-byte nonce and a 32-byte session id with their lengths, the
# early_data extension 8)
QUIC_TICKETS = 2 * 89
# QUIC (protocol h3): packets of 1200 bytes (quinn's initial MTU; its MTU discovery is not
# modelled), of which a packet's header, AEAD tag and STREAM frame header take about this much;
# the ClientHello goes in a padded Initial of 1200 bytes; the window is quic_icw packets
QUIC_PACKET = 1200
QUIC_OVERHEAD = 40
DEFAULT_QUIC_ICW = 10
# quinn's pacer (quinn-proto pacing.rs): a token bucket refilled at 5/4 of the window per smoothed
# RTT, holding the window's share of 2 ms, at least 10 and at most 256 packets (bursts)
PACE_GAIN = 1.25
PACE_INTERVAL_MS = 2.0
PACE_BURST = (10, 256)
MIN_PACE_RTT_MS = 0.001  # quinn's pacer at an RTT of 0 (the emulator's RTT 0 is a few µs)
SKIPPED_HEADERS = manifest._DROP  # framing headers the replay server drops and sets itself


def plan_for(page: Page, cfg: RunConfig, tfo: bool) -> tuple[dict, list, dict]:
    """The plan the built-in loader would load under ``cfg`` (as run.runner.PageRunner builds it,
    origin addresses numbered as the topology numbers them), the page object of each plan object,
    and the per-origin RTT overrides as {address: (up, down) one-way delays in ms}."""
    if not loader_of(cfg.client).planned:
        raise PltError(f"predict models the built-in loader only, not --client {cfg.client}")
    if not page.objects:
        raise PltError(f"{page.id or page.url}: the page has no objects")
    assigned = hostmap.assign([page])
    host_ips = {h: names.origin_ip(i) for h, i in assigned.items()}
    one_way = {}  # per-origin RTT overrides: address -> (up, down) delays in ms
    for o in cfg.topology(max(assigned.values(), default=0) + 1, assigned).overrides:
        if o.loss:
            raise PltError(f"--origin-rtt with loss ({o.loss * 100:g}%): predict models no loss")
        one_way[names.origin_ip(o.origin)] = (o.rtt_us // 2 / 1000.0, (o.rtt_us - o.rtt_us // 2) / 1000.0)
    https_hosts = set(assigned) if cfg.schemes == "https" else None
    if cfg.schemes == "chromium":  # Chromium's own HSTS upgrades: its list, cached per version (one probe)
        https_hosts = hsts.upgraded_hosts(assigned)
    built = plans.build(
        page,
        host_ips,
        tfo=tfo,
        ca="ca.pem",
        max_conns_per_host=cfg.max_conns_per_host,
        https_hosts=https_hosts,
        model=cfg.model,
        calibrated=cfg.calibrated,
        # (as the replay offers them to this loader: h3 on the addresses that serve QUIC)
        offered=manifest.address_protocols([page], host_ips, cfg.protocol, loader_of(cfg.client).protocols),
        tls_mode=cfg.tls,
        quic={"cc": cfg.quic_cc, "icw": cfg.quic_icw},
        network_stack=cfg.network_stack == plans.NETWORK_STACK_CALIBRATED,
    )
    return built, plans.plan_objects(page, host_ips, https_hosts), one_way


class Scheduler:
    """The built-in loader's scheduler itself (rust/src/loader/scheduler.rs with policy.rs) in a
    `pltlab-dp schedule` process (docs/dataplane-interfaces.md): the plan, then ``now`` and
    events in, actions out, in its JSON: events ``{"connected": c}``, ``{"connected_h2": c}``,
    ``{"first_byte": i}``, ``{"done": {"conn": c, "keep_alive": b}}``,
    ``{"stream_done": {"conn": c, "object": i}}``, ``{"timer": T}``; actions ``{"open": {"conn",
    "pool", "dns_end_ms"}}``, ``{"send": {"conn", "object"}}``, ``{"timer": {"at", "timer": T}}``.
    A context manager (the process)."""

    def __init__(self, plan: dict):
        self.dp = dataplane.Conversation(["schedule"], "pltlab-dp schedule")
        self.pools: list[int] = []
        self.done = False
        self.dp.tell(plan)

    def __enter__(self) -> Scheduler:
        return self

    def __exit__(self, *exc) -> None:
        self.dp.__exit__(*exc)

    def start(self, now: float) -> list[dict]:
        return self._reply(self.dp.ask({"now": now}))

    def handle(self, now: float, event: dict) -> list[dict]:
        return self._reply(self.dp.ask({"now": now, "event": event}))

    def _reply(self, r: dict) -> list[dict]:
        self.done = r["done"]
        self.pools = r.get("pools", self.pools)
        return r["actions"]

    def pool_object(self, pool: int) -> int:
        """The first object of ``pool``: its host, address and scheme are the pool's."""
        return self.pools[pool]

    def end(self) -> dict:
        """The load over: {"done", "ready_ms", "released_ms"} (per object)."""
        return self.dp.close()


def response_bytes(o) -> tuple[int, int]:
    """(head, body) bytes the replay server sends for page object ``o`` over HTTP/1.1: the
    recorded headers it keeps, its Content-Length, and the body at its recorded transfer size."""
    body = 0 if (100 <= o.status < 200 or o.status in NO_BODY or o.method.upper() == "HEAD") else o.wire_size
    head = len(f"HTTP/1.1 {o.status} OK\r\n") + len(f"Content-Length: {body}\r\n") + 2
    for k, v in o.headers:
        if k.lower() not in SKIPPED_HEADERS and (k.lower() != "content-encoding" or body):
            head += len(k) + len(v) + 4
    if o.mime and not any(k.lower() == "content-type" for k, _ in o.headers):
        head += len("Content-Type: ") + len(o.mime) + 2
    return head, body


def _tls(n: int) -> int:
    """Bytes on the wire for ``n`` bytes sent in TLS records."""
    return n + TLS_OVERHEAD * max(1, -(-n // TLS_RECORD))


class _Conn:
    def __init__(self, cid: int, pool_obj: dict, sender: tcpmodel.Sender, opened: float):
        self.id = cid
        self.tls = bool(pool_obj.get("tls"))
        self.quic = self.tls and pool_obj.get("protocol") == "h3"  # QUIC: no TCP, no TFO
        self.h2 = self.tls and pool_obj.get("protocol") in ("h2", "h3")  # multiplexed
        self.ip = pool_obj["ip"]
        self.up_ms = self.down_ms = 0.0  # one-way delays (set by the simulation)
        self.sender = sender
        self.opened = opened
        self.syn_free = False  # the request may ride in the SYN (TFO, plain http)
        self.connected: float | None = None
        self.streams: list[list] = []  # h2: [object, bytes left, first frame sent]
        self.rr = 0
        self.requests: list[int] = []
        self.tfo = False
        self.tickets = False
        self.batch: tuple | None = None  # (when, objects) of the last request write
        self.tokens: float | None = None  # QUIC: the pacer's bytes (None: full, at first)
        self.paced_at = 0.0
        self.pace_wake: float | None = None  # when a ("pump", c) event is due
        # QUIC's anti-amplification limit (predict/quicwire.py): the server's datagram bytes sent
        # and received until the client's Handshake packet validates its address
        self.validated = not self.quic
        self.finished_sent = False
        self.sent_bytes = self.recvd_bytes = 0
        self.before_validation: tuple[int, int] | None = None  # (sent, received) then
        self.held_by_limit = False  # the limit held the server back when validation came
        self.amp_blocked = False


class Simulation:
    """One predicted load: the scheduler's actions carried out on modelled connections."""

    def __init__(self, page: Page, cfg: RunConfig, tfo: bool, client_hello: int | None = None):
        self.cfg, self.tfo = cfg, tfo
        self.client_hello = client_hello or cfg.client_hello or CLIENT_HELLO  # (knob client_hello)
        self.plan, self.objs, self.one_way = plan_for(page, cfg, tfo)
        up_rate = cfg.rate_bps if cfg.rate_up_bps is None else cfg.rate_up_bps
        self.up = tcpmodel.Link(cfg.rtt_us // 2 / 1000.0, up_rate)
        self.down = tcpmodel.Link((cfg.rtt_us - cfg.rtt_us // 2) / 1000.0, cfg.rate_bps)
        mtu = cfg.mtu or 1500
        self.mss = mtu - tcpmodel.HEADERS
        self.icw = cfg.icw or DEFAULT_ICW
        self.sched: Scheduler | None = None
        self.ready_ms: list[float] = []
        self.heap: list = []
        self.seq = itertools.count()
        self.conns: list[_Conn] = []
        self.cookies: dict[str, float] = {}  # address -> when the client holds its TFO cookie
        self.sizes = [response_bytes(o) for o in self.objs]
        hosts = {o["host"] for o in self.plan["objects"] if o.get("tls")}
        # the replay's one certificate names every https host (+ its CA): a full handshake's flight
        self.flight_full = 1500 + sum(len(h) + 4 for h in hosts)
        n = len(self.objs)
        self.t = {k: [None] * n for k in ("send", "first", "last")}
        self.conn_of: list[int | None] = [None] * n
        self.new_conn = [False] * n

    # -- the event queue --
    def at(self, when: float, ev: tuple) -> None:
        heapq.heappush(self.heap, (when, next(self.seq), ev))

    def run(self) -> dict:
        with Scheduler(self.plan) as self.sched:
            self._actions(0.0, self.sched.start(0.0))
            while self.heap:
                now, _, ev = heapq.heappop(self.heap)
                kind = ev[0]
                if kind == "sched":
                    self._actions(now, self.sched.handle(now, ev[1]))
                elif kind == "segment":
                    self._segment(now, ev[1], ev[2])
                elif kind == "ack":  # (ev[2]: the packet left before the address was validated)
                    c = self.conns[ev[1]]
                    c.sender.acked(grow=not (ev[2] and c.held_by_limit))
                    self._pump(now, c)
                elif kind == "server":
                    self._server(now, ev[1], ev[2])
                elif kind == "connect":
                    self._connect(now, self.conns[ev[1]])
                elif kind == "hello":
                    self._hello(now, self.conns[ev[1]])
                elif kind == "pump":
                    self.conns[ev[1]].pace_wake = None
                    self._pump(now, self.conns[ev[1]])
                elif kind == "validated":  # QUIC: the client's Handshake packet arrived
                    c = self.conns[ev[1]]
                    if not c.validated:
                        c.before_validation = (c.sent_bytes, c.recvd_bytes)
                    c.validated = True
                    c.held_by_limit = c.amp_blocked
                    self._pump(now, c)
            end = self.sched.end()
        if not end["done"]:
            raise PltError("predict: the plan's scheduling stalled (an object never became ready)")
        self.ready_ms = end["ready_ms"]
        return self._result()

    def _actions(self, now: float, actions: list[dict]) -> None:
        for a in actions:
            ((kind, x),) = a.items()
            if kind == "timer":
                self.at(x["at"], ("sched", {"timer": x["timer"]}))
            elif kind == "open":
                self._open(now, x["conn"], x["pool"])
            else:
                self._send(now, x["conn"], x["object"])

    # -- connections --
    def _open(self, now: float, cid: int, pool: int) -> None:
        o = self.plan["objects"][self.sched.pool_object(pool)]
        up, down = self.one_way.get(o["ip"], (self.up.delay_ms, self.down.delay_ms))
        quic = bool(o.get("tls")) and o.get("protocol") == "h3"
        if quic:  # QUIC's window: quic_icw packets of 1200 bytes
            icw = self.cfg.quic_icw or DEFAULT_QUIC_ICW
            sender = tcpmodel.Sender(mss=QUIC_PACKET - QUIC_OVERHEAD, cwnd=icw, initcwnd=icw, rtt_ms=up + down)
        else:
            sender = tcpmodel.Sender(mss=self.mss, cwnd=self.icw, initcwnd=self.icw, rtt_ms=up + down)
        c = _Conn(cid, o, sender, now)
        c.up_ms, c.down_ms = up, down
        if c.quic and self.cfg.tls in quicwire.TOKEN_MODES:  # its Initial carries a token: validated
            c.validated = True
        self.conns.append(c)
        cookie = self.cookies.get(c.ip)
        c.tfo = not c.quic and self.tfo and (self.cfg.warm or (cookie is not None and cookie <= now))
        setup = self.plan.get("conn_setup_delay_ms", 0.0)  # the browser's own set-up (knob network_stack)
        self.at(now + setup + (TFO_SEND_MS if c.tfo else OPEN_MS), ("connect", cid))

    def _connect(self, now: float, c: _Conn) -> None:
        """connect() at ``now``: the SYN leaves (with TFO carrying the first request or the
        ClientHello)."""
        c.opened, cid = now, c.id
        if c.quic:  # no SYN: the Initial with the ClientHello leaves at once
            self._hello(now, c, self.up.send(now, QUIC_PACKET + 28, c.up_ms))
            return
        syn_at = self.up.send(now, SYN_BYTES, c.up_ms)
        if self.tfo and c.ip not in self.cookies:  # the SYN-ACK brings the cookie (cold keys)
            self.cookies[c.ip] = syn_at + c.down_ms
        if not c.tls:
            if c.tfo:  # connect() returns at once; the first request rides in the SYN
                c.syn_free = True
                self._connected(now, c)
            else:
                self.at(syn_at + c.down_ms, ("sched", {"connected": cid}))
                c.connected = syn_at + c.down_ms
            return
        if c.tfo and self.client_hello > SYN_DATA_MAX:
            # the SYN carries a part of it, the rest leaves with the SYN-ACK's arrival and the
            # server answers only a whole ClientHello: TFO saves nothing (Chromium's, docs/loaders.md)
            c.tfo = False
        hello_at = now if c.tfo else syn_at + c.down_ms  # the ClientHello leaves
        if c.tfo:  # the ClientHello (and with 0-RTT the first request) rides in the SYN
            self._hello(now, c, syn_at)
        else:
            self.at(hello_at, ("hello", cid))

    def _hello(self, now: float, c: _Conn, arrive: float | None = None) -> None:
        """The ClientHello leaves at ``now`` (in the SYN: it arrives at ``arrive``); with 0-RTT
        the connection counts as set up at once and its first request goes as early data."""
        if arrive is None:
            arrive = self.up.send(now, self.client_hello + tcpmodel.HEADERS, c.up_ms)
        flight = self.flight_full if self.cfg.tls == "full" else 250
        self.at(arrive, ("server", c.id, ("flight", flight)))
        if self.cfg.tls == "0rtt":
            c.syn_free = c.tfo
            self._connected(now, c)

    def _connected_event(self, c: _Conn) -> dict:
        return {"connected_h2": c.id} if c.h2 else {"connected": c.id}  # (h3: as h2, multiplexed)

    def _connected(self, now: float, c: _Conn) -> None:
        """Set up at ``now``: the loader learns it after what already happened at this instant
        (its connection tasks report asynchronously), so a response arriving at the same time
        frees its connection first."""
        c.connected = now
        self.at(now, ("sched", self._connected_event(c)))

    def _send(self, now: float, cid: int, i: int) -> None:
        c = self.conns[cid]
        obj = self.plan["objects"][i]
        self.t["send"][i] = now
        if self.conn_of[i] is None:
            self.conn_of[i] = cid
            self.new_conn[i] = not c.requests
        c.requests.append(i)
        if c.h2 and c.batch is not None and c.batch[0] == now:  # h2: in the same write as the one before
            c.batch[1].append(i)
            return
        size = quicwire.request_bytes(obj) + QUIC_OVERHEAD if c.quic else REQUEST_HEAD + len(obj["url"])
        if c.syn_free:  # in the SYN (already on its way)
            c.syn_free = False
            arrive = c.up_ms + c.opened
        else:
            arrive = self.up.send(now, size + tcpmodel.HEADERS, c.up_ms)
        c.batch = (now, [i])
        cpu = SERVE_TLS_CPU_MS if c.tls else SERVE_CPU_MS
        self.at(arrive + cpu, ("server", cid, ("requests", c.batch[1])))

    # -- the server side --
    def _server(self, now: float, cid: int, what: tuple) -> None:
        c = self.conns[cid]
        if what[0] == "flight":
            if c.quic:  # the client's Initial (padded to a full packet); the server's is padded too
                c.recvd_bytes += QUIC_PACKET
                c.sender.write(now, tcpmodel.Unit(max(what[1], QUIC_PACKET - QUIC_OVERHEAD), [("hs", cid)]))
            else:
                c.sender.write(now, tcpmodel.Unit(_tls(what[1]), [("hs", cid)]))
        else:
            if c.quic and len(what) == 2:  # the requests' packets (0-RTT before validation)
                n = sum(quicwire.request_bytes(self.plan["objects"][i]) for i in what[1])
                c.recvd_bytes += n + QUIC_OVERHEAD * -(-n // (QUIC_PACKET - QUIC_OVERHEAD))
            if c.tls and not c.tickets:  # the client's Finished came with it: 2 session tickets
                c.tickets = True
                c.sender.write(now, tcpmodel.Unit(QUIC_TICKETS if c.quic else TICKETS, []))
            if c.h2 and len(what[1]) > 1 and len(what) == 2:
                # the server answers the requests of one read one after another, then writes the
                # answers in one go (one TLS write): the first waited SERVE_TLS_CPU_MS, each further
                # one costs what parsing and looking up a request costs (SERVE_CPU_MS)
                self.at(now + (len(what[1]) - 1) * SERVE_CPU_MS, ("server", cid, (*what, "served")))
                return
            if c.h2:  # the requests of one client write are answered in one poll
                for i in what[1]:
                    head, body = self.sizes[i]
                    c.streams.append([i, head // 2 + body, False])  # HPACK: about half the head
                self._frames(now, c)
            else:
                (i,) = what[1]
                head, body = self.sizes[i]
                total = head + body
                wire = _tls(total) if c.tls else total
                first = min(wire, TLS_RECORD + TLS_OVERHEAD) if c.tls else 1
                c.sender.write(now, tcpmodel.Unit(wire, [("last", cid, i)], first, [("first", cid, i)]))
        self._pump(now, c)

    def _frames(self, now: float, c: _Conn) -> None:
        """h2: the streams' frames, round robin, into the socket as far as its send buffer
        (about two windows) goes; what one poll writes is cut into TLS records, and a stream's
        first or last byte is readable when its record has arrived."""
        s = c.sender
        room = 2 * s.cwnd * s.mss - sum(u.size - u.sent for u in s.queue)
        # h3: no TLS records: stream data is readable packet by packet (the overhead is the packet's)
        record, overhead = (s.mss, 0) if c.quic else (TLS_RECORD, TLS_OVERHEAD)
        batch, events, size, joined = [], [], 0, False
        while c.streams and room > 0:
            c.rr %= len(c.streams)
            st = c.streams[c.rr]
            take = min(H2_FRAME, st[1])
            st[1] -= take
            n = take + H2_FRAME_HEADER
            room -= n
            batch.append((n, [] if st[2] else [("first", c.id, st[0])]))
            st[2] = True
            if st[1] <= 0:
                batch[-1][1].append(("stream", c.id, st[0]))
                c.streams.pop(c.rr)
            else:
                c.rr += 1
        for n, evs in batch:  # records of at most TLS_RECORD bytes over the batch
            if c.quic:  # a stream's first byte is readable with the packet that carries it
                events += [e for e in evs if e[0] == "first"]
                evs = [e for e in evs if e[0] != "first"]
            while n > 0:
                take = min(n, record - size)
                size, n = size + take, n - take
                if n == 0:
                    events += evs
                if size == record:
                    s.write(now, tcpmodel.Unit(size + overhead, events), join=joined)
                    size, events, joined = 0, [], True
        if size:
            s.write(now, tcpmodel.Unit(size + overhead, events), join=joined)

    def _pump(self, now: float, c: _Conn) -> None:
        for seg in self._paced(now, c) if c.quic else c.sender.next_segments(now):
            self.at(self.down.send(now, seg.size + tcpmodel.HEADERS, c.down_ms), ("segment", c.id, seg))
        if c.h2 and c.streams:
            self._frames(now, c)
            # (the pacer's wake-up, or the client's Handshake packet, pumps again)
            held = c.quic and (c.pace_wake is not None or c.amp_blocked)
            if c.sender.queue and c.sender.inflight < int(c.sender.cwnd) and not held:
                self._pump(now, c)

    def _paced(self, now: float, c: _Conn) -> list[tcpmodel.Segment]:
        """QUIC: the packets the window and quinn's pacer let go at ``now``; when the pacer holds
        some back, a ("pump", c) event when its tokens suffice."""
        s = c.sender
        window = s.cwnd * QUIC_PACKET
        rtt = max(s.rtt_ms, MIN_PACE_RTT_MS)  # (RTT 0: the burst cap, no pacing to speak of)
        cap = min(max(window * PACE_INTERVAL_MS / rtt, PACE_BURST[0] * QUIC_PACKET), PACE_BURST[1] * QUIC_PACKET)
        rate = PACE_GAIN * window / rtt  # bytes per ms
        c.tokens = cap if c.tokens is None else min(cap, c.tokens + (now - c.paced_at) * rate)
        c.paced_at = now
        out = []
        c.amp_blocked = False
        while s.queue and s.inflight < int(s.cwnd):
            if not c.validated and c.sent_bytes >= quicwire.AMPLIFICATION * c.recvd_bytes:
                c.amp_blocked = True  # until the client's Handshake packet ("validated")
                break
            if c.tokens < QUIC_PACKET - 1e-6:
                wake = now + max((QUIC_PACKET - c.tokens) / rate, 1e-3)
                if c.pace_wake is None or wake < c.pace_wake:
                    c.pace_wake = wake
                    self.at(wake, ("pump", c.id))
                break
            seg = s.next_segments(now, 1)
            for x in seg:  # (its ACK: see _segment)
                x.unvalidated = not c.validated
            out += seg
            c.sent_bytes += sum(x.size + QUIC_OVERHEAD for x in seg)
            c.tokens -= QUIC_PACKET
        return out

    # -- the client side --
    def _segment(self, now: float, cid: int, seg: tcpmodel.Segment) -> None:
        c = self.conns[cid]
        # the client's ACK; on the uplink it costs half a header: delayed ACKs cover two segments.
        # QUIC: the ACKs of packets sent before the client's address was validated travel with
        # its Handshake packet; if the limit held the server back then, quinn reads them while it
        # counts itself application limited (its last transmit found nothing it could send:
        # connection/mod.rs `app_limited = buf.is_empty() && !congestion_blocked`), and its
        # controllers do not grow the window on such ACKs (congestion/cubic.rs, new_reno.rs `on_ack`)
        self.at(self.up.send(now, tcpmodel.HEADERS // 2, c.up_ms), ("ack", cid, seg.unvalidated))
        for ev in seg.events:
            kind = ev[0]
            if kind == "hs" and c.quic and not c.finished_sent:
                # the client's Handshake packet (its Finished, after it checked the flight)
                # validates its address at the server (RFC 9000 §8.1); with the Initial's ACK
                # the datagram is padded to a full packet
                c.finished_sent = True
                leave = now + TLS_CPU_MS if c.connected is None else now
                self.at(self.up.send(leave, QUIC_PACKET + 28, c.up_ms), ("validated", cid))
            if kind == "hs" and c.connected is None:  # (0-RTT: set up when the hello left)
                c.connected = now + TLS_CPU_MS  # the client checks the flight (certificate)
                self.at(c.connected, ("sched", self._connected_event(c)))
            elif kind == "first":
                i = ev[2]
                self.t["first"][i] = now
                self._actions(now, self.sched.handle(now, {"first_byte": i}))
            elif kind == "last":
                self.t["last"][ev[2]] = now
                # (knob keepalive off: the replay closes the connection after each response)
                keep = self.cfg.keepalive == "on"
                self._actions(now, self.sched.handle(now, {"done": {"conn": cid, "keep_alive": keep}}))
            elif kind == "stream":
                self.t["last"][ev[2]] = now
                self._actions(now, self.sched.handle(now, {"stream_done": {"conn": cid, "object": ev[2]}}))

    def _result(self) -> dict:
        objs = self.plan["objects"]
        reqs = []
        for i, o in enumerate(objs):
            reqs.append(
                {
                    "index": i,
                    "url": o["url"],
                    "host": o["host"],
                    "conn_id": self.conn_of[i],
                    "new_conn": self.new_conn[i],
                    "ready_ms": round(self.ready_ms[i], 3),
                    "request_ms": round(self.t["send"][i], 3),
                    "first_byte_ms": round(self.t["first"][i] or self.t["last"][i], 3),
                    "last_byte_ms": round(self.t["last"][i], 3),
                    "transfer_bytes": sum(self.sizes[i]),
                    "protocol": o.get("protocol") or "http/1.1",
                }
            )
        plt = max(r["last_byte_ms"] for r in reqs)
        return {
            "plt_ms": round(plt, 3),
            "network_plt_ms": round(plt, 3),
            "objects": len(objs),
            "connections": len({c for c in self.conn_of if c is not None}),  # that carried a request
            "connections_opened": len(self.conns),
            "requests": reqs,
        }


def predict(page: Page, cfg: RunConfig, tfo: bool, client_hello: int | None = None) -> dict:
    """The built-in loader's load of ``page`` under ``cfg`` with TFO on or off, predicted:
    {"plt_ms", "network_plt_ms", "tail_ms", "objects", "connections", "requests"}. With a
    calibrated page and model "chromium", plt_ms adds the calibrated tail as `pltlab run` does.
    ``client_hello``: the TLS ClientHello's bytes (default the knob's, else the built-in loader's,
    CLIENT_HELLO; one larger than a SYN carries, as Chromium's, gets nothing from TFO)."""
    res = Simulation(page, cfg, tfo, client_hello).run()
    tail = plans.tail_ms(page, cfg.model, cfg.calibrated)
    res["tail_ms"] = tail
    if tail is not None:
        res["plt_ms"] = round(res["plt_ms"] + tail, 3)
    return res
