"""The intervals are scipy's BCa bootstrap intervals (checked against scipy called here directly,
with the generator seeded as pltlab seeds it), their fallbacks on degenerate samples, and the one
rule of where an interval is shown: the console summary of `reproduce tfo`, its --json, the
report's tables, sentences and JSON all follow stats.shown (MIN_N values per side)."""

import numpy as np
import pytest
from scipy.stats import bootstrap

from pltlab.experiments import stats
from pltlab.report import effects, headline, summary, tables
from pltlab.report.statistics import analyse
from pltlab.studies import tfo as tfo_study
from tests.test_report import _run

PLTS = [312.0, 298.5, 305.1, 330.2, 301.7, 299.9, 341.0]


def _scipy_ci(samples, stat, seed):
    ci = bootstrap(
        samples, stat, n_resamples=10_000, confidence_level=0.95, method="BCa", rng=np.random.default_rng(seed)
    ).confidence_interval
    return ci.low, ci.high


def test_intervals_are_scipys_bca_seeded_as_before():
    assert stats.mean_ci(PLTS, seed=7) == pytest.approx(_scipy_ci((PLTS,), np.mean, 7))
    s = stats.summary(PLTS, seed=3)
    assert s["ci"] == pytest.approx(list(_scipy_ci((PLTS,), np.mean, 3)))
    on, off = [200.0, 210, 190, 205, 195, 220], [300.0, 310, 290, 305, 295]
    imp = stats.improvement(on, off, seed=4)
    want = _scipy_ci((on, off), lambda x, y, axis=-1: 1 - np.mean(x, axis=axis) / np.mean(y, axis=axis), 4)
    assert imp["ci"] == pytest.approx(list(want))
    assert imp["improvement"] == pytest.approx(1 - np.mean(on) / np.mean(off))
    assert imp["ci"][0] < imp["improvement"] < imp["ci"][1]
    diff = _scipy_ci((off, on), lambda x, y, axis=-1: np.mean(y, axis=axis) - np.mean(x, axis=axis), 11)
    assert stats.diff_of_means(off, on, seed=11) == pytest.approx(diff)
    # BCa, not the percentile interval: on a skewed sample they differ
    skewed = [1.0, 1.1, 1.2, 1.3, 1.5, 2.0, 9.0]
    pct = bootstrap((skewed,), np.mean, method="percentile", rng=np.random.default_rng(0)).confidence_interval
    assert stats.mean_ci(skewed) != pytest.approx((pct.low, pct.high))
    assert stats.INTERVAL == "95 % BCa bootstrap interval"


def test_fallbacks_on_degenerate_samples():
    assert stats.summary([5, 5, 5])["ci"] == [5, 5]  # no spread: the point itself
    assert stats.mean_ci([42.0]) == (42.0, 42.0)  # one value: the point
    assert stats.improvement([80, 80], [100, 100])["ci"] == pytest.approx([0.2, 0.2])
    assert stats.improvement([80], [100, 110, 90])["ci"] == [None, None]  # one value beside others: none
    assert stats.bca(np.mean, []) is None
    lo, hi = stats.geomean_ci([7.0, 7.0])
    assert lo == hi == 7.0


def _runs(n):
    out = []
    for rep in range(1, n + 1):
        out.append(_run("a", 100, 0, rep, 300 + 3 * rep))
        out.append(_run("a", 100, 1, rep, 200 + 5 * rep))
    return out


@pytest.mark.parametrize("n", [2, 4, 5])
def test_one_rule_for_the_console_the_json_and_the_report(n):
    a = analyse(_runs(n))
    (g,) = a["rows"]
    shown = n >= stats.MIN_N
    assert stats.shown(n, n) is shown and headline.enough(n, n) is shown and headline.MIN_N == stats.MIN_N
    # the console summary of `reproduce tfo` (its conclusions) and its --json
    console = tfo_study.conclusions(a, [])
    line = next(x for x in console if x.startswith(stats.INTERVAL))
    (row,) = tfo_study.summary(a)["rows"]
    # the report: headline table, sentence, compact statistics, stats.csv rows, the study's section, --json
    head = headline.rows(a)[0][-1]
    said = dict(headline.sentences(a))["a"]
    compact = [r[-1] for r in tables.compact_stats(a)[1]]
    st = tables.stats_rows(a)
    section = tfo_study.sections(a)[0]["rows"][0][3]
    data = summary.plt_rows(a)[0]
    if shown:
        assert g["improvement_ci"][0] is not None
        assert "a@100: [" in line and row["improvement_ci"][0] is not None
        assert head.startswith("[") and stats.INTERVAL + " [" in said and section.startswith("[")
        assert all(c.startswith("[") for c in compact) and "-" not in st[0][-5:]
        assert data["improvement_ci95"][0] is not None and data["base"]["ci95"][0] is not None
    else:  # computed, but shown nowhere
        assert g["improvement_ci"][0] is not None
        assert f"a@100: {stats.NO_CI}" in line and "[" not in line and row["improvement_ci"] == [None, None]
        assert head == stats.NO_CI and f"n = {n} / {n}: no CI" in said and section == stats.NO_CI
        assert compact == [stats.NO_CI, stats.NO_CI] and st[0][-5:-3] == ["-", "-"] and st[0][-2:] == ["-", "-"]
        assert data["improvement_ci95"] == [None, None] and data["base"]["ci95"] == [None, None]
        assert headline.warning(a) is not None


def test_effects_follow_the_rule():
    rows = effects.effects(_runs(3)) + effects.effects(_runs(6))
    shown = {r["n"]: effects.table_rows([r])[0] for r in rows if r["page"] == "a"}
    assert shown[3][6] == stats.NO_CI and shown[6][6].startswith("[")
    assert effects.HEADERS[6] == f"{stats.INTERVAL} (ms)"
