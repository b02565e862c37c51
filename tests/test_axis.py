"""Any knob is an axis (issue 25, 1): an experiment compares TFO or any list knob (`compare`), the
engine interleaves that knob's values, runners take ``load(point, rep)``, run keys and digests of
TFO experiments stay as every results folder has them, and reports/explain/compare pair any two
values of any knob (`--by`)."""

import json
import os
import sqlite3

import pytest

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.errors import PltError
from pltlab.experiments import spec, sweep
from pltlab.experiments.results import Results
from pltlab.report import build
from pltlab.report import compare_dirs as cmp
from pltlab.run.point import Point
from tests.conftest import pltlab_cmd
from tests.fakes import FakeRunner


def _page(d, name="alpha", scheme="http") -> str:
    p = os.path.join(d, f"{name}.har")
    page = generate(objects=3, total_bytes=9000, origins=1, depth=1, seed=5, scheme=scheme, domain=name)
    write_page(page, p)
    return p


def _exp(d, body: str) -> spec.Experiment:
    _page(d)
    path = os.path.join(d, "exp.toml")
    with open(path, "w") as f:
        f.write(f'name = "axis"\npages = ["alpha.har"]\n{body}')
    return spec.load(path)


# ---- the schedule -------------------------------------------------------------------------
def test_a_protocol_axis_runs_its_values_back_to_back_and_flips_their_order(tmp_path):
    exp = _exp(
        tmp_path,
        'rtt = ["10ms", "30ms"]\nprotocol = ["h1", "h2"]\ntfo = "off"\ncompare = "protocol"\nrepetitions = 6\n',
    )
    assert exp.axis() == "protocol" and exp.n_runs == 2 * 2 * 6
    items = sweep.schedule(exp)
    assert len({i.key for i in items}) == len(items) == exp.n_runs
    assert all(i.point == Point(tfo=False) for i in items)
    protocol = lambda i: exp.configs[i.config].protocol  # noqa: E731
    rtt = lambda i: exp.configs[i.config].rtt_us  # noqa: E731
    firsts: dict[int, list[str]] = {}
    for a, b in zip(items[::2], items[1::2]):  # each block: h1 and h2 of one RTT, back to back
        assert a.rep == b.rep and rtt(a) == rtt(b) and {protocol(a), protocol(b)} == {"h1", "h2"}
        firsts.setdefault(rtt(a), []).append(protocol(a))
    for order in firsts.values():  # the first side alternates from one repetition to the next
        assert all(x != y for x, y in zip(order, order[1:])) and order.count("h1") == order.count("h2") == 3
    # the keys carry the protocol in their configuration part: no two collide, tfo=0 as ever
    assert {i.key.rsplit("|", 2)[1] for i in items} == {"tfo=0"}
    assert sum('"protocol":"h2"' in i.key for i in items) == exp.n_runs // 2


def test_a_protocol_axis_with_both_tfo_modes_keeps_each_block_together(tmp_path):
    exp = _exp(tmp_path, 'protocol = ["h1", "h2"]\ntfo = ["off", "on"]\ncompare = "protocol"\nrepetitions = 2\n')
    items = sweep.schedule(exp)
    assert len(items) == exp.n_runs == 8
    for rep in (1, 2):
        block = [(exp.configs[i.config].protocol, i.tfo) for i in items if i.rep == rep]
        assert [p for p, _ in block][:2] == [block[0][0]] * 2 and len({p for p, _ in block[2:]}) == 1
    first = [[exp.configs[i.config].protocol for i in items if i.rep == r][0] for r in (1, 2)]
    assert first[0] != first[1]


def test_without_compare_a_tfo_pair_is_the_axis_and_one_mode_is_none(tmp_path):
    assert _exp(tmp_path, 'tfo = ["off", "on"]\n').axis() == "tfo"
    assert _exp(tmp_path, 'tfo = "off"\nprotocol = ["h1", "h2"]\n').axis() is None


@pytest.mark.parametrize(
    "body,msg",
    [
        ('compare = "protocol"\n', "key 'compare': protocol lists one value"),
        ('compare = "color"\n', "key 'compare': 'color': not a knob to compare by"),
        ('compare = "seed"\n', "key 'compare': 'seed': not a knob to compare by"),
        ('tfo = "off"\ncompare = "tfo"\n', "key 'compare': tfo lists one value"),
    ],
)
def test_a_bad_compare_key_is_one_line_naming_it(tmp_path, body, msg):
    with pytest.raises(PltError) as e:
        _exp(tmp_path, body)
    assert msg in str(e.value) and "\n" not in str(e.value)


def test_compare_other_than_the_default_changes_the_digest_the_default_does_not(tmp_path):
    base = 'protocol = ["h1", "h2"]\ntfo = ["off", "on"]\n'
    plain = _exp(tmp_path, base).digest()
    assert _exp(tmp_path, base + 'compare = "tfo"\n').digest() == plain
    assert _exp(tmp_path, base + 'compare = "protocol"\n').digest() != plain


# ---- run keys and resume of folders made before -------------------------------------------
OLD_TOML = (
    'name = "old"\npages = ["alpha.har"]\nrtt = ["10ms", "30ms"]\ntfo = ["off", "on"]\nrepetitions = 2\nseed = 7\n'
)
# written by the code of before the axis (commit 71d6314): the digest and the run keys in order
OLD_DIGEST = "b490f5da31ebfd97"
_C10 = '["10000us",null,null,"0","1000",null,"cubic","builtin",true,[]]'
_C30 = '["30000us",null,null,"0","1000",null,"cubic","builtin",true,[]]'
OLD_KEYS = [
    f"alpha|http://www.alpha.test/|{_C30}|tfo=1|rep=1",
    f"alpha|http://www.alpha.test/|{_C30}|tfo=0|rep=1",
    f"alpha|http://www.alpha.test/|{_C10}|tfo=1|rep=1",
    f"alpha|http://www.alpha.test/|{_C10}|tfo=0|rep=1",
    f"alpha|http://www.alpha.test/|{_C10}|tfo=0|rep=2",
    f"alpha|http://www.alpha.test/|{_C10}|tfo=1|rep=2",
    f"alpha|http://www.alpha.test/|{_C30}|tfo=0|rep=2",
    f"alpha|http://www.alpha.test/|{_C30}|tfo=1|rep=2",
]


def _old_exp(d) -> spec.Experiment:
    _page(d)
    (d / "exp.toml").write_text(OLD_TOML)
    return spec.load(str(d / "exp.toml"))


def test_tfo_run_keys_digest_and_order_are_those_of_before(tmp_path):
    exp = _old_exp(tmp_path)
    assert exp.digest() == OLD_DIGEST
    assert [i.key for i in sweep.schedule(exp)] == OLD_KEYS


def _old_folder(out, keys: list[str]) -> None:
    """A results folder as the code of before wrote it: its meta (no `compare`) and one ok row per key."""
    os.makedirs(out, exist_ok=True)
    res = Results(str(out))
    res.set_meta(name="old", digest=OLD_DIGEST, experiment=OLD_TOML, environment={}, n_runs=8, pages=[])
    for seq, key in enumerate(keys):
        tfo, rep = int(key.split("|tfo=")[1][0]), int(key.rsplit("rep=", 1)[1])
        rtt = 10.0 if "10000us" in key else 30.0
        row = {"run_key": key, "attempt": 1, "status": "ok", "seq": seq, "page": "alpha", "rtt_ms": rtt}
        row |= {"config_key": key.split("|")[2], "tfo": tfo, "rep": rep, "valid": 1, "plt_ms": 100.0 - 10 * tfo + rep}
        res.add_run(row, [])
    res.close()


class NoLoads(FakeRunner):
    def load(self, point, rep):
        raise AssertionError("a resume of a complete folder loaded a page")


class Loads(FakeRunner):
    done: list = []

    def load(self, point, rep):
        Loads.done.append((self.cfg.rtt_us, point.tfo, rep))
        empty = {"client": {"TCPFastOpenActive": int(point.tfo)}, "server": {}}
        return {
            "plt_ms": 90.0,
            "valid": True,
            "invalid_reason": None,
            "not_found": 0,
            "tfo_counters": empty,
            "requests": [],
        }


def test_an_old_folder_resumes_without_running_anything(tmp_path, monkeypatch):
    exp = _old_exp(tmp_path)
    out = tmp_path / "old-out"
    _old_folder(out, OLD_KEYS)
    monkeypatch.setitem(sweep.kinds.KINDS, "page_load", NoLoads)
    monkeypatch.setattr(sweep, "export", lambda d: [])
    st = sweep.run(exp, str(out), resume=True)
    assert st["runs"] == st["failed"] == 0
    assert Results(str(out)).count() == 8


def test_an_old_half_done_folder_resumes_the_missing_runs_only(tmp_path, monkeypatch):
    exp = _old_exp(tmp_path)
    out = tmp_path / "old-out"
    _old_folder(out, OLD_KEYS[:5])
    Loads.done = []
    monkeypatch.setitem(sweep.kinds.KINDS, "page_load", Loads)
    monkeypatch.setattr(sweep, "export", lambda d: [])
    st = sweep.run(exp, str(out), resume=True)
    assert st["runs"] == 3 and sorted(Loads.done) == [(10000, True, 2), (30000, False, 2), (30000, True, 2)]
    db = sqlite3.connect(out / "results.sqlite")
    assert [r[0] for r in db.execute("SELECT run_key FROM runs ORDER BY id")] == OLD_KEYS
    db.close()


def test_an_old_folder_reports_by_tfo_as_before(tmp_path):
    _old_folder(tmp_path, OLD_KEYS)
    built = build(str(tmp_path))
    a = built["analysis"]
    assert a["by"] == "tfo" and a["labels"] == ("no TFO", "TFO")
    table = (tmp_path / "table.md").read_text()
    assert "| PLT: no TFO (ms) | PLT: TFO (ms) |" in table
    assert [r[2:4] for r in built["seeds"]] == [["102", "92"], ["102", "92"]]
    assert "TFO saves 10 ms" in (tmp_path / "report.html").read_text()


# ---- reports by any knob ---------------------------------------------------------------------
def _protocol_folder(out, n=6, protocols=("h1", "h2"), compare="protocol") -> None:
    """A results folder of an h1-vs-h2 sweep (two RTTs), built with the Results API: h2 is 40 ms faster."""
    os.makedirs(out, exist_ok=True)
    res = Results(str(out))
    res.set_meta(name="proto", digest="x", experiment="", environment={}, n_runs=0, pages=[], compare=compare)
    seq = 0
    for rtt in (20.0, 100.0):
        for rep in range(1, n + 1):
            for i, proto in enumerate(protocols):
                key = f"p|u|[{rtt},{json.dumps(proto)}]|tfo=0|rep={rep}"
                plt = 1000 + rtt - 40 * i + (rep * 7 + i * 3) % 11
                row = {"run_key": key, "attempt": 1, "status": "ok", "seq": seq, "page": "p", "rtt_ms": rtt}
                row |= {"config_key": key.split("|")[2], "protocol": proto, "tfo": 0, "rep": rep}
                res.add_run(row | {"valid": 1, "plt_ms": plt, "cc": "cubic", "client": "builtin"}, [])
                seq += 1
    res.close()


def test_report_by_protocol_pairs_h1_and_h2(tmp_path):
    _protocol_folder(tmp_path, compare=None)
    cp = pltlab_cmd("report", str(tmp_path), "--by", "protocol", "--json")
    assert cp.returncode == 0, cp.stderr
    data = json.loads(cp.stdout)
    assert data["by"] == "protocol"
    rows = data["plt"]
    assert [(r["rtt_ms"], r["base"]["value"], r["alt"]["value"]) for r in rows] == [(20, "h1", "h2"), (100, "h1", "h2")]
    for r in rows:
        assert r["base"]["n"] == r["alt"]["n"] == 6 and "tfo_off" not in r
        assert r["base"]["mean"] - r["alt"]["mean"] == pytest.approx(40, abs=1)
        lo, hi = r["improvement_ci95"]
        assert 0 < lo <= r["improvement"] <= hi
    assert data["tables"]["plt"]["headers"] == ["Page", "RTT(ms)", "PLT: h1 (ms)", "PLT: h2 (ms)", "Improv. (%)"]
    assert "protocol" in data["tables"]["stats"]["headers"] and "tfo" not in data["tables"]["stats"]["headers"]
    html = (tmp_path / "report.html").read_text()
    assert "p: h2 vs h1 saves 41 ms = 2.0 RTT at 20 ms RTT" in html
    assert "n (h1 / h2)" in html and "PLT: no TFO" not in html


def test_report_defaults_to_the_folders_own_axis_and_refuses_a_knob_of_one_value(tmp_path):
    _protocol_folder(tmp_path)
    assert build(str(tmp_path))["analysis"]["by"] == "protocol"
    for by, msg in (("tfo", "--by tfo: its valid loads have one value of it (TFO off)"), ("hue", "not a knob")):
        cp = pltlab_cmd("report", str(tmp_path), "--by", by)
        assert cp.returncode != 0 and msg in cp.stderr and len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_a_knob_of_three_values_pairs_each_with_its_baseline(tmp_path):
    _protocol_folder(tmp_path, protocols=("h2", "h1", "recorded"))
    a = build(str(tmp_path))["analysis"]
    assert a["baseline"] == "h1" and a["labels"] == ("protocol h1", "other")
    pairs = sorted({tuple(g["values"]) for g in a["rows"]})
    assert pairs == [("h1", "h2"), ("h1", "recorded")]
    assert {g["config"] for g in a["rows"]} == {"h2 vs h1", "recorded vs h1"}


def test_compare_one_folder_by_protocol(tmp_path):
    _protocol_folder(tmp_path)
    res = cmp.compare(str(tmp_path), by="protocol")
    assert res["compared"] == ["protocol"] and res["a"]["label"] == "protocol h1" and res["b"]["label"] == "protocol h2"
    assert [round(r["diff_ms"]) for r in res["rows"]] == [-41, -41]
    cp = pltlab_cmd("compare", str(tmp_path), "--by", "tfo")
    assert cp.returncode != 0 and "--by tfo: 1 value(s) of it (TFO off), not two" in cp.stderr


def test_compare_two_folders_by_tfo(tmp_path):
    _old_folder(tmp_path / "all", OLD_KEYS)
    for tfo in (0, 1):  # a folder of TFO off, one of TFO on
        _old_folder(tmp_path / f"t{tfo}", [k for k in OLD_KEYS if f"tfo={tfo}" in k])
    res = cmp.compare(str(tmp_path / "t0"), str(tmp_path / "t1"), by="tfo")
    assert res["compared"] == ["tfo"] and [r["tfo"] for r in res["rows"]] == [None, None]
    assert [r["diff_ms"] for r in res["rows"]] == [-10, -10]
    with pytest.raises(PltError, match="--by protocol: the sides do not differ in it"):
        cmp.compare(str(tmp_path / "t0"), str(tmp_path / "t1"), by="protocol")


# ---- a real sweep comparing protocols --------------------------------------------------------
@pytest.mark.root
def test_a_sweep_comparing_h1_with_h2_end_to_end(tmp_path):
    _page(tmp_path, scheme="https")
    (tmp_path / "exp.toml").write_text(
        'name = "h1h2"\npages = ["alpha.har"]\nrtt = "40ms"\nprotocol = ["h1", "h2"]\ntfo = "off"\n'
        'compare = "protocol"\nrepetitions = 2\nseed = 3\n'
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(tmp_path / "exp.toml"), "-o", str(out), "--json", timeout=600)
    assert cp.returncode == 0, cp.stderr[-2000:]
    data = json.loads(cp.stdout)
    assert data["runs"]["done"] == 4 and data["runs"]["invalid"] == 0
    assert "(protocol h1)" in cp.stderr and "(protocol h2)" in cp.stderr
    db = sqlite3.connect(out / "results.sqlite")
    runs = list(db.execute("SELECT protocol, rep, tfo FROM runs ORDER BY seq"))
    protos = {
        r[0]: {
            p
            for (p,) in db.execute(
                "SELECT DISTINCT r.protocol FROM requests r JOIN runs u ON u.id = r.run_id WHERE u.protocol = ?",
                (r[0],),
            )
        }
        for r in runs
    }
    db.close()
    assert [r[1] for r in runs] == [1, 1, 2, 2] and runs[0][0] != runs[1][0] and runs[0][0] != runs[2][0]
    assert protos == {"h1": {"http/1.1"}, "h2": {"h2"}}
    rep = data["report"]
    assert rep["by"] == "protocol" and rep["plt"][0]["base"]["value"] == "h1" and rep["plt"][0]["alt"]["n"] == 2
    assert "h2 vs h1" in (out / "report.html").read_text()
    ex = pltlab_cmd("explain", str(out), "--page", "alpha", "--rtt", "40ms", "--json")
    assert ex.returncode == 0, ex.stderr
    got = json.loads(ex.stdout)
    assert "(protocol h2) vs " in got["sentences"][0] and "(protocol h1)" in got["sentences"][0]


def test_rtt_is_no_axis_every_row_is_per_rtt(tmp_path):
    with pytest.raises(PltError, match="key 'compare': 'rtt': every row is per RTT already"):
        _exp(tmp_path, 'rtt = ["10ms", "20ms"]\ncompare = "rtt"\n')


def test_explain_by_protocol_names_the_loads_by_their_protocol(tmp_path):
    from pltlab.explain import loads

    _protocol_folder(tmp_path)
    alt, base = loads.median_pair(str(tmp_path), "p", "20ms", "protocol")
    db = sqlite3.connect(tmp_path / "results.sqlite")
    got = dict(db.execute("SELECT id, protocol FROM runs WHERE id IN (?, ?)", (alt, base)))
    db.close()
    assert got == {alt: "h2", base: "h1"}
    assert loads.default_by(str(tmp_path)) == "protocol"
    with pytest.raises(PltError, match="several configurations besides tls"):
        loads.median_pair(str(tmp_path), "p", "20ms", "tls")
