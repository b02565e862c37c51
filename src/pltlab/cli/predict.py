"""CLI: `pltlab predict PAGE` — the built-in loader's PLT predicted from the page's structure,
without emulation (pltlab.predict; docs/explain.md "Predict"). The options are `pltlab run`'s
knobs and mean the same."""

import json
import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab.cli.options import CorpusOpt, knob_options
from pltlab.errors import PltError


@knob_options("run")
def predict(
    page: Annotated[
        str,
        typer.Argument(
            help="HAR file, corpus directory, bundled page (nytimes, ...), page URL, or a sweep's output folder."
        ),
    ],
    knobs: dict,
    corpus: CorpusOpt = None,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="Print one JSON object: every prediction (plt_ms, per-request timeline)."),
    ] = False,
    compute_model: Annotated[
        str | None,
        typer.Option(
            "--compute-model",
            help="With --client chromium: the general compute model's parameters (a JSON file; "
            "default: the ones shipped, fitted on the public page set).",
        ),
    ] = None,
):
    """Predict a page's load time without emulation: the built-in loader's plan and scheduling
    over modelled TCP (slow start from initcwnd, TFO, TLS 1.3, HTTP/2, the bottleneck rate).
    PAGE may also be a sweep's output folder: every page and configuration of its experiment,
    predicted beside the measured median. With --client chromium: Chromium's PLT, the built-in
    loader's Chromium model with a compute model learned from other pages' calibrations."""
    from pltlab.predict import chromium_compute
    from pltlab.predict.pages import predict_pages
    from pltlab.run.config import RunConfig

    if os.path.isfile(os.path.join(page, "results.sqlite")):  # a sweep's folder: beside its loads
        if knobs:
            raise PltError(f"{page}: a results folder is predicted with its own configurations: no knob options")
        return _beside_results(page, as_json)
    cfg = RunConfig.from_knobs(knobs)
    got = predict_pages(page, cfg, corpus, chromium_compute.load(compute_model) if compute_model else None)
    if as_json:
        doc = {"predictions": got}
        if len(got) == 1:
            doc["plt_ms"] = got[0]["plt_ms"]
        print(json.dumps(doc))
        return
    who = (
        "Chromium: the built-in loader's Chromium model + general compute model, network- and CPU-bound"
        if any("client" in p for p in got)
        else "built-in loader"
    )
    t = Table(title=f"predicted page load time ({who}, no emulation)")
    bounds = all("cpu_bound_ms" in p for p in got)  # Chromium: the two estimates its PLT combines
    cols = ("page", "RTT (ms)", "TFO", "objects", "connections", "PLT (ms)")
    for col in cols + (("network-bound (ms)", "CPU-bound (ms)") if bounds else ()):
        t.add_column(col)
    for p in got:
        t.add_row(
            escape(os.path.basename(p["page_id"]) or p["page_id"]),
            f"{p['rtt_ms']:g}",
            "on" if p["tfo"] else "off",
            str(p["objects"]),
            str(p["connections"]),
            f"{p['plt_ms']:.1f}",
            *((f"{p['network_bound_ms']:.1f}", f"{p['cpu_bound_ms']:.1f}") if bounds else ()),
        )
    con = Console()
    con.print(t)
    for p in {p["page_id"]: p for p in got}.values():  # (once per page)
        name = escape(os.path.basename(p["page_id"]) or p["page_id"])
        if p["fit"]["in_sample"]:
            con.print(f"note: {name} is one of the pages the model's CPU constants were set from (in sample)")
        if p["fit"]["outside"]:
            con.print(f"note: {name}: outside what the model was fitted on: {escape('; '.join(p['fit']['outside']))}")
        cm = p.get("compute_model")
        if cm:
            con.print(f"compute: {escape(cm['source'])}", highlight=False)
            stance = "in sample (one of the pages it was fitted on)" if cm["in_sample"] else "out of sample"
            con.print(f"note: {name} is {stance} for the compute model", highlight=False)
            if cm["outside"]:
                con.print(f"note: {name}: outside the compute model's fit: {escape('; '.join(cm['outside']))}")


def beside_results(out_dir: str) -> list[dict]:
    """Per page, configuration and TFO mode of the sweep in ``out_dir``: the measured median PLT
    of its valid loads beside the prediction (``why``: the prediction's reason for none)."""
    import statistics

    from pltlab.experiments import spec
    from pltlab.experiments.results import Results
    from pltlab.predict import chromium_compute
    from pltlab.predict.pages import as_predicted, predict_as, unsupported, with_compute

    path = os.path.join(out_dir, "experiment.toml")
    if not os.path.isfile(path):
        raise PltError(f"{out_dir}: no experiment.toml (not a sweep's output folder)")
    doc, text = spec.read_toml(path)
    exp = spec.from_dict(doc, path, os.getcwd())  # relative pages: from where sweeps are started
    res = Results(out_dir)
    try:
        rows = res.rows()
    finally:
        res.close()
    measured: dict[tuple, list[float]] = {}
    for r in rows:
        if r["status"] == "ok" and r["valid"]:
            measured.setdefault((r["page"], r["config_key"], bool(r["tfo"])), []).append(r["plt_ms"])
    out, compute = [], None
    for c, conf in enumerate(exp.configs):
        cfg = exp.run_config(c)
        label = f"{c + 1}: RTT {cfg.rtt_us / 1000:g} ms"
        why = unsupported(cfg)
        chromium = not why and as_predicted(cfg) is not cfg  # Chromium: with the general compute model
        if chromium and compute is None:
            compute = chromium_compute.shipped()
        for e in exp.pages:
            page = with_compute(e.page, e.label, compute)[0] if chromium else e.page
            for tfo in exp.tfo_modes:
                got = measured.get((e.label, conf.key(), tfo), [])
                row = {
                    "page": e.label,
                    "config_key": conf.key(),
                    "config": label,
                    "rtt_ms": cfg.rtt_us / 1000,
                    "tfo": tfo,
                    "n": len(got),
                    "measured_ms": statistics.median(got) if got else None,
                    "predicted_ms": None
                    if why
                    else predict_as(page, cfg, tfo, compute if chromium else None)["plt_ms"],
                    "why": why,
                }
                if row["measured_ms"] and row["predicted_ms"] is not None:
                    row["error"] = row["predicted_ms"] / row["measured_ms"] - 1
                out.append(row)
    return out


def _beside_results(out_dir: str, as_json: bool) -> None:
    rows = beside_results(out_dir)
    errs = [abs(r["error"]) for r in rows if "error" in r]
    mape = sum(errs) / len(errs) if errs else None
    if as_json:
        print(json.dumps({"comparisons": rows, "mape": mape}))
        return
    t = Table(title=f"predicted beside measured (median of the valid loads): {escape(out_dir)}")
    for col in ("page", "configuration", "TFO", "n", "measured (ms)", "predicted (ms)", "error"):
        t.add_column(col)
    for r in rows:
        t.add_row(
            escape(r["page"]),
            escape(r["config"]),
            "on" if r["tfo"] else "off",
            str(r["n"]),
            "-" if r["measured_ms"] is None else f"{r['measured_ms']:.1f}",
            escape(r["why"]) if r["why"] else f"{r['predicted_ms']:.1f}",
            f"{r['error']:+.1%}" if "error" in r else "-",
        )
    out = Console()
    out.print(t)
    if mape is not None:
        out.print(f"mean absolute percentage error {mape:.1%} over {len(errs)} configurations", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(predict)
