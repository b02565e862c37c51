"""Chromium's compute, measured: per-object delays and the load-event tail for the built-in
loader's model of Chromium (plan.build(model="chromium"); docs/loaders.md "Compute calibration").

Method: load the page with Chromium over the emulated network (RTT 0 by default; no TFO,
Chromium's schemes), several times. For every object of the built-in plan, its compute delay is

    when Chromium handed the request to its network stack (ResourceTiming's requestTime; for a
    low-priority request, which tight mode may hold, requestWillBeSent + the page's typical
    hand-over) - the time the object became requestable under the plan's model (its parent's
    first byte if ``at_first_byte``, else its last byte, and every object of ``after``
    arrived), clamped at >= 0;

for the main document: its request start - navigationStart. The tail is loadEventEnd - the last
response's end (of the plan's objects); the tight-mode delay of a frame: when Chromium left
tight mode there - when its head scripts/stylesheets arrived. Each is the median over the loads.
What remains besides the network is Chromium's CPU time (parsing, script execution, layout),
its main-thread queueing and its renderer -> network-stack hand-over on this machine.

Measured by pltlab.run.calibrate; stored with the archive by pltlab.archive.calibration."""

from __future__ import annotations

import statistics

from pltlab.archive.model import strip_fragment
from pltlab.errors import PltError


def _match(plan_objs: list[dict], requests: list[dict]) -> list[dict | None]:
    """The Chromium request of each plan object (same URL; the k-th plan object of a URL gets
    the k-th request of it), or None."""
    by_url: dict[str, list[dict]] = {}
    for r in sorted(requests, key=lambda r: r.get("start_ms") or 0.0):
        by_url.setdefault(strip_fragment(r.get("url") or ""), []).append(r)
    out = []
    for o in plan_objs:
        q = by_url.get(strip_fragment(o["url"]))
        out.append(q.pop(0) if q else None)
    return out


def nav_offset(load: dict, main: dict | None) -> float:
    """navigationStart -> the requests' clock (ms since the load's first request): the main
    document's first byte (``main``: the request of the document at the end of the main URL's
    redirect chain) is Navigation Timing's responseStart on the one clock and first_byte_ms on
    the other. 0 when either is missing."""
    rs = (load.get("nav_timing") or {}).get("responseStart")
    fb = (main or {}).get("first_byte_ms")
    if isinstance(rs, (int, float)) and rs > 0 and isinstance(fb, (int, float)):
        return rs - fb
    return 0.0


def tight_end(plan: dict, reqs: list[dict | None], phase: int | None = None) -> float | None:
    """When a frame of Chromium left tight mode in one load (``phase``: the plan's tight phase
    of that frame, None = the main document's): the moment its scheduler released (network
    request start, ``released_ms``) one of the frame's delayable requests while ``tight_limit``
    of them were already out (released, not yet arrived). None when that never happened."""
    lim = plan.get("tight_limit")
    if not lim:
        return None
    spans = sorted(
        (r["released_ms"], r["last_byte_ms"])
        for o, r in zip(plan["objects"], reqs)
        if o.get("delayable")
        and o.get("tight_phase") == phase
        and r is not None
        and r.get("released_ms") is not None
        and r.get("last_byte_ms") is not None
    )
    for t, _ in spans:
        if sum(1 for a, b in spans if a < t and b > t) >= lim:
            return t
    return None


def derive_one(plan: dict, load: dict, doc: int = 0) -> dict:
    """One Chromium load (loaders.chromium.load's result, with ``nav_timing``) against the plan
    (model="chromium"; ``doc``: the plan index of the main URL's final document): {"compute_ms":
    [ms or None per plan object], "tail_ms", "tight_delay_ms" (None: not measurable in this
    load), "matched"}."""
    objs = plan["objects"]
    if not load.get("plt_ms"):
        raise PltError("Chromium reported no load event: the page did not load")
    reqs = _match(objs, load.get("requests") or [])
    main = reqs[0] if reqs else None
    if main is None or main.get("start_ms") is None:
        raise PltError(f"{objs[0]['url'] if objs else '?'}: Chromium did not request the main document")
    if main.get("error") or not main.get("status"):
        raise PltError(f"{objs[0]['url']}: the main document failed in Chromium: {main.get('error') or 'no response'}")
    off = nav_offset(load, reqs[doc] if 0 <= doc < len(reqs) else None)

    def at(j: int, first_byte: bool):
        r = reqs[j]
        if r is None:
            return None
        t = r.get("first_byte_ms") if first_byte else None
        return t if t is not None else r.get("last_byte_ms")

    def own_handover(o: dict, r: dict | None) -> float | None:
        """requestWillBeSent -> the request's start in the network stack, for a request the
        scheduler never holds (a delayable one's release may include tight mode, which the
        plan models itself)."""
        if o.get("delayable") or r is None or r.get("released_ms") is None or r.get("start_ms") is None:
            return None
        d = r["released_ms"] - r["start_ms"]
        return d if d >= 0 else None

    lat = [d for o, r in zip(objs[1:], reqs[1:]) if (d := own_handover(o, r)) is not None]
    handover = statistics.median(lat) if lat else 0.0  # the typical one, for the others

    out: list[float | None] = []
    for i, o in enumerate(objs):
        r = reqs[i]
        if r is None or r.get("start_ms") is None:
            out.append(None)
            continue
        if o.get("parent") is None:  # the navigation: from navigationStart to its request
            out.append(round(max(0.0, r["start_ms"] + off), 3))
            continue
        ts = [at(o["parent"], bool(o.get("at_first_byte")))] + [at(a, False) for a in o.get("after", [])]
        if any(t is None for t in ts):
            out.append(None)
            continue
        d = own_handover(o, r)
        sent = r["start_ms"] + (handover if d is None else d)  # handed to the network stack
        out.append(round(max(0.0, sent - max(ts)), 3))
    ends = [r["last_byte_ms"] for r in reqs if r is not None and r.get("last_byte_ms") is not None]
    tail = max(0.0, (load["plt_ms"] - off) - max(ends)) if ends else 0.0

    def tight_delay(until: list[int], phase: int | None) -> float | None:
        te = tight_end(plan, reqs, phase)
        arrived = [reqs[j].get("last_byte_ms") if reqs[j] is not None else None for j in until]
        if te is None or not arrived or any(t is None for t in arrived):
            return None
        return round(max(0.0, te - max(arrived)), 3)

    frames = {
        ph["doc"]: tight_delay(ph["until"], k) for k, ph in enumerate(plan.get("tight_phases") or []) if ph.get("until")
    }
    return {
        "compute_ms": out,
        "tail_ms": round(tail, 3),
        "tight_delay_ms": tight_delay(plan.get("tight_until") or [], None),
        "frame_tight_delay_ms": frames,
        "matched": sum(r is not None for r in reqs),
    }


def network_stack(load: dict, rtt_ms: float = 0.0) -> dict:
    """What Chromium's network stack took in one load beyond the link (its CPU: post-quantum key
    exchange, certificate checks, per-response IPC; what the per-object delays, measured up to
    the hand-over to the network stack, leave out: docs/fidelity.md "Why 20 ms is hard"):
    ``setup_ms``, the median new connection's set-up (connectStart -> connectEnd, TLS included)
    less its round trips on the link (2 x ``rtt_ms`` over TLS, 1 over plain http or QUIC), and
    ``ttfb_ms``, the median request's sendStart -> response head less one round trip; each clamped
    at >= 0, None without a sample; with their sample counts."""

    def med(xs: list[float]) -> float | None:
        return round(statistics.median(xs), 3) if xs else None

    setup, ttfb = [], []
    for r in load.get("requests") or []:
        cs, ce, sent, fb = (r.get(k) for k in ("connect_start_ms", "connect_end_ms", "request_ms", "first_byte_ms"))
        if cs is not None and ce is not None and ce >= cs:
            trips = 2 if str(r.get("url", "")).startswith("https:") and r.get("protocol") != "h3" else 1
            setup.append(max(0.0, ce - cs - trips * rtt_ms))
        if sent is not None and fb is not None and fb >= sent:
            ttfb.append(max(0.0, fb - sent - rtt_ms))
    return {"setup_ms": med(setup), "ttfb_ms": med(ttfb), "connections": len(setup), "requests": len(ttfb)}


def derive(plan: dict, loads: list[dict], doc: int = 0, rtt_ms: float = 0.0) -> dict:
    """The median over several loads of derive_one (per object, and the tight-mode delay, over
    the loads that gave a value), and of network_stack (``rtt_ms``: the loads' RTT)."""
    if not loads:
        raise PltError("calibration needs at least one Chromium load")
    ones = [derive_one(plan, ld, doc) for ld in loads]
    nets = [network_stack(ld, rtt_ms) for ld in loads]

    def med(vs):
        vs = [v for v in vs if v is not None]
        return round(statistics.median(vs), 3) if vs else None

    comp = [med(d["compute_ms"][i] for d in ones) for i in range(len(plan["objects"]))]
    frames = {
        f: med(d["frame_tight_delay_ms"].get(f) for d in ones)
        for f in {k for d in ones for k in d["frame_tight_delay_ms"]}
    }
    return {
        "compute_ms": comp,
        "tail_ms": med(d["tail_ms"] for d in ones),
        "tight_delay_ms": med(d["tight_delay_ms"] for d in ones) or 0.0,
        "frame_tight_delay_ms": {k: v for k, v in sorted(frames.items()) if v is not None},
        "matched": min(d["matched"] for d in ones),
        "loads": len(ones),
        "net_setup_ms": med(n["setup_ms"] for n in nets),
        "net_ttfb_ms": med(n["ttfb_ms"] for n in nets),
    }
