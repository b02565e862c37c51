"""`pltlab reproduce ablations`: the variant table (pure), each factor's effect with its CI and the
gaps table on synthetic results folders (expected values worked out by hand), and one tiny real
ablation (root)."""

import csv
import dataclasses
import json
import re
import subprocess
import sys

import pytest

from pltlab.errors import PltError
from pltlab.run import knobs
from pltlab.studies import ablations, engine, paper_gaps
from pltlab.studies.ablations import effects, findings, gaps, paths, variants
from tests.conftest import pltlab_cmd

KEEPALIVE = "keepalive" in knobs.KNOBS  # (another change's knob: its rows join when it is merged)


def names(paper, quick=False, only=()):
    return [v.name for v in variants.variants(paper, quick, only)]


def test_tfo_variants_one_factor_at_a_time_and_back():
    got = names("tfo")
    want = [
        "today",
        "paper2011",
        # toward 2011 from today: the preset's factors that differ from today's defaults (frto, sack,
        # ss_after_idle, cubic and 6 connections per host are today's too; icw 10 is the kernel's)
        "today+rack=off",
        "today+tlp=off",
        "today+client_rmem=87380",
        # back from the preset to today's value
        "paper2011+rack=on",
        "paper2011+tlp=on",
        "paper2011+client_rmem=default",
        # candidate causes the preset does not hold
        "paper2011+icw=3",
        "today+icw=3",
        *(["paper2011+keepalive=off", "today+keepalive=off"] if KEEPALIVE else []),
        "paper2011+queue=50",
        "today+queue=50",
    ]
    assert got == want
    table = {v.name: v for v in variants.variants("tfo")}
    assert table["today+rack=off"].base == "today" and table["today+rack=off"].knobs == ("rack=off",)
    assert table["paper2011+rack=on"].base == "paper2011" and table["paper2011+rack=on"].setup == "paper2011"
    assert "2.6.34" in table["paper2011+icw=3"].why  # each extra with its source
    # --quick: no switching back, the extras on the preset only
    assert names("tfo", quick=True) == [
        "today",
        "paper2011",
        "today+rack=off",
        "today+tlp=off",
        "today+client_rmem=87380",
        "paper2011+icw=3",
        *(["paper2011+keepalive=off"] if KEEPALIVE else []),
        "paper2011+queue=50",
    ]


def test_icw_variants_and_duplicates_left_out():
    got = names("icw")
    assert got[:2] == ["today", "2011"]
    assert set(got) == {
        "today",
        "2011",
        "today+rack=off",
        "today+tlp=off",
        "today+wscale=off",
        "today+timestamps=off",
        "2011+rack=on",
        "2011+tlp=on",
        "2011+wscale=on",
        "2011+timestamps=on",
        "2011+loss_burst=4",
        "today+loss_burst=4",
    }
    # the extras wscale/timestamps/rack/tlp off are the preset's own: on the preset they are the
    # preset, from today the one-factor variants; neither is run twice
    assert len(got) == len(set(got))
    assert "2011+wscale=off" not in got and "today+loss_burst=1" not in got
    # no two variants with the same knob values
    pp = variants.PAPERS["icw"]
    keys = [repr(sorted(variants.knob_values(pp, v).items())) for v in variants.variants("icw")]
    assert len(keys) == len(set(keys))


def test_only_some_variants_keeps_their_bases():
    assert names("tfo", only=("paper2011+icw=3",)) == ["paper2011", "paper2011+icw=3"]
    # --variant picks from the whole table, with --quick too (today+icw=3 is no --quick variant)
    assert "today+icw=3" not in names("tfo", quick=True)
    assert names("tfo", quick=True, only=("today+icw=3",)) == ["today", "today+icw=3"]
    assert names("icw", True, ("today+rack=off",)) == ["today", "today+rack=off"]
    with pytest.raises(PltError, match=r"^--variant 'today\+rack=of': no such variant of tfo \(choose from "):
        names("tfo", only=("today+rack=of",))


def test_refusals_are_one_line(monkeypatch):
    tfo = variants.PAPERS["tfo"]
    for extra, msg in (
        # the link is the paper's: a study's fixed knob is no factor
        (variants.Extra("rate", "100mbit", "x"), r"^invalid --knob 'rate=100mbit': the study sets rate itself"),
        (variants.Extra("rack", "maybe", "x"), r"^set-up paper2011: invalid rack 'maybe': on or off$"),
    ):
        monkeypatch.setitem(variants.PAPERS, "tfo", dataclasses.replace(tfo, extra=(extra,)))
        with pytest.raises(PltError, match=msg) as e:
            variants.variants("tfo")
        assert "\n" not in str(e.value)
    monkeypatch.setitem(variants.PAPERS, "tfo", tfo)
    for given, msg in (
        ({}, r"^--paper is required: tfo or icw$"),
        ({"paper": "spdy"}, r"^invalid --paper 'spdy': tfo or icw$"),
        ({"paper": "icw", "pages": "wikipedia"}, r"^--pages is for --paper tfo$"),
        ({"paper": "tfo", "fairness_seconds": 2.0}, r"^--fairness-seconds is for --paper icw$"),
        ({"paper": "tfo", "reps": 0}, r"--reps"),
    ):
        with pytest.raises(PltError, match=msg):
            ablations.options(given)


def test_each_variant_runs_its_papers_study():
    p = ablations.options({"paper": "icw", "quick": True, "fairness_seconds": 2.0, "variant": ["2011+loss_burst=4"]})
    assert ablations.runs(p) == [
        ("2011", "icw", {"quick": True, "stack": "2011", "knob": [], "only": ["fairness"], "fairness_seconds": 2.0}),
        (
            "2011+loss_burst=4",
            "icw",
            {"quick": True, "stack": "2011", "knob": ["loss_burst=4"], "only": ["fairness"], "fairness_seconds": 2.0},
        ),
    ]
    p = ablations.options({"paper": "tfo", "pages": "wikipedia", "reps": 1, "variant": ["today+rack=off"]})
    assert [(sub, study, v["setup"], v["knob"], v["pages"], v["reps"]) for sub, study, v in ablations.runs(p)] == [
        ("today", "tfo", "today", [], "wikipedia", 1),
        ("today+rack=off", "tfo", "today", ["rack=off"], "wikipedia", 1),
    ]


# ---- synthetic results folders --------------------------------------------------------------
def _tfo_variant(d, cells, metrics=None):
    """A `reproduce tfo` folder's stats.csv and runs.csv: cells {(page, rtt): (PLTs off, PLTs on)};
    ``metrics``: every load's metrics (the link's drops), else a runs.csv of before it had them."""
    d.mkdir(parents=True)
    m = [] if metrics is None else [json.dumps(metrics)]
    with open(d / "runs.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "status", "page", "rtt_ms", "tfo", "rep", "plt_ms", "valid"] + ["metrics"] * bool(m))
        i = 0
        for (page, rtt), sides in cells.items():
            for tfo, plts in enumerate(sides):
                for rep, plt in enumerate(plts, 1):
                    i += 1
                    w.writerow([i, "ok", page, rtt, tfo, rep, plt, 1] + m)
            # an invalid load and a failed one: neither counts (the invalid one was loaded: its drops do)
            w.writerow([i + 100, "ok", page, rtt, 1, 9, 1.0, 0] + m)
            w.writerow([i + 200, "failed", page, rtt, 1, 9, "", ""] + [""] * bool(m))
    with open(d / "stats.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(
            ["page", "rtt_ms", "tfo", "n", "improvement_pct", "improvement_ci95_lo_pct", "improvement_ci95_hi_pct"]
        )
        for (page, rtt), (off, on) in cells.items():
            imp = 100 * (1 - sum(on) / len(on) / (sum(off) / len(off)))
            for tfo in ("off", "on"):
                w.writerow([page, rtt, tfo, len(off), f"{imp:.2f}", f"{imp - 1:.2f}", f"{imp + 1:.2f}"])
    (d / "report.html").write_text("<html></html>")


def _ablation_dir(tmp_path, paper, plan):
    out = tmp_path / paper
    out.mkdir()
    vs = [v for v in variants.variants(paper) if v.name in plan]
    engine.record("ablations", {"paper": paper}, str(out), {"variants": [v.__dict__ for v in vs]})
    return out


def test_tfo_effects_and_gaps_table(tmp_path, capsys):
    out = _ablation_dir(tmp_path, "tfo", ["today", "today+rack=off"])
    off = [95, 105, 100, 100, 100]  # mean 100
    # today: 2 % at 20 ms (below the paper's 4 %), 15 % at 100 ms
    _tfo_variant(
        out / "today",
        {("wsj", 20): (off, [97, 99, 98, 98, 98]), ("wsj", 100): ([2 * x for x in off], [168, 172, 170, 170, 170])},
    )
    # rack off: 20 % and 30 %
    _tfo_variant(
        out / "today+rack=off",
        {("wsj", 20): (off, [75, 85, 80, 80, 80]), ("wsj", 100): ([2 * x for x in off], [135, 145, 140, 140, 140])},
    )
    doc = findings.summarize(str(out))
    today, rack = (v["headline"] for v in doc["variants"])
    assert [c["improvement"] for c in today["cells"]] == pytest.approx([0.02, 0.15])
    assert not today["in_band"] and rack["in_band"]
    (e,) = doc["effects"]
    assert (e["variant"], e["base"], e["factor"]) == ("today+rack=off", "today", "rack=off")
    # (0.20 - 0.02 + 0.30 - 0.15) / 2 over the cells; per RTT 0.18 and 0.15
    assert e["effect"] == pytest.approx(0.165)
    assert [r["effect"] for r in e["by_rtt"]] == pytest.approx([0.18, 0.15])
    assert e["n"] == 10 and e["ci"][0] < 0.165 < e["ci"][1] and e["ci"][0] > 0
    assert e["by_rtt"][0]["n"] == 5 and e["by_rtt"][0]["ci"][0] < 0.18 < e["by_rtt"][0]["ci"][1]
    assert e["moves_into_band"]
    assert doc["sentences"][0].startswith("Measured TFO improvement: today's defaults 2.0 % to 15.0 %")
    assert "Setting rack=off from today's defaults changes the TFO improvement by +16.5 pts [" in doc["sentences"][1]
    assert "moves it into the paper's band" in doc["sentences"][1]
    assert doc["missing"] == []
    md = gaps.page([doc])
    assert "| 4% to 41%, rising with RTT | 2.0 % to 15.0 % (mean at 20/100 ms: 2.0/15.0 %) | not measured |" in md
    assert "| `today+rack=off` | `today` | +16.5 pts [" in md and "+18.0 pts [" in md
    assert (
        "| variant | wsj 20 ms | wsj 100 ms |" in md
        and "| `today` | 2.0 % [1.0 %, 3.0 %] | 15.0 % [14.0 %, 16.0 %] |" in md
    )
    # the written summary is what the studies' reports read; without one: not measured
    findings.write(str(out))
    assert paper_gaps.why("tfo", str(out))[:2] == doc["sentences"][:2]
    # paper-gaps.md from the folder: its ablations.json (a committed folder need not hold the loads)
    (out / "today" / "runs.csv").unlink()
    assert gaps.main([str(out)]) == 0
    page = capsys.readouterr().out
    assert "| `today+rack=off` | `today` | +16.5 pts [" in page
    assert "Not measured yet: `pltlab reproduce ablations --paper icw -o docs/results/ablations-icw`" in page
    assert paper_gaps.why("tfo", str(tmp_path / "none")) == [
        "not measured; see docs/results/paper-gaps.md (`pltlab reproduce ablations --paper tfo` measures it)"
    ]


def test_the_link_drops_of_each_variant_and_the_rack_tlp_sentence(tmp_path, capsys):
    """Each load's link drops (metrics `link_drops`, per direction) summed per variant, in the
    per-variant table, and the sentence on what RACK/TLP had to act on (today and the preset)."""
    out = _ablation_dir(tmp_path, "tfo", ["today", "paper2011", "today+queue=50"])
    cells = {("wsj", 20): ([100, 110], [90, 100])}  # 4 valid loads + 1 invalid one, all loaded
    none = {"uplink": {"loss": 0, "queue": 0}, "downlink": {"loss": 0, "queue": 0}}
    _tfo_variant(out / "today", cells, {"queue_wait_us": {}, "link_drops": none})
    _tfo_variant(out / "paper2011", cells, {"link_drops": {**none, "uplink": {"loss": 1, "queue": 0}}})
    _tfo_variant(out / "today+queue=50", cells, {"link_drops": {**none, "downlink": {"loss": 0, "queue": 3}}})
    doc = findings.summarize(str(out))
    drops = {v["name"]: v["drops"] for v in doc["variants"]}
    assert drops["today"] == {"loads": 5, "runs": 5, "loss": 0, "queue": 0}
    assert drops["paper2011"] == {"loads": 5, "runs": 5, "loss": 5, "queue": 0}
    assert drops["today+queue=50"] == {"loads": 5, "runs": 5, "loss": 0, "queue": 15}
    want = (
        "RACK/TLP act on losses: the TFO link dropped 5 packets in 10 loads "
        "(5 by random loss, 0 by queue overflow; today and paper2011, both directions)."
    )
    assert want in doc["sentences"]
    md = findings.markdown(doc)
    assert "| link drops |" in md and "| 15 (0 lost, 15 queue overflow) in 5 loads |" in md
    assert f"- {want}" in md
    # loads recorded before the drops were (no metrics): said, not guessed; the page says so too
    (tmp_path / "old").mkdir()
    old = _ablation_dir(tmp_path / "old", "tfo", ["today", "paper2011"])
    _tfo_variant(old / "today", cells)
    _tfo_variant(old / "paper2011", cells)
    doc = findings.summarize(str(old))
    assert doc["variants"][0]["drops"] is None
    assert doc["sentences"][-1].startswith("RACK/TLP act on losses: the TFO link's drops were not measured")
    findings.write(str(old))
    doc = json.loads((old / "ablations.json").read_text())
    doc["sentences"] = [s for s in doc["sentences"] if "RACK/TLP" not in s]  # written before the sentence existed
    (old / "ablations.json").write_text(json.dumps(doc))
    assert gaps.main([str(old)]) == 0
    page = capsys.readouterr().out
    assert "- RACK/TLP act on losses: the TFO link's drops were not measured" in page
    assert len(re.findall(r"\| `(today|paper2011)` \|.*\| (yes|no) \| not measured \|", page)) == 2  # (drops column)


def test_few_loads_show_no_ci_and_a_missing_variant_is_named(tmp_path):
    out = _ablation_dir(tmp_path, "tfo", ["today", "today+tlp=off", "today+rack=off"])
    _tfo_variant(out / "today", {("wsj", 20): ([100, 110], [90, 100])})
    _tfo_variant(out / "today+tlp=off", {("wsj", 20): ([100, 110], [80, 90])})
    doc = findings.summarize(str(out))
    (e,) = doc["effects"]
    # 1 - 85/105 - (1 - 95/105) = 10/105; two loads a side: no interval (stats.MIN_N)
    assert e["effect"] == pytest.approx(10 / 105) and e["ci"] is None
    assert doc["missing"] == ["today+rack=off"]
    assert "by +9.5 pts n < 5: no CI" in doc["sentences"][1]
    assert doc["sentences"][-1] == "Not finished, so not measured: today+rack=off."


def _fair_metrics(downloads, intervals):
    return {
        "downloads": downloads,  # [ms, bytes]
        "long_intervals_kbyte_s": intervals,
        "long_bytes": sum(intervals) * 1000,
        "long_seconds": len(intervals),
    }


def test_icw_ratio_effect_and_gaps_table(tmp_path, monkeypatch):
    # variant: 6 x 5000 B in 6 x 100 ms = 50 KB/s short, long flow 10 KB/s: 5.0; base: 20/10 = 2.0
    v = effects.fairness_samples(
        _fair_metrics([[90, 5000], [110, 5000], [100, 5000], [95, 5000], [105, 5000], [100, 5000]], [9, 11, 10, 10, 10])
    )
    b = effects.fairness_samples(
        _fair_metrics([[240, 5000], [260, 5000], [250, 5000], [250, 5000], [245, 5000], [255, 5000]], [9, 11, 10, 10])
    )
    e = effects.icw_effect(v, b)
    assert e["effect"] == pytest.approx(3.0) and e["ci"][0] < 3.0 < e["ci"][1] and e["n"] == 6
    out = _ablation_dir(tmp_path, "icw", ["today", "2011", "today+wscale=off"])
    for name, ratio in (("today", 2.0), ("2011", 2.5), ("today+wscale=off", 5.0)):
        (out / name).mkdir()
        fair = {"icw": 32, "ratio": ratio, "ratio_ci": [ratio - 1, ratio + 1], "long_kbyte_s": 10.0}
        fair.update(short_kbyte_s=10 * ratio, short_downloads=6)
        other = {
            "icw": 3,
            "ratio": 9.0,
            "ratio_ci": [8, 10],
            "long_kbyte_s": 1,
            "short_kbyte_s": 9,
            "short_downloads": 1,
        }
        (out / name / "results.json").write_text(json.dumps({"fairness": [fair, other]}))
    samples = {"today": b, "2011": b, "today+wscale=off": v}
    monkeypatch.setattr(effects, "icw_loads", lambda folder, icw: samples[folder.rsplit("/", 1)[1]])
    doc = findings.summarize(str(out))
    heads = {x["name"]: x["headline"] for x in doc["variants"]}
    assert heads["today"]["ratio"] == 2.0 and heads["today"]["icw"] == 32  # the largest ICW's
    assert not heads["today"]["in_band"] and heads["today+wscale=off"]["in_band"]  # >= 4.7 / 1.5
    (e,) = doc["effects"]
    assert e["variant"] == "today+wscale=off" and e["effect"] == pytest.approx(3.0) and e["moves_into_band"]
    md = gaps.page([doc])
    assert "| 4.7 (band: >= 3.1) | 2.00 [1.00, 3.00] at ICW 32 | 2.50 [1.50, 3.50] at ICW 32 |" in md
    assert "Setting wscale=off from today's defaults changes the fairness ratio by +3.00 [" in md


def test_the_median_download_beside_the_aggregate(tmp_path, monkeypatch):
    """The study's short-flow rate is a download's: the median download's rate over the long flow's
    with its CI; the downloads slower than 1 s counted, with those where the client sent again."""
    # rates 49152 B / 800 ms = 61.44 KB/s (the median), 98.3, 24.6 (a 2 s download, SYN sent again), ...
    rows = [[800, 49152, 0], [500, 49152, 0], [2000, 49152, 1], [700, 49152, 0], [1500, 49152, 0], [900, 49152, 0]]
    s = effects.fairness_samples(_fair_metrics(rows, [9, 11, 10, 10, 10, 10]))
    assert effects.slow_downloads(s, 1000) == (2, 1, 6)
    ci = effects.median_ratio_ci(s)  # median of 6 rates: between 800 ms's 61.4 and 900 ms's 54.6 KB/s
    assert ci[0] < (49152 / 800 + 49152 / 900) / 2 / 10 < ci[1]
    out = _ablation_dir(tmp_path, "icw", ["today", "2011"])
    for name in ("today", "2011"):
        (out / name).mkdir()
        fair = {"icw": 32, "ratio": 2.7, "ratio_ci": [2.1, 3.4], "long_kbyte_s": 10.0, "short_kbyte_s": 27.0}
        fair.update(short_downloads=6, short_median_kbyte_s=58.0)
        (out / name / "results.json").write_text(json.dumps({"fairness": [fair]}))
    monkeypatch.setattr(effects, "icw_loads", lambda folder, icw: s)
    doc = findings.summarize(str(out))
    h = next(v["headline"] for v in doc["variants"] if v["name"] == "2011")
    assert h["median_ratio"] == pytest.approx(5.8) and not h["in_band"]  # (the band judges the aggregate)
    text = " ".join(doc["sentences"])
    assert "the median download 58.0 KB/s, the long flow 10.0 KB/s, their ratio 5.80 (within the band, >= 3.1)" in text
    assert (
        "2 of its 6 downloads took over 1 s (TCP's initial retransmission timeout), 1 of them with the client" in text
    )
    # a summary written before the median was kept gets its point from the variant's results.json
    old = {"paper": "icw", "variants": [{"name": "2011", "headline": {"ratio": 2.7}}]}
    gaps.fill_medians(str(out), old)
    assert old["variants"][0]["headline"]["median_ratio"] == pytest.approx(5.8)


def test_a_variant_without_a_run_at_the_largest_icw_is_judged_at_none(tmp_path, monkeypatch):
    s = effects.fairness_samples(_fair_metrics([[800, 49152, 0]] * 6, [10] * 6))
    out = _ablation_dir(tmp_path, "icw", ["2011", "2011+loss_burst=4"])
    for name, icw in (("2011", 32), ("2011+loss_burst=4", 3)):  # (its ICW 32 run failed twice)
        (out / name).mkdir()
        fair = {"icw": icw, "ratio": 9.0, "ratio_ci": [8.0, 10.0], "long_kbyte_s": 1.0, "short_kbyte_s": 9.0}
        (out / name / "results.json").write_text(json.dumps({"fairness": [dict(fair, short_downloads=6)]}))
    monkeypatch.setattr(effects, "icw_loads", lambda folder, icw: s)
    doc = findings.summarize(str(out))
    h = next(v["headline"] for v in doc["variants"] if v["name"] == "2011+loss_burst=4")
    assert not h["in_band"] and findings.headline_text("icw", h).startswith(
        "no run at ICW 32 (its fairness runs failed)"
    )
    (e,) = doc["effects"]
    assert e["effect"] is None and not e["moves_into_band"]


def test_gaps_module_refuses_a_folder_that_is_no_ablation(tmp_path):
    cp = subprocess.run(
        [sys.executable, "-m", "pltlab.studies.ablations.gaps", str(tmp_path)], capture_output=True, text=True
    )
    assert cp.returncode == 2 and cp.stdout == ""
    assert cp.stderr == f"pltlab: error: {tmp_path}: no study.json of `pltlab reproduce ablations` here\n"


@pytest.mark.root
@pytest.mark.slow  # two variants of a one-page, one-repetition tfo study: 12 real loads
def test_reproduce_ablations_tiny(tmp_path):
    out = tmp_path / "abl"
    args = ("reproduce", "ablations", "--paper", "tfo", "--pages", "wikipedia", "--reps", "1")
    args += ("--variant", "today+rack=off", "-o", str(out))
    cp = pltlab_cmd(*args, "--json", timeout=600)
    assert cp.returncode == 0, cp.stderr
    doc = json.loads(cp.stdout.strip().splitlines()[-1])
    assert [v["name"] for v in doc["variants"]] == ["today", "today+rack=off"]
    for name in ("today", "today+rack=off"):
        assert (out / name / "report.html").is_file()
        assert json.loads((out / name / "study.json").read_text())["study"] == "tfo"
    (e,) = doc["effects"]
    # one load per side and RTT (an invalid one, e.g. a late emulator on a busy machine, leaves its cell out)
    assert e["factor"] == "rack=off" and 1 <= e["n"] <= 3 and e["ci"] is None and e["effect"] is not None
    assert (out / "ablations.json").is_file() and "`today+rack=off`" in (out / "ablations.md").read_text()
    # where the TFO-off loads' time went: a row per cell explained from the real loads
    rows = [r for v in doc["variants"] for r in v["paths"] or []]
    assert rows and all(r["page"] == "wikipedia" and r["plt_off_ms"] > 0 and r["handshakes_on_path"] >= 1 for r in rows)
    with open(out / "today+rack=off" / "runs.csv", newline="") as f:
        assert {r["rack"] for r in csv.DictReader(f)} == {"off"}
    # resumed: a finished variant is not run again
    cp = pltlab_cmd(*args, "--resume", timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert cp.stderr.count("finished before, not run again") == 2
    # without --resume the folder is refused in one line
    cp = pltlab_cmd(*args)
    assert cp.returncode == 2 and "pass --resume" in cp.stderr


@pytest.mark.root
@pytest.mark.slow  # two variants of two 2-s fairness runs (ICW 32 and 3): ~4 min on a busy machine (retries of runs too short to finish a download)
def test_reproduce_ablations_icw_tiny(tmp_path):
    out = tmp_path / "abl"
    cp = pltlab_cmd(
        *("reproduce", "ablations", "--paper", "icw", "--quick", "--fairness-seconds", "2"),
        *("--variant", "2011+loss_burst=4", "-o", str(out)),
        timeout=600,
    )
    assert cp.returncode == 0, cp.stderr
    doc = json.loads((out / "ablations.json").read_text())
    assert [v["name"] for v in doc["variants"]] == ["2011", "2011+loss_burst=4"]
    assert json.loads((out / "2011" / "study.json").read_text())["params"]["parts"] == ["fairness"]
    (e,) = doc["effects"]
    heads = {v["name"]: v["headline"] for v in doc["variants"]}
    assert heads["2011"]["icw"] == 32 and heads["2011"]["ratio"] > 0
    assert e["base"] == "2011" and e["factor"] == "loss_burst=4" and e["effect"] is not None
    assert "| `2011+loss_burst=4` | `2011` |" in cp.stdout  # the table it prints


def test_the_reports_read_the_committed_ablations(tmp_path, monkeypatch):
    from pltlab.studies import tfo

    def why_lines():
        (sec,) = [s for s in tfo.sections({"rows": []}) if "lines" in s]
        return [x for x in sec["lines"] if x.startswith("why results can differ: ")]

    monkeypatch.setitem(paper_gaps.COMMITTED, "tfo", str(tmp_path / "none"))
    assert why_lines() == [
        "why results can differ: not measured; see docs/results/paper-gaps.md "
        "(`pltlab reproduce ablations --paper tfo` measures it)"
    ]
    (tmp_path / "ablations.json").write_text(json.dumps({"sentences": ["Setting rack=off changes it by +1.0 pts."]}))
    monkeypatch.setitem(paper_gaps.COMMITTED, "tfo", str(tmp_path))
    assert why_lines() == [
        "why results can differ: Setting rack=off changes it by +1.0 pts.",
        "why results can differ: see docs/results/paper-gaps.md",
    ]


def test_the_committed_folders_each_paper_first_then_its_smaller_runs(tmp_path, monkeypatch):
    monkeypatch.setattr(paper_gaps, "_ROOT", str(tmp_path))
    monkeypatch.setattr(paper_gaps, "COMMITTED", {"tfo": "a/tfo", "icw": "a/icw"})
    monkeypatch.setattr(paper_gaps, "MORE", {"tfo": ("a/tfo-quick", "a/tfo-none"), "icw": ()})
    for d in ("a/icw", "a/tfo-quick", "a/tfo"):  # (a/tfo-none holds no ablations.json: left out)
        (tmp_path / d).mkdir(parents=True)
        (tmp_path / d / paper_gaps.SUMMARY).write_text("{}")
    assert paper_gaps.all_committed() == [str(tmp_path / d) for d in ("a/tfo", "a/tfo-quick", "a/icw")]


def test_what_the_pages_allow_tfo_to_save(tmp_path):
    """k set-ups on the path x RTT / PLT beside the measured improvement; a cell below the band is
    named with its figures; a folder without loads has no rows."""
    assert paths.cells(str(tmp_path), [("p", 20.0)]) is None
    row = {"page": "p", "rtt_ms": 20.0, "plt_off_ms": 8000.0, "tcp_ms": 900.0, "request_ms": 100.0}
    row |= {"transfer_ms": 6000.0, "handshakes_on_path": 10, "new_connections": 30, "saved_ms": 240.0}
    s = paths.shares(row)
    # 10 x 20 ms = 200 ms of 8 s; saved 240 ms of 8 s; transfer 6 of 8 s
    assert s["allowed"] == pytest.approx(0.025) and s["saved"] == pytest.approx(0.03)
    assert s["transfer"] == pytest.approx(0.75)
    hi = dict(row, rtt_ms=200.0, plt_off_ms=10000.0, saved_ms=1500.0)  # 10 x 200 ms = 20 % allowed
    cells = [{"page": "p", "rtt_ms": 20.0, "improvement": 0.03}, {"page": "p", "rtt_ms": 200.0, "improvement": 0.15}]
    doc = {
        "paper": "tfo",
        "preset": "paper2011",
        "published": paper_gaps.PUBLISHED["tfo"],
        "variants": [{"name": "today", "headline": {"cells": cells}, "paths": [row, hi]}],
    }
    text = " ".join(findings.paths_sentences(doc))
    assert "at 20 ms k x RTT / PLT 2.5 %, TFO saved 3.0 %" in text and "at 200 ms k x RTT / PLT 20.0 %" in text
    # only the 20 ms cell (3 %) is below the paper's 4 %: 10 x 20 ms / 4 % = 5 s
    assert "p 20 ms: 10 set-ups x 20 ms of a 8.0 s PLT = 2.5 %, measured 3.0 %" in text and "p 200 ms:" not in text
    assert "= 5.0 s" in text
    assert findings.allowed_column(doc) == []  # (the preset's paths: none here)
    doc["variants"].append({"name": "paper2011", "headline": {"cells": cells}, "paths": [row, hi]})
    assert findings.allowed_column(doc)[1] == "20 ms 2.5 %, 200 ms 20.0 %"
    # a variant in the band: its set-ups on the path beside its base's
    more = dict(row, handshakes_on_path=14)
    doc["variants"].append(
        {"name": "x", "base": "paper2011", "headline": {"cells": cells, "in_band": True}, "paths": [more]}
    )
    text = " ".join(findings.paths_sentences(doc))
    assert (
        "`x` is in the paper's band: 14 connection set-ups on the critical path of its TFO-off loads, against 10 in `paper2011`."
        in text
    )


def test_a_cell_with_one_load_a_side_is_left_out_of_the_effect(tmp_path):
    # invalid loads can leave a cell one load on a side: BCa's jackknife cannot leave it out, and
    # the pooled effect over the other cells keeps its interval
    out = _ablation_dir(tmp_path, "tfo", ["today", "today+rack=off"])
    off = [95, 105, 100, 100, 100]
    _tfo_variant(
        out / "today",
        {("wsj", 20): (off, [97, 99, 98, 98, 98]), ("wsj", 100): ([200, 204], [170])},
    )
    _tfo_variant(
        out / "today+rack=off",
        {("wsj", 20): (off, [75, 85, 80, 80, 80]), ("wsj", 100): ([200, 204], [140, 150])},
    )
    (e,) = findings.summarize(str(out))["effects"]
    # only the 20 ms cell counts: 0.20 - 0.02
    assert e["effect"] == pytest.approx(0.18)
    assert e["ci"] is not None and e["ci"][0] < 0.18 < e["ci"][1]
