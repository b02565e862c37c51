"""A page's stored compute calibration (measured by pltlab.run.calibrate, derived by
pltlab.loaders.compute_model): its keys in Obj/Page extras, their checks, and storing them.

Stored with the archive (archive/har.py): per entry ``_pltlab_compute_ms``, per page
``_pltlab_calibration`` = {"tail_ms", "tight_delay_ms", "frame_tight_delay_ms", "browser",
"machine", "rtt_ms", "loads", "measured_at", "matched", "objects"}."""

from __future__ import annotations

import math
import os
import platform
import re

from pltlab.archive.model import Page
from pltlab.errors import PltError

KEY = "compute_ms"  # Obj.extras key (HAR: the entry's `_pltlab_compute_ms`)
PAGE_KEY = "calibration"  # Page.extras key (HAR: the page's `_pltlab_calibration`)


def check_delay(v, where: str) -> float:
    """A stored compute delay: a finite number >= 0 (ms)."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise PltError(f"{where}: invalid compute delay {v!r}: must be a number of ms >= 0")
    return float(v)


# Chromium's network stack beyond the link, per new connection and per request
# (loaders.compute_model.network_stack): used by plans with the knob network_stack calibrated
NET_KEYS = ("net_setup_ms", "net_ttfb_ms")


def check_calibration(cal, where: str) -> dict:
    if not isinstance(cal, dict):
        raise PltError(f"{where}: invalid calibration {cal!r}: must be an object")
    check_delay(cal.get("tail_ms"), f"{where}: calibration tail_ms")
    if cal.get("tight_delay_ms") is not None:
        check_delay(cal["tight_delay_ms"], f"{where}: calibration tight_delay_ms")
    for k in NET_KEYS:
        if cal.get(k) is not None:
            check_delay(cal[k], f"{where}: calibration {k}")
    frames = cal.get("frame_tight_delay_ms")
    if frames is not None:
        if not isinstance(frames, dict):
            raise PltError(f"{where}: invalid calibration frame_tight_delay_ms {frames!r}: must be an object")
        for url, v in frames.items():
            check_delay(v, f"{where}: calibration frame_tight_delay_ms of {url}")
    return cal


def stored(page: Page) -> dict | None:
    """The page's stored compute calibration, checked, or None."""
    cal = page.extras.get(PAGE_KEY)
    return None if cal is None else check_calibration(cal, page.url)


def attach(page: Page, objs: list, derived: dict, meta: dict) -> Page:
    """Store ``derived`` on ``page``: ``objs`` are the page's objects in plan order
    (plan.plan_objects). Objects without a value get none (no delay)."""
    for o in page.objects:
        o.extras.pop(KEY, None)
    for o, v in zip(objs, derived["compute_ms"]):
        if v is not None:
            o.extras[KEY] = v
    frames = {objs[k].url: v for k, v in (derived.get("frame_tight_delay_ms") or {}).items()}
    page.extras[PAGE_KEY] = {
        "tail_ms": derived["tail_ms"],
        "tight_delay_ms": derived.get("tight_delay_ms", 0.0),
        "frame_tight_delay_ms": frames,
        **meta,
        "loads": derived["loads"],
        "matched": derived["matched"],
        "objects": len(objs),
    }
    for k in NET_KEYS:  # (calibrations made before these were measured have none)
        if derived.get(k) is not None:
            page.extras[PAGE_KEY][k] = derived[k]
    return page


def machine() -> str:
    """What a calibration's compute delays depend on of this machine: CPU model, CPU count and
    kernel ("AMD EPYC, 2 CPUs, Linux 6.18.44"; the browser is the calibration's own `browser`).
    Not the host name: two machines alike in these compute alike, and a shipped page names no host."""
    cpu = ""
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "")
    except OSError:
        pass
    return f"{cpu or platform.machine()}, {os.cpu_count()} CPUs, Linux {platform.release()}"


# A stored machine string of before: "HOST: CPU, N CPUs, Linux K" (the host name led it)
_WITH_HOST = re.compile(r"[^\s:,]+: (.+, \d+ CPUs, Linux \S+)")


def machine_of(stored: str) -> str:
    """A calibration's stored machine string as ``machine()`` writes it now: an older one's
    leading host name dropped (its CPU, CPU count and kernel kept); anything else as it is."""
    m = _WITH_HOST.fullmatch(stored)
    return m.group(1) if m else stored
