"""The built-in loader's request scheduling, ported from rust/src/loader/scheduler.rs and
policy.rs as the same pure state machine: ``now`` and events in, actions out. The predictor
drives it with modelled network events instead of sockets, so a prediction loads exactly
the requests, on exactly the connections, the loader would. Keep it in step with the Rust.

Events: ("timer", kind, x) with kind "ready"|"dns"|"tight"; ("connected", c);
("connected_h2", c); ("first_byte", i); ("done", c, keep_alive); ("stream_done", c, i).
Actions: ("open", conn, pool); ("send", conn, object); ("timer", at, kind, x).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field


@dataclass
class _Pool:
    first: int
    addr: tuple
    queue: deque = field(default_factory=deque)
    idle: list = field(default_factory=list)  # the most recently freed last
    open: int = 0
    connecting: int = 0
    dns: str = "none"  # none | pending | done
    h2: bool = False
    mux: int | None = None


@dataclass
class _Conn:
    pool: int
    busy: int | None = None
    streams: list = field(default_factory=list)
    mux: bool = False


class _Phase:
    def __init__(self, until: list[int], delay_ms: float):
        self.left = len(until)
        self.on = bool(until)
        self.out = 0
        self.delay_ms = delay_ms


class Policy:
    """policy.rs: Archive (every request released when ready, FIFO pools) unless the plan has
    delayable objects, then Chromium's limits (delayable_limit, tight phases per frame)."""

    def __init__(self, plan: dict):
        objs = plan["objects"]
        self.delayable = [bool(o.get("delayable")) for o in objs]
        self.chromium = any(self.delayable)
        if not self.chromium:
            return
        defs = [(list(p["until"]), float(p.get("delay_ms") or 0.0)) for p in plan.get("tight_phases") or []]
        legacy = None
        if plan.get("tight_until"):
            defs.append((list(plan["tight_until"]), float(plan.get("tight_delay_ms") or 0.0)))
            legacy = len(defs) - 1
        self.in_tight: list[list[int]] = [[] for _ in objs]
        self.phases = []
        for k, (until, delay) in enumerate(defs):
            until = sorted(set(until))
            for t in until:
                self.in_tight[t].append(k)
            self.phases.append(_Phase(until, delay))
        self.slot = []
        for o in objs:
            tp = o.get("tight_phase")
            self.slot.append(tp if tp is not None else (legacy if legacy is not None else len(self.phases)))
        self.limit = plan.get("delayable_limit")
        self.tight_limit = plan.get("tight_limit")
        self.held: list[deque] = [deque() for _ in range(len(self.phases) + 1)]
        self.out = 0

    def _gate_open(self, k: int) -> bool:
        if self.limit is not None and self.out >= self.limit:
            return False
        if k < len(self.phases) and self.tight_limit is not None and self.phases[k].on:
            return self.phases[k].out < self.tight_limit
        return True

    def admit(self, i: int) -> bool:
        if not self.chromium or not self.delayable[i]:
            return True
        k = self.slot[i]
        if self.held[k] or not self._gate_open(k):
            self.held[k].append(i)
            return False
        return True

    def enqueue(self, i: int, queue: deque) -> None:
        if not self.chromium:
            queue.append(i)
        elif self.delayable[i]:
            self.out += 1
            if self.slot[i] < len(self.phases):
                self.phases[self.slot[i]].out += 1
            queue.append(i)
        else:  # ahead of every delayable request of the pool
            pos = next((n for n, k in enumerate(queue) if self.delayable[k]), len(queue))
            queue.insert(pos, i)

    def arrived(self, i: int, now: float, out: list) -> None:
        if not self.chromium:
            return
        if self.delayable[i]:
            self.out -= 1
            if self.slot[i] < len(self.phases):
                self.phases[self.slot[i]].out -= 1
        for k in self.in_tight[i]:
            ph = self.phases[k]
            ph.left -= 1
            if ph.left == 0:
                if ph.delay_ms > 0:
                    out.append(("timer", now + ph.delay_ms, "tight", k))
                else:
                    ph.on = False

    def phase_ended(self, k: int) -> None:
        self.phases[k].on = False

    def next_held(self) -> int | None:
        if not self.chromium:
            return None
        for k, q in enumerate(self.held):
            if q and self._gate_open(k):
                return q.popleft()
        return None


class Scheduler:
    """scheduler.rs for a plan (dict, as plan.build returns it)."""

    def __init__(self, plan: dict):
        objs = plan["objects"]
        n = len(objs)
        self.max_conns = int(plan.get("max_conns_per_host", 6))
        self.dns_delay_ms = float(plan.get("dns_delay_ms") or 0.0)
        self.delay_ms = [float(o.get("delay_ms") or 0.0) for o in objs]
        keys: dict[tuple, int] = {}
        self.pools: list[_Pool] = []
        self.obj_pool = []
        for i, o in enumerate(objs):
            key = (bool(o.get("tls")), o["host"].lower(), o["port"])
            if key not in keys:
                keys[key] = len(self.pools)
                self.pools.append(_Pool(first=i, addr=(o["ip"], o["port"])))
            p = keys[key]
            self.pools[p].h2 |= bool(o.get("tls")) and o.get("protocol") == "h2"
            self.obj_pool.append(p)
        self.children: list[list[int]] = [[] for _ in range(n)]
        self.fb_children: list[list[int]] = [[] for _ in range(n)]
        self.waiting = [0] * n
        for i, o in enumerate(objs):
            if o.get("parent") is not None:
                (self.fb_children if o.get("at_first_byte") else self.children)[o["parent"]].append(i)
                self.waiting[i] += 1
            for a in o.get("after") or []:
                self.children[a].append(i)
                self.waiting[i] += 1
        self.ready_ms = [0.0] * n
        self.released_ms = [0.0] * n
        self.policy = Policy(plan)
        self.conns: list[_Conn] = []
        self.mux_by_addr: dict[tuple, int] = {}
        self.done_count = 0
        self.out: list = []

    def _take(self) -> list:
        out, self.out = self.out, []
        return out

    def start(self, now: float) -> list:
        for i, w in enumerate(self.waiting):
            if w == 0:
                self._requestable(i, now)
        return self._take()

    def is_done(self) -> bool:
        return self.done_count == len(self.waiting)

    def pool_object(self, p: int) -> int:
        return self.pools[p].first

    def handle(self, now: float, ev: tuple) -> list:
        kind = ev[0]
        if kind == "timer":
            _, what, x = ev
            if what == "ready":
                self._ready(x, now)
            elif what == "dns":
                self.pools[x].dns = "done"
                self._dispatch(x, now)
            else:
                self.policy.phase_ended(x)
                self._release_held(now)
        elif kind == "first_byte":
            for k in list(self.fb_children[ev[1]]):
                self._prereq_met(k, now)
        elif kind == "connected":
            c = ev[1]
            p = self.conns[c].pool
            self.pools[p].connecting -= 1
            self.pools[p].open += 1
            fell_back, self.pools[p].h2 = self.pools[p].h2, False
            self._free(c)
            if fell_back:
                self._dispatch(p, now)
        elif kind == "connected_h2":
            c = ev[1]
            p = self.conns[c].pool
            self.pools[p].connecting -= 1
            self.pools[p].open += 1
            self.conns[c].mux = True
            self.pools[p].mux = c
            self.mux_by_addr.setdefault(self.pools[p].addr, c)
            self._dispatch(p, now)
        elif kind == "stream_done":
            _, c, i = ev
            self.conns[c].streams.remove(i)
            self._arrived(i, now)
        elif kind == "done":
            _, c, keep_alive = ev
            i = self.conns[c].busy
            if keep_alive:
                self._free(c)
            else:
                p = self.conns[c].pool
                self.conns[c].busy = None
                self.pools[p].open -= 1
                self._dispatch(p, now)
            self._arrived(i, now)
        else:
            raise ValueError(f"unknown event {ev!r}")
        return self._take()

    def _arrived(self, i: int, now: float) -> None:
        self.done_count += 1
        self.policy.arrived(i, now, self.out)
        for k in list(self.children[i]):
            self._prereq_met(k, now)
        self._release_held(now)

    def _prereq_met(self, i: int, now: float) -> None:
        self.waiting[i] -= 1
        if self.waiting[i] == 0:
            self._requestable(i, now)

    def _requestable(self, i: int, now: float) -> None:
        d = self.delay_ms[i]
        if d > 0:
            self.out.append(("timer", now + d, "ready", i))
        else:
            self._ready(i, now)

    def _ready(self, i: int, now: float) -> None:
        self.ready_ms[i] = now
        if self.policy.admit(i):
            self._release(i, now)

    def _release(self, i: int, now: float) -> None:
        self.released_ms[i] = now
        p = self.obj_pool[i]
        self.policy.enqueue(i, self.pools[p].queue)
        self._dispatch(p, now)

    def _release_held(self, now: float) -> None:
        while (i := self.policy.next_held()) is not None:
            self._release(i, now)

    def _assign(self, c: int, i: int) -> None:
        self.conns[c].busy = i
        self.out.append(("send", c, i))

    def _free(self, c: int) -> None:
        p = self.conns[c].pool
        self.conns[c].busy = None
        if self.pools[p].queue:
            self._assign(c, self.pools[p].queue.popleft())
        else:
            self.pools[p].idle.append(c)

    def _dns(self, p: int, now: float) -> bool:
        """The pool's DNS delay is over (starting it if need be)."""
        pool = self.pools[p]
        if pool.dns == "none":
            if self.dns_delay_ms > 0:
                pool.dns = "pending"
                self.out.append(("timer", now + self.dns_delay_ms, "dns", p))
                return False
            pool.dns = "done"
        return pool.dns == "done"

    def _open(self, p: int) -> None:
        self.pools[p].connecting += 1
        self.conns.append(_Conn(pool=p))
        self.out.append(("open", len(self.conns) - 1, p))

    def _dispatch(self, p: int, now: float) -> None:
        pool = self.pools[p]
        if pool.h2 or pool.mux is not None:
            return self._dispatch_h2(p, now)
        while pool.queue and pool.idle:
            self._assign(pool.idle.pop(), pool.queue.popleft())
        if not pool.queue or not self._dns(p, now):
            return
        while len(pool.queue) > pool.connecting and pool.open + pool.connecting < self.max_conns:
            self._open(p)

    def _dispatch_h2(self, p: int, now: float) -> None:
        pool = self.pools[p]
        if not pool.queue or not self._dns(p, now):
            return
        if pool.mux is None:
            pool.mux = self.mux_by_addr.get(pool.addr)
        if pool.mux is not None:
            c = pool.mux
            while pool.queue:
                i = pool.queue.popleft()
                self.conns[c].streams.append(i)
                self.out.append(("send", c, i))
            return
        if pool.open + pool.connecting == 0:
            self._open(p)
