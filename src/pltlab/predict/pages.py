"""`pltlab predict`: every page an argument names (as `pltlab run` names them), predicted under
one RunConfig for each of its TFO modes."""

from __future__ import annotations

import copy

from pltlab.errors import PltError
from pltlab.loaders.registry import DEFAULT as PLANNED_LOADER
from pltlab.loaders.registry import get as loader_of
from pltlab.predict import chromium_compute, fitted
from pltlab.predict.simulate import predict
from pltlab.run import knobs
from pltlab.run.batch import named_pages
from pltlab.run.config import RunConfig


def unsupported(cfg: RunConfig) -> str | None:
    """Why the predictor cannot model ``cfg`` (a knob it leaves out), or None."""
    loader = loader_of(cfg.client)
    if not loader.planned and loader.predicted_as is None:
        return f"--client {cfg.client}: predict models the built-in loader and Chromium only"
    if cfg.loss:
        return f"--loss {cfg.loss * 100:g}%: predict models no loss (no retransmissions)"
    if cfg.trace_up or cfg.trace_down:
        return "--trace: predict models a fixed rate, not a delivery trace"
    if cfg.network == knobs.RECORDED_NETWORK:
        return "--network recorded: predict models the network the knobs set, not a recorded one (pltlab run does)"
    if cfg.dns_us:
        return "--dns: predict models no DNS delay"
    if cfg.cc not in ("cubic", "reno"):
        return f"--cc {cfg.cc}: predict models slow start without loss (cubic or reno)"
    return None


def as_predicted(cfg: RunConfig) -> RunConfig:
    """The configuration predict simulates for ``cfg``: itself for the built-in loader; for a
    loader predict stands in for (Chromium: Loader.predicted_as), the built-in loader with that
    model, calibrated (by the general compute model: chromium_compute.apply), with its
    ClientHello's size (TFO over TLS as it: knob client_hello)."""
    loader = loader_of(cfg.client)
    if loader.planned:
        return cfg
    out = copy.copy(cfg)
    out.client, out.model, out.calibrated = PLANNED_LOADER, loader.predicted_as, True
    out.client_hello = loader.client_hello_bytes  # its TFO over TLS (knob client_hello)
    if loader.upgrades_itself and cfg.schemes == "recorded":  # its recorded schemes + its HSTS upgrades
        out.schemes = "chromium"
    return out


def predict_as(page, cfg: RunConfig, tfo: bool, compute: dict | None = None) -> dict:
    """predict() of ``page`` as loaded under ``cfg``'s client (as_predicted; a loader's own
    ClientHello size). ``compute``: the general compute model's parameters ``page`` was
    calibrated with (with_compute): the PLT is then its form's (chromium_compute.plt_estimate:
    the network-bound and the CPU-bound estimate combined)."""
    res = predict(page, as_predicted(cfg), tfo)
    return res if compute is None else chromium_compute.plt_estimate(compute, page, res)


def with_compute(page, label: str, params: dict):
    """``page`` with the general compute model's synthetic calibration, and where it stands
    against that model's fit ({"in_sample", "fitted_on", "fitted_at", "outside", "source"})."""
    where = chromium_compute.stance(params, page, label)
    where["source"] = (
        f"general compute model fitted on {len(params['fitted_on'])} calibrated pages "
        f"({', '.join(params['fitted_on'])}) at {params.get('fitted_at')}, "
        f"{', '.join(params.get('browser') or ['Chromium ?'])} on {'; '.join(params.get('machine') or ['?'])}"
    )
    plt = params.get("plt")
    where["source"] += (
        f"; PLT form {plt['form']} (network- and CPU-bound) fitted on {len(plt['fitted_on'])} pages' Chromium loads"
        if plt
        else "; no PLT form (the network-bound estimate alone)"
    )
    return chromium_compute.apply(params, page), where


def predict_pages(what: str, cfg: RunConfig, corpus: str | None = None, compute: dict | None = None) -> list[dict]:
    """One prediction per page ``what`` names and TFO mode of ``cfg``: {page_id, page, rtt_ms,
    rate_mbit, tfo, plt_ms, network_plt_ms, tail_ms, objects, connections, requests}. Raises
    PltError (one line) for a configuration it cannot model or a page it cannot read.

    For Chromium (``--client chromium``): the built-in loader's Chromium model with the general
    compute model's synthetic calibration (``compute``: its parameters; default the shipped
    ones), and ``compute_model`` saying what that was fitted on and whether the page was in it."""
    why = unsupported(cfg)
    if why:
        raise PltError(why)
    sim = as_predicted(cfg)
    if sim is not cfg and compute is None:
        compute = chromium_compute.shipped()
    out = []
    for label, page, err in named_pages(what, corpus):
        if err is not None:
            raise PltError(f"{label}: {err}" if not err.startswith(label) else err)
        fit = fitted.stance(page, sim)
        extra = {}
        if sim is not cfg:
            page, extra["compute_model"] = with_compute(page, label, compute)
            extra["client"] = cfg.client
        for tfo in cfg.tfo_modes:
            try:
                res = predict_as(page, cfg, tfo, compute if sim is not cfg else None)
            except (ValueError, KeyError) as e:
                raise PltError(f"{label}: cannot predict: {e}") from None
            out.append(
                {
                    "page_id": label,
                    "page": page.url,
                    "rtt_ms": cfg.rtt_us / 1000,
                    "rate_mbit": cfg.rate_bps / 1e6 if cfg.rate_bps else None,
                    "tfo": tfo,
                    **res,
                    "fit": fit,  # where it stands against what the CPU constants were set from
                    **extra,
                }
            )
    return out
