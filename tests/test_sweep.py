"""`pltlab sweep`: experiment files, interleaved order, SQLite results, resume after SIGKILL."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.errors import PltError
from pltlab.experiments import spec, sweep
from tests.conftest import pltlab_cmd


def _pages(d) -> list[str]:
    out = []
    for name, n, origins in (("alpha", 5, 2), ("beta", 4, 1)):
        p = os.path.join(d, f"{name}.har")
        write_page(generate(objects=n, total_bytes=n * 3000, origins=origins, depth=2, seed=len(name), domain=name), p)
        out.append(p)
    return out


def _exp(d, reps=2, extra="") -> str:
    _pages(d)
    path = os.path.join(d, "exp.toml")
    with open(path, "w") as f:
        f.write(
            f'name = "two"\npages = ["alpha.har", "beta.har"]\nrtt = ["10ms", "30ms"]\n'
            f'tfo = ["off", "on"]\nrepetitions = {reps}\nseed = 7\n{extra}'
        )
    return path


def _runs(out) -> list[dict]:
    db = sqlite3.connect(os.path.join(out, "results.sqlite"))
    cur = db.execute("SELECT * FROM runs ORDER BY id")
    names = [d[0] for d in cur.description]
    rows = [dict(zip(names, r)) for r in cur]
    db.close()
    return rows


def _runs_so_far(out) -> list[dict]:
    """Runs of a sweep still starting: the database may not exist or have its schema yet."""
    try:
        return _runs(out) if (out / "results.sqlite").exists() else []
    except sqlite3.OperationalError:
        return []


@pytest.mark.root
def test_two_page_two_rtt_sweep_end_to_end(tmp_path):
    path = _exp(tmp_path)
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(path), "-o", str(out), timeout=300)
    assert cp.returncode == 0, cp.stderr
    assert "Experiment 1 alpha @ 10ms delay" in cp.stderr and "Fetching beta took" in cp.stderr
    runs = _runs(out)
    assert len(runs) == 2 * 2 * 2 * 2 and len({r["run_key"] for r in runs}) == 16
    assert all(r["status"] == "ok" and r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    for r in runs:  # parameters, counters, emulator lateness and versions are recorded
        assert r["rtt_ms"] in (10, 30) and r["cc"] == "cubic" and r["pltlab_version"] and r["kernel"]
        assert r["lateness_p99_us"] is not None and r["dp_version"]
        assert (r["tfo_active"] > 0) == bool(r["tfo"]) and json.loads(r["tfo_counters"])["client"]
    # TFO saves the handshake RTT of the first connection (one RTT) on these chains.
    for page in ("alpha", "beta"):
        for rtt in (10, 30):
            off = [r["plt_ms"] for r in runs if (r["page"], r["rtt_ms"], r["tfo"]) == (page, rtt, 0)]
            on = [r["plt_ms"] for r in runs if (r["page"], r["rtt_ms"], r["tfo"]) == (page, rtt, 1)]
            assert sum(off) / len(off) - sum(on) / len(on) > 0.5 * rtt
    # interleaved: on/off adjacent per block, both orders used, repetitions not run in blocks
    seqs = sorted(runs, key=lambda r: r["seq"])
    pairs = [(a, b) for a, b in zip(seqs[::2], seqs[1::2])]
    assert all(a["config_key"] == b["config_key"] and a["page"] == b["page"] and a["tfo"] != b["tfo"] for a, b in pairs)
    assert {a["tfo"] for a, _ in pairs} == {0, 1}
    db = sqlite3.connect(out / "results.sqlite")
    n_req = db.execute("SELECT COUNT(*) FROM requests").fetchone()[0]
    assert n_req == sum(r["objects"] for r in runs)
    import pandas as pd

    for t in ("runs", "requests"):
        assert len(pd.read_parquet(out / f"{t}.parquet")) == len(pd.read_csv(out / f"{t}.csv"))
    assert (out / "report.html").is_file() and (out / "table.md").is_file()
    # a second sweep into the same folder without --resume is refused, results untouched
    before = (out / "results.sqlite").stat().st_mtime_ns
    cp = pltlab_cmd("sweep", str(path), "-o", str(out))
    assert cp.returncode != 0 and "--resume" in cp.stderr and cp.stderr.strip().count("\n") == 0
    assert (out / "results.sqlite").stat().st_mtime_ns == before
    # --resume of a finished sweep runs nothing more
    cp = pltlab_cmd("sweep", str(path), "-o", str(out), "--resume", "--no-report")
    assert cp.returncode == 0, cp.stderr
    assert len(_runs(out)) == 16


@pytest.mark.root
def test_resume_after_sigkill_loses_and_duplicates_nothing(tmp_path):
    path = _exp(tmp_path, reps=3)
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", "sweep", str(path), "-o", str(out), "--no-report"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.time() + 120
    try:
        while time.time() < deadline:  # kill once a few runs are in, mid-sweep
            if len(_runs_so_far(out)) >= 5:
                break
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    n_killed = len(_runs(out))
    assert 5 <= n_killed < 24
    cp = pltlab_cmd("sweep", str(path), "-o", str(out), "--resume", "--no-report", timeout=300)
    assert cp.returncode == 0, cp.stderr
    runs = _runs(out)
    keys = [r["run_key"] for r in runs]
    assert len(runs) == 24 and len(set(keys)) == 24  # 2 pages x 2 RTT x 2 TFO x 3 reps
    assert all(r["status"] == "ok" for r in runs)
    assert set(keys) == {it.key for it in sweep.schedule(spec.load(str(path)))}
    # the killed sweep's namespaces were removed by the resume (the leak fixture checks the rest)
    db = sqlite3.connect(out / "results.sqlite")
    assert db.execute("SELECT COUNT(*) FROM runners WHERE closed IS NULL").fetchone()[0] == 0


@pytest.mark.root
def test_failed_run_is_recorded_and_retried_once(tmp_path, monkeypatch):
    from pltlab.run import runner

    path = _exp(tmp_path, reps=1, extra="")
    exp = spec.load(path)
    exp.pages, exp.configs = exp.pages[:1], exp.configs[:1]
    calls = {"n": 0}
    real = runner.PageRunner.load

    def flaky(self, tfo, rep):
        calls["n"] += 1
        if calls["n"] == 1:
            raise PltError("page load failed: injected")
        return real(self, tfo, rep)

    monkeypatch.setattr(runner.PageRunner, "load", flaky)
    res = sweep.run(exp, str(tmp_path / "o"))
    runs = _runs(tmp_path / "o")
    assert res["runs"] == 2 and res["failed"] == 0
    failed = [r for r in runs if r["status"] == "failed"]
    assert len(failed) == 1 and failed[0]["attempt"] == 1 and "injected" in failed[0]["failure_reason"]
    retried = [r for r in runs if r["run_key"] == failed[0]["run_key"] and r["status"] == "ok"]
    assert len(retried) == 1 and retried[0]["attempt"] == 2


def test_order_is_seeded_balanced_and_stable(tmp_path):
    exp = spec.load(_exp(tmp_path, reps=4))
    a, b = sweep.schedule(exp), sweep.schedule(exp)
    assert [i.key for i in a] == [i.key for i in b] and len({i.key for i in a}) == exp.n_runs == 32
    for p in range(2):
        for c in range(2):
            firsts = [i.tfo for i in a if (i.page, i.config) == (p, c)][::2]
            assert firsts.count(True) == firsts.count(False) == 2  # on/off alternate over reps
    exp.seed = 8
    assert [i.key for i in sweep.schedule(exp)] != [i.key for i in a]


@pytest.mark.parametrize(
    "body,key",
    [
        ('pages = ["amazon"]\nrtt = ["10 parsecs"]\n', "rtt"),
        ('pages = ["amazon"]\nrate = "fast"\n', "rate"),
        ('pages = ["amazon"]\ntfo = ["maybe"]\n', "tfo"),
        ('pages = ["amazon"]\ninitcwnd = [0]\n', "initcwnd"),
        ('pages = ["amazon"]\ncc = ["vegas"]\n', "cc"),
        ('pages = ["amazon"]\nclient = ["lynx"]\n', "client"),
        ('pages = ["amazon"]\nwarmup = ["tepid"]\n', "warmup"),
        ('pages = ["amazon"]\nrepetitions = 0\n', "repetitions"),
        ('pages = ["amazon"]\nloss = ["200%"]\n', "loss"),
        ('pages = ["amazon"]\norigin_rtt = [{"nohost.example" = "5ms"}]\n', "origin_rtt"),
        ('pages = ["nosuchpage"]\n', "pages"),
        ('rtt = ["10ms"]\n', "pages"),
        ('pages = ["amazon"]\nrtts = ["10ms"]\n', "rtts"),
        ('pages = ["amazon"]\nclient_rmem = "1 lightyear"\n', "client_rmem"),
        ('pages = ["amazon"]\nclient_rmem = "1GiB"\n', "client_rmem"),
        ('pages = ["amazon"]\nmodel = "firefox"\n', "model"),
        ('pages = ["amazon"]\nschemes = "gopher"\n', "schemes"),
        ('pages = ["amazon"]\ncalibrated = "yes"\n', "calibrated"),
    ],
)
def test_malformed_experiment_file_is_one_error_naming_the_key(tmp_path, body, key):
    path = tmp_path / "exp.toml"
    path.write_text(body)
    out = tmp_path / "o"
    cp = pltlab_cmd("sweep", str(path), "-o", str(out))
    assert cp.returncode != 0
    assert cp.stderr.strip().count("\n") == 0, cp.stderr
    assert cp.stderr.startswith(f"pltlab: error: {path}: key '{key}': "), cp.stderr
    assert not out.exists()  # nothing half-written


def test_invalid_toml_is_one_line(tmp_path):
    path = tmp_path / "exp.toml"
    path.write_text('pages = ["amazon"\n')
    cp = pltlab_cmd("sweep", str(path))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "not valid TOML" in cp.stderr


def test_spec_cross_product_and_overrides(tmp_path):
    _pages(tmp_path)
    doc = {
        "pages": ["alpha.har"],
        "rtt": ["10ms", "20ms"],
        "rate": ["4mbit", "unlimited"],
        "initcwnd": ["default", 10],
        "origin_rtt": [{}, {"o1.alpha.test": "5ms/1%"}],
        "tfo": "on",
    }
    exp = spec.from_dict(doc, "x.toml", str(tmp_path))
    assert len(exp.configs) == 16 and exp.tfo_modes == (True,) and exp.n_runs == 16 * 3
    assert {c.overrides for c in exp.configs} == {(), (("o1.alpha.test", 5000, 0.01),)}
    assert exp.pages[0].label == "alpha"
    assert exp.client_rmem == 1 << 20  # pltlab's default: 1 MiB
    rm = spec.from_dict({**doc, "client_rmem": "2MiB"}, "x.toml", str(tmp_path))
    assert rm.client_rmem == 2 << 20 and rm.digest() != exp.digest()
    kern = spec.from_dict({**doc, "client_rmem": "kernel"}, "x.toml", str(tmp_path))
    assert kern.client_rmem is None and kern.digest() not in (exp.digest(), rm.digest())
    assert spec.from_dict({**doc, "client_rmem": "default"}, "x.toml", str(tmp_path)).digest() == exp.digest()
    # the built-in loader's model and schemes: passed to every run; defaults keep the digest
    assert (
        exp.settings == {}
        and spec.from_dict({**doc, "model": "archive"}, "x.toml", str(tmp_path)).digest() == exp.digest()
    )
    ch = spec.from_dict(
        {**doc, "model": "chromium", "schemes": "chromium", "calibrated": False}, "x.toml", str(tmp_path)
    )
    assert ch.settings == {"model": "chromium", "schemes": "chromium", "calibrated": False}
    assert ch.digest() != exp.digest()
    from pltlab.experiments.sweep import Sweep

    cfg = Sweep(ch, str(tmp_path / "o"))._cfg(0)
    assert (cfg.model, cfg.schemes, cfg.calibrated) == ("chromium", "chromium", False)


def test_results_database_of_an_earlier_version_gains_the_new_columns(tmp_path):
    """Resuming a sweep whose database predates a column: the column is added, rows kept."""
    import sqlite3

    from pltlab.experiments.results import Results

    db = sqlite3.connect(tmp_path / "results.sqlite")
    db.execute(
        "CREATE TABLE runs (id INTEGER PRIMARY KEY, run_key TEXT NOT NULL, attempt INTEGER NOT NULL, "
        "status TEXT NOT NULL, plt_ms REAL, UNIQUE(run_key, attempt))"
    )
    db.execute("INSERT INTO runs (run_key, attempt, status, plt_ms) VALUES ('k', 1, 'ok', 12.5)")
    db.commit()
    db.close()
    res = Results(str(tmp_path))
    res.add_run(
        {
            "run_key": "k2",
            "attempt": 1,
            "status": "ok",
            "plt_ms": 20.0,
            "tail_ms": 3.0,
            "network_plt_ms": 17.0,
            "link_aids_missing": "idle_poll",
        },
        [],
    )
    rows = res.rows()
    assert [(r["run_key"], r["plt_ms"], r["tail_ms"]) for r in rows] == [("k", 12.5, None), ("k2", 20.0, 3.0)]
    assert [r["link_aids_missing"] for r in rows] == [None, "idle_poll"]
