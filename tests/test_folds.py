"""The folds of a page set (issue 27): fixed before fitting, a site never split between a fit and
the pages it is judged on, and the guard that refuses a figure whose judged page leaked into its fit."""

import os

import pytest

from pltlab.errors import PltError
from pltlab.experiments import folds
from pltlab.experiments.folds import Entry

ROOT = os.path.join(os.path.dirname(__file__), "..")
PAGESET = os.path.join(ROOT, "benches", "pagesets", "public.txt")
FOLDS = os.path.join(ROOT, "benches", "pagesets", "public-folds.json")


def test_committed_folds_are_the_page_sets_and_were_fixed_once():
    with open(FOLDS) as f:
        fixed = folds.Folds.from_json(f.read(), FOLDS)
    entries = folds.read(PAGESET)
    assert len(entries) >= 25 and set(fixed.fold) == {e.name for e in entries}
    # regenerating from the list gives the committed file: a changed page set shows here
    assert folds.make(entries, fixed.k, fixed.seed) == fixed


def test_no_fold_leaks_a_page_or_its_site_into_its_own_fit():
    with open(FOLDS) as f:
        fx = folds.Folds.from_json(f.read(), FOLDS)
    seen = []
    for i in range(fx.k):
        test, train = fx.test(i), fx.train(i)
        assert test and not set(test) & set(train) and set(test) | set(train) == set(fx.fold)
        assert not {fx.group[p] for p in test} & {fx.group[p] for p in train}
        folds.check(train, test, fx)  # the guard agrees
        seen += test
    assert sorted(seen) == sorted(fx.fold)  # every page judged exactly once


def test_sites_and_recordings_group_pages():
    entries = [
        Entry("wiki-en", "https://en.wikipedia.org/wiki/TCP"),
        Entry("wiki-www", "http://www.wikipedia.org/"),  # same registrable domain
        Entry("bbc", "https://www.bbc.co.uk/news"),
        Entry("other-uk", "https://shop.example.co.uk/"),  # co.uk is a public suffix: another site
        Entry("old", "http://www.vkontakte.ru/", "devtools/redirect.json"),
        Entry("new", "https://m.vk.com/", "devtools/redirect.json"),  # one recording: one group
        Entry("solo", "https://squoosh.app/"),
    ]
    g = folds.groups(entries)
    assert g["wiki-en"] == g["wiki-www"] == "wikipedia.org"
    assert g["bbc"] == "bbc.co.uk" and g["other-uk"] == "example.co.uk"
    assert g["old"] == g["new"] and len(set(g.values())) == 5
    f = folds.make(entries, 3, seed=7)
    assert f.fold["old"] == f.fold["new"] and f.fold["wiki-en"] == f.fold["wiki-www"]
    assert sorted(len(f.test(i)) for i in range(3)) == [2, 2, 3]  # balanced by pages
    assert folds.make(entries, 3, seed=7) == f  # reproducible


def test_the_guard_refuses_a_leak_in_one_line():
    entries = [
        Entry("a", "https://a.example.com/"),
        Entry("a2", "https://b.example.com/x"),
        Entry("c", "https://c.org/"),
    ]
    f = folds.make(entries, 2)
    with pytest.raises(PltError) as e:
        folds.check(["a", "c"], ["a2"], f, "predict MAPE")
    assert (
        "\n" not in str(e.value) and str(e.value).startswith("predict MAPE: page a2") and "example.com" in str(e.value)
    )
    folds.check(["c"], ["a", "a2"], f)


@pytest.mark.parametrize("k", [1, 4])
def test_k_must_leave_sites_in_every_fold(k):
    entries = [Entry("a", "https://a.com/"), Entry("b", "https://b.com/"), Entry("c", "https://c.com/")]
    with pytest.raises(PltError, match="k = "):
        folds.make(entries, k)


def test_bad_lists_and_folds_files_are_one_line(tmp_path):
    p = tmp_path / "set.txt"
    p.write_text("a https://a.com/\nb notaurl\n")
    with pytest.raises(PltError, match=r"set.txt:2: not 'NAME URL"):
        folds.read(str(p))
    p.write_text("a https://a.com/\na https://b.com/\n")
    with pytest.raises(PltError, match="page a listed twice"):
        folds.read(str(p))
    with pytest.raises(PltError, match="x.json: not a folds file"):
        folds.Folds.from_json('{"k": 2, "seed": 1, "group": {"a": "a.com"}, "fold": {"a": 5}}', "x.json")


def test_the_chromium_ground_truth_loads_every_page_of_the_set_on_the_issues_grid():
    """benches/pagesets/chromium-truth.toml (the data `predict --client chromium` is judged on) lists
    exactly the page set, Chromium, RTT 20/100/200 ms x h1/h2 x TFO off/on, 20/5 Mbit/s."""
    from pltlab.experiments import spec

    exp = spec.load(os.path.join(ROOT, "benches", "pagesets", "chromium-truth.toml"))
    assert [e.label for e in exp.pages] == [
        e.name for e in folds.read(os.path.join(ROOT, "benches", "pagesets", "public.txt"))
    ]
    cfgs = [exp.run_config(c) for c in range(len(exp.configs))]
    assert {(c.rtt_us, c.protocol) for c in cfgs} == {(r * 1000, p) for r in (20, 100, 200) for p in ("h1", "h2")}
    assert {c.client for c in cfgs} == {"chromium"}
    assert {(c.rate_bps, c.rate_up_bps) for c in cfgs} == {(20_000_000, 5_000_000)}
    assert set(exp.tfo_modes) == {False, True}
