"""Statistics against hand-computed values, the seeds' table, and the HTML report in Chromium."""

import json
import math
import os

import pytest

from pltlab.experiments import stats
from pltlab.experiments.results import Results
from pltlab.report import build, build_study, tables
from pltlab.report.analysis import analyse
from pltlab.studies import tfo as tfo_study
from pltlab.studies.engine import lines, table
from tests.conftest import pltlab_cmd


def test_summary_matches_hand_computed_values():
    s = stats.summary([100, 200, 400])
    assert s["n"] == 3 and s["mean"] == pytest.approx(700 / 3) and s["median"] == 200
    assert s["geomean"] == pytest.approx(200)  # (100 * 200 * 400) ** (1/3)
    lo, hi = s["ci"]
    assert 100 <= lo < 700 / 3 < hi <= 400
    assert stats.summary([5, 5, 5])["ci"] == [5, 5]
    # two values: resampled means are 0, 5, 10 with probabilities 1/4, 1/2, 1/4 -> [0, 10]
    assert stats.mean_ci([0, 10]) == (0, 10)
    assert math.isnan(stats.geomean([0, 1]))


def test_improvement_is_signed_with_its_own_interval():
    imp = stats.improvement([80, 80], [100, 100])
    assert imp["improvement"] == pytest.approx(0.2) and imp["ci"] == pytest.approx([0.2, 0.2])
    slow = stats.improvement([120, 120], [100, 100])
    assert slow["improvement"] == pytest.approx(-0.2)  # a slowdown stays negative (no abs())
    noisy = stats.improvement([80, 90, 70, 85], [100, 110, 95, 105])
    lo, hi = noisy["ci"]
    assert noisy["improvement"] == pytest.approx(1 - 81.25 / 102.5)
    assert lo < noisy["improvement"] < hi and hi - lo < 0.3
    assert stats.improvement([], [1])["improvement"] is None


def _run(page, rtt, tfo, rep, plt, valid=True, status="ok"):
    return {
        "run_key": f"{page}|{rtt}|{tfo}|{rep}",
        "attempt": 1,
        "status": status,
        "seq": rep,
        "page": page,
        "page_url": f"http://www.{page}.test/",
        "objects": 2,
        "config_key": "k",
        "rtt_ms": rtt,
        "rate_down_bps": 4_000_000,
        "rate_up_bps": 256_000,
        "loss": 0.0,
        "queue": "1000",
        "icw": None,
        "cc": "cubic",
        "client": "builtin",
        "warm": True,
        "overrides": [],
        "tfo": tfo,
        "rep": rep,
        "plt_ms": plt,
        "valid": valid,
        "invalid_reason": None if valid else "TFO requested but ...",
        "runner_id": "abc123",
        "lateness_p99_us": 150.0,
        "failure_reason": "boom" if status == "failed" else None,
    }


def _requests(tfo):
    setup = 0 if tfo else 20
    return [
        {
            "index": 0,
            "url": "http://www.a.test/",
            "new_conn": True,
            "connect_start_ms": 0,
            "request_ms": setup,
            "last_byte_ms": setup + 20,
            "status": 200,
        },
        {
            "index": 1,
            "url": "http://www.a.test/x.js",
            "new_conn": False,
            "connect_start_ms": None,
            "request_ms": setup + 20,
            "last_byte_ms": setup + 40,
            "status": 200,
        },
    ]


def _db(d):
    res = Results(str(d))
    res.set_meta(name="synthetic", experiment='pages = ["a"]\n', environment={"kernel": "test"})
    plts = {
        ("a", 20, False): [100, 110, 90],
        ("a", 20, True): [80, 85, 75],
        ("a", 100, False): [300, 310, 290],
        ("a", 100, True): [200, 210, 190],
        ("b", 20, False): [50, 50, 50],
        ("b", 20, True): [55, 55, 55],
    }
    for (page, rtt, tfo), v in plts.items():
        for rep, p in enumerate(v, 1):
            r = _run(page, rtt, tfo, rep, p)
            r["config_key"] = f"k{rtt}"
            res.add_run(r, _requests(tfo))
    res.add_run(_run("a", 20, True, 9, 5000, valid=False), [])  # invalid: never averaged in
    res.add_run(_run("b", 20, True, 8, None, status="failed"), [])
    res.close()
    return plts


def test_seeds_table_format_and_values(tmp_path):
    _db(tmp_path)
    built = build(str(tmp_path))
    md = (tmp_path / "table.md").read_text().splitlines()
    assert [c.strip() for c in md[0].strip("|").split("|")] == tables.SEED_HEADERS
    assert md[0].startswith("| Page") and set(md[1]) <= {"|", "-"}
    assert built["seeds"] == [
        ["a", "20", "100", "80", "20.0"],
        ["a", "100", "300", "200", "33.3"],
        ["b", "20", "50", "55", "-10.0"],
    ]
    csv = (tmp_path / "table.csv").read_text().splitlines()
    assert csv[0] == "Page,RTT(ms),PLT: no TFO (ms),PLT: TFO (ms),Improv. (%)" and csv[3] == "b,20,50,55,-10.0"
    st = (tmp_path / "stats.csv").read_text().splitlines()
    assert st[0].split(",") == tables.STATS_HEADERS and len(st) == 1 + 6
    a = built["analysis"]
    assert len(a["invalid"]) == 1 and len(a["failed_final"]) == 1
    figs = os.listdir(tmp_path / "output-figures")
    for stem in ("requests-a-20ms", "requests-a-100ms", "requests-b-20ms", "plt-vs-rtt", "improvement-vs-rtt"):
        assert f"{stem}.png" in figs and f"{stem}.svg" in figs


def _render(path):
    """(console errors, images as [complete, naturalWidth], body text, requested URLs) of a report
    opened in headless Chromium."""
    from playwright.sync_api import sync_playwright

    from pltlab.loaders.browser import flags

    errors, urls = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=flags.find_executable(None), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page()
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: urls.append(r.url))
            page.goto(f"file://{path}", wait_until="load")
            imgs = page.evaluate("[...document.images].map(i => [i.complete, i.naturalWidth])")
            text = page.inner_text("body")
        finally:
            browser.close()
    return errors, imgs, text, urls


def test_report_renders_in_headless_chromium(tmp_path):
    _db(tmp_path)
    cp = pltlab_cmd("report", str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    assert "PLT: no TFO (ms)" in cp.stdout
    errors, imgs, text, urls = _render(tmp_path / "report.html")
    assert not errors, errors
    # 2 waterfalls x 2 configurations, PLT and improvement vs RTT, the round trips TFO saves
    assert len(imgs) == 6 and all(ok and w > 100 for ok, w in imgs), imgs
    assert all(u.startswith(("file:", "data:")) for u in urls), urls  # self-contained
    for s in ("PLT: TFO (ms)", "Validity", "Experiment file", "Environment", "1 invalid", "What each feature saves"):
        assert s in text


def test_report_bad_folder_is_one_line(tmp_path):
    cp = pltlab_cmd("report", str(tmp_path / "none"))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "results.sqlite" in cp.stderr


def test_analyse_ignores_failed_and_invalid():
    runs = [dict(_run("a", 20, t, i, 100 - 20 * t), id=i) for i in range(3) for t in (False, True)]
    runs.append(dict(_run("a", 20, True, 7, 1, valid=False), id=9))
    a = analyse(runs)
    assert a["rows"][0]["tfo"]["n"] == 3 and a["rows"][0]["improvement"] == pytest.approx(0.2)


def test_study_sections_in_the_sweep_report(tmp_path):
    """A study's comparison with the published results goes into the same report.html."""
    _db(tmp_path)
    built = build(str(tmp_path), study_sections=tfo_study.sections)
    page = (tmp_path / "report.html").read_text()
    assert "TFO improvement with its 95 % bootstrap CI" in page and tfo_study.PAPER["source"] in page
    assert page.index("PLT table") < page.index("Published: ") < page.index("Validity")
    assert built["seeds"][0] == ["a", "20", "100", "80", "20.0"]


def test_study_report_renders_in_headless_chromium(tmp_path):
    """build_study: the study's tables, checks and figures, each experiment's validity and
    experiment file, the environment; self-contained, no error in Chromium."""
    import matplotlib.pyplot as plt

    part = tmp_path / "part"
    part.mkdir()
    _db(part)
    fig, ax = plt.subplots()
    ax.plot([1, 2], [3, 4])
    png = str(tmp_path / "fig.png")
    fig.savefig(png)
    plt.close(fig)
    secs = [
        table("Points <ms>", ["x", "y"], [["1", "2 & 3"]], note="a note"),
        lines("Checks", ['good: {"ok": true}', 'bad: {"ok": false}'], bad=["bad"]),
    ]
    built = build_study(
        str(tmp_path),
        "A study",
        secs,
        [png],
        {"checks": {"bad": {"ok": False}}},
        {"part-one": str(part), "not-run": str(tmp_path / "none")},
    )
    assert json.loads((tmp_path / "results.json").read_text()) == {"checks": {"bad": {"ok": False}}}
    md = (tmp_path / "tables.md").read_text()
    assert md.startswith("# A study\n\n## Points <ms>\n\na note\n\n| x | y     |") and "- bad: " in md
    assert set(built["notes"]) == {"part-one"}
    errors, imgs, text, urls = _render(tmp_path / "report.html")
    assert not errors, errors
    assert len(imgs) == 1 and all(ok and w > 100 for ok, w in imgs), imgs
    assert all(u.startswith(("file:", "data:")) for u in urls), urls
    for s in (
        "Points <ms>",
        "2 & 3",
        "a note",
        "part-one: validity",
        "part-one: experiment",
        "Environment",
        "1 invalid",
    ):
        assert s in text, s
    assert "<li class=bad>bad: {&quot;ok&quot;: false}</li>" in (tmp_path / "report.html").read_text()
