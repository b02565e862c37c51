"""One measured page load with its own packet trace: a fresh topology per load, so every load
starts cold and the seeded loss gives every ICW the same drop pattern for the same seed."""

from __future__ import annotations

import dataclasses
import os
import tempfile

from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.run.config import RunConfig
from pltlab.run.pcaptrace import plt_from_pcap
from pltlab.run.runner import PageRunner

ICW_MIN, ICW_MAX = 1, 256


def check_icw(v) -> int:
    """An initial congestion window in segments, or a one-line PltError. 256 segments (370 KB)
    is far beyond any window a client advertises at the start (64 KB), so larger values measure
    nothing; the study used 1..32."""
    if isinstance(v, bool) or not isinstance(v, int) or not ICW_MIN <= v <= ICW_MAX:
        raise PltError(f"invalid ICW {v!r}: must be an integer from {ICW_MIN} to {ICW_MAX} segments")
    return v


class TracedPageRunner(PageRunner):
    """PageRunner whose topology writes a pcap (userspace emulator: netem has no pcap)."""

    def __init__(self, page: Page, cfg: RunConfig, pcap: str):
        # No re-run of a late load in place: the pcap would hold both loads. A late load is
        # invalid here, and the study retries it in a fresh topology (study._load).
        super().__init__(page, dataclasses.replace(cfg, pcap=pcap, backend="userspace", late_reruns=0))
        self.pcap = pcap


def traced_load(page: Page, cfg: RunConfig, rep: int = 1, keep_pcap: str | None = None) -> dict:
    """One load (no TFO) in a fresh topology; the run record plus ``loader_plt_ms``,
    ``trace_plt_ms``, ``trace`` (connections, unacked) and ``seed``."""
    check_icw(cfg.icw)
    fd, pcap = tempfile.mkstemp(prefix="pltlab-icw-", suffix=".pcap")
    os.close(fd)
    try:
        with TracedPageRunner(page, cfg, pcap) as pr:
            rec = pr.load(False, rep)
        tr = plt_from_pcap(pcap)
        if keep_pcap:
            os.replace(pcap, keep_pcap)
    finally:
        if os.path.exists(pcap):
            os.unlink(pcap)
    if not rec["valid"]:
        raise PltError(f"invalid load: {rec['invalid_reason']}")
    rec["loader_plt_ms"] = rec["plt_ms"]
    rec["trace_plt_ms"] = tr["plt_ms"]
    rec["trace"] = {"connections": tr["connections"], "unacked": tr["unacked"]}
    rec["seed"] = cfg.seed
    return rec
