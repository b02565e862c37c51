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

Stored with the archive (archive/har.py): per entry ``_pltlab_compute_ms``, per page
``_pltlab_calibration`` = {"tail_ms", "tight_delay_ms", "frame_tight_delay_ms", "browser",
"machine", "rtt_ms", "loads", "measured_at", "matched", "objects"}."""

from __future__ import annotations

import math
import os
import platform
import statistics
import time

from pltlab.archive import synth
from pltlab.archive.model import Page, strip_fragment
from pltlab.errors import PltError

KEY = "compute_ms"  # Obj.extras key (HAR: the entry's `_pltlab_compute_ms`)
PAGE_KEY = "calibration"  # Page.extras key (HAR: the page's `_pltlab_calibration`)


def check_delay(v, where: str) -> float:
    """A stored compute delay: a finite number >= 0 (ms)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise PltError(f"{where}: invalid compute delay {v!r}: must be a number of ms >= 0")
    return float(v)


def check_calibration(cal, where: str) -> dict:
    if not isinstance(cal, dict):
        raise PltError(f"{where}: invalid calibration {cal!r}: must be an object")
    check_delay(cal.get("tail_ms"), f"{where}: calibration tail_ms")
    if cal.get("tight_delay_ms") is not None:
        check_delay(cal["tight_delay_ms"], f"{where}: calibration tight_delay_ms")
    frames = cal.get("frame_tight_delay_ms")
    if frames is not None:
        if not isinstance(frames, dict):
            raise PltError(f"{where}: invalid calibration frame_tight_delay_ms {frames!r}: must be an object")
        for url, v in frames.items():
            check_delay(v, f"{where}: calibration frame_tight_delay_ms of {url}")
    return cal


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
    spans = sorted((r["released_ms"], r["last_byte_ms"]) for o, r in zip(plan["objects"], reqs)
                   if o.get("delayable") and o.get("tight_phase") == phase and r is not None
                   and r.get("released_ms") is not None and r.get("last_byte_ms") is not None)
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

    frames = {ph["doc"]: tight_delay(ph["until"], k) for k, ph in enumerate(plan.get("tight_phases") or [])
              if ph.get("until")}
    return {"compute_ms": out, "tail_ms": round(tail, 3),
            "tight_delay_ms": tight_delay(plan.get("tight_until") or [], None),
            "frame_tight_delay_ms": frames, "matched": sum(r is not None for r in reqs)}


def derive(plan: dict, loads: list[dict], doc: int = 0) -> dict:
    """The median over several loads of derive_one (per object, and the tight-mode delay, over
    the loads that gave a value)."""
    if not loads:
        raise PltError("calibration needs at least one Chromium load")
    ones = [derive_one(plan, ld, doc) for ld in loads]

    def med(vs):
        vs = [v for v in vs if v is not None]
        return round(statistics.median(vs), 3) if vs else None

    comp = [med(d["compute_ms"][i] for d in ones) for i in range(len(plan["objects"]))]
    frames = {f: med(d["frame_tight_delay_ms"].get(f) for d in ones)
              for f in {k for d in ones for k in d["frame_tight_delay_ms"]}}
    return {"compute_ms": comp, "tail_ms": med(d["tail_ms"] for d in ones),
            "tight_delay_ms": med(d["tight_delay_ms"] for d in ones) or 0.0,
            "frame_tight_delay_ms": {k: v for k, v in sorted(frames.items()) if v is not None},
            "matched": min(d["matched"] for d in ones), "loads": len(ones)}


def machine() -> str:
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{platform.node()}: {cpu or platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}"


def attach(page: Page, objs: list, derived: dict, meta: dict) -> Page:
    """Store ``derived`` on ``page``: ``objs`` are the page's objects in plan order
    (plan.plan_objects). Objects without a value get none (no delay)."""
    for o in page.objects:
        o.extras.pop(KEY, None)
    for o, v in zip(objs, derived["compute_ms"]):
        if v is not None:
            o.extras[KEY] = v
    frames = {objs[k].url: v for k, v in (derived.get("frame_tight_delay_ms") or {}).items()}
    page.extras[PAGE_KEY] = {"tail_ms": derived["tail_ms"],
                             "tight_delay_ms": derived.get("tight_delay_ms", 0.0),
                             "frame_tight_delay_ms": frames, **meta, "loads": derived["loads"],
                             "matched": derived["matched"], "objects": len(objs)}
    return page


def calibrate(page: Page, loads: int = 3, rtt: str = "0ms", log=None) -> Page:
    """Measure Chromium's compute on ``page`` (``loads`` loads at ``rtt``, median) and store it
    on the page (in place; returned)."""
    from pltlab.experiments.runner import PageRunner, RunConfig
    from pltlab.loaders import chromium, plan as plans

    if loads < 1:
        raise PltError(f"invalid number of calibration loads {loads}: must be >= 1")
    cfg = RunConfig(rtt=rtt, client="chromium", schemes="chromium", model="chromium", reps=loads,
                    tfo_modes=(False,))
    results, browser = [], ""
    with PageRunner(page, cfg) as pr:
        plan = plans.build(page, pr.host_ips, tfo=False, ca=pr.replay.ca, https_hosts=pr.https_hosts,
                           model="chromium", calibrated=False)
        for k in range(loads):
            try:
                res = chromium.load(pr.topo, page, pr.host_ips, pr.replay.spki, tfo=False)
            except PltError as e:
                raise PltError(f"calibrating {page.url}: load {k + 1} failed: {e}") from None
            browser = res.get("browser") or browser
            results.append(res)
            if log:
                log(f"{page.url}: calibration load {k + 1}/{loads}: Chromium PLT {res['plt_ms']:.1f} ms")
        objs = plans.plan_objects(page, pr.host_ips)
    main = synth.main_document(page)
    doc = next((i for i, o in enumerate(objs) if o is main), 0)
    try:
        derived = derive(plan, results, doc)
    except PltError as e:
        raise PltError(f"calibrating {page.url}: {e}") from None
    meta = {"browser": f"chromium {browser}".strip(), "machine": machine(),
            "rtt_ms": cfg.link().rtt_us / 1000,
            "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "load_plt_ms": [round(r["plt_ms"], 1) for r in results]}
    return attach(page, objs, derived, meta)
