"""Statistics of measurements, one implementation for every study: the geometric mean, percentile
bootstrap intervals (of a mean, a geometric mean, or any statistic of several resampled samples),
quantiles, and the signed improvement of TFO over no TFO (1 - PLT_tfo / PLT_notfo; a slowdown is
negative)."""

import math
import statistics

import numpy as np

BOOT = 10_000  # bootstrap resamples
LEVEL = 0.95


def geomean(v) -> float:
    v = list(v)
    return math.exp(statistics.fmean(math.log(x) for x in v)) if v and min(v) > 0 else float("nan")


def quantile(v, q: float) -> float:
    """The q-quantile, linear between order statistics (nan for no values)."""
    return float(np.quantile(np.asarray(v, dtype=float), q)) if len(v) else float("nan")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _interval(samples: np.ndarray) -> tuple[float, float]:
    a = (1 - LEVEL) / 2
    lo, hi = np.quantile(samples, [a, 1 - a])
    return float(lo), float(hi)


def bootstrap(stat, *samples, n: int = BOOT, seed: int = 0) -> np.ndarray:
    """``stat`` over ``n`` resamples (with replacement) of every sample, drawn one after the other
    from one generator seeded with ``seed``. A sample is a sequence of values or of rows (a
    (k, m) array: rows resampled whole); ``stat`` receives one (n, k[, m]) array per sample and
    returns n values."""
    rng = _rng(seed)
    draws = []
    for s in samples:
        x = np.asarray(s, dtype=float)
        draws.append(x[rng.integers(0, len(x), size=(n, len(x)))])
    return stat(*draws)


def interval(boots) -> tuple[float, float]:
    """The percentile interval (LEVEL) of bootstrap values."""
    return _interval(np.asarray(boots, dtype=float))


def boot_means(v, n: int = BOOT, seed: int = 0) -> np.ndarray:
    """Means of n resamples (with replacement) of v."""
    return bootstrap(lambda x: x.mean(axis=1), v, n=n, seed=seed)


def mean_ci(v, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the mean."""
    if len(v) == 0:
        return float("nan"), float("nan")
    return _interval(boot_means(v, seed=seed))


def geomean_ci(v, seed: int = 0) -> tuple[float, float]:
    """Percentile-bootstrap 95 % interval of the geometric mean (positive values)."""
    v = list(v)
    if not v or min(v) <= 0:
        return float("nan"), float("nan")
    if len(v) == 1:  # exactly the value (exp(log(x)) may differ from x in its last bit)
        return v[0], v[0]
    return _interval(np.exp(boot_means(np.log(v), seed=seed)))


def summary(v, seed: int = 0) -> dict:
    v = list(v)
    if not v:
        return {"n": 0, "mean": None, "median": None, "geomean": None, "ci": [None, None]}
    lo, hi = mean_ci(v, seed)
    return {
        "n": len(v),
        "mean": statistics.fmean(v),
        "median": statistics.median(v),
        "geomean": geomean(v),
        "ci": [lo, hi],
    }


def geo_summary(v, seed: int = 0) -> dict:
    """n, geometric mean and its bootstrap interval (the ICW study's points)."""
    v = list(v)
    if not v:
        return {"n": 0, "geomean": None, "ci": [None, None]}
    lo, hi = geomean_ci(v, seed)
    return {"n": len(v), "geomean": geomean(v), "ci": [lo, hi]}


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
