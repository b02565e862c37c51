"""The PLT form of `pltlab predict --client chromium` (issue 27 item 2): the network-bound and the
CPU-bound estimate combined (pltlab.predict.chromium_plt), its fit on ground-truth loads
(pltlab.experiments.plt_fit) and the folds it is judged on: no held-out page's truth enters the
fit that predicts it. Pure: no root, no load, no simulation (rows are synthetic)."""

import copy
import json
import math
import os

import pytest

from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.experiments import folds as foldsmod
from pltlab.experiments import plt_fit
from pltlab.predict import chromium_compute, chromium_plt

FOLDS = os.path.join(os.path.dirname(__file__), "..", "benches", "pagesets", "public-folds.json")


@pytest.fixture(scope="module")
def folds():
    with open(FOLDS, encoding="utf-8") as f:
        return foldsmod.Folds.from_json(f.read(), FOLDS)


def _plt(form="pnorm", a=1.0, p=2.0, one=0.0, objects=0.0, js=0.0, conns=0.0):
    return {
        "form": form,
        "log_a": math.log(a),
        "p": p,
        "cpu": {"one": one, "log_objects": objects, "log_kb_js": js, "log_connections": conns},
        "fitted_on": ["x"],
    }


F0 = {"one": 1.0, "log_objects": 0.0, "log_kb_js": 0.0, "log_connections": 0.0}


def test_the_forms_combine_as_written():
    c400 = math.log(400)  # C = 400 ms whatever the page
    # p = 2: (300^2 + 400^2)^(1/2) = 500; a = 2 doubles N: (2 x 150) -> 500 again
    assert chromium_plt.estimate(_plt(p=2, one=c400), 300, F0)["plt_ms"] == pytest.approx(500)
    got = chromium_plt.estimate(_plt(a=2, p=2, one=c400), 150, F0)
    assert got == pytest.approx({"plt_ms": 500, "network_bound_ms": 300, "cpu_bound_ms": 400})
    # sum (p = 1): 300 + 400; max: the larger, on either side
    assert chromium_plt.estimate(_plt("sum", p=1, one=c400), 300, F0)["plt_ms"] == pytest.approx(700)
    mx = chromium_plt.FORMS["max"].p
    assert chromium_plt.estimate(_plt("max", p=mx, one=c400), 300, F0)["plt_ms"] == pytest.approx(400)
    assert chromium_plt.estimate(_plt("max", p=mx, one=c400), 900, F0)["plt_ms"] == pytest.approx(900)
    # no form fitted: the network-bound estimate alone
    assert chromium_plt.estimate(None, 321.0, F0)["plt_ms"] == 321.0


def test_the_cpu_bound_estimate_from_a_pages_structure():
    """A page of 3 objects (its document, a 100 KiB script, an image) on 3 connections: C =
    10 ms x (1 + 3)^0.5 x (1 + 100)^0.25 x (1 + 3)^0.5 = 10 x 2 x 3.170 x 2 = 126.8 ms."""
    page = Page(
        url="https://a.test/",
        objects=[
            Obj(url="https://a.test/", mime="text/html", size=2000),
            Obj(
                url="https://a.test/app.js", mime="application/javascript", size=100 * 1024, initiator="https://a.test/"
            ),
            Obj(url="https://b.test/i.png", mime="image/png", size=5000, initiator="https://a.test/"),
        ],
    )
    _objs, _rows, page_f = chromium_compute.structure(page)
    f = chromium_plt.features(page_f, connections=3)
    assert f == pytest.approx(
        {"one": 1.0, "log_objects": math.log(4), "log_kb_js": math.log(101), "log_connections": math.log(4)}
    )
    plt = _plt(one=math.log(10), objects=0.5, js=0.25, conns=0.5)
    assert chromium_plt.cpu_bound(plt, f) == pytest.approx(10 * 2 * 101**0.25 * 2)
    assert 101**0.25 == pytest.approx(3.170, abs=1e-3)


def _rows(folds, plt, noise=None):
    """Rows of every page of the folds at three network-bound estimates and two connection counts,
    measured = the form's value (times noise[page] where given)."""
    out = []
    for n, page in enumerate(sorted(folds.fold)):
        objs = 5 + 7 * n  # pages of 5..201 objects, scripts growing with them
        for net in (300.0, 1200.0, 3000.0):
            for conns in (2, 9):
                f = {
                    "one": 1.0,
                    "log_objects": math.log1p(objs),
                    "log_kb_js": math.log1p(20 * n),
                    "log_connections": math.log1p(conns),
                }
                meas = chromium_plt.estimate(plt, net, f)["plt_ms"] * (noise or {}).get(page, 1.0)
                out.append({"page": page, "rtt_ms": net / 15, "protocol": "h2", "tfo": False,
                            "measured_ms": meas, "network_ms": net, "f": f})  # fmt: skip
    return out


KNOWN = _plt(a=1.3, p=3.0, one=math.log(40), objects=0.6, js=0.1, conns=0.2)


def test_the_fit_recovers_a_known_form(folds):
    got = plt_fit.fit(_rows(folds, KNOWN), folds, fitted_at="2026-01-01T00:00:00Z")
    assert got["form"] == "pnorm" and got["fitted_on"] == sorted(folds.fold)
    assert math.exp(got["log_a"]) == pytest.approx(1.3, rel=0.03)
    assert got["p"] == pytest.approx(3.0, rel=0.1)
    assert got["cpu"]["log_objects"] == pytest.approx(0.6, abs=0.05)
    for r in plt_fit.predicted(got, _rows(folds, KNOWN)):
        assert abs(r["error"]) < 0.01, r
    assert json.loads(json.dumps(got)) == got and chromium_plt.check(got)


def test_a_judged_pages_truth_never_enters_its_fit(folds):
    rows = _rows(folds, KNOWN)
    # expressen-2 is judged; its site (expressen.se) has rows in the fit through expressen
    with pytest.raises(PltError, match=r"PLT form: page expressen-2 is judged out of sample but its site"):
        plt_fit.fit([r for r in rows if r["page"] != "expressen-2"], folds, judged=["expressen-2"])
    with pytest.raises(PltError, match="page nosuch is not in the page set's folds"):
        plt_fit.fit(rows, folds, judged=["nosuch"])


def test_cross_validation_predicts_a_page_without_its_truth(folds):
    """Changing a page's measured PLTs changes no prediction of its own fold (its fit never saw
    them) and changes the predictions of every other fold (theirs did): a leak would show."""
    base = _rows(folds, KNOWN, noise={p: 1 + 0.05 * (i % 3 - 1) for i, p in enumerate(sorted(folds.fold))})
    seen = []

    def rows_of(i):
        seen.append(i)
        return copy.deepcopy(base)

    before, fits = plt_fit.cross_validate(folds, rows_of)
    assert sorted(seen) == list(range(folds.k)) and len(before) == len(base)
    for f in fits:  # each fold's fit holds no page of its own fold
        assert not set(f["plt"]["fitted_on"]) & set(folds.test(f["fold"]))
        assert set(f["judged"]) == set(folds.test(f["fold"]))
    victim = "wikipedia"
    changed = [dict(r, measured_ms=r["measured_ms"] * 1.5) if r["page"] == victim else r for r in base]
    after, fits_after = plt_fit.cross_validate(folds, lambda i: copy.deepcopy(changed))
    home = folds.fold[victim]
    for b_, a_ in zip(before, after):
        assert (b_["page"], b_["network_ms"]) == (a_["page"], a_["network_ms"])
        if folds.fold[b_["page"]] == home:
            assert a_["predicted_ms"] == b_["predicted_ms"], b_["page"]
    for fb, fa in zip(fits, fits_after):
        coefs = [fb["plt"]["log_a"], fb["plt"]["p"], *fb["plt"]["cpu"].values()]
        coefs_after = [fa["plt"]["log_a"], fa["plt"]["p"], *fa["plt"]["cpu"].values()]
        assert (coefs == coefs_after) is (fb["fold"] == home), fb["fold"]
    moved = [abs(a_["predicted_ms"] / b_["predicted_ms"] - 1) for b_, a_ in zip(before, after)]
    assert max(moved) > 1e-3  # the other folds' predictions follow the changed page


def test_parameters_with_a_broken_form_are_refused(tmp_path):
    params = chromium_compute.shipped()
    params["plt"] = KNOWN
    good = tmp_path / "good.json"
    good.write_text(json.dumps(params))
    assert chromium_compute.load(str(good))["plt"] == KNOWN
    params["plt"] = {"form": "nosuch"}
    bad = tmp_path / "p.json"
    bad.write_text(json.dumps(params))
    with pytest.raises(PltError, match=f"{bad}: not the parameters of a Chromium compute model"):
        chromium_compute.load(str(bad))


def test_cli_predict_applies_the_form(tmp_path):
    """`pltlab predict --client chromium` with parameters whose form is a sum with C = 100 ms:
    PLT = N + 100, N = the simulated network PLT + the tail; with the larger of N and C = 60 s:
    60 s, whatever the page."""
    from tests.conftest import pltlab_cmd

    params = chromium_compute.shipped()
    for plt, want in (
        (_plt("sum", p=1.0, one=math.log(100)), lambda p: p["network_bound_ms"] + 100),
        (_plt("max", p=chromium_plt.FORMS["max"].p, one=math.log(60000)), lambda p: 60000),
    ):
        path = tmp_path / f"{plt['form']}.json"
        path.write_text(json.dumps({**params, "plt": plt}))
        cp = pltlab_cmd("predict", "wikipedia", "--client", "chromium", "--rtt", "100ms", "--json",
                        "--compute-model", str(path))  # fmt: skip
        assert cp.returncode == 0, cp.stderr
        p = json.loads(cp.stdout)["predictions"][0]
        assert p["network_bound_ms"] == pytest.approx(p["network_plt_ms"] + p["tail_ms"], abs=0.01)
        assert p["plt_ms"] == pytest.approx(want(p), abs=0.01), plt["form"]
