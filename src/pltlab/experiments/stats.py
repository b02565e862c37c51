"""Statistics of measurements, one implementation for every study: the geometric mean, BCa
bootstrap intervals (scipy.stats.bootstrap, method "BCa": of a mean, a geometric mean, or any
statistic of several samples resampled independently), quantiles, the signed improvement of TFO
over no TFO (1 - PLT_tfo / PLT_notfo; a slowdown is negative), and the one rule of where an
interval is shown (``shown``: every side has MIN_N values or more), which console summaries,
JSON, tables and figures alike follow."""

import math
import statistics
import warnings

import numpy as np
from scipy import stats as _scipy

BOOT = 10_000  # bootstrap resamples
LEVEL = 0.95
INTERVAL = "95 % BCa bootstrap interval"  # what every interval is, as tables and legends name it
MIN_N = 5  # values per side below which no interval is shown (one of 2 to 4 values understates the uncertainty)
NO_CI = f"n < {MIN_N}: no CI"  # what a table shows instead


def shown(*ns: int) -> bool:
    """Whether an interval of samples of these sizes is shown (the one rule, MIN_N)."""
    return bool(ns) and min(ns) >= MIN_N


def geomean(v) -> float:
    v = list(v)
    return math.exp(statistics.fmean(math.log(x) for x in v)) if v and min(v) > 0 else float("nan")


def quantile(v, q: float) -> float:
    """The q-quantile, linear between order statistics (nan for no values)."""
    return float(np.quantile(np.asarray(v, dtype=float), q)) if len(v) else float("nan")


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def bca(stat, *samples, seed: int = 0, n: int = BOOT) -> tuple[float, float] | None:
    """The BCa bootstrap interval (LEVEL) of ``stat(*samples, axis=-1)`` (vectorized: each sample
    an array whose last axis holds its values), every sample resampled independently with ``n``
    resamples from one generator seeded with ``seed``. Fallbacks: where no sample has any spread
    (every value equal, a single value included) the interval is the point itself; where BCa has
    no answer (a sample of one value beside others, or a degenerate bootstrap distribution): None."""
    xs = [np.asarray(s, dtype=float) for s in samples]
    if not xs or any(len(x) == 0 for x in xs):
        return None
    if all(np.all(x == x[0]) for x in xs):
        p = float(stat(*xs, axis=-1))
        return p, p
    if any(len(x) < 2 for x in xs):
        return None
    with warnings.catch_warnings():  # (a degenerate distribution: scipy warns and gives nan, handled below)
        warnings.simplefilter("ignore")
        ci = _scipy.bootstrap(
            xs, stat, n_resamples=n, confidence_level=LEVEL, method="BCa", vectorized=True, rng=_rng(seed)
        ).confidence_interval
    lo, hi = float(ci.low), float(ci.high)
    return None if math.isnan(lo) or math.isnan(hi) else (lo, hi)


def _mean(x, axis=-1):
    return np.mean(x, axis=axis)


def _nan2(ci) -> tuple[float, float]:
    return ci if ci is not None else (float("nan"), float("nan"))


def mean_ci(v, seed: int = 0) -> tuple[float, float]:
    """BCa bootstrap 95 % interval of the mean (nan, nan: none, see ``bca``)."""
    return _nan2(bca(_mean, list(v), seed=seed))


def geomean_ci(v, seed: int = 0) -> tuple[float, float]:
    """BCa bootstrap 95 % interval of the geometric mean (positive values)."""
    v = list(v)
    if not v or min(v) <= 0:
        return float("nan"), float("nan")
    if len(set(v)) == 1:  # exactly the value (exp(log(x)) may differ from x in its last bit)
        return v[0], v[0]
    return _nan2(bca(lambda x, axis=-1: np.exp(np.mean(x, axis=axis)), np.log(v), seed=seed))


def _ci(ci) -> list:
    return [None, None] if ci is None else [ci[0], ci[1]]


def summary(v, seed: int = 0) -> dict:
    v = list(v)
    if not v:
        return {"n": 0, "mean": None, "median": None, "geomean": None, "ci": [None, None]}
    return {
        "n": len(v),
        "mean": statistics.fmean(v),
        "median": statistics.median(v),
        "geomean": geomean(v),
        "ci": _ci(bca(_mean, v, seed=seed)),
    }


def geo_summary(v, seed: int = 0) -> dict:
    """n, geometric mean and its bootstrap interval (the ICW study's points)."""
    v = list(v)
    if not v:
        return {"n": 0, "geomean": None, "ci": [None, None]}
    lo, hi = geomean_ci(v, seed)
    return {"n": len(v), "geomean": geomean(v), "ci": [lo, hi]}


def _improvement(tfo, notfo, axis=-1):
    return 1 - np.mean(tfo, axis=axis) / np.mean(notfo, axis=axis)


def improvement(tfo, notfo, seed: int = 0) -> dict:
    """1 - mean(tfo) / mean(notfo) with its BCa bootstrap 95 % interval (both sides resampled
    independently)."""
    tfo, notfo = list(tfo), list(notfo)
    if not tfo or not notfo:
        return {"improvement": None, "ci": [None, None]}
    point = 1 - statistics.fmean(tfo) / statistics.fmean(notfo)
    return {"improvement": point, "ci": _ci(bca(_improvement, tfo, notfo, seed=seed))}


def diff_of_means(a, b, seed: int = 0) -> tuple[float, float] | None:
    """BCa bootstrap 95 % interval of mean(b) - mean(a) (samples resampled independently)."""
    return bca(lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis), list(a), list(b), seed=seed)
