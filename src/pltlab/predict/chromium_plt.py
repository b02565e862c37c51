"""Chromium's PLT from a network-bound and a CPU-bound estimate (issue 27 item 2).

On the project's busy 2-core VM Chromium's load is bound by its CPU at short RTTs (its PLT at
20 ms barely exceeds its PLT at RTT 0) and by the network at long ones; a constant added to the
network's PLT (the earlier model's *rest* term) over-predicts the small pages at 100-200 ms and
under-predicts the large ones at 20 ms. So two estimates, combined:

- **N, network-bound**: `pltlab predict`'s simulation of the built-in loader's Chromium model with
  the general compute model's per-object delays, tail and tight-mode delay
  (pltlab.predict.chromium_compute): the page's critical path over the modelled network;
- **C, CPU-bound**: the load's serialised work (renderer main thread, the network stack's
  handshakes and per-response work), exp(c . [1, log(1 + objects), log(1 + KB of script),
  log(1 + connections)]) ms; connections are the simulated ones of the configuration (h1 opens
  more: more handshakes);
- **PLT = ((a N)^p + C^p)^(1/p)**: p = 1 is their sum (no overlap), p -> infinity the larger of
  the two; between, the overlap is learned; a scales the network-bound estimate (Chromium's own
  connection set-up and first bytes are slower than the built-in loader's).

The forms are a registry (FORMS): "pnorm" (a, p and c learned; the model), "max" and "sum"
(p fixed; ablations the bench prints beside it). Their parameters are fitted on other pages'
ground-truth Chromium loads (pltlab.experiments.plt_fit, which refuses a fit holding the site of a
page it is judged on) and stored in the compute model's parameters under "plt"."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

FEATURES = ("one", "log_objects", "log_kb_js", "log_connections")
MAX_P = 1e6  # "max": large enough that the sum of the two powers is the larger one (JSON-safe)


@dataclass(frozen=True)
class Form:
    name: str
    p: float | None  # None: learned
    what: str


FORMS = {
    f.name: f
    for f in (
        Form("pnorm", None, "((a N)^p + C^p)^(1/p), p learned (the model)"),
        Form("max", MAX_P, "the larger of a N and C"),
        Form("sum", 1.0, "a N + C (no overlap)"),
    )
}
DEFAULT_FORM = "pnorm"


def features(page_f: Mapping[str, float], connections: int) -> dict[str, float]:
    """The CPU-bound estimate's features: the page's totals (chromium_compute.structure's page
    features) and the configuration's simulated connections."""
    return {
        "one": 1.0,
        "log_objects": float(page_f["log_page_objects"]),
        "log_kb_js": float(page_f["log_page_kb_js"]),
        "log_connections": math.log1p(connections),
    }


def cpu_bound(plt: Mapping, f: Mapping[str, float]) -> float:
    """C (ms)."""
    return math.exp(sum(plt["cpu"][k] * f[k] for k in FEATURES))


def log_combine(log_n: float, log_c: float, p: float) -> float:
    """log((N^p + C^p)^(1/p)) from log N and log C, without overflow."""
    hi = max(log_n, log_c)
    return hi + math.log(math.exp(p * (log_n - hi)) + math.exp(p * (log_c - hi))) / p


def estimate(plt: Mapping | None, network_ms: float, f: Mapping[str, float]) -> dict[str, float]:
    """{"plt_ms", "network_bound_ms", "cpu_bound_ms"}: the PLT the form gives a page whose
    network-bound estimate is ``network_ms`` (None ``plt``: no form fitted, N alone)."""
    if not plt:
        return {"plt_ms": network_ms, "network_bound_ms": network_ms, "cpu_bound_ms": 0.0}
    n = max(network_ms, 1e-3) * math.exp(plt["log_a"])
    c = cpu_bound(plt, f)
    got = math.exp(log_combine(math.log(n), math.log(c), float(plt["p"])))
    return {"plt_ms": round(got, 3), "network_bound_ms": round(n, 3), "cpu_bound_ms": round(c, 3)}


def check(plt) -> bool:
    """True when ``plt`` has the shape of a fitted form (None is allowed: no form)."""
    if plt is None:
        return True
    try:
        return (
            plt["form"] in FORMS
            and isinstance(plt["log_a"], (int, float))
            and isinstance(plt["p"], (int, float))
            and plt["p"] >= 1
            and all(isinstance(plt["cpu"][k], (int, float)) for k in FEATURES)
            and isinstance(plt["fitted_on"], list)
        )
    except (KeyError, TypeError):
        return False
