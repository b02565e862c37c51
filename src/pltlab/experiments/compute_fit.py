"""Fitting the general Chromium compute model (pltlab.predict.chromium_compute, issue 27 item 2)
on calibrated pages: robust least squares in log space (scipy's least_squares, soft-L1 loss, a
small ridge term so that a feature the fit never sees stays near 0), each page weighing as much as
any other. ``fit`` calls folds.check first: a fit never holds the site of a page it is judged on.
The PLT form beside these delays (pltlab.predict.chromium_plt) is fitted on ground-truth loads by
pltlab.experiments.plt_fit (benches/bench_predict_chromium.py --fit-out writes both); parameters
fitted here alone have no "plt" and predict the network-bound estimate alone.

    python3 -m pltlab.experiments.compute_fit fit DIR/calib --folds benches/pagesets/public-folds.json -o params.json
    python3 -m pltlab.experiments.compute_fit apply params.json page.har -o page-model.har   # then:
    pltlab run page-model.har --model chromium --schemes chromium      # the built-in loader with it
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import sys
from collections.abc import Iterable, Mapping

import numpy as np
from scipy.optimize import least_squares

from pltlab.archive import calibration as calib
from pltlab.archive.har import read_page, write_page
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.experiments import folds as foldsmod
from pltlab.predict import chromium_compute
from pltlab.predict.chromium_compute import OBJECT_FEATURES, PAGE_FEATURES, VERSION, kind_of, structure

RIDGE = 1e-3  # (a penalty of sqrt(RIDGE) * coefficient: a feature the fit never sees stays at 0)
PAGE_RIDGE = 1e-3  # (the per-page fits have a few tens of rows)
SOFT_L1_SCALE = 0.5  # residuals (log ms) beyond which the loss grows linearly: outliers weigh less


def _robust(x: np.ndarray, y: np.ndarray, w: np.ndarray, ridge: float = RIDGE) -> np.ndarray:
    """Coefficients of y ~ x (log space), robust (soft-L1), weighted, with a small ridge."""
    sw = np.sqrt(w)
    ridge = math.sqrt(ridge)

    def resid(b):
        return np.concatenate([sw * (x @ b - y), ridge * b])

    return least_squares(resid, np.zeros(x.shape[1]), loss="soft_l1", f_scale=SOFT_L1_SCALE).x


def fit(
    pages: Mapping[str, Page],
    folds: foldsmod.Folds,
    judged: Iterable[str] = (),
    fitted_at: str | None = None,
) -> dict:
    """The model's parameters fitted on the calibrated ``pages`` (name -> a page calibrated by
    `pltlab calibrate`), refusing (folds.check, one PltError line) a fit that holds the site of a
    page in ``judged``."""
    judged = list(judged)
    foldsmod.check(pages, judged, folds, what="Chromium compute model")
    if not pages:
        raise PltError("compute model: no calibrated page to fit on")
    xs, ys, ws, px, tails, tights = [], [], [], [], [], []
    nets: dict[str, list[float]] = {k: [] for k in calib.NET_KEYS}
    browsers, machines, ranges = set(), set(), {}
    for name, page in sorted(pages.items()):
        cal = calib.stored(page)
        if cal is None:
            raise PltError(f"{name}: not calibrated (no _pltlab_calibration): run `pltlab calibrate` first")
        objs, rows, page_f = structure(page)
        got = [(f, o.extras.get(calib.KEY)) for o, f in zip(objs, rows)]
        got = [(f, calib.check_delay(v, f"{name}: {calib.KEY}")) for f, v in got if v is not None]
        for f, v in got:
            xs.append([f[k] for k in OBJECT_FEATURES])
            ys.append(math.log1p(v))
            ws.append(1.0 / len(got))
        px.append([page_f[k] for k in PAGE_FEATURES])
        tails.append(math.log1p(float(cal["tail_ms"])))
        tights.append(math.log1p(float(cal.get("tight_delay_ms") or 0.0)))
        for k in calib.NET_KEYS:
            if cal.get(k) is not None:
                nets[k].append(float(cal[k]))
        browsers.add(str(cal.get("browser") or "?"))
        machines.add(calib.machine_of(str(cal.get("machine") or "?")))
        for o in objs:
            k = kind_of(o)
            lo, hi = ranges.get(k, (o.size, o.size))
            ranges[k] = (min(lo, o.size), max(hi, o.size))
        n = len(objs)
        ranges["objects"] = (min(ranges.get("objects", (n, n))[0], n), max(ranges.get("objects", (n, n))[1], n))
    w = np.array(ws)
    b = _robust(np.array(xs), np.array(ys), w * len(w) / w.sum())  # (mean weight 1: the ridge stays small)
    pxa = np.array(px)
    bt = _robust(pxa, np.array(tails), np.ones(len(px)), PAGE_RIDGE)
    bg = _robust(pxa, np.array(tights), np.ones(len(px)), PAGE_RIDGE)
    out = {
        "version": VERSION,
        "objects": dict(zip(OBJECT_FEATURES, map(float, np.round(b, 5)))),
        "tail": dict(zip(PAGE_FEATURES, map(float, np.round(bt, 5)))),
        "tight": dict(zip(PAGE_FEATURES, map(float, np.round(bg, 5)))),
        "fitted_on": sorted(pages),
        "fitted_urls": sorted({p.url for p in pages.values()}),
        "fitted_objects": len(ys),
        "ranges": {k: list(v) for k, v in sorted(ranges.items())},
        "fitted_at": fitted_at or datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "browser": sorted(browsers),
        "machine": sorted(machines),
    }
    # Chromium's network stack: the median page's, when every page has it measured (calibrations
    # since 2026-11-28; a mix would be a median over some of the pages)
    if all(len(v) == len(pages) for v in nets.values()):
        out["net"] = {k: round(float(np.median(v)), 3) for k, v in nets.items()}
        out["net"]["pages"] = len(pages)
    return out


def calibrated(folder: str) -> dict[str, Page]:
    """The calibrated archives of ``folder`` (NAME.har, as `pltlab calibrate -o` writes them, or
    NAME.har.gz), by NAME; an archive without a calibration is an error naming it."""
    out = {}
    for f in sorted(os.listdir(folder)):
        name = f[: -len(".har")] if f.endswith(".har") else f[: -len(".har.gz")] if f.endswith(".har.gz") else None
        if name is None:
            continue
        path = os.path.join(folder, f)
        if name in out:
            raise PltError(f"{path}: {name} is calibrated twice in {folder} (.har and .har.gz)")
        page = read_page(path)
        if calib.stored(page) is None:
            raise PltError(f"{path}: no compute calibration (_pltlab_calibration)")
        out[name] = page
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="The general Chromium compute model: fit it, or apply it to a page.")
    sub = ap.add_subparsers(dest="cmd", required=True)
    f = sub.add_parser("fit", help="fit on calibrated pages (pltlab calibrate -o DIR)")
    f.add_argument("calib", help="folder of calibrated archives NAME.har (NAME as in the folds)")
    f.add_argument("--folds", required=True, help="the page set's folds (benches/pagesets/*-folds.json)")
    f.add_argument("-o", "--output", required=True)
    ap_ = sub.add_parser(
        "apply", help="write PAGE with the model's synthetic calibration (pltlab run --model chromium)"
    )
    ap_.add_argument("params", help="the model's parameters (JSON)")
    ap_.add_argument("page", help="an archive file")
    ap_.add_argument("-o", "--output", required=True, help="the HAR to write")
    a = ap.parse_args(argv)
    try:
        if a.cmd == "apply":
            page = chromium_compute.apply(chromium_compute.load(a.params), read_page(a.page))
            write_page(page, a.output)
            print(
                f"{a.output}: {a.page} calibrated by the model fitted on {len(page.extras[calib.PAGE_KEY]['fitted_on'])} pages"
            )
            return 0
        with open(a.folds, encoding="utf-8") as fh:
            folds = foldsmod.Folds.from_json(fh.read(), a.folds)
        params = fit(calibrated(a.calib), folds)
    except (PltError, OSError) as e:
        print(f"compute_fit: error: {e}", file=sys.stderr)
        return 2
    with open(a.output, "w", encoding="utf-8") as fh:
        json.dump(params, fh, indent=1)
        fh.write("\n")
    print(f"fitted on {len(params['fitted_on'])} pages, {params['fitted_objects']} objects: {a.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
