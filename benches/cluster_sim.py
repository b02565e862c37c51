"""A discrete-event simulation of a cluster sweep (pltlab.cluster.driver) from measured costs:
how long a study's loads take on N nodes, and where the time goes.

What it models is what the driver does:
- each node first starts its slots' actors and runs its self-check (``node_start_s``, ``check_s``),
  every node at once; a node takes runs when its own check is done;
- the queue is the sweep's order; each slot holds up to ``pipeline`` runs (the one loading and the
  next, waiting in the slot's queue: driver.PIPELINE), so a slot's next load starts
  ``actor_gap_s`` after the previous one ended when the driver handed it over in time;
- a run handed to a slot reaches it ``submit_s`` later (submit -> start of an idle actor);
- a load's result reaches the driver ``return_s(load)`` after the load ended (serialisation and
  transfer of its result), and the driver, one process, records results one at a time
  (``record_s`` each: its database write); only then does it hand that slot its next run.

Loads take the times given, in the queue's order (a study's measured wall times per load, or
draws from them). Pure Python: no Ray, nothing measured here.
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Overheads:
    """Seconds. ``return_s``: a constant, or one value per load (its result's size differs)."""

    submit_s: float = 0.0  # driver hands a run to an idle slot -> the load starts
    return_s: float | tuple = 0.0  # load ends -> its result is at the driver
    record_s: float = 0.0  # the driver's work per result (database write), one at a time
    actor_gap_s: float = 0.0  # a slot's queued next call starting after the previous one returned
    node_start_s: float = 0.0  # a node's actors created and answering
    check_s: float = 0.0  # a node's self-check (pltlab check) before it takes runs


@dataclass
class Outcome:
    makespan_s: float  # first actor created -> last result recorded
    busy_s: float  # sum of load times
    slots: int
    per_slot_runs: list[int] = field(default_factory=list)
    driver_busy_s: float = 0.0
    first_start_s: float = 0.0  # the first load's start
    last_end_s: float = 0.0  # the last load's end

    @property
    def efficiency(self) -> float:
        """Load time over slot time (1: every slot loading from the start to the end)."""
        return self.busy_s / (self.slots * self.makespan_s) if self.makespan_s > 0 else 1.0


def simulate(
    loads: list[float], nodes: int, slots_per_node: int = 1, o: Overheads = Overheads(), pipeline: int = 2
) -> Outcome:
    """Run ``loads`` (seconds each, in queue order) on ``nodes`` x ``slots_per_node`` slots."""
    if nodes < 1 or slots_per_node < 1 or pipeline < 1:
        raise ValueError("nodes, slots per node and pipeline must be at least 1")
    n_slots = nodes * slots_per_node
    ret = o.return_s if isinstance(o.return_s, tuple | list) else None
    if ret is not None and len(ret) != len(loads):
        raise ValueError(f"{len(ret)} return times for {len(loads)} loads")
    ready_at = o.node_start_s + o.check_s  # every node checks at once
    # per slot: when it is free to start its next load, and its queue of (load index, arrival time)
    free = [ready_at] * n_slots
    queued: list[list[tuple[int, float]]] = [[] for _ in range(n_slots)]
    per_slot = [0] * n_slots
    events: list[tuple[float, int, str, int, int]] = []  # (time, tie-break, kind, slot, load)
    seq = 0
    nxt = 0  # next load of the queue
    span = [float("inf"), ready_at]  # first start, last end

    def push(t, kind, slot, load):
        nonlocal seq
        heapq.heappush(events, (t, seq, kind, slot, load))
        seq += 1

    def start_next(slot, now):
        """The slot's next queued load starts when it has arrived and the slot is free."""
        if not queued[slot]:
            return
        load, arrival = queued[slot].pop(0)
        gap = o.actor_gap_s if free[slot] > ready_at else 0.0
        begin = max(arrival, free[slot] + gap, now)
        end = begin + loads[load]
        span[0], span[1] = min(span[0], begin), max(span[1], end)
        free[slot] = float("inf")  # loading
        push(end, "end", slot, load)

    def hand(slot, now):
        nonlocal nxt
        if nxt >= len(loads):
            return
        queued[slot].append((nxt, now + o.submit_s))
        nxt += 1
        if free[slot] != float("inf") and len(queued[slot]) == 1:
            push(now + o.submit_s, "arrive", slot, -1)

    # the driver fills every place once the cluster is admitted (slot by slot, place by place)
    for _ in range(pipeline):
        for s in range(n_slots):
            hand(s, ready_at)
    driver_free = ready_at
    driver_busy = 0.0
    last = ready_at
    while events:
        t, _, kind, slot, load = heapq.heappop(events)
        if kind == "arrive":
            if free[slot] != float("inf"):
                start_next(slot, t)
        elif kind == "end":
            free[slot] = t
            per_slot[slot] += 1
            start_next(slot, t)
            r = ret[load] if ret is not None else o.return_s
            push(t + r, "result", slot, load)
        else:  # "result": the driver records it, then hands this slot its next run
            done = max(t, driver_free) + o.record_s
            driver_busy += o.record_s
            driver_free = done
            last = max(last, done)
            hand(slot, done)  # (an idle slot starts it on its "arrive" event)
    return Outcome(
        makespan_s=last,
        busy_s=sum(loads),
        slots=n_slots,
        per_slot_runs=per_slot,
        driver_busy_s=driver_busy,
        first_start_s=span[0] if loads else ready_at,
        last_end_s=span[1],
    )


def draws(samples: list[float], n: int, seed: int = 1) -> list[float]:
    """``n`` load times drawn (with replacement) from measured ``samples``."""
    rng = random.Random(seed)
    return [rng.choice(samples) for _ in range(n)]
