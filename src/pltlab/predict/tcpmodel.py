"""A TCP sender and the emulated link as pure state (time passed in, like smoltcp): what the
replay server's kernel does with a response, segment by segment.

- ``Link``: one direction of the emulator (docs/dataplane-interfaces.md): a fixed one-way delay,
  and with a rate a FIFO bottleneck shared by every connection: a packet leaves at
  max(arrival, previous departure) + its size * 8 / rate. No loss, the queue never overflows.
  An origin with its own RTT (an override) has its own delays, the bottleneck stays shared.
- ``Sender``: Linux's slow start as it runs on the server (cubic never leaves slow start without
  loss): ``cwnd`` segments of ``mss`` bytes in flight, +1 segment per segment acknowledged while
  the window is in use (tcp_is_cwnd_limited: cwnd < 2 * the most in flight), the client
  acknowledging every segment as it arrives; after an idle time longer than the RTO
  (srtt + 200 ms, tcp_rto_min) the window restarts, halving per RTO down to initcwnd
  (tcp_cwnd_restart). The client's receive window is not a limit (1 MiB buffer by default).
"""

from __future__ import annotations

from dataclasses import dataclass, field

HEADERS = 52  # IP + TCP with timestamps: a segment of MSS bytes is an MTU-sized packet
RTO_MIN_MS = 200.0


@dataclass
class Link:
    delay_ms: float
    rate_bps: int | None = None
    busy_until: float = 0.0

    def send(self, now: float, size: int, delay_ms: float | None = None) -> float:
        """When a packet of ``size`` IP bytes handed to the link at ``now`` arrives (``delay_ms``:
        its origin's own one-way delay, an override)."""
        delay = self.delay_ms if delay_ms is None else delay_ms
        if not self.rate_bps:
            return now + delay
        start = max(now, self.busy_until)
        self.busy_until = start + size * 8000.0 / self.rate_bps
        return self.busy_until + delay


@dataclass
class Unit:
    """Bytes the server wrote as one piece (a TLS record, a whole response, a handshake
    flight): ``at_last`` are what the client learns when its last byte arrives, ``at_first``
    when its first ``first`` bytes have (e.g. the first TLS record of a response)."""

    size: int
    at_last: list
    first: int = 0
    at_first: list = field(default_factory=list)
    sent: int = 0
    batch: int = 0  # bytes of one batch may share a segment (set by Sender.write)


@dataclass
class Segment:
    size: int
    events: list  # of the units' at_first/at_last events this segment completes
    unvalidated: bool = False  # QUIC: sent before the client's address was validated (simulate)


@dataclass
class Sender:
    mss: int
    cwnd: float
    initcwnd: int
    rtt_ms: float
    inflight: int = 0
    max_out: int = 0
    last_send: float | None = None
    queue: list = field(default_factory=list)  # of Unit, in send order
    batches: int = 0

    def rto_ms(self) -> float:
        return self.rtt_ms + RTO_MIN_MS

    def write(self, now: float, unit: Unit, join: bool = False) -> None:
        """The server writes ``unit`` at ``now`` (after an idle period: window restart);
        ``join``: in the same socket write as the unit before."""
        if self.inflight == 0 and not self.queue and self.last_send is not None:
            idle = now - self.last_send
            rto = self.rto_ms()
            if idle > rto:
                restart = min(self.initcwnd, self.cwnd)
                cwnd = self.cwnd
                while idle - rto > 0 and cwnd > restart:
                    idle -= rto
                    cwnd = cwnd // 2
                self.cwnd = max(cwnd, restart)
                self.max_out = 0
        # a write while the window is full joins the unsent bytes (they leave as full segments);
        # else it leaves at once, in segments of its own (TCP_NODELAY)
        blocked = join or (self.queue and self.inflight >= int(self.cwnd))
        self.batches += 0 if blocked else 1
        unit.batch = self.batches
        self.queue.append(unit)

    def next_segments(self, now: float, limit: int | None = None) -> list[Segment]:
        """The segments the window lets go at ``now`` (at most ``limit``: a pacer's)."""
        out = []
        while self.queue and self.inflight < int(self.cwnd) and (limit is None or len(out) < limit):
            size, events = 0, []
            batch = self.queue[0].batch
            while self.queue and size < self.mss and self.queue[0].batch == batch:
                u = self.queue[0]
                take = min(self.mss - size, u.size - u.sent)
                if u.first and u.sent < u.first <= u.sent + take:
                    events += u.at_first
                u.sent += take
                size += take
                if u.sent >= u.size:
                    events += u.at_last
                    self.queue.pop(0)
            self.inflight += 1
            self.max_out = max(self.max_out, self.inflight)
            self.last_send = now
            out.append(Segment(size, events))
        return out

    def acked(self, grow: bool = True) -> None:
        """One segment acknowledged (``grow``: False when the sender counts as application
        limited, as quinn does; the window then stays)."""
        self.inflight -= 1
        if grow and self.cwnd < 2 * self.max_out:
            self.cwnd += 1
        if self.inflight == 0:
            self.max_out = 0
