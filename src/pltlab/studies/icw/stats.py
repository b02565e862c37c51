"""Tiny statistics for the ICW study: geometric mean with a percentile-bootstrap CI."""

from __future__ import annotations

import math
import random


def geomean(xs) -> float:
    xs = [float(x) for x in xs]
    if not xs or min(xs) <= 0:
        raise ValueError("geometric mean needs positive values")
    return math.exp(sum(math.log(x) for x in xs) / len(xs))


def _pct(sorted_xs: list[float], q: float) -> float:
    k = (len(sorted_xs) - 1) * q
    lo, hi = math.floor(k), math.ceil(k)
    return sorted_xs[lo] + (sorted_xs[hi] - sorted_xs[lo]) * (k - lo)


def bootstrap_ci(xs, stat=geomean, level: float = 0.95, n: int = 2000, seed: int = 1) -> tuple[float, float]:
    """Percentile bootstrap CI of ``stat`` over ``xs`` (a single value: [x, x])."""
    xs = list(xs)
    if len(xs) < 2:
        v = stat(xs)
        return (v, v)
    rng = random.Random(seed)
    boots = sorted(stat([rng.choice(xs) for _ in xs]) for _ in range(n))
    a = (1 - level) / 2
    return (_pct(boots, a), _pct(boots, 1 - a))


def summary(xs, seed: int = 1) -> dict:
    lo, hi = bootstrap_ci(xs, seed=seed)
    return {"n": len(xs), "geomean": geomean(xs), "ci": [lo, hi]}
