"""`pltlab reproduce handshakes`: the paired effects and the answer from hand-made loads (pure),
the study file and options, the experiments it builds, and (root, slow) a tiny study end to end."""

import json
import os

import pytest

from pltlab.errors import PltError
from pltlab.experiments.spec import load as load_experiment
from pltlab.studies import STUDIES
from pltlab.studies.handshakes import effects, parts, study_file
from tests.conftest import pltlab_cmd

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "handshakes.toml")


def load(page, rep, protocol, tls, tfo, plt, hs, valid=True, rtt=100.0, loss=0.0, client="builtin"):
    return {
        "id": hash((page, rep, protocol, tls, tfo, rtt, loss, client)) % 10**6,
        "folder": "f",
        "page": page,
        "client": client,
        "protocol": protocol,
        "tls": tls,
        "tfo": tfo,
        "rtt_ms": rtt,
        "loss": loss,
        "rep": rep,
        "plt_ms": plt,
        "valid": valid,
        "hs_rtts": hs,
    }


def _row(rows, effect, **ctx):
    (r,) = [r for r in rows if r["effect"] == effect and r["context"] == ctx]
    return r


# five (page, rep) pairs: TFO saves one RTT (100 ms) plus a little noise under full TLS and under
# 0-RTT; 0-RTT saves one more RTT; h3 with 0-RTT is within a few ms of h2 with TFO and 0-RTT
PAIRS = [("a", 1, 0), ("a", 2, 4), ("b", 1, -3), ("b", 2, 2), ("c", 1, 1)]


def study_loads():
    out = []
    for page, rep, e in PAIRS:
        out += [
            load(page, rep, "h2", "full", False, 1000 + e, 2.0),
            load(page, rep, "h2", "full", True, 900 + e + rep, 1.0),
            load(page, rep, "h2", "0rtt", False, 800 + e, 1.0),
            load(page, rep, "h2", "0rtt", True, 700 + e - rep, 0.0),
            load(page, rep, "h3", "0rtt", False, 700 + e + (1 if rep == 1 else -1) * 3, 0.0),
        ]
    return out


def test_each_effect_pairs_loads_that_differ_in_it_only():
    rows = effects.rows(study_loads())
    tfo_full = _row(rows, "tfo", protocol="h2", tls="full")
    # hand computed: saved = 100 - rep per pair (reps 1, 2, 1, 2, 1)
    assert tfo_full["n"] == 5 and tfo_full["saved_ms"] == pytest.approx((99 + 98 + 99 + 98 + 99) / 5)
    assert tfo_full["saved_rtts"] == pytest.approx(1.0)
    lo, hi = tfo_full["saved_ms_ci"]
    assert 98 <= lo <= tfo_full["saved_ms"] <= hi <= 99
    tfo_zero = _row(rows, "tfo", protocol="h2", tls="0rtt")
    assert tfo_zero["saved_ms"] == pytest.approx((101 + 102 + 101 + 102 + 101) / 5)
    zero = _row(rows, "0rtt", protocol="h2")  # TFO off on both sides
    assert zero["n"] == 5 and zero["saved_ms"] == pytest.approx(200) and zero["saved_rtts"] == pytest.approx(1.0)
    assert zero["saved_pct"] == pytest.approx(200 / 1000.8)
    quic = _row(rows, "quic-vs-tfo", tls="0rtt")  # h2 + TFO (700 + e - rep) against h3 (700 + e +- 3)
    assert quic["saved_ms"] == pytest.approx((-4 + 1 - 4 + 1 - 4) / 5)
    # nothing measured h1, resumption or h3 full: no rows made up
    assert not [r for r in rows if r["effect"] in ("h2", "resume")]
    assert [r["context"] for r in rows if r["effect"] == "quic"] == [{"tls": "0rtt"}]


def test_invalid_loads_are_paired_with_nothing():
    loads = study_loads()
    loads[1]["valid"] = False  # page a rep 1: h2 full with TFO
    rows = effects.rows(loads)
    r = _row(rows, "tfo", protocol="h2", tls="full")
    assert r["n"] == 4 and r["saved_ms"] == pytest.approx((98 + 99 + 98 + 99) / 4)
    assert not effects.shown(r) and effects.verdict(r) == "saved?"  # 4 pairs: below MIN_N, no interval


def test_rows_are_split_by_rtt_loss_and_loader():
    loads = study_loads() + [
        load("a", 1, "h2", "full", False, 500, 2, rtt=20.0),
        load("a", 1, "h2", "full", True, 480, 1, rtt=20.0),
        load("a", 1, "h2", "full", False, 1200, 2, client="chromium"),
        load("a", 1, "h2", "full", True, 1190, 2, client="chromium"),
    ]
    rs = [r for r in effects.rows(loads) if r["effect"] == "tfo" and r["context"]["tls"] == "full"]
    assert {(r["client"], r["rtt_ms"], r["n"]) for r in rs} == {
        ("builtin", 100.0, 5),
        ("builtin", 20.0, 1),
        ("chromium", 100.0, 1),
    }
    assert {r["saved_ms"] for r in rs if r["n"] == 1} == {20, 10}


def test_the_answer_follows_the_numbers():
    text = effects.answer(effects.rows(study_loads()))
    assert "With 0-RTT on, TFO still saved 101 ms [101, 102], 1.0 handshake round trips at 100 ms" in text
    assert "So TFO still adds 1.0 handshake round trips per load on the critical path" in text
    assert "QUIC with 0-RTT against h2 with TFO and 0-RTT: " in text
    # TFO under 0-RTT changed nothing: the same loads, its side made equal to the other's
    flat = []
    for x in study_loads():
        if x["tls"] == "0rtt" and x["protocol"] == "h2" and x["tfo"]:
            x = {**x, "plt_ms": x["plt_ms"] + 100 + (5 if x["rep"] == 1 else -7), "hs_rtts": 1.0}
        flat.append(x)
    text = effects.answer(effects.rows(flat))
    assert "With 0-RTT on, TFO saved nothing measurable" in text and "TFO still saved" not in text
    assert "adds nothing measurable once 0-RTT is used" in text
    assert "No TFO comparison" in effects.answer([], "builtin")


def test_example_file_is_the_default_study():
    assert study_file.resolve(study_file.load(EXAMPLE)) == study_file.defaults()


def test_size_of_the_full_and_quick_runs():
    full = study_file.defaults()
    # 18 pages x 3 RTTs x 2 losses x 3 reps x (h1, h2: 3 TLS x 2 TFO + h3: 3 TLS = 15)
    # Chromium: 11 https pages x 3 RTTs x 1 loss x 3 reps x (h2: 3 x 2 + h3: full, 0rtt = 8)
    assert parts.n_loads(full) == {"builtin": 4860, "chromium": 792}
    quick = study_file.defaults(quick=True)
    assert parts.n_loads(quick) == {"builtin": 3 * 1 * 1 * 2 * 15, "chromium": 1 * 1 * 1 * 2 * 2}
    assert parts.estimate_s(quick) < 600  # --quick: under 10 minutes by the study's own estimate
    assert "4860 builtin + 792 chromium loads" in STUDIES["handshakes"].HELP


def test_experiments_keep_tfo_off_quic_and_chromium_on_https():
    exps = dict(parts.experiments(study_file.defaults()))
    assert set(exps) == {"tcp", "quic", "chromium-tcp", "chromium-quic"}
    assert {c.protocol for c in exps["tcp"].configs} == {"h1", "h2"} and exps["tcp"].tfo_modes == (False, True)
    assert {c.protocol for c in exps["quic"].configs} == {"h3"} and exps["quic"].tfo_modes == (False,)
    assert exps["quic"].axis() == "tls" and exps["tcp"].axis() == "tfo"
    assert {c.tls for c in exps["chromium-quic"].configs} == {"full", "0rtt"}
    assert all(e.page.url.startswith("https://") for e in exps["chromium-tcp"].pages)
    assert exps["tcp"].settings == {"schemes": "https"} and exps["chromium-tcp"].settings == {}
    assert sum(e.n_runs for e in exps.values()) == 4860 + 792


def test_each_experiment_file_is_its_experiment(tmp_path):
    """The experiment file a part records (the report shows it) runs the same loads with `pltlab
    sweep`: the same digest, hence the same run keys."""
    for sub, exp in parts.experiments(study_file.defaults(quick=True)):
        f = tmp_path / f"{sub}.toml"
        f.write_text(exp.source)
        again = load_experiment(str(f))
        assert (again.digest(), again.n_runs, again.axis()) == (exp.digest(), exp.n_runs, exp.axis()), sub


@pytest.mark.parametrize(
    "text,msg",
    [
        ("[handshakes]\nrtt = ['fast']\n", "key 'handshakes.rtt'"),
        ("[handshakes]\npages = ['nosuchpage']\n", "unknown bundled page 'nosuchpage'"),
        ("[handshakes]\nprotocol = ['recorded']\n", "unknown protocol"),
        ("[handshakes.chromium]\nspeed = 1\n", "key 'handshakes.chromium.speed': unknown key"),
        ("[other]\n", "key 'other': unknown key"),
    ],
)
def test_bad_file_is_one_clear_error(tmp_path, text, msg):
    f = tmp_path / "h.toml"
    f.write_text(text)
    with pytest.raises(PltError) as e:
        study_file.load(str(f))
    assert msg in str(e.value) and str(f) in str(e.value) and "\n" not in str(e.value)


def test_flags_override_the_file(tmp_path):
    f = tmp_path / "h.toml"
    f.write_text('[handshakes]\nquick = true\nloss = ["1%"]\n')
    p = study_file.options({"config": str(f), "rtt": [20.0, 200.0], "client": ["builtin"]})
    assert p.quick and p.rtts == (20, 200) and p.losses == (0.01,) and p.clients == ("builtin",)
    assert p.pages == study_file.QUICK_VALUES["pages"]
    # Chromium sits out where no page is one of its own (recorded over https); alone, it is refused
    p = study_file.options({"page": ["wikipedia", "github"]})
    assert study_file.points(p, "chromium")[0] == ("github",)
    assert [sub for sub, _ in parts.experiments(study_file.options({"page": ["wikipedia"]}))] == ["tcp", "quic"]
    with pytest.raises(PltError, match="no page to load: Chromium takes"):
        study_file.options({"page": ["wikipedia"], "client": ["chromium"]})


TINY = '[handshakes]\nprotocol = ["h2", "h3"]\ntls = ["full", "0rtt"]\n'


@pytest.mark.root  # 12 loads, resumed once: ~25-40 s: CI's test-slow step
@pytest.mark.slow
def test_reproduce_handshakes_tiny_end_to_end(tmp_path):
    conf = tmp_path / "tiny.toml"
    conf.write_text(TINY)
    out = tmp_path / "o"
    args = ["reproduce", "handshakes", "-c", str(conf), "--page", "filamentgroup", "--page", "github"]
    args += ["--rtt", "100", "--loss", "0", "--reps", "1", "--client", "builtin", "--json", "-o", str(out)]
    cp = pltlab_cmd(*args, timeout=600)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    assert res["invalid_loads"] == 0
    # 2 pages x (h2: 2 TLS x 2 TFO + h3: 2 TLS) = 12 loads -> TFO pairs under full and 0-RTT, 2 each
    tfo = [r for r in res["rows"] if r["effect"] == "tfo"]
    assert sorted(r["context"]["tls"] for r in tfo) == ["0rtt", "full"] and {r["n"] for r in tfo} == {2}
    full = next(r for r in tfo if r["context"]["tls"] == "full")
    assert 0.5 <= full["saved_rtts"] <= 4  # TFO took a TCP handshake off the critical path
    assert {r["effect"] for r in res["rows"]} == {"tfo", "0rtt", "quic", "quic-vs-tfo"}
    assert "With 0-RTT on, TFO" in res["answer"]["builtin"]
    assert len(res["pages"]) == 2 and all("TFO on vs off (run #" in s for s in res["pages"])
    html = (out / "report.html").read_text()
    assert "What does TFO still add once TLS 1.3 0-RTT and QUIC exist?" in html
    assert 'alt="saved_ms.png"' in html and "data:image/png;base64," in html  # the figure inlined
    assert (out / "tables.md").is_file() and (out / "saved_ms.png").is_file()
    assert json.loads((out / "study.json").read_text())["study"] == "handshakes"
    cp = pltlab_cmd(*args, "--resume", timeout=300)  # resumed: nothing more to run, the same rows
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["rows"] == res["rows"]
