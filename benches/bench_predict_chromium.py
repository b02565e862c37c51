#!/usr/bin/env python3
"""`pltlab predict --client chromium` out of sample (issue 27 item 2): for each fold of the page
set (benches/pagesets/public-folds.json, fixed before fitting), the general Chromium compute model
(pltlab.predict.chromium_compute) fitted on the calibrations of the other folds' pages predicts the
held-out pages' Chromium PLT in every configuration of a sweep of emulated Chromium loads (the
ground truth: RTT 20/100/200 ms, h1/h2, TFO off/on); compared with the median of each
configuration's valid loads: MAPE, median absolute error, p90 and Spearman's rho. The same
figures in sample (fitted on every calibrated page, judged on all) are printed beside them.
Targets (out of sample): median absolute error <= 10 %, rho >= 0.95. Pages whose median absolute
error misses 10 % are named.

    python3 benches/bench_predict_chromium.py --data DIR [--folds FILE] [--fit-out PARAMS.json]

DIR: calib/NAME.har (`pltlab calibrate -o DIR/calib`: NAME as in the folds) and truth/ (the
output folder of a `pltlab sweep` of Chromium loads of the page set, its page labels the names of
the folds). No load runs here: predictions only (a few seconds per configuration and page).
``--fit-out``: also write the parameters fitted on every calibrated page (what the package ships:
src/pltlab/predict/chromium_compute.json).

``--emulate`` (root; issue 27 item 3): also load each held-out page with the built-in loader
(model chromium, Chromium's HSTS upgrades) over the emulated network with the synthetic
calibration of its fold's model, 1 load per configuration and TFO mode, and judge those PLTs
against Chromium's the same way (``--pages``: only these). Hours on the whole set: run it on a
quiet machine.
"""

import argparse
import json
import os
import statistics
import sys

import record
from scipy.stats import spearmanr

from pltlab.errors import PltError
from pltlab.experiments import compute_fit
from pltlab.experiments import folds as foldsmod
from pltlab.predict import chromium_compute
from pltlab.predict.pages import predict_as

FOLDS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pagesets", "public-folds.json")
BOUND = 10.0  # %: a page's median absolute error beyond this is named

META = {
    "name": "bench_predict_chromium",
    "area": "predict",
    "title": "pltlab predict --client chromium against emulated Chromium loads, out of sample",
    "command": "python3 benches/bench_predict_chromium.py --data DIR",
    "quick": "python3 benches/bench_predict_chromium.py --quick --data DIR",
    "duration": "~2 min (predictions only; the data: benches/pagesets, pltlab calibrate + a sweep)",
    "needs": "collected data (--data)",
    "figures": {
        "median_abs_error": {
            "name": "median absolute error of the predicted Chromium PLT, out of sample",
            "unit": "%",
            "target": ("<=", 10.0),
        },
        "spearman": {
            "name": "Spearman rho, predicted vs Chromium PLT, out of sample",
            "unit": "",
            "target": (">=", 0.95),
        },
        "mape": {"name": "MAPE, out of sample", "unit": "%", "target": None},
        "p90_abs_error": {"name": "p90 absolute error, out of sample", "unit": "%", "target": None},
        "median_abs_error_in_sample": {"name": "median absolute error, in sample", "unit": "%", "target": None},
        "spearman_in_sample": {"name": "Spearman rho, in sample", "unit": "", "target": None},
        "mape_in_sample": {"name": "MAPE, in sample", "unit": "%", "target": None},
        "p90_abs_error_in_sample": {"name": "p90 absolute error, in sample", "unit": "%", "target": None},
        "builtin_median_abs_error": {
            "name": "built-in loader (Chromium model, synthetic calibration) vs Chromium: median absolute error, "
            "out of sample",
            "unit": "%",
            "target": ("<=", 10.0),
        },
        "builtin_spearman": {
            "name": "built-in loader vs Chromium: Spearman rho, out of sample",
            "unit": "",
            "target": None,
        },
    },
}


def truth(folder: str) -> tuple[dict, list]:
    """The sweep in ``folder``: {(page label, config index, tfo): median PLT of the valid loads}
    and its (label, page) entries and (index, RunConfig, config key) configurations."""
    from pltlab.experiments import spec
    from pltlab.experiments.results import Results

    path = os.path.join(folder, "experiment.toml")
    if not os.path.isfile(path):
        raise PltError(f"{folder}: no experiment.toml (not a sweep's output folder)")
    doc, _ = spec.read_toml(path)
    exp = spec.from_dict(doc, path, os.getcwd())
    res = Results(folder)
    try:
        rows = res.rows()
    finally:
        res.close()
    got: dict[tuple, list[float]] = {}
    for r in rows:
        if r["status"] == "ok" and r["valid"] and r["plt_ms"]:
            got.setdefault((r["page"], r["config_key"], bool(r["tfo"])), []).append(r["plt_ms"])
    configs = [(c, exp.run_config(c), conf.key()) for c, conf in enumerate(exp.configs)]
    med = {}
    for c, _cfg, key in configs:
        for e in exp.pages:
            for tfo in (False, True):
                if got.get((e.label, key, tfo)):
                    med[(e.label, c, tfo)] = statistics.median(got[(e.label, key, tfo)])
    return med, [(e.label, e.page) for e in exp.pages], configs


def truth_machine(data: str, folder: str) -> str:
    """How busy the machine was while the truth loads ran, from DIR/machine.jsonl (load averages
    sampled beside them by chromium_pageset.py); says how many loads have no sample."""
    from pltlab.experiments.results import Results

    samples = []
    try:
        with open(os.path.join(data, "machine.jsonl"), encoding="utf-8") as f:
            samples = sorted((d["t"], d["load1"], d.get("cpus") or 1) for d in map(json.loads, filter(str.strip, f)))
    except (OSError, ValueError, KeyError):
        pass
    res = Results(folder)
    try:
        spans = [(r["started_at"], r["wall_ms"]) for r in res.rows() if r["status"] == "ok" and r["valid"]]
    finally:
        res.close()
    loads = []
    for t0, wall in spans:
        if t0 is None:
            continue
        near = [s for s in samples if t0 - 10 <= s[0] <= t0 + (wall or 0) / 1000 + 10]
        if near:
            loads.append(max(s[1] / s[2] for s in near))
    if not loads:
        return f"machine state not recorded for the {len(spans)} truth loads"
    busy = sum(v > 1 for v in loads)
    return (
        f"truth loads: 1-min load average per CPU median {statistics.median(loads):.2f}, max {max(loads):.2f}, "
        f"> 1 during {busy} of {len(loads)} loads (not recorded for {len(spans) - len(loads)})"
    )


def judge(params: dict, names: list[str], pages: dict, configs: list, measured: dict) -> list[dict]:
    """Each (page, configuration, TFO) of ``names`` with a measured PLT: predicted beside it."""
    out = []
    for name in names:
        syn = chromium_compute.apply(params, pages[name])
        for c, cfg, _key in configs:
            for tfo in (False, True):
                meas = measured.get((name, c, tfo))
                if meas is None:
                    continue
                pred = predict_as(syn, cfg, tfo)["plt_ms"]
                out.append(
                    {
                        "page": name,
                        "rtt_ms": cfg.rtt_us / 1000,
                        "protocol": cfg.protocol,
                        "tfo": tfo,
                        "measured_ms": meas,
                        "predicted_ms": pred,
                        "error": pred / meas - 1,
                    }
                )
    return out


def emulate(params: dict, names: list[str], pages: dict, configs: list, measured: dict) -> list[dict]:
    """judge()'s rows for the built-in loader's emulated loads (1 per configuration and TFO mode)
    of ``names`` with the model's synthetic calibration."""
    from pltlab.predict.pages import as_predicted
    from pltlab.run.runner import run_page

    out = []
    for name in names:
        syn = chromium_compute.apply(params, pages[name])
        for c, cfg, _key in configs:
            want = [t for t in (False, True) if (name, c, t) in measured]
            if not want:
                continue
            sim = as_predicted(cfg)
            sim.reps = 1
            for r in run_page(syn, sim):
                meas = measured.get((name, c, r["tfo"]))
                if meas is None or not r.get("valid") or not r.get("plt_ms"):
                    continue
                out.append(
                    {
                        "page": name,
                        "rtt_ms": cfg.rtt_us / 1000,
                        "protocol": cfg.protocol,
                        "tfo": r["tfo"],
                        "measured_ms": meas,
                        "predicted_ms": r["plt_ms"],
                        "error": r["plt_ms"] / meas - 1,
                    }
                )
            print(f"  emulated {name} {cfg.rtt_us / 1000:g} ms {cfg.protocol}: {len(out)} loads so far", flush=True)
    return out


def stats(rows: list[dict]) -> dict:
    errs = sorted(abs(r["error"]) * 100 for r in rows)
    if not errs:
        return {"n": 0}
    p90 = errs[min(len(errs) - 1, int(round(0.9 * (len(errs) - 1))))]
    rho = (
        spearmanr([r["predicted_ms"] for r in rows], [r["measured_ms"] for r in rows]).statistic
        if len(rows) > 2
        else None
    )
    return {"n": len(errs), "mape": statistics.fmean(errs), "median": statistics.median(errs), "p90": p90, "rho": rho}


def per_page(rows: list[dict]) -> dict[str, float]:
    pages: dict[str, list[float]] = {}
    for r in rows:
        pages.setdefault(r["page"], []).append(abs(r["error"]) * 100)
    return {p: statistics.median(v) for p, v in sorted(pages.items())}


def _line(label: str, s: dict) -> str:
    if not s.get("n"):
        return f"{label}: no configuration"
    rho = "-" if s["rho"] is None else f"{s['rho']:.3f}"
    return (
        f"{label}: {s['n']} configurations: MAPE {s['mape']:.1f} %, median |error| {s['median']:.1f} %, "
        f"p90 {s['p90']:.1f} %, Spearman rho {rho}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default=None, help="DIR with calib/ (calibrated archives) and truth/ (a sweep folder)")
    ap.add_argument("--quick", action="store_true", help="the same (predictions only: a couple of minutes)")
    ap.add_argument("--folds", default=FOLDS)
    ap.add_argument("--fit-out", default=None, help="write the parameters fitted on every calibrated page here")
    ap.add_argument("--emulate", action="store_true", help="also the built-in loader's emulated loads (root; item 3)")
    ap.add_argument("--pages", nargs="*", default=None, help="with --emulate: only these pages")
    a = ap.parse_args()
    with record.Bench(META, quick=a.quick) as b:
        if not a.data or not all(os.path.isdir(os.path.join(a.data, d)) for d in ("calib", "truth")):
            b.skip("no data: --data DIR with calib/ (pltlab calibrate) and truth/ (a sweep of Chromium loads)")
        else:
            run(b, a)
    return b.exit_code


def run(b, a) -> None:
    with open(a.folds, encoding="utf-8") as f:
        folds = foldsmod.Folds.from_json(f.read(), a.folds)
    cal = compute_fit.calibrated(os.path.join(a.data, "calib"))
    measured, entries, configs = truth(os.path.join(a.data, "truth"))
    pages = dict(entries)
    unknown = sorted(set(pages) - set(folds.fold))
    if unknown:
        print(f"not in the folds (left out): {', '.join(unknown)}", flush=True)
    judged_all = sorted(p for p in pages if p in folds.fold)
    print(
        f"{len(cal)} calibrated pages, {len(judged_all)} pages with Chromium loads, {len(configs)} configurations, "
        f"{len(measured)} (page, configuration, TFO) medians; folds: {a.folds} (k = {folds.k})",
        flush=True,
    )
    out_rows, emu_rows = [], []
    for i in range(folds.k):
        train = {n: cal[n] for n in folds.train(i) if n in cal}
        test = [n for n in folds.test(i) if n in pages]
        if not test or not train:
            continue
        params = compute_fit.fit(train, folds, judged=test)
        rows = judge(params, test, pages, configs, measured)
        print(_line(f"fold {i} (fit on {len(train)} pages, judged: {', '.join(test)})", stats(rows)), flush=True)
        out_rows += rows
        if a.emulate:
            emu = [n for n in test if a.pages is None or n in a.pages]
            emu_rows += emulate(params, emu, pages, configs, measured)
    all_params = compute_fit.fit(cal, folds)
    in_rows = judge(all_params, judged_all, pages, configs, measured)
    if a.fit_out:
        with open(a.fit_out, "w", encoding="utf-8") as f:
            json.dump(all_params, f, indent=1)
            f.write("\n")
    so, si = stats(out_rows), stats(in_rows)
    print(_line("out of sample", so), flush=True)
    print(_line("in sample    ", si), flush=True)
    by_rtt = {}
    for r in out_rows:
        by_rtt.setdefault((r["rtt_ms"], r["protocol"]), []).append(r)
    for (rtt, proto), rows in sorted(by_rtt.items()):
        print("  " + _line(f"out of sample, RTT {rtt:g} ms, {proto}", stats(rows)), flush=True)
    pin, pout = per_page(in_rows), per_page(out_rows)
    failed = [p for p, v in pout.items() if v > BOUND]
    print(f"per page (median |error|, out of sample / in sample); beyond {BOUND:g} %: {len(failed)}", flush=True)
    for p, v in pout.items():
        worst = max((r for r in out_rows if r["page"] == p), key=lambda r: abs(r["error"]))
        print(
            f"  {p:20} {v:6.1f} % / {pin.get(p, float('nan')):6.1f} %{'  MISSED' if v > BOUND else ''}; worst "
            f"{worst['error']:+.1%} at {worst['rtt_ms']:g} ms {worst['protocol']} TFO {'on' if worst['tfo'] else 'off'} "
            f"({worst['predicted_ms']:.0f} vs {worst['measured_ms']:.0f} ms)",
            flush=True,
        )
    on = (
        f"{len(set(r['page'] for r in out_rows))} pages x {len(configs)} configurations x TFO off/on "
        f"({so.get('n', 0)} medians of emulated Chromium loads), each predicted by a model fitted on the other folds "
        f"({a.folds}); pages beyond {BOUND:g} %: {', '.join(f'{p} {pout[p]:.0f} %' for p in failed) or 'none'}; "
        f"{truth_machine(a.data, os.path.join(a.data, 'truth'))}"
    )
    on_in = f"the same configurations, the model fitted on all {len(cal)} calibrated pages (in sample)"
    b.figure("median_abs_error", so.get("median"), on=on)
    b.figure("spearman", so.get("rho"), on=on)
    b.figure("mape", so.get("mape"), on=on)
    b.figure("p90_abs_error", so.get("p90"), on=on)
    b.figure("median_abs_error_in_sample", si.get("median"), on=on_in)
    b.figure("spearman_in_sample", si.get("rho"), on=on_in)
    b.figure("mape_in_sample", si.get("mape"), on=on_in)
    b.figure("p90_abs_error_in_sample", si.get("p90"), on=on_in)
    if a.emulate:
        se = stats(emu_rows)
        print(_line("built-in loader (emulated) vs Chromium, out of sample", se), flush=True)
        for p, v in per_page(emu_rows).items():
            print(f"  {p:20} {v:6.1f} %{'  MISSED' if v > BOUND else ''}", flush=True)
        on_e = f"{len(set(r['page'] for r in emu_rows))} pages, 1 emulated load per configuration and TFO mode"
        b.figure("builtin_median_abs_error", se.get("median"), on=on_e)
        b.figure("builtin_spearman", se.get("rho"), on=on_e)
    else:
        b.skip("not run (--emulate: root, hours)", key="builtin_median_abs_error")
        b.skip("not run (--emulate)", key="builtin_spearman")


if __name__ == "__main__":
    sys.exit(main())
