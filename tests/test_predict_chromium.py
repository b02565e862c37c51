"""`pltlab predict --client chromium` (issue 27 item 2): the general Chromium compute model
(pltlab.predict.chromium_compute, fitted by pltlab.experiments.compute_fit) refuses to fit on a
judged page's site, recovers known parameters from calibrations generated with known values,
and the CLI says what it was fitted on and whether the page was in it. No root, no load."""

import json
import math
import os

import pytest

from pltlab.archive import bundled
from pltlab.archive import calibration as calib
from pltlab.errors import PltError
from pltlab.experiments import compute_fit
from pltlab.experiments import folds as foldsmod
from pltlab.loaders import plan as plans
from pltlab.loaders.browser import hsts
from pltlab.predict import chromium_compute
from pltlab.predict.pages import predict_as
from pltlab.run.config import RunConfig
from tests.conftest import pltlab_cmd

FOLDS = os.path.join(os.path.dirname(__file__), "..", "benches", "pagesets", "public-folds.json")

# The generating model (log(1 + ms)), set here: a script 1.5 + 0.4 per log(1 + KB), a stylesheet
# 0.8, an image 0.3, a font 0.2, a document 1.0, anything else 0.5; +0.5 when render-blocking;
# the navigation 2.0; the tail 1.0 + 0.5 log(1 + KB of script on the page); tight mode 3 ms.
BASE = {"js": 1.5, "css": 0.8, "html": 1.0, "image": 0.3, "font": 0.2, "other": 0.5}
JS_PER_LOG_KB, BLOCKING, NAV = 0.4, 0.5, 2.0
TAIL_ONE, TAIL_PER_LOG_JS_KB, TIGHT_MS = 1.0, 0.5, 3.0
TRAIN = ("amazon", "nytimes", "wsj", "linkedin", "github", "expressen", "aftonbladet", "enorm-magazin")


def _known(o, f: dict) -> float:
    """The generating model's delay of an object (features as the model computes them)."""
    if f["main"]:
        return math.expm1(NAV)
    k = chromium_compute.kind_of(o)
    js = math.log1p(o.size / 1024) if k == "js" else 0.0
    return math.expm1(BASE[k] + JS_PER_LOG_KB * js + BLOCKING * f["blocking"])


def _synthetic(name: str):
    """Bundled page ``name`` calibrated by the generating model (as `pltlab calibrate` stores one)."""
    page = bundled.load(name)
    objs, rows, _ = chromium_compute.structure(page)
    for o, f in zip(objs, rows):
        o.extras[calib.KEY] = round(_known(o, f), 3)
    js_kb = sum(o.size for o in objs if chromium_compute.kind_of(o) == "js") / 1024
    page.extras[calib.PAGE_KEY] = {
        "tail_ms": round(math.expm1(TAIL_ONE + TAIL_PER_LOG_JS_KB * math.log1p(js_kb)), 3),
        "tight_delay_ms": TIGHT_MS,
        "browser": "test",
        "machine": "test machine",
    }
    return page


@pytest.fixture(scope="module")
def folds():
    with open(FOLDS, encoding="utf-8") as f:
        return foldsmod.Folds.from_json(f.read(), FOLDS)


@pytest.fixture(scope="module")
def synthetic():
    return {n: _synthetic(n) for n in (*TRAIN, "wikipedia", "filamentgroup")}


def test_the_fit_refuses_a_judged_pages_site(folds, synthetic):
    fit = {n: synthetic[n] for n in TRAIN}
    # expressen-2 is in no fit, but its site (expressen.se) is: judging it would be in sample
    with pytest.raises(PltError, match=r"page expressen-2 is judged out of sample but its site \(expressen.se\)"):
        compute_fit.fit(fit, folds, judged=["wikipedia", "expressen-2"])
    with pytest.raises(PltError, match="page nosuch is not in the page set's folds"):
        compute_fit.fit(fit, folds, judged=["nosuch"])
    # wikipedia and filamentgroup: their sites are not in the fit
    params = compute_fit.fit(fit, folds, judged=["wikipedia", "filamentgroup"])
    assert params["fitted_on"] == sorted(TRAIN)


def test_the_fit_recovers_known_parameters(folds, synthetic):
    params = compute_fit.fit({n: synthetic[n] for n in TRAIN}, folds, fitted_at="2026-01-01T00:00:00Z")
    c = params["objects"]
    for k, v in BASE.items():
        assert c[f"kind_{k}"] == pytest.approx(v, abs=0.05), k
    assert c["main"] == pytest.approx(NAV, abs=0.05)
    assert c["log_kb_js"] == pytest.approx(JS_PER_LOG_KB, abs=0.02)
    assert c["blocking"] == pytest.approx(BLOCKING, abs=0.05)
    for k in ("delayable", "at_first_byte", "waits", "from_script", "depth", "log_kb_css", "log_page_objects"):
        assert abs(c[k]) < 0.03, k  # not in the generating model
    assert params["tail"]["one"] == pytest.approx(TAIL_ONE, abs=0.05)
    assert params["tail"]["log_page_kb_js"] == pytest.approx(TAIL_PER_LOG_JS_KB, abs=0.02)
    # applied to pages it never saw: their generated calibration, within 5 %
    for name in ("wikipedia", "filamentgroup"):
        truth = synthetic[name]
        syn = chromium_compute.apply(params, bundled.load(name))
        got = [o.extras.get(calib.KEY) for o in syn.objects]
        want = [o.extras.get(calib.KEY) for o in truth.objects]
        pairs = [(g, w) for g, w in zip(got, want) if w is not None]
        assert pairs and all(g == pytest.approx(w, rel=0.05, abs=0.05) for g, w in pairs), name
        cal = calib.stored(syn)
        assert cal["tail_ms"] == pytest.approx(calib.stored(truth)["tail_ms"], rel=0.05)
        assert cal["tight_delay_ms"] == pytest.approx(TIGHT_MS, rel=0.05)
        assert cal["source"] == "model" and cal["fitted_on"] == sorted(TRAIN)


def test_chromiums_client_hello_gets_nothing_from_tfo():
    """Over https Chromium's ~2 KB ClientHello does not fit in the SYN (docs/loaders.md "TFO in
    Chromium"): a predicted Chromium load gains nothing from TFO, the built-in loader's does."""
    page = bundled.load("filamentgroup")  # recorded over https
    for client, saves in (("chromium", False), ("builtin", True)):
        cfg = RunConfig(rtt="100ms", client=client, protocol="h2")
        off, on = (predict_as(page, cfg, tfo)["network_plt_ms"] for tfo in (False, True))
        assert (off - on > 90) is saves, (client, off, on)


def test_cli_predict_client_chromium(tmp_path, folds, synthetic):
    params = compute_fit.fit({n: synthetic[n] for n in TRAIN}, folds, judged=["wikipedia"])
    path = tmp_path / "params.json"
    path.write_text(json.dumps(params))
    for page, in_sample in (("wikipedia", False), ("amazon", True)):
        cp = pltlab_cmd(
            "predict", page, "--client", "chromium", "--rtt", "100ms", "--tfo", "on", "--json",
            "--compute-model", str(path),
        )  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        doc = json.loads(cp.stdout)
        p = doc["predictions"][0]
        assert doc["plt_ms"] == p["plt_ms"] > p["network_plt_ms"] > 0 and p["client"] == "chromium"
        assert p["tail_ms"] > 0 and p["compute_model"]["in_sample"] is in_sample
        assert (
            p["compute_model"]["fitted_on"] == len(TRAIN) and "amazon, aftonbladet" not in p["compute_model"]["source"]
        )
        assert "fitted on 8 calibrated pages (aftonbladet, amazon," in p["compute_model"]["source"]
    cp = pltlab_cmd("predict", "wikipedia", "--client", "chromium", "--rtt", "100ms")  # the shipped parameters
    assert cp.returncode == 0, cp.stderr
    assert "compute: general compute model fitted on" in cp.stdout and "compute model" in cp.stdout
    bad = tmp_path / "bad.json"
    bad.write_text('{"version": 1}')
    cp = pltlab_cmd("predict", "wikipedia", "--client", "chromium", "--compute-model", str(bad))
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode != 0 and len(lines) == 1 and str(bad) in lines[0], cp.stderr


# --- the built-in loader with the Chromium model, out of sample (issue 27 item 3) --------------


@pytest.fixture(scope="module")
def bench():
    import sys

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "benches"))
    import bench_predict_chromium  # (and chromium_pageset, beside it)

    return bench_predict_chromium


def test_emulated_loads_get_a_model_fitted_without_their_site(bench, folds, synthetic):
    """--emulate: each held-out page is loaded with the synthetic calibration of a model fitted
    on the other folds' pages only (never its own site), and beside it with its own calibration."""
    judged = ("wikipedia", "filamentgroup", "amazon", "expressen")
    pages = {n: bundled.load(n) for n in judged}
    models = bench.fold_models(folds, synthetic, pages)
    assert sorted(n for _i, _p, test in models for n in test) == sorted(judged)
    seen = set()
    for i, params, test in models:
        for name, sample, page in bench.emulation_pages(params, test, pages, synthetic):
            cal = calib.stored(page)
            seen.add((name, sample))
            if sample == "in":  # the page's own measured calibration
                assert page is synthetic[name] and cal.get("source") != "model"
                continue
            site_pages = {p for p, g in folds.group.items() if g == folds.group[name]}
            assert cal["source"] == "model" and name in site_pages
            assert not site_pages & set(cal["fitted_on"]), (name, cal["fitted_on"])
            # exactly the calibrated pages of the other folds
            assert cal["fitted_on"] == sorted(n for n in synthetic if folds.fold[n] != folds.fold[name])
            assert cal["fitted_on"] and all(folds.fold[n] != i for n in cal["fitted_on"])
            assert page is not pages[name] and calib.stored(pages[name]) is None  # a copy is calibrated
            assert "rest_ms" not in cal  # (the model before the PLT form added its rest term to the tail)
    assert seen == {(n, s) for n in judged for s in ("out", "in")}


def test_emulate_loads_the_builtin_loader_as_predict_simulates_chromium(bench, tmp_path, monkeypatch, synthetic):
    """emulate(): the loads are the built-in loader with model chromium, calibrated, Chromium's
    HSTS upgrades, 1 repetition per TFO mode of the Chromium configuration; each row is written
    to the CSV as it comes, and a run given that CSV again loads only what is missing."""
    import pltlab.run.runner as runner

    loaded = []

    def fake_run_page(page, cfg):
        loaded.append((page, cfg))
        return [
            {"tfo": t, "valid": True, "plt_ms": 1200.0 + 100 * t, "network_plt_ms": 1000.0, "tail_ms": 200.0}
            for t in cfg.tfo_modes
        ]

    monkeypatch.setattr(runner, "run_page", fake_run_page)
    monkeypatch.setattr(hsts, "upgraded_hosts", lambda hosts, **_: set())  # (no Chromium asked)
    configs = [
        (c, RunConfig(client="chromium", rtt=rtt, rate="20mbit", rate_up="5mbit", protocol=proto), str(c))
        for c, (rtt, proto) in enumerate((("20ms", "h1"), ("200ms", "h2")))
    ]
    measured = {("filamentgroup", c, t): 1000.0 for c in (0, 1) for t in (False, True)}
    del measured[("filamentgroup", 1, True)]  # no Chromium load there: no row
    counts = dict.fromkeys(measured, 2)
    page = synthetic["filamentgroup"]
    rows_csv = str(tmp_path / "rows.csv")
    rows = bench.emulate([("filamentgroup", "in", page)], {"filamentgroup": 4}, configs, measured, counts, rows_csv)
    assert [(p is page, c.client, c.model, c.calibrated, c.schemes, c.reps) for p, c in loaded] == [
        (True, "builtin", "chromium", True, "chromium", 1)
    ] * 2
    # Chromium's ClientHello: its stand-in uses TFO on plain-http connections only (knob client_hello);
    # Chromium's network-stack times only when asked (network_stack "off" by default)
    assert all(c.client_hello > plans.SYN_DATA_MAX and c.network_stack == "off" for _p, c in loaded)
    assert [(c.rtt_us, c.protocol, c.rate_bps, c.rate_up_bps) for _p, c in loaded] == [
        (20_000, "h1", 20_000_000, 5_000_000),
        (200_000, "h2", 20_000_000, 5_000_000),
    ]
    assert [(r["rtt_ms"], r["tfo"], r["error"]) for r in rows] == [
        (20.0, False, pytest.approx(0.2)),
        (20.0, True, pytest.approx(0.3)),
        (200.0, False, pytest.approx(0.2)),
    ]
    again = bench.read_rows(rows_csv)
    assert [r["chromium_tfo_can_save"] for r in again] == [False] * 3  # every object over https
    with open(rows_csv, encoding="utf-8") as f:  # the model has no rest term (the PLT form's C took its place)
        assert "rest_ms" not in f.readline() and all("rest_ms" not in r for r in again)
    assert [
        (r["page"], r["sample"], r["fold"], r["rtt_ms"], r["protocol"], r["tfo"], r["chromium_loads"]) for r in again
    ] == [
        ("filamentgroup", "in", 4, 20.0, "h1", False, 2),
        ("filamentgroup", "in", 4, 20.0, "h1", True, 2),
        ("filamentgroup", "in", 4, 200.0, "h2", False, 2),
    ]
    loaded.clear()
    resumed = bench.emulate(
        [("filamentgroup", "in", page)], {"filamentgroup": 4}, configs, measured, counts, rows_csv, again
    )
    assert loaded == [] and len(resumed) == 3
    assert len(bench.read_rows(rows_csv)) == 3


def test_the_stand_in_of_chromiums_h2_on_an_http_only_page_is_h1(bench, monkeypatch):
    """Chromium's "h2" offers h2 on https origins only: google's 2013 page (every object over
    http, none on Chromium's HSTS list) went over HTTP/1.1 in Chromium's h2 loads, and the built-in
    loader standing in for it gets h1 there (it refuses h2 on such a page), h2 on an https page."""
    monkeypatch.setattr(hsts, "upgraded_hosts", lambda hosts, **_: set())
    cfg = RunConfig(client="chromium", rtt="20ms", protocol="h2")
    google, filamentgroup = bundled.load("google"), bundled.load("filamentgroup")
    assert {o.scheme for o in google.objects} == {"http"} and "https" in {o.scheme for o in filamentgroup.objects}
    assert bench.stand_in(cfg, google).protocol == "h1"
    assert bench.stand_in(cfg, filamentgroup).protocol == "h2"
    h1 = RunConfig(client="chromium", rtt="20ms", protocol="h1")
    assert bench.stand_in(h1, google).protocol == bench.stand_in(h1, filamentgroup).protocol == "h1"
    sim = bench.stand_in(cfg, filamentgroup)
    assert (sim.client, sim.model, sim.calibrated, sim.schemes, sim.reps) == (
        "builtin",
        "chromium",
        True,
        "chromium",
        1,
    )
    # google's h2 under Chromium's upgrades of its hosts (were they on the list): h2
    monkeypatch.setattr(hsts, "upgraded_hosts", lambda hosts, **_: set(hosts))
    assert bench.stand_in(cfg, google).protocol == "h2"


def test_tfo_as_chromium_judges_the_tfo_off_load_where_chromiums_tfo_saves_nothing(bench):
    def row(page, tfo, builtin, chromium, can_save):
        return {
            "page": page, "sample": "out", "rtt_ms": 20.0, "protocol": "h2", "tfo": tfo, "builtin_ms": builtin,
            "predicted_ms": builtin, "chromium_ms": chromium, "measured_ms": chromium,
            "error": builtin / chromium - 1, "chromium_tfo_can_save": can_save,
        }  # fmt: skip

    rows = [
        row("https-page", False, 900.0, 1000.0, False),
        row("https-page", True, 800.0, 1000.0, False),  # the built-in loader's TFO saved a round trip
        row("http-page", False, 900.0, 1000.0, True),
        row("http-page", True, 800.0, 900.0, True),  # both saved: kept
        row("lone", True, 700.0, 1000.0, False),  # no TFO-off load to take: left out
    ]
    got = {(r["page"], r["tfo"]): (r["builtin_ms"], round(r["error"], 6)) for r in bench.tfo_as_chromium(rows)}
    assert got == {
        ("https-page", False): (900.0, -0.1),
        ("https-page", True): (900.0, -0.1),
        ("http-page", False): (900.0, -0.1),
        ("http-page", True): (800.0, round(800 / 900 - 1, 6)),
    }


def test_without_rest_takes_the_rest_term_off_the_out_of_sample_plt(bench):
    rows = [
        {"sample": "out", "builtin_ms": 1500.0, "chromium_ms": 1000.0, "rest_ms": 400.0, "error": 0.5},
        {"sample": "in", "builtin_ms": 1100.0, "chromium_ms": 1000.0, "rest_ms": None, "error": 0.1},
    ]
    (r,) = bench.without_rest(rows)
    assert (r["builtin_ms"], round(r["error"], 6)) == (1100.0, 0.1)


OLD_ROWS = (  # a rows file of the model before the PLT form (docs/results/builtin-vs-chromium/rows.csv)
    "page,fold,sample,rtt_ms,protocol,tfo,chromium_ms,chromium_loads,builtin_ms,builtin_network_ms,tail_ms,error,"
    "chromium_tfo_can_save,rest_ms\n"
    "amazon,2,out,20.0,h1,off,1000.0,2,1500.0,1000.0,700.0,0.5,False,400.0\n"
    "amazon,2,in,20.0,h1,off,1000.0,2,1100.0,1000.0,300.0,0.1,False,\n"
)


def test_old_rows_are_reported_but_never_appended_to(bench, tmp_path, folds, capsys):
    """Rows of the model before the PLT form (a rest_ms column): --report-only reads them (the
    old rest-term ablation among the figures), a run that would load refuses to append to them."""
    import types

    old = tmp_path / "old.csv"
    old.write_text(OLD_ROWS, encoding="utf-8")
    rows = bench.read_rows(str(old))
    assert [(r["sample"], r["rest_ms"]) for r in rows] == [("out", 400.0), ("in", None)]
    assert [r["builtin_ms"] for r in bench.without_rest(rows)] == [1100.0]
    a = types.SimpleNamespace(pages=None, rows=str(old), report_only=True, network_stack="off")
    assert bench.emulation(a, folds, {}, {}, ([], {}, {}), []) == rows
    a.report_only = False
    with pytest.raises(PltError, match=r"old\.csv: rows of an older compute model .*rest_ms.*give a new --rows file"):
        bench.emulation(a, folds, {}, {}, ([], {}, {}), [])
    assert old.read_text(encoding="utf-8") == OLD_ROWS
    figures = {}
    record = types.SimpleNamespace(figure=lambda key, value, on, **_: figures.setdefault(key, (value, on)))
    bench.report_emulation(record, rows)
    assert figures["builtin_median_abs_error"][0] == pytest.approx(50.0)  # (1500 vs 1000 ms)
    assert "before the PLT form" in figures["builtin_median_abs_error"][1]
    assert "without the old model's rest term" in capsys.readouterr().out


def test_fold_balanced_order(bench):
    fold = {"a": 0, "b": 0, "c": 0, "d": 1, "e": 2, "f": 2}
    assert bench.fold_balanced(list("fedcba"), fold) == ["a", "d", "e", "b", "f", "c"]


def test_an_export_gives_the_benches_the_same_data(bench, tmp_path, synthetic):
    """chromium_pageset.py export: the calibrations (gzipped) and the truth's loads (runs.csv.gz,
    the columns the bench reads) give the same calibrated pages and the same medians as the data
    folder they came from; a damaged gzip is one line naming the file."""
    import shutil

    import chromium_pageset

    from pltlab.archive.har import write_page

    data, to = tmp_path / "data", tmp_path / "export"
    (data / "calib").mkdir(parents=True)
    for n in ("wikipedia", "filamentgroup"):
        write_page(synthetic[n], str(data / "calib" / f"{n}.har"))
    quick = os.path.join(os.path.dirname(__file__), "..", "docs", "results", "handshakes-2026-quick", "tcp")
    shutil.copytree(quick, data / "truth")  # a committed sweep's experiment.toml and runs.csv
    chromium_pageset.export(str(data), str(to))
    assert sorted(os.listdir(to / "calib")) == ["filamentgroup.har.gz", "wikipedia.har.gz"]
    a, b = compute_fit.calibrated(str(data / "calib")), compute_fit.calibrated(str(to / "calib"))
    assert a.keys() == b.keys()
    for n in a:
        assert [o.extras.get(calib.KEY) for o in a[n].objects] == [o.extras.get(calib.KEY) for o in b[n].objects]
        assert calib.stored(a[n]) == calib.stored(b[n])
    counts_a, counts_b = {}, {}
    med_a, pages_a, configs_a = bench.truth(str(data / "truth"), counts_a)
    med_b, pages_b, configs_b = bench.truth(str(to / "truth"), counts_b)
    assert med_a and med_a == med_b and counts_a == counts_b
    assert [p for p, _ in pages_a] == [p for p, _ in pages_b] and [k for *_, k in configs_a] == [
        k for *_, k in configs_b
    ]
    again = tmp_path / "again"
    chromium_pageset.export(str(data), str(again))  # the same data exports to the same bytes
    assert (again / "truth" / "runs.csv.gz").read_bytes() == (to / "truth" / "runs.csv.gz").read_bytes()
    only = tmp_path / "calib-only"  # before the truth is collected: the calibrations alone
    shutil.rmtree(data / "truth")
    chromium_pageset.export(str(data), str(only))
    assert sorted(os.listdir(only)) == ["calib"] and len(compute_fit.calibrated(str(only / "calib"))) == 2
    (to / "calib" / "wikipedia.har.gz").write_bytes(b"\x1f\x8b" + b"not gzip at all")
    with pytest.raises(PltError, match=r"wikipedia\.har\.gz: not a readable gzip file"):
        compute_fit.calibrated(str(to / "calib"))


def test_the_fit_takes_the_network_stack_times_of_its_pages(folds, synthetic):
    """The general model's network-stack times are the median of its training pages'; a held-out
    page calibrated by it gets them; a training page measured before they were (none) leaves the
    model without them."""
    import copy

    pages = {}
    for k, n in enumerate(TRAIN):
        p = copy.deepcopy(synthetic[n])
        p.extras[calib.PAGE_KEY].update(net_setup_ms=10.0 * (k + 1), net_ttfb_ms=float(k))
        pages[n] = p
    params = compute_fit.fit(pages, folds, judged=["wikipedia"])
    # set-ups 10 .. 80 and first bytes 0 .. 7 over the 8 pages: medians 45 and 3.5
    assert params["net"] == {"net_setup_ms": 45.0, "net_ttfb_ms": 3.5, "pages": len(TRAIN)}
    held = calib.stored(chromium_compute.apply(chromium_compute.check(params, "fit"), synthetic["wikipedia"]))
    assert (held["net_setup_ms"], held["net_ttfb_ms"]) == (45.0, 3.5)
    del pages[TRAIN[0]].extras[calib.PAGE_KEY]["net_setup_ms"]
    params = compute_fit.fit(pages, folds, judged=["wikipedia"])
    assert "net" not in params
    assert "net_setup_ms" not in calib.stored(chromium_compute.apply(params, synthetic["wikipedia"]))
    with pytest.raises(PltError, match="not the parameters"):
        chromium_compute.check({**params, "net": {"net_setup_ms": -1, "net_ttfb_ms": 0}}, "bad.json")


def test_rows_of_another_network_stack_are_never_appended_to(bench, tmp_path, folds):
    """--network-stack calibrated with a rows file of "off" loads (or the other way): refused in
    one line before anything loads; --report-only reads them."""
    import csv
    import types

    path = tmp_path / "rows.csv"
    row = dict.fromkeys(bench.ROW_FIELDS, "")
    row.update(page="github", fold=1, sample="out", rtt_ms=20.0, protocol="h2", tfo="off", chromium_ms=1000.0)
    row.update(chromium_loads=2, builtin_ms=900.0, builtin_network_ms=900.0, error=-0.1)
    row.update(chromium_tfo_can_save="False", network_stack="off")
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.DictWriter(f, bench.ROW_FIELDS)
        w.writeheader()
        w.writerow(row)
    before = path.read_text(encoding="utf-8")
    a = types.SimpleNamespace(pages=None, rows=str(path), report_only=False, network_stack="calibrated")
    with pytest.raises(PltError, match=r"rows\.csv: rows of network_stack off: give a new --rows file"):
        bench.emulation(a, folds, {}, {}, ([], {}, {}), [])
    assert path.read_text(encoding="utf-8") == before
    a.report_only = True
    assert [r["network_stack"] for r in bench.emulation(a, folds, {}, {}, ([], {}, {}), [])] == ["off"]
