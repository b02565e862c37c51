"""What each feature saves: paired PLT differences between a knob's baseline and each other value
it took in an experiment (TFO off -> on, protocol h1 -> h2, TLS full -> resume / 0rtt, ...),
everything else equal (page, RTT, the other knobs, repetition), in ms and in round trips.

A feature's context is the other varying knobs' values: TFO's saving over h1 with full
handshakes is a row of its own, beside its saving over h2 with 0-RTT. "all pages" rows pool the
pages' pairs in round trips (saved ms / RTT), so pages of any size weigh alike.
"""

from __future__ import annotations

import json
import math
import statistics

from pltlab.experiments import stats
from pltlab.report import headline
from pltlab.report import statistics as an
from pltlab.run import knobs

RTT = knobs.KNOBS["rtt"].column
BASELINES = an.BASELINES
_show, _baseline = an.show, an.baseline


def _dims(runs: list[dict]) -> list[str]:
    cols = [k.column for k in knobs.point() if k.column and k.column != RTT] + ["tfo"]
    return [c for c in cols if len({json.dumps(r.get(c)) for r in runs}) > 1]


def effects(runs: list[dict]) -> list[dict]:
    """Rows {feature, context, page, rtt_ms, n, saved_ms, ci, saved_rtts, rtts_ci,
    baseline_context} per page and "all pages" (saved_rtts pooled); valid runs only, pairs
    matched by repetition. ``baseline_context``: every other knob at its baseline."""
    ok = [r for r in runs if r.get("status") == "ok" and r.get("valid") and r.get("plt_ms") is not None]
    dims = _dims(ok)
    values_of = {c: sorted({json.dumps(r.get(c)) for r in ok}) for c in dims}
    base_of = {c: _baseline(c, [json.loads(v) for v in values_of[c]]) for c in dims}
    out = []
    for col in dims:
        values, base = values_of[col], base_of[col]
        others = [c for c in dims if c != col]
        at_base = tuple(json.dumps(base_of[c]) for c in others)
        by_key: dict[tuple, dict] = {}
        for r in ok:  # (page, rtt, other knobs, rep) -> value -> PLT
            key = (r["page"], r[RTT], tuple(json.dumps(r.get(c)) for c in others), r.get("rep"))
            by_key.setdefault(key, {})[json.dumps(r.get(col))] = r["plt_ms"]
        for v in values:
            alt = json.loads(v)
            if alt == base:
                continue
            feature = f"{_show(col, base)} -> {_show(col, alt)}"
            groups: dict[tuple, list[float]] = {}
            for (page, rtt, ctx, _), plts in by_key.items():
                if json.dumps(base) in plts and v in plts:
                    groups.setdefault((ctx, rtt, page), []).append(plts[json.dumps(base)] - plts[v])
            pooled: dict[tuple, list[float]] = {}
            for i, ((ctx, rtt, page), diffs) in enumerate(sorted(groups.items())):
                context = ", ".join(_show(c, json.loads(x)) for c, x in zip(others, ctx))
                out.append(
                    _row(feature, context, page, rtt, diffs, seed=i * 7919) | {"baseline_context": ctx == at_base}
                )
                pooled.setdefault((ctx, rtt), []).extend(d / rtt for d in diffs if rtt)
            for i, ((ctx, rtt), rtts) in enumerate(sorted(pooled.items())):
                context = ", ".join(_show(c, json.loads(x)) for c, x in zip(others, ctx))
                lo, hi = stats.mean_ci(rtts, seed=i * 104729)
                out.append(
                    {
                        "feature": feature,
                        "context": context,
                        "page": "all pages",
                        "rtt_ms": rtt,
                        "n": len(rtts),
                        "saved_ms": None,
                        "ci": [None, None],
                        "saved_rtts": statistics.fmean(rtts),
                        "rtts_ci": [lo, hi],
                        "baseline_context": ctx == at_base,
                    }
                )
    return out


def _row(feature: str, context: str, page: str, rtt: float, diffs: list[float], seed: int) -> dict:
    lo, hi = stats.mean_ci(diffs, seed=seed)
    mean = statistics.fmean(diffs)
    per = (lambda x: x / rtt) if rtt else (lambda x: None)  # noqa: E731
    return {
        "feature": feature,
        "context": context,
        "page": page,
        "rtt_ms": rtt,
        "n": len(diffs),
        "saved_ms": mean,
        "ci": [lo, hi],
        "saved_rtts": per(mean),
        "rtts_ci": [per(lo), per(hi)],
    }


HEADERS = [
    "feature",
    "context",
    "page",
    "RTT (ms)",
    "n",
    "saved (ms)",
    f"{stats.INTERVAL} (ms)",
    "saved (RTTs)",
    f"{stats.INTERVAL} (RTTs)",
]


def table_rows(rows: list[dict]) -> list[list[str]]:
    def f(x, d):
        return "" if x is None else f"{x:.{d}f}"

    def ci(r, key, point, d):  # no interval of fewer than MIN_N pairs (stats.shown)
        lo, hi = r[key]
        if r[point] is None:
            return ""
        if not stats.shown(r["n"]):
            return headline.NO_CI
        return "-" if lo is None or math.isnan(lo) else f"[{lo:.{d}f}, {hi:.{d}f}]"

    return [
        [
            r["feature"],
            r["context"],
            r["page"],
            f"{r['rtt_ms']:g}",
            str(r["n"]),
            f(r["saved_ms"], 1),
            ci(r, "ci", "saved_ms", 1),
            f(r["saved_rtts"], 2),
            ci(r, "rtts_ci", "saved_rtts", 2),
        ]
        for r in rows
    ]
