"""`--network recorded` (knob network): a page loaded over the network it was recorded over, as
pltlab.archive.netinfer infers it from the recording's timings, with every other knob on top.

What the inference sets, each only where the user left the knob at its default (a knob given at
its default value cannot be told from one not given):

    rtt          the page's median RTT (origins without samples of their own)
    origin_rtt   each origin's RTT (the median over its hosts' new connections); an origin the
                 user named in --origin-rtt keeps the user's
    rate         the inferred download rate (both directions: the recording has no upload rate);
                 not with a delivery trace
    dns          the median first lookup, with the built-in loader (Chromium resolves itself)
    think_time   on, each response's recorded wait minus its origin's RTT (clipped at 0)

``apply`` returns the page as replayed (the think times in place of the recorded waits), the
configuration, and the inference (its summary goes into each run's metrics).
"""

from __future__ import annotations

import dataclasses
import statistics

from pltlab import units
from pltlab.archive import netinfer
from pltlab.archive.model import Page
from pltlab.loaders import registry
from pltlab.replay import hosts as hostmap
from pltlab.run import knobs
from pltlab.run.config import RunConfig


def _us(ms: float) -> int:
    return min(units.MAX_RTT_US, max(0, round(ms * 1000)))


def apply(page: Page, cfg: RunConfig, where: str = "") -> tuple[Page, RunConfig, netinfer.Inference]:
    """The page, configuration and inference of a load over ``page``'s recorded network; one
    PltError line naming ``where`` (default: the page's id) when the recording has no timings."""
    inf = netinfer.infer(page, where or page.id or page.url)
    default = {k.field: k.value for k in knobs.KNOBS.values()}
    changes: dict = {"think_time": True}
    if cfg.rtt_us == default["rtt_us"]:
        changes["rtt_us"] = _us(inf.rtt_ms)
    if cfg.rate_bps == default["rate_bps"] and cfg.trace_down is None and inf.rate_bps is not None:
        changes["rate_bps"] = min(units.MAX_RATE_BPS, max(units.MIN_RATE_BPS, inf.rate_bps))
    if cfg.dns_us == default["dns_us"] and inf.dns_ms is not None and registry.get(cfg.client).planned:
        changes["dns_us"] = _us(inf.dns_ms)
    changes["overrides"] = _overrides(page, cfg, inf)
    think = iter(inf.think_ms)
    objects = [dataclasses.replace(o, extras={**o.extras, "wait_ms": next(think) or 0.0}) for o in page.objects]
    return dataclasses.replace(page, objects=objects), dataclasses.replace(cfg, **changes), inf


def _overrides(page: Page, cfg: RunConfig, inf: netinfer.Inference) -> tuple:
    """The user's per-origin overrides, and the inferred RTT of every other origin (by index:
    hosts at one recorded address share an origin, pltlab.replay.hosts)."""
    index = hostmap.assign([page])
    taken = {index.get(t) if isinstance(t, str) else t for t, _, _ in cfg.overrides}
    per_origin: dict[int, list[float]] = {}
    for host, i in index.items():
        h = inf.hosts.get(host)
        if h is not None and h.rtt_ms is not None:
            per_origin.setdefault(i, []).append(h.rtt_ms)
    inferred = [(i, _us(statistics.median(v)), None) for i, v in per_origin.items() if i not in taken]
    return tuple(sorted((*cfg.overrides, *inferred), key=repr))
