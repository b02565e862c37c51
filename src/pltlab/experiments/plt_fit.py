"""Fitting the PLT form of `pltlab predict --client chromium` (pltlab.predict.chromium_plt: the
network-bound and the CPU-bound estimate combined) on ground-truth Chromium loads of *other*
pages (issue 27 item 2).

A row is one (page, configuration, TFO mode) of a sweep of emulated Chromium loads: the median
PLT of its valid loads, the page's network-bound estimate N under that configuration (the
general compute model's synthetic calibration, simulated: ``network_rows``) and the CPU-bound
estimate's features. ``fit`` is robust least squares in log space (scipy's least_squares, soft-L1
loss, a small ridge on the CPU-bound slopes), each page weighing as much as any other; it calls
folds.check first, so the ground truth of a page whose site is judged never enters its fit.
``cross_validate`` fits fold by fold on the other folds' rows only and predicts the held-out ones.
"""

from __future__ import annotations

import datetime
import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np
from scipy.optimize import least_squares

from pltlab.archive import calibration as calib
from pltlab.errors import PltError
from pltlab.experiments import folds as foldsmod
from pltlab.predict import chromium_compute, chromium_plt
from pltlab.predict.chromium_plt import DEFAULT_FORM, FEATURES, FORMS
from pltlab.predict.pages import predict_as

SOFT_L1_SCALE = 0.2  # log PLT: residuals beyond ~20 % weigh linearly (a starved load is an outlier)
RIDGE = 1e-3  # on the CPU-bound slopes (not the intercept, not a, not p)
P_BOUNDS = (-6.0, 5.0)  # p = 1 + exp(q): from a sum (1.0025) to nearly the larger one (149)


def network_rows(params: dict, pages: Mapping, configs: list, measured: Mapping) -> list[dict]:
    """A row per (page, configuration, TFO) of ``pages`` (name -> page) with a measured PLT
    (``measured``: {(name, config index, tfo): ms}; ``configs``: [(index, RunConfig, key)]): the
    network-bound estimate of ``page`` calibrated by the compute model ``params`` and the
    CPU-bound estimate's features."""
    out = []
    for name, page in pages.items():
        syn = chromium_compute.apply(params, page)
        page_f = calib.stored(syn)["page_features"]
        for c, cfg, _key in configs:
            for tfo in (False, True):
                meas = measured.get((name, c, tfo))
                if meas is None:
                    continue
                res = predict_as(syn, cfg, tfo)
                out.append(
                    {
                        "page": name,
                        "rtt_ms": cfg.rtt_us / 1000,
                        "protocol": cfg.protocol,
                        "tfo": tfo,
                        "measured_ms": meas,
                        "network_ms": res["plt_ms"],
                        "f": chromium_plt.features(page_f, res["connections"]),
                    }
                )
    return out


def _log_pred(theta: np.ndarray, log_n: np.ndarray, x: np.ndarray, p_fixed: float | None) -> np.ndarray:
    la, c = theta[0], theta[1 : 1 + len(FEATURES)]
    p = p_fixed if p_fixed is not None else 1.0 + math.exp(theta[-1])
    ln, lc = log_n + la, x @ c
    hi = np.maximum(ln, lc)
    return hi + np.log(np.exp(p * (ln - hi)) + np.exp(p * (lc - hi))) / p


def fit(
    rows: list[dict],
    folds: foldsmod.Folds,
    judged: Iterable[str] = (),
    form: str = DEFAULT_FORM,
    fitted_at: str | None = None,
) -> dict:
    """The form's parameters ("plt" of the compute model's parameters) fitted on ``rows``,
    refusing (folds.check, one PltError line) rows of a page whose site is in ``judged``."""
    judged = list(judged)
    pages = sorted({r["page"] for r in rows})
    foldsmod.check(pages, judged, folds, what="Chromium PLT form")
    if not rows:
        raise PltError("PLT form: no ground-truth load to fit on")
    if form not in FORMS:
        raise PltError(f"PLT form: no form {form!r} (forms: {', '.join(FORMS)})")
    p_fixed = FORMS[form].p
    per_page = {p: sum(r["page"] == p for r in rows) for p in pages}
    w = np.array([1.0 / per_page[r["page"]] for r in rows])
    sw = np.sqrt(w * len(w) / w.sum())
    log_n = np.log(np.maximum([r["network_ms"] for r in rows], 1e-3))
    x = np.array([[r["f"][k] for k in FEATURES] for r in rows])
    y = np.log([r["measured_ms"] for r in rows])
    ridge = math.sqrt(RIDGE)

    def resid(theta):
        return np.concatenate([sw * (_log_pred(theta, log_n, x, p_fixed) - y), ridge * theta[2 : 1 + len(FEATURES)]])

    x0 = [0.0, float(np.median(y)) - 1.0] + [0.0] * (len(FEATURES) - 1)
    lo, hi = [-np.inf] * len(x0), [np.inf] * len(x0)
    if p_fixed is None:
        x0.append(math.log(2.0))
        lo.append(P_BOUNDS[0])
        hi.append(P_BOUNDS[1])
    theta = least_squares(resid, np.array(x0), bounds=(lo, hi), loss="soft_l1", f_scale=SOFT_L1_SCALE).x
    p = p_fixed if p_fixed is not None else 1.0 + math.exp(theta[-1])
    return {
        "form": form,
        "log_a": round(float(theta[0]), 5),
        "p": round(float(p), 5),
        "cpu": dict(zip(FEATURES, (round(float(v), 5) for v in theta[1 : 1 + len(FEATURES)]))),
        "fitted_on": pages,
        "fitted_rows": len(rows),
        "fitted_at": fitted_at or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


def predicted(plt: dict, rows: list[dict]) -> list[dict]:
    """``rows`` with the form's prediction: predicted_ms, network_bound_ms, cpu_bound_ms, error."""
    out = []
    for r in rows:
        e = chromium_plt.estimate(plt, r["network_ms"], r["f"])
        out.append(
            {
                **{k: v for k, v in r.items() if k != "f"},
                "predicted_ms": e["plt_ms"],
                "network_bound_ms": e["network_bound_ms"],
                "cpu_bound_ms": e["cpu_bound_ms"],
                "error": e["plt_ms"] / r["measured_ms"] - 1,
            }
        )
    return out


def cross_validate(
    folds: foldsmod.Folds, rows_of: Callable[[int], list[dict]], form: str = DEFAULT_FORM
) -> tuple[list[dict], list[dict]]:
    """Out of sample, fold by fold: ``rows_of(i)`` gives every page's rows with the network-bound
    estimate of fold i's compute model (fitted without fold i); the form is fitted on the rows of
    the other folds' pages only and predicts fold i's. The predicted rows, and each fold's
    {"fold", "plt", "judged"}."""
    out, fits = [], []
    for i in range(folds.k):
        rows = rows_of(i)
        test = [r for r in rows if folds.fold.get(r["page"]) == i]
        if not test:
            continue
        train = [r for r in rows if folds.fold.get(r["page"]) not in (i, None)]
        judged = sorted({r["page"] for r in test})
        plt = fit(train, folds, judged=judged, form=form)
        out += predicted(plt, test)
        fits.append({"fold": i, "plt": plt, "judged": judged})
    return out, fits
