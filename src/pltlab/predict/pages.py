"""`pltlab predict`: every page an argument names (as `pltlab run` names them), predicted under
one RunConfig for each of its TFO modes."""

from __future__ import annotations

from pltlab.errors import PltError
from pltlab.loaders.registry import get as loader_of
from pltlab.predict import fitted
from pltlab.predict.simulate import predict
from pltlab.run import knobs
from pltlab.run.batch import named_pages
from pltlab.run.config import RunConfig


def unsupported(cfg: RunConfig) -> str | None:
    """Why the predictor cannot model ``cfg`` (a knob it leaves out), or None."""
    if not loader_of(cfg.client).planned:
        return f"--client {cfg.client}: predict models the built-in loader only"
    if cfg.loss:
        return f"--loss {cfg.loss * 100:g}%: predict models no loss (no retransmissions)"
    if cfg.trace_up or cfg.trace_down:
        return "--trace: predict models a fixed rate, not a delivery trace"
    if cfg.schemes == "chromium":
        return "--schemes chromium: Chromium's HSTS list is asked from Chromium at run time; use --schemes https"
    if cfg.network == knobs.RECORDED_NETWORK:
        return "--network recorded: predict models the network the knobs set, not a recorded one (pltlab run does)"
    if cfg.dns_us:
        return "--dns: predict models no DNS delay"
    if cfg.cc not in ("cubic", "reno"):
        return f"--cc {cfg.cc}: predict models slow start without loss (cubic or reno)"
    return None


def predict_pages(what: str, cfg: RunConfig, corpus: str | None = None) -> list[dict]:
    """One prediction per page ``what`` names and TFO mode of ``cfg``: {page_id, page, rtt_ms,
    rate_mbit, tfo, plt_ms, network_plt_ms, tail_ms, objects, connections, requests}. Raises
    PltError (one line) for a configuration it cannot model or a page it cannot read."""
    why = unsupported(cfg)
    if why:
        raise PltError(why)
    out = []
    for label, page, err in named_pages(what, corpus):
        if err is not None:
            raise PltError(f"{label}: {err}" if not err.startswith(label) else err)
        fit = fitted.stance(page, cfg)
        for tfo in cfg.tfo_modes:
            try:
                res = predict(page, cfg, tfo)
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
                }
            )
    return out
