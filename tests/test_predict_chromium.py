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
