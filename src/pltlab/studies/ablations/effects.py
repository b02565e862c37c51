"""Each variant's headline figures, read from its folder as its study wrote it, and each factor's
effect (the variant minus its base) with a BCa bootstrap interval over the loads (repetitions)
(pltlab.experiments.stats), and whether the figure is in the paper's band
(pltlab.studies.paper_gaps.PUBLISHED).

tfo: the TFO improvement per page x RTT (stats.csv: the study's own figures with their CIs); an
effect is the mean over the pages of (improvement of the variant - of the base), per RTT and over
every cell, every side of every cell resampled (runs.csv: the valid loads).
icw: the fairness ratio at the largest ICW (results.json, with the study's CI); an effect is the
variant's ratio minus the base's, the downloads and the long flow's 1-s rates resampled (the
fairness part's results database: the flows measurement's metrics)."""

from __future__ import annotations

import csv
import json
import math
import os

import numpy as np

from pltlab import results as results_folder
from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.studies.paper_gaps import PUBLISHED

SEED = 1


def _num(s):
    try:
        x = float(s)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def _csv(folder: str, name: str) -> list[dict]:
    path = os.path.join(folder, name)
    try:
        with open(path, newline="") as f:
            return list(csv.DictReader(f))
    except OSError as e:
        raise PltError(f"{path}: cannot read the variant's {name} ({e.strerror}): did the variant finish?") from None


# ---- tfo ---------------------------------------------------------------------------------
def tfo_headline(folder: str) -> dict:
    """The study's improvements per page x RTT (fractions, CI where stats.csv shows one)."""
    cells = {}
    for r in _csv(folder, "stats.csv"):
        key = (r["page"], float(r["rtt_ms"]))
        if key in cells:
            continue  # (one row per side, the improvement on both)
        imp = _num(r["improvement_pct"])
        lo, hi = _num(r["improvement_ci95_lo_pct"]), _num(r["improvement_ci95_hi_pct"])
        cells[key] = {
            "page": key[0],
            "rtt_ms": key[1],
            "improvement": None if imp is None else imp / 100,
            "ci": [lo / 100, hi / 100] if lo is not None and hi is not None else None,
            "n": int(r["n"]),
        }
    rows = sorted(cells.values(), key=lambda c: (c["page"], c["rtt_ms"]))
    return {"cells": rows, "in_band": tfo_in_band(rows)}


def tfo_in_band(cells: list[dict]) -> bool:
    """Every cell within the paper's band, and each page's improvement rising with RTT."""
    lo, hi = PUBLISHED["tfo"]["band"]
    imps = [c["improvement"] for c in cells]
    if not imps or None in imps:
        return False
    if not all(lo <= i <= hi for i in imps):
        return False
    for page in {c["page"] for c in cells}:
        mine = [c["improvement"] for c in sorted(cells, key=lambda c: c["rtt_ms"]) if c["page"] == page]
        if any(b < a for a, b in zip(mine, mine[1:])):
            return False
    return True


def tfo_loads(folder: str) -> dict:
    """{(page, rtt_ms): (PLTs without TFO, with TFO)} of the valid loads (runs.csv)."""
    out: dict = {}
    for r in _csv(folder, "runs.csv"):
        plt = _num(r.get("plt_ms"))
        if r.get("status") != "ok" or r.get("valid") not in ("1", "True", "true") or plt is None:
            continue
        sides = out.setdefault((r["page"], float(r["rtt_ms"])), ([], []))
        sides[int(float(r["tfo"]) > 0)].append(plt)
    return out


def tfo_drops(folder: str) -> dict | None:
    """The packets the link emulator dropped during the variant's loads (runs.csv: each load's
    metrics `link_drops`, pltlab.run.runner.link_drops), both directions summed: {"loads": loads
    that recorded them, "runs": loads in all, "loss": by random loss, "queue": by the full queue};
    None when no load recorded them (loads of a pltlab before it counted, or netem)."""
    out = {"loads": 0, "runs": 0, "loss": 0, "queue": 0}
    for r in _csv(folder, "runs.csv"):
        if r.get("status") != "ok":
            continue
        out["runs"] += 1
        try:
            drops = (json.loads(r.get("metrics") or "null") or {}).get("link_drops")
        except ValueError:
            drops = None
        if not drops:
            continue
        out["loads"] += 1
        for d in drops.values():
            out["loss"] += int(d.get("loss") or 0)
            out["queue"] += int(d.get("queue") or 0)
    return out if out["loads"] else None


def _imp(off, on, axis=-1):
    return 1 - np.mean(on, axis=axis) / np.mean(off, axis=axis)


def tfo_effect(variant: dict, base: dict, rtt_ms: float | None = None) -> dict:
    """The mean over the cells both hold (at ``rtt_ms``, else every RTT) of (the variant's
    improvement - the base's), with its BCa interval (every side of every cell resampled on its
    own; shown only where each side holds stats.MIN_N loads in all)."""
    keys = sorted(k for k in variant if k in base and (rtt_ms is None or k[1] == rtt_ms))
    keys = [k for k in keys if all(variant[k]) and all(base[k])]
    # BCa's jackknife leaves one load out of each side: where some cells have two loads a side,
    # those (an invalid load can leave another cell one); else every cell, without an interval
    keys = [k for k in keys if all(len(s) >= 2 for s in (*variant[k], *base[k]))] or keys
    if not keys:
        return {"effect": None, "ci": None, "n": 0}
    samples = [s for k in keys for s in (*variant[k], *base[k])]

    def stat(*xs, axis=-1):
        d = [_imp(xs[4 * i], xs[4 * i + 1], axis) - _imp(xs[4 * i + 2], xs[4 * i + 3], axis) for i in range(len(keys))]
        return sum(d) / len(d)  # (the sides broadcast: BCa's jackknife resamples one at a time)

    point = float(stat(*[np.asarray(s, dtype=float) for s in samples]))
    n = min(sum(len(variant[k][i]) for k in keys) for i in (0, 1))
    n = min(n, *(sum(len(base[k][i]) for k in keys) for i in (0, 1)))
    ci = stats.bca(stat, *samples, seed=SEED, n=2000) if stats.shown(n) else None
    return {"effect": point, "ci": list(ci) if ci else None, "n": n}


# ---- icw ---------------------------------------------------------------------------------
def icw_headline(folder: str) -> dict:
    """The fairness ratio at the study's largest fairness ICW, with its CI (results.json)."""
    path = os.path.join(folder, "results.json")
    try:
        with open(path) as f:
            fair = json.load(f).get("fairness") or []
    except (OSError, ValueError) as e:
        raise PltError(f"{path}: cannot read the variant's results ({e}): did the variant finish?") from None
    if not fair:
        raise PltError(f"{path}: no fairness results (the ablations run `reproduce icw --only fairness`)")
    f = max(fair, key=lambda x: x["icw"])
    ci = f.get("ratio_ci")
    ratio = f["ratio"]
    med, long_kbs = f.get("short_median_kbyte_s"), f["long_kbyte_s"]
    return {
        "icw": f["icw"],
        "ratio": ratio,
        "ci": ci if ci and all(x is not None and math.isfinite(x) for x in ci) else None,
        "long_kbyte_s": long_kbs,
        "short_kbyte_s": f["short_kbyte_s"],
        "downloads": f["short_downloads"],
        "in_band": icw_in_band(ratio),
        # the median download's rate over the long flow's: the study's 59.1 KB/s is a download's
        # rate, the aggregate (all bytes / all download time) counts every retransmission timeout
        "short_median_kbyte_s": med,
        "median_ratio": med / long_kbs if med is not None and long_kbs else None,
    }


def icw_in_band(ratio: float | None) -> bool:
    return ratio is not None and math.isfinite(ratio) and ratio >= PUBLISHED["icw"]["band"][0]


def fairness_samples(metrics: dict) -> dict:
    """A fairness run's samples: downloads as (bytes, ms) rows, the long flow's 1-s rates (KB/s)
    and its rate over the run (KB/s)."""
    dl = np.asarray([[f[1], f[0]] for f in metrics["downloads"]], dtype=float).reshape(-1, 2)
    secs = metrics.get("long_seconds") or 0
    return {
        "downloads": dl,
        # the client's retransmissions per download (tcpi_total_retrans: its SYN or request sent again)
        "retrans": np.asarray([f[2] if len(f) > 2 else 0 for f in metrics["downloads"]], dtype=float),
        "intervals": np.asarray(metrics.get("long_intervals_kbyte_s") or [], dtype=float),
        "long_kbs": metrics["long_bytes"] / secs / 1000 if secs else 0.0,
    }


def icw_loads(folder: str, icw: int) -> dict:
    """The samples of the fairness run at ``icw`` (the fairness part's results database)."""
    runs = results_folder.open(os.path.join(folder, "fairness")).runs
    ok = runs[(runs["status"] == "ok") & (runs["icw"] == icw) & runs["metrics"].notna()]
    if ok.empty:
        raise PltError(f"{folder}: no finished fairness run at ICW {icw}")
    return fairness_samples(json.loads(ok.iloc[-1]["metrics"]))


def icw_failures(folder: str, icw: int | None = None) -> list[str]:
    """Why the fairness runs at ``icw`` (None: any) failed, each attempt's reason in order, the
    same reason once; none readable: []."""
    try:
        runs = results_folder.open(os.path.join(folder, "fairness")).runs
    except (PltError, OSError):
        return []
    bad = runs[(runs["status"] == "failed") & ((runs["icw"] == icw) if icw is not None else True)]
    return list(
        dict.fromkeys(
            f"ICW {i}: {r}" if icw is None else str(r) for i, r in zip(bad["icw"], bad["failure_reason"]) if r
        )
    )


def _ratio_stat(s: dict):
    """(the samples the bootstrap resamples, the ratio of resampled samples)."""
    dl = s["downloads"]
    idx = np.arange(len(dl))

    def ratio(i, iv=None, axis=-1):
        rows = dl[np.asarray(i, dtype=int)]
        short = rows[..., 0].sum(-1) / rows[..., 1].sum(-1)
        return short / (iv.mean(axis=axis) if iv is not None else s["long_kbs"])

    return ([idx, s["intervals"]] if len(s["intervals"]) else [idx]), ratio


def median_ratio_ci(s: dict) -> list[float] | None:
    """The BCa interval of the median download's rate over the long flow's mean 1-s rate
    (downloads and the 1-s rates resampled); None without them or without an interval."""
    dl, iv = s["downloads"], s["intervals"]
    if len(dl) < 2 or len(iv) < 2:
        return None
    rates = dl[:, 0] / dl[:, 1]  # bytes/ms = KB/s

    def stat(r, i, axis=-1):
        return np.median(r, axis=axis) / i.mean(axis=axis)

    ci = stats.bca(stat, rates, iv, seed=SEED, n=2000) if stats.shown(len(dl)) else None
    return list(ci) if ci else None


def slow_downloads(s: dict, over_ms: float) -> tuple[int, int, int]:
    """(downloads that took longer than ``over_ms``, those of them in which the client sent
    something again, all downloads)."""
    dl = s["downloads"]
    if not len(dl):
        return 0, 0, 0
    slow = dl[:, 1] > over_ms
    return int(slow.sum()), int((slow & (s["retrans"] > 0)).sum()), len(dl)


def icw_effect(variant: dict, base: dict) -> dict:
    """The variant's fairness ratio minus the base's with its BCa interval (downloads and the long
    flow's 1-s rates resampled, as the study's own ratio CI)."""
    if not len(variant["downloads"]) or not len(base["downloads"]):
        return {"effect": None, "ci": None, "n": 0}  # (a run too short for one download: no ratio)
    sv, rv = _ratio_stat(variant)
    sb, rb = _ratio_stat(base)

    def stat(*xs, axis=-1):
        a, b = xs[: len(sv)], xs[len(sv) :]
        return rv(*a, axis=axis) - rb(*b, axis=axis)

    point = float(stat(*sv, *sb))
    n = min(len(variant["downloads"]), len(base["downloads"]))
    ci = stats.bca(stat, *sv, *sb, seed=SEED, n=2000) if stats.shown(n) else None
    return {"effect": point, "ci": list(ci) if ci else None, "n": n}
