"""Statistics of PLT samples: summaries with bootstrap confidence intervals, and the signed
improvement of TFO over no TFO (1 - PLT_tfo / PLT_notfo; a slowdown is negative)."""

import math
import statistics

import numpy as np

BOOT = 10_000  # bootstrap resamples
LEVEL = 0.95


def geomean(v) -> float:
    return math.exp(statistics.fmean(math.log(x) for x in v)) if v and min(v) > 0 else float("nan")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    a = (1 - LEVEL) / 2
    lo, hi = np.quantile(samples, [a, 1 - a])
    return float(lo), float(hi)


def boot_means(v, n: int = BOOT, seed: int = 0) -> np.ndarray:
    """Means of n resamples (with replacement) of v."""
    x = np.asarray(v, dtype=float)
    idx = _rng(seed).integers(0, len(x), size=(n, len(x)))
    return x[idx].mean(axis=1)


def mean_ci(v, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the mean."""
    if len(v) == 0:
        return float("nan"), float("nan")
    return _interval(boot_means(v, seed=seed))


def summary(v, seed: int = 0) -> dict:
    v = list(v)
    if not v:
        return {"n": 0, "mean": None, "median": None, "geomean": None, "ci": [None, None]}
    lo, hi = mean_ci(v, seed)
    return {"n": len(v), "mean": statistics.fmean(v), "median": statistics.median(v),
            "geomean": geomean(v), "ci": [lo, hi]}


def improvement(tfo, notfo, seed: int = 0) -> dict:
    """1 - mean(tfo) / mean(notfo) with a bootstrap 95 % interval (both sides resampled
    independently)."""
    tfo, notfo = list(tfo), list(notfo)
    if not tfo or not notfo:
        return {"improvement": None, "ci": [None, None]}
    point = 1 - statistics.fmean(tfo) / statistics.fmean(notfo)
    b = 1 - boot_means(tfo, seed=seed) / boot_means(notfo, seed=seed + 1)
    lo, hi = _interval(b)
    return {"improvement": point, "ci": [lo, hi]}
