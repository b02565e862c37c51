"""Measurement kinds: what one run of an experiment measures. The sweep engine opens a kind's
runner per (page, configuration) and asks it for loads.

A runner is a context manager with ``topo.run_id`` (recorded before ``__enter__``, so a resume
after a kill can remove what was left) and ``load(point, rep) -> dict`` (``point``: the load's
per-load knobs, pltlab.run.point.Point: its TFO mode) returning at least plt_ms
(None: the kind measures no PLT), valid, invalid_reason, not_found, tfo_counters ({"client",
"server"}) and requests, and optionally ``metrics`` (a dict, stored as JSON in the run's row),
``seed`` (the link seed the load used, where not the configuration's) and ``summary`` (a line
for the progress display instead of the PLT).

- page_load: the page loaded by a loader over the emulated WAN (run.runner.PageRunner); runners
  stay up across repetitions. Per-object transfer times are in its request rows.
- traced_load: page loads with the PLT read from the emulator's packet trace, each in a fresh
  topology with link seed seed + rep - 1 (run.traced).
- flows: a long flow against back-to-back short downloads on one bottleneck (run.flows).
"""

from __future__ import annotations

from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.run.config import RunConfig
from pltlab.run.flows import FlowsRunner
from pltlab.run.runner import PageRunner
from pltlab.run.traced import TracedRunner

KINDS = {"page_load": PageRunner, "traced_load": TracedRunner, "flows": FlowsRunner}


def check(kind: str) -> str:
    if kind not in KINDS:
        raise PltError(f"unknown measurement kind {kind!r} (choose from {', '.join(KINDS)})")
    return kind


def needs_root(kind: str) -> bool:
    """Whether the runs of ``kind`` need root here (they build emulated WANs): the runner class's
    ``needs_root``, False if it does not say."""
    return bool(getattr(KINDS[check(kind)], "needs_root", False))


def runner(kind: str, page: Page, cfg: RunConfig):
    """A runner of ``kind`` for ``page`` under ``cfg`` (not yet entered)."""
    return KINDS[check(kind)](page, cfg)
