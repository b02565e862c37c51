"""`pltlab compare DIR_A DIR_B`: rows matched across two results folders, the difference with its
interval (none where n < 5), the knob compared found from the folders, one-line errors."""

import json
import os

import pytest

from pltlab.errors import PltError
from pltlab.experiments.results import Results
from pltlab.report import compare_dirs as cmp
from pltlab.report import headline
from tests.conftest import pltlab_cmd
from tests.test_report import _render, _run


def _folder(d, icw, plts, pages=("a",)):
    """A results folder at initcwnd ``icw``: plts[(page, rtt, tfo)] -> PLTs of its repetitions."""
    d.mkdir()
    res = Results(str(d))
    res.set_meta(name=d.name)
    for (page, rtt, tfo), v in plts.items():
        if page not in pages:
            continue
        for rep, p in enumerate(v, 1):
            r = _run(page, rtt, tfo, rep, p)
            r["icw"] = icw
            res.add_run(r, [])
    res.close()
    return str(d)


A = {
    ("a", 20, False): [100, 102, 98, 101, 99],
    ("a", 20, True): [80, 82, 78, 81, 79],
    ("b", 20, False): [50, 52, 48],
}
B = {
    ("a", 20, False): [120, 122, 118, 121, 119],
    ("a", 20, True): [70, 72, 68, 71, 69],
    ("b", 20, False): [40, 40, 40],
}


def test_compare_two_initcwnd_folders(tmp_path):
    res = cmp.compare(_folder(tmp_path / "A", 10, A, ("a", "b")), _folder(tmp_path / "B", 3, B, ("a", "b")))
    assert res["compared"] == ["icw"] and res["context"] == []
    assert (res["a"]["label"], res["b"]["label"]) == ("initcwnd 10", "initcwnd 3")
    by = {(r["page"], r["tfo"]): r for r in res["rows"]}
    off = by[("a", False)]
    assert off["diff_ms"] == pytest.approx(20) and off["change"] == pytest.approx(0.2)
    lo, hi = off["ci"]
    assert 18 < lo < 20 < hi < 22
    assert by[("a", True)]["diff_ms"] == pytest.approx(-10)
    few = by[("b", False)]
    assert few["diff_ms"] == pytest.approx(-10) and few["ci"] is None and res["few"] == [few]
    rows = cmp.table_rows(res)
    assert rows[0][:3] == ["a", "20", "off"] and rows[0][6] == "+20.0" and rows[0][8] == "+20.0"
    assert rows[-1][7] == headline.NO_CI
    assert any("fewer than 5 valid loads" in n for n in cmp.notes(res))


def test_compare_reads_an_older_database_as_migrated(tmp_path):
    """A folder written before a knob existed (no keep-alive, loss-burst columns) compares with a
    new one as its runs ran (kept alive, random loss), not as a difference "None vs on"."""
    import sqlite3

    a = _folder(tmp_path / "A", 10, A, ("a", "b"))
    db = sqlite3.connect(os.path.join(a, "results.sqlite"))
    db.execute("ALTER TABLE runs DROP COLUMN keepalive")
    db.execute("ALTER TABLE runs DROP COLUMN loss_burst")
    db.commit()
    db.close()
    b = tmp_path / "B"
    _folder(b, 3, B, ("a", "b"))
    db = sqlite3.connect(os.path.join(b, "results.sqlite"))
    db.execute("UPDATE runs SET keepalive = 'on', loss_burst = 1.0")
    db.commit()
    db.close()
    res = cmp.compare(a, str(b))
    assert res["compared"] == ["icw"] and res["context"] == []
    assert (res["a"]["label"], res["b"]["label"]) == ("initcwnd 10", "initcwnd 3")
    db = sqlite3.connect(os.path.join(b, "results.sqlite"))
    db.execute("UPDATE runs SET keepalive = 'off'")
    db.commit()
    db.close()
    with pytest.raises(PltError, match="folders differ in"):
        cmp.compare(a, str(b), by="icw")


def test_compare_pages_in_one_folder_only_and_mismatches(tmp_path):
    a = _folder(tmp_path / "A", 10, A, ("a", "b"))
    b = _folder(tmp_path / "B", 10, B, ("a",))
    res = cmp.compare(a, b)
    assert res["compared"] == [] and res["only_a"] == ["b @ 20 ms, TFO off"] and res["only_b"] == []
    assert "Only in A (not compared): b @ 20 ms, TFO off" in cmp.notes(res)
    assert any(n.startswith("The folders share every knob") for n in cmp.notes(res))
    c = _folder(tmp_path / "C", 10, {("z", 20, False): [1, 2]}, ("z",))
    with pytest.raises(PltError, match="no page x RTT x TFO x configuration measured in both"):
        cmp.compare(a, c)
    # a compared knob that varies inside a folder: the rows could not be matched
    mixed = tmp_path / "M"
    _folder(mixed, 3, B, ("a",))
    res_m = Results(str(mixed))
    r = _run("a", 20, False, 9, 120)
    r["icw"] = 20
    res_m.add_run(r, [])
    res_m.close()
    with pytest.raises(PltError, match=r"M: icw takes several values \(initcwnd 20, initcwnd 3\)"):
        cmp.compare(a, str(mixed))


def test_compare_cli_table_json_and_html(tmp_path):
    a = _folder(tmp_path / "A", 10, A, ("a", "b"))
    b = _folder(tmp_path / "B", 3, B, ("a", "b"))
    cp = pltlab_cmd("compare", a, b, "--html", str(tmp_path / "c.html"), env={**os.environ, "COLUMNS": "160"})
    assert cp.returncode == 0, cp.stderr
    assert "initcwnd 10 (A) vs initcwnd 3 (B)" in cp.stdout and "+20.0" in cp.stdout and "n < 5: no CI" in cp.stdout
    doc = json.loads(pltlab_cmd("compare", a, b, "--json").stdout)
    assert doc["compared"] == ["icw"] and len(doc["rows"]) == 3 and doc["min_n_for_ci"] == 5
    r = _render(tmp_path / "c.html")
    assert not r["errors"] and r["layout"]["scroll"] <= 1280
    assert "B − A (ms)" in r["text"] and "fewer than 5 valid loads" in r["text"]
    cp = pltlab_cmd("compare", a, str(tmp_path / "none"))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "results.sqlite" in cp.stderr
