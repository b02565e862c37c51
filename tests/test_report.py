"""Statistics against hand-computed values, the seeds' table, and the HTML report in Chromium."""

import json
import math
import os

import pytest

from pltlab.experiments import stats
from pltlab.experiments.results import Results
from pltlab.report import build, build_study, hars, headline, tables, waterfalls, why
from pltlab.report.statistics import analyse
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


def _render(path, width=1280):
    """What a report shows in headless Chromium at ``width`` px: console errors, images as
    [complete, naturalWidth], body text, requested URLs, the layout's widths and per waterfall
    its state, request rows, critical-path rows, time axis and a PNG of it (the first two)."""
    from playwright.sync_api import sync_playwright

    from pltlab.loaders.browser import flags

    errors, urls = [], []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path=flags.find_executable(None), args=["--no-sandbox", "--disable-gpu"]
        )
        try:
            page = browser.new_page(viewport={"width": width, "height": 900})
            page.on("console", lambda m: m.type == "error" and errors.append(m.text))
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: urls.append(r.url))
            page.goto(f"file://{path}", wait_until="load")
            page.wait_for_function(
                "[...document.querySelectorAll('details[open] .pc')].every(d => d.dataset.state)", timeout=15000
            )
            imgs = page.evaluate("[...document.images].map(i => [i.complete, i.naturalWidth])")
            text = page.inner_text("body")
            layout = page.evaluate(
                """({scroll: document.documentElement.scrollWidth,
                     tables: [...document.querySelectorAll('table')].map(t =>
                        [t.getBoundingClientRect().right, t.parentElement.getBoundingClientRect().right])})"""
            )
            charts = page.evaluate(
                """[...document.querySelectorAll('.pc')].map(d => ({state: d.dataset.state || null,
                     rows: d.querySelectorAll('.rows-holder > .row-item').length,
                     path: d.querySelectorAll('.row-item.on-path').length,
                     tfo: d.querySelectorAll('.row-item.tfo').length, axis: +d.dataset.len}))"""
            )
            shots = [el.screenshot() for el in page.query_selector_all("details[open] .pc")[:2]]
            overlay = 0
            if charts and charts[0]["rows"]:  # a click on a request opens its details
                page.click("details[open] .pc .rows-holder > .row-item >> nth=1")
                overlay = page.evaluate("document.querySelectorAll('.pc .info-overlay-holder').length")
        finally:
            browser.close()
    return {
        "errors": errors,
        "imgs": imgs,
        "text": text,
        "urls": urls,
        "layout": layout,
        "charts": charts,
        "shots": shots,
        "overlay": overlay,
    }


def _not_blank(png: bytes) -> bool:
    """More than one colour in a good share of the image: something is drawn."""
    import io

    from matplotlib import image

    a = image.imread(io.BytesIO(png))[..., :3].reshape(-1, 3)
    return a.shape[0] > 1000 and (a.std(axis=0) > 0.05).any()


def test_report_renders_in_headless_chromium(tmp_path):
    _db(tmp_path)
    cp = pltlab_cmd("report", str(tmp_path))
    assert cp.returncode == 0, cp.stderr
    assert "PLT: no TFO (ms)" in cp.stdout and "Fewer than 5 valid loads per side" in cp.stdout
    r = _render(tmp_path / "report.html")
    assert not r["errors"], r["errors"]
    # improvement vs RTT (headline), the round trips TFO saves, PLT vs RTT; waterfalls are interactive
    assert len(r["imgs"]) == 3 and all(ok and w > 100 for ok, w in r["imgs"]), r["imgs"]
    assert all(u.startswith(("file:", "data:")) for u in r["urls"]), r["urls"]  # self-contained
    text = r["text"]
    for s in ("PLT: TFO (ms)", "Validity", "Experiment file", "Environment", "1 invalid", "What each feature saves"):
        assert s in text
    # headline first: the n < 5 warning, a sentence per page, then the PLT table
    assert text.index("Fewer than 5 valid loads") < text.index("a: TFO saves 20 ms") < text.index("PLT table")
    assert "b: TFO costs 5 ms" in text and "n < 5: no CI" in text
    # usable at 1280 px: no horizontal overflow, every table within its box
    assert r["layout"]["scroll"] <= 1280, r["layout"]
    assert all(right <= box + 0.5 for right, box in r["layout"]["tables"]), r["layout"]
    # one waterfall per side of each of the 3 rows; the first row's drawn, on one time axis
    charts = r["charts"]
    assert len(charts) == 6 and [c["state"] for c in charts[:2]] == ["drawn", "drawn"], charts
    # the axis: the longer median load (TFO off: 100 ms of 90, 100, 110)
    assert charts[0]["axis"] == charts[1]["axis"] == 100 and all(c["rows"] == 2 for c in charts[:2])
    assert all(c["path"] >= 1 for c in charts[:2]) and all(c["state"] is None for c in charts[2:])
    assert len(r["shots"]) == 2 and all(_not_blank(s) for s in r["shots"])
    assert r["overlay"] == 1  # per-request drill-down


def test_report_bad_folder_is_one_line(tmp_path):
    cp = pltlab_cmd("report", str(tmp_path / "none"))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "results.sqlite" in cp.stderr


def test_analyse_ignores_failed_and_invalid():
    runs = [dict(_run("a", 20, t, i, 100 - 20 * t), id=i) for i in range(3) for t in (False, True)]
    runs.append(dict(_run("a", 20, True, 7, 1, valid=False), id=9))
    a = analyse(runs)
    assert a["rows"][0]["alt"]["n"] == 3 and a["rows"][0]["improvement"] == pytest.approx(0.2)


def test_study_sections_in_the_sweep_report(tmp_path):
    """A study's comparison with the published results goes into the same report.html."""
    _db(tmp_path)
    built = build(str(tmp_path), study_sections=tfo_study.sections)
    page = (tmp_path / "report.html").read_text()
    assert "TFO improvement with its 95 % BCa bootstrap interval" in page and tfo_study.PAPER["source"] in page
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
    r = _render(tmp_path / "report.html")
    errors, imgs, text, urls = r["errors"], r["imgs"], r["text"], r["urls"]
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
    # (escaped by the templates: Jinja2 autoescape writes " as &#34;)
    assert "<li class=bad>bad: {&#34;ok&#34;: false}</li>" in (tmp_path / "report.html").read_text()


def _group(page, rtt, off, on, config=""):
    def side(v):
        return stats.summary(v)

    imp = stats.improvement(on, off)
    return {
        "page": page,
        "config": config,
        "rtt_ms": rtt,
        "by": "tfo",
        "labels": ("no TFO", "TFO"),
        "values": (0, 1),
        "base": side(off),
        "alt": side(on),
        "improvement": imp["improvement"],
        "improvement_ci": imp["ci"],
    }


def test_no_interval_and_a_warning_where_a_side_has_fewer_than_5_loads():
    five = _group("a", 100, [300, 310, 290, 305, 295], [200, 210, 190, 205, 195])
    three = _group("b", 20, [100, 110, 90], [80, 85, 75])
    a = {"rows": [five, three], "by": "tfo"}
    rows = headline.rows(a)
    assert rows[0][2] == "5 / 5" and rows[0][-1].startswith("[") and rows[0][5] == "100"
    lo, hi = (float(x) for x in rows[0][-1].strip("[]").split(","))
    assert lo < float(rows[0][6]) < hi
    assert rows[1][2] == "3 / 3" and rows[1][-1] == headline.NO_CI  # the bootstrap CI exists but is not shown
    assert three["improvement_ci"][0] is not None
    w = headline.warning(a)
    assert "1 of 2 row(s)" in w and "b @ 20 ms (n = 3 / 3)" in w and "a @" not in w
    assert headline.warning({"rows": [five]}) is None
    said = dict(headline.sentences(a))
    assert said["a"].startswith("a: TFO saves 100 ms = 1.0 RTT at 100 ms RTT (33.3 %, 95 % BCa bootstrap interval [")
    assert said["b"] == "b: TFO saves 20 ms = 1.0 RTT at 20 ms RTT (20.0 %, n = 3 / 3: no CI)."
    # the explain hook's words follow where it has some
    said = dict(headline.sentences(a, lambda page, gs: "From explain." if page == "b" else None))
    assert said["b"].endswith("no CI). From explain.") and said["a"].endswith(").")
    _, st = tables.compact_stats(a)
    assert [r[-1] == headline.NO_CI for r in st] == [False, False, True, True]


def _har(spans):
    """A HAR of entries (start, end) in ms."""
    rows = [
        {"url": f"http://x.test/{i}", "ready_ms": s, "request_ms": s, "first_byte_ms": e, "last_byte_ms": e}
        for i, (s, e) in enumerate(spans)
    ]
    return hars.from_requests({"id": 1, "plt_ms": max(e for _, e in spans)}, rows)


def test_critical_path_of_a_chain_and_of_a_fan_out_behind_a_slow_object():
    # a chain 0 -> 1 -> 2, and a short request off the path
    assert waterfalls.critical_path(_har([(0, 10), (10, 30), (30, 60), (10, 15)]))[0] == [0, 1, 2]
    # a fan-out behind one slow object (1): the path goes through it to the latest of the fan
    path, how = waterfalls.critical_path(_har([(0, 10), (10, 50), (10, 20), (50, 70), (50, 90), (50, 60)]))
    assert path == [0, 1, 4] and how.startswith("approximate")
    # flags from the load's graph win
    har = _har([(0, 10), (10, 50), (10, 20)])
    har["log"]["entries"][2]["_critical_path"] = True
    assert waterfalls.critical_path(har) == ([2], why.SOURCE)


def test_har_from_the_requests_table_and_the_vendored_viewer():
    har = hars.from_requests(
        {"id": 7, "plt_ms": 100, "started_at": 1.7e9},
        [
            {
                "url": "https://a.test/",
                "host": "a.test",
                "conn_id": 0,
                "new_conn": 1,
                "ready_ms": 0,
                "connect_start_ms": 1,
                "connect_end_ms": 21,
                "tls_end_ms": 41,
                "request_ms": 41,
                "first_byte_ms": 61,
                "last_byte_ms": 70,
                "body_bytes": 500,
                "status": 200,
                "protocol": "h2",
            },
            {"url": "https://a.test/x.js", "request_ms": None, "last_byte_ms": None},  # never sent: left out
        ],
    )
    log = har["log"]
    assert log["version"] == "1.2" and log["pages"][0]["pageTimings"]["onLoad"] == 100
    (e,) = log["entries"]
    assert e["timings"] == {
        "blocked": 1,
        "dns": -1,
        "connect": 40,  # HAR 1.2: connect includes ssl
        "ssl": 20,
        "send": 0,
        "wait": 20,
        "receive": 9,
    }
    assert e["time"] == 70 and e["response"]["content"] == {"size": 500, "mimeType": "text/html"}
    assert e["connection"] == "0" and e["request"]["httpVersion"] == "h2"
    import importlib.resources

    vendor = importlib.resources.files("pltlab.report").joinpath("vendor")
    assert "MIT License" in vendor.joinpath("LICENSE").read_text()
    assert "perfCascade" in vendor.joinpath("perf-cascade.min.js").read_text()[:2000]


@pytest.mark.root
def test_report_of_a_real_sweep_in_headless_chromium(tmp_path):
    """A real short sweep (one generated page, 5 loads per side): intervals shown, no n < 5
    warning, and the median loads' waterfalls drawn with one row per object."""
    from pltlab.archive.generate import generate
    from pltlab.archive.har import write_page

    write_page(
        generate(objects=6, total_bytes=18000, origins=2, depth=2, seed=3, domain="gamma"), str(tmp_path / "g.har")
    )
    (tmp_path / "exp.toml").write_text(
        'name = "real"\npages = ["g.har"]\nrtt = ["20ms"]\ntfo = ["off", "on"]\nrepetitions = 5\nseed = 1\n'
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(tmp_path / "exp.toml"), "-o", str(out), timeout=300)
    assert cp.returncode == 0, cp.stderr
    r = _render(out / "report.html")
    assert not r["errors"], r["errors"]
    assert "Fewer than 5" not in r["text"] and "no CI" not in r["text"] and "95 % BCa bootstrap interval [" in r["text"]
    # pltlab explain's words in the headline and its critical path in the waterfalls (the loads have a graph)
    assert "At 20 ms the median TFO load (run #" in r["text"] and "new connections were off the path" in r["text"]
    assert r["text"].count(f"({why.SOURCE})") == 2
    charts = r["charts"]
    assert len(charts) == 2 and all(c["state"] == "drawn" and c["rows"] == 6 for c in charts), charts
    assert all(1 <= c["path"] <= 6 for c in charts) and charts[0]["axis"] == charts[1]["axis"]
    # drawn from the HARs stored with the runs: their connections' SYN-with-data facts (TFO marks)
    assert charts[0]["tfo"] == 0 and 1 <= charts[1]["tfo"] <= 6
    assert all(_not_blank(s) for s in r["shots"]) and r["layout"]["scroll"] <= 1280


def test_report_html_comes_from_autoescaped_templates_shipped_with_the_package():
    import importlib.resources

    from pltlab.report import html

    names = {p.name for p in importlib.resources.files("pltlab.report").joinpath("templates").iterdir()}
    assert {"page.html.j2", "parts.html.j2", "waterfalls.html.j2", "compare_intro.html.j2"} <= names
    page = html.render(
        "<b>title</b>",
        [
            ("a & b", html._table(["<h>"], [["<script>x</script>"], ["n < 5: no CI"]])),
            ("", html.notes([("bad <i>", True), ("good", False)]) + html.pre("<pre>")),
        ],
    )
    assert "<title>&lt;b&gt;title&lt;/b&gt;</title>" in page and "<h2>a &amp; b</h2>" in page
    assert "<th>&lt;h&gt;</th>" in page and "<td>&lt;script&gt;x&lt;/script&gt;</td>" in page
    assert '<td class="noci">n &lt; 5: no CI</td>' in page  # (the class by the cell's text, as before)
    assert "<li class=bad>bad &lt;i&gt;</li>" in page and "<li>good</li>" in page and "<pre>&lt;pre&gt;</pre>" in page
    assert "<script>" not in page
