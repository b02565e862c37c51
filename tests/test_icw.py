"""ICW study (`reproduce icw`): the Yahoo-like page, PLT from a packet trace, the study as
experiments of the sweep engine (kinds traced_load, page_load, flows), its analysis and checks,
and resume after SIGKILL."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest
import typer
from typer.testing import CliRunner

from pltlab.cli import studies as study_commands
from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.net import names
from pltlab.report import study_report
from pltlab.run import kinds
from pltlab.run.pcaptrace import (
    ACK,
    FIN,
    SYN,
    ipv4_tcp,
    plt_from_pcap,
    read_pcap,
    trace_plt,
    write_pcap,
)
from pltlab.run.point import Point
from pltlab.studies.icw import check_icw, study_file, yahoo_page
from pltlab.studies.icw.analysis import checks
from tests.fakes import FakeRunner

C, S1, S2 = "198.18.0.1", "198.19.0.1", "198.19.0.2"
PSH = 0x08


def _app() -> typer.Typer:
    app = typer.Typer()
    study_commands.add(app, "icw")  # as `reproduce` makes it from the study's PARAMS

    @app.command()
    def other():  # a second command, so `icw` stays a subcommand (as under `reproduce`)
        pass

    return app


def _db_runs(path) -> list[dict]:
    db = sqlite3.connect(path)
    cur = db.execute("SELECT * FROM runs ORDER BY id")
    names_ = [d[0] for d in cur.description]
    rows = [dict(zip(names_, r)) for r in cur]
    db.close()
    return rows


# ---- the page ---------------------------------------------------------------------------
def test_yahoo_page_shape():
    p = yahoo_page()
    assert len(p.objects) == 30
    hosts = [o.host for o in p.objects]
    assert len(set(hosts)) == 2 and hosts.count(hosts[0]) == 15
    assert all(o.initiator == p.url for o in p.objects[1:])  # all discovered from the HTML
    assert 300_000 < sum(o.size for o in p.objects) < 450_000
    assert p.extras["generator"]["name"] == "icw.yahoo_page"  # made by archive.generate.from_objects
    assert all(("Cache-Control", "no-cache, no-store") in o.headers for o in p.objects)


# ---- PLT from a synthetic trace -----------------------------------------------------------
def test_trace_plt_synthetic(tmp_path):
    """Two connections; the answer is known: first SYN at 10.000, final ACK of the last object
    (on connection 2, whose server sequence numbers wrap around 2**32) at 10.410."""
    isn1, isn2 = 1000, 2**32 - 700  # connection 2 wraps
    pk = []
    # connection 1: port 40001 -> S1:80, 1500 response bytes
    pk += [
        (10.000, ipv4_tcp(C, S1, 40001, 80, 5, 0, SYN)),
        (10.100, ipv4_tcp(S1, C, 80, 40001, isn1, 6, SYN | ACK)),
        (10.100, ipv4_tcp(C, S1, 40001, 80, 6, isn1 + 1, ACK)),
        (10.101, ipv4_tcp(C, S1, 40001, 80, 6, isn1 + 1, ACK | PSH, 100)),
        (10.200, ipv4_tcp(S1, C, 80, 40001, isn1 + 1, 106, ACK, 1000)),
        (10.201, ipv4_tcp(C, S1, 40001, 80, 106, isn1 + 1001, ACK)),
        (10.250, ipv4_tcp(S1, C, 80, 40001, isn1 + 1001, 106, ACK | PSH, 500)),
        (10.260, ipv4_tcp(C, S1, 40001, 80, 106, isn1 + 1501, ACK)),
    ]
    # connection 2: port 40002 -> S2:80, opened later, 3000 bytes, the last segment arrives 10.400
    pk += [
        (10.050, ipv4_tcp(C, S2, 40002, 80, 77, 0, SYN)),
        (10.150, ipv4_tcp(S2, C, 80, 40002, isn2, 78, SYN | ACK)),
        (10.150, ipv4_tcp(C, S2, 40002, 80, 78, isn2 + 1, ACK | PSH, 90)),
        (10.250, ipv4_tcp(S2, C, 80, 40002, isn2 + 1, 168, ACK, 1448)),
        (10.300, ipv4_tcp(S2, C, 80, 40002, isn2 + 1449, 168, ACK, 1448)),
        (10.301, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 1449, ACK)),  # partial ACK
        (10.400, ipv4_tcp(S2, C, 80, 40002, isn2 + 2897, 168, ACK | PSH, 104)),
        (10.410, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK)),  # the final ACK
        # after the load: a spurious retransmission and its duplicate ACK, FINs
        (10.600, ipv4_tcp(S2, C, 80, 40002, isn2 + 2897, 168, ACK | PSH, 104)),
        (10.601, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK)),
        (10.700, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK | FIN)),
        (10.800, ipv4_tcp(S2, C, 80, 40002, isn2 + 3001, 169, ACK | FIN)),
    ]
    # unrelated traffic on another port is ignored
    pk += [
        (10.900, ipv4_tcp(C, S1, 40003, 9000, 1, 0, SYN)),
        (11.000, ipv4_tcp(S1, C, 9000, 40003, 9, 2, SYN | ACK)),
        (11.100, ipv4_tcp(S1, C, 9000, 40003, 10, 2, ACK, 1000)),
        (11.200, ipv4_tcp(C, S1, 40003, 9000, 2, 1010, ACK)),
    ]
    pk.sort(key=lambda x: x[0])
    path = str(tmp_path / "t.pcap")
    write_pcap(path, pk)
    segs = read_pcap(path)
    assert len(segs) == len(pk)
    r = plt_from_pcap(path)
    assert r["plt_ms"] == pytest.approx(410.0, abs=0.01)
    assert r["connections"] == 2 and r["unacked"] == 0
    assert trace_plt(segs, client_ip=None)["plt_ms"] == pytest.approx(410.0, abs=0.01)
    # without the final ACKs, each connection ends at its last data segment
    no_ack = [s for s in segs if not (s.src == C and round(s.t, 3) in (10.410, 10.601, 10.700))]
    r2 = trace_plt(no_ack, C)
    assert r2["unacked"] == 1 and r2["plt_ms"] == pytest.approx(400.0, abs=0.01)


def test_read_pcap_rejects_other_files(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes(b"not a pcap at all, but long enough")
    with pytest.raises(PltError, match="not a pcap"):
        read_pcap(str(p))


def test_the_one_statistics_module():
    """Geometric means and their bootstrap CIs come from experiments.stats (the TFO table's)."""
    assert stats.geomean([1, 100]) == pytest.approx(10)
    lo, hi = stats.geomean_ci([10, 11, 12, 13, 30])
    assert lo <= stats.geomean([10, 11, 12, 13, 30]) <= hi
    assert stats.geomean_ci([5.0]) == (5.0, 5.0)
    assert stats.geomean_ci([10, 11, 12, 13, 30], seed=3) == stats.geomean_ci([10, 11, 12, 13, 30], seed=3)
    # the geometric mean's interval is scipy's BCa interval of exp(mean(log x)), computed here
    # directly (BCa is transformation-respecting: the exponential of the log mean's interval)
    import numpy as np
    from scipy.stats import bootstrap

    x = np.log([10, 11, 12, 13, 30])
    ci = bootstrap((x,), np.mean, n_resamples=10_000, method="BCa", rng=np.random.default_rng(0)).confidence_interval
    assert stats.geomean_ci([10, 11, 12, 13, 30]) == pytest.approx((np.exp(ci.low), np.exp(ci.high)))
    assert stats.quantile([1, 2, 3, 4], 0.5) == 2.5


# ---- bad ICW ----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, 2000])
def test_bad_icw_is_one_clear_error(bad, tmp_path):
    with pytest.raises(PltError, match=f"invalid ICW {bad}"):
        check_icw(bad)
    r = CliRunner().invoke(_app(), ["icw", "--quick", "--icw", "1", "--icw", str(bad), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert lines == [f"pltlab: error: invalid ICW {bad}: must be an integer from 1 to 1024 segments"]
    assert not os.path.exists(tmp_path / "o")  # refused before running anything


def test_a_study_folder_is_not_reused_without_resume(tmp_path):
    out = tmp_path / "o"
    out.mkdir()
    (out / "something").write_text("x")
    r = CliRunner().invoke(_app(), ["icw", "--only", "rtt", "--rtt", "20", "--out", str(out)])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"pltlab: error: {out} exists and is not empty: pass --resume to continue that study, "
        f"or choose another output folder (-o)"
    ]


# ---- the engine's path without a network: fake measurement kinds ---------------------------
class FakeTraced(FakeRunner):
    """A traced_load runner answering from a formula: PLT = RTT x (2 + 8 / ICW) (+ loss x 10 RTT),
    failing load (ICW 3, rep 2) on every attempt."""

    calls: list = []

    def load(self, point, rep):
        cols = self.cfg.columns()
        FakeTraced.calls.append((cols["icw"], rep))
        if cols["icw"] == 3 and rep == 2:
            raise PltError("load timed out")
        rtt = cols["rtt_ms"]
        plt = rtt * (2 + 8 / cols["icw"]) + cols["loss"] * 10 * rtt + rep
        return {
            "plt_ms": plt,
            "valid": True,
            "invalid_reason": None,
            "not_found": 0,
            "tfo_counters": {"client": {}, "server": {}},
            "requests": [],
            "metrics": {
                "trace_plt_ms": plt,
                "loader_plt_ms": plt - 0.5,
                "connections": 12,
                "unacked": 0,
                "link_seed": self.cfg.seed + rep - 1,
            },
            "seed": self.cfg.seed + rep - 1,
        }


# parts rtt and loss, 2 ICWs x 2 RTTs / 2 losses, 3 loads per point
MINI_STUDY = ["--reps", "3", "--icw", "1", "--icw", "3", "--rtt", "50", "--rtt", "100", "--loss", "0", "--loss", "10"]
MINI_STUDY += ["--only", "rtt", "--only", "loss"]


def test_study_runs_through_the_engine_and_checks_its_results(tmp_path, monkeypatch):
    """Parts rtt and loss as sweeps (one database each), a load failing twice recorded and left
    out of its point (not the end of the study), statistics from experiments.stats."""
    monkeypatch.setitem(kinds.KINDS, "traced_load", FakeTraced)
    FakeTraced.calls = []
    out = tmp_path / "icw"
    r = CliRunner().invoke(
        _app(),
        ["icw", "--json", "--out", str(out), *MINI_STUDY],
    )
    assert r.exit_code == 0, r.stderr
    assert "icw-rtt" in r.stderr and "Experiment 1 yahoo-like @ 50ms delay, ICW 3 (no TFO)" in r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(res) == {
        "plt_vs_rtt",
        "plt_vs_loss",
        "transfer_rtts",
        "fairness",
        "checks",
        "output_dir",
        "wall_time_s",
        "quick",
    }
    # every run key once per attempt; (ICW 3, rep 2) tried twice per point, then left out
    assert FakeTraced.calls.count((3, 2)) == 2 * 4 and len(FakeTraced.calls) == 2 * 2 * 2 * 3 + 4
    pts = {(p["icw"], p["rtt_ms"]): p for p in res["plt_vs_rtt"]}
    assert pts[(1, 50)]["n"] == 3 and pts[(3, 50)]["n"] == 2
    want = [50 * 10 + rep for rep in (1, 2, 3)]
    assert pts[(1, 50)]["plt_ms"] == pytest.approx(stats.geomean(want), abs=1e-3)
    assert pts[(1, 50)]["ci"] == pytest.approx(list(stats.geomean_ci(want, seed=1)), abs=1e-3)
    full = json.loads((out / "results.json").read_text())
    p3 = next(p for p in full["plt_vs_rtt"] if (p["icw"], p["rtt_ms"]) == (3, 50))
    assert p3["failed_loads"] == [{"rep": 2, "seed": 2, "error": "load timed out"}]
    assert p3["plt_runs_ms"] == [50 * (2 + 8 / 3) + 1, 50 * (2 + 8 / 3) + 3]
    ck = res["checks"]
    assert not ck["all_loads_done"]["ok"]
    assert {"fig": "plt_vs_rtt", "icw": 3, "rtt_ms": 50, "reps": 2} in ck["all_loads_done"]["failed"]
    assert ck["fig19_monotone"]["ok"] and ck["fig19_savings_grow"]["ok"] and ck["fig20_rising"]["ok"]
    assert ck["trace_vs_loader"] == {"ok": True, "max_abs_diff_ms": 0.5}
    # the engine's databases: one per part, failed attempts kept, the link seed per load
    runs = _db_runs(out / "rtt" / "results.sqlite")
    assert len(runs) == 2 * 2 * 3 + 2 and {r["status"] for r in runs} == {"ok", "failed"}
    assert {(r["rep"], r["seed"]) for r in runs if r["status"] == "ok"} == {(1, 1), (2, 2), (3, 3)}
    assert json.loads(runs[0]["metrics"])["connections"] == 12
    assert (out / "loss" / "results.sqlite").is_file() and (out / "study.json").is_file()
    html = (out / "report.html").read_text()
    for s in ("PLT vs RTT (Fig. 19)", "Checks", "icw-rtt: validity", "icw-loss: experiment", "Environment"):
        assert s in html
    assert "data:image/png;base64," in html  # the figures, embedded
    assert "PLT vs loss" in (out / "tables.md").read_text()
    # the report is rebuilt from the databases alone (study.json names the study and parameters)
    (out / "results.json").unlink()
    again = study_report(str(out))
    assert again["checks"] == ck and json.loads((out / "results.json").read_text())["plt_vs_rtt"] == full["plt_vs_rtt"]
    # --resume of a finished study runs nothing again (the failed run had its two attempts)
    FakeTraced.calls = []
    r = CliRunner().invoke(
        _app(),
        ["icw", "--json", "--out", str(out), *MINI_STUDY, "--resume"],
    )
    assert r.exit_code == 0, r.stderr
    assert FakeTraced.calls == [] and json.loads(r.stdout.strip().splitlines()[-1])["checks"] == res["checks"]
    # ... and a resume with other parameters is refused: a different experiment
    r = CliRunner().invoke(
        _app(),
        [
            "icw",
            "--out",
            str(out),
            "--reps",
            "4",
            "--icw",
            "1",
            "--icw",
            "3",
            "--rtt",
            "50",
            "--rtt",
            "100",
            "--only",
            "rtt",
            "--resume",
        ],
    )
    assert r.exit_code == 2 and "holds a different experiment" in r.stderr


def test_checks_skip_points_without_loads():
    pts = [
        {"icw": 1, "rtt_ms": 50, "plt_ms": 500.0, "ci": [490, 510], "n": 2, "max_abs_diff_ms": 1.0, "failed_loads": []},
        {
            "icw": 3,
            "rtt_ms": 50,
            "plt_ms": None,
            "ci": [None, None],
            "n": 0,
            "max_abs_diff_ms": None,
            "failed_loads": [{"rep": 1, "seed": 1, "error": "x"}],
        },
    ]
    ck = checks({"plt_vs_rtt": pts})
    assert not ck["all_loads_done"]["ok"] and ck["fig19_monotone"]["ok"]
    assert ck["trace_vs_loader"]["ok"]


# ---- real loads -------------------------------------------------------------------------
def test_kinds_registry():
    assert set(kinds.KINDS) == {"page_load", "traced_load", "flows"}
    with pytest.raises(PltError, match="unknown measurement kind 'x'"):
        kinds.check("x")


@pytest.mark.root
@pytest.mark.slow
def test_mini_study_end_to_end(tmp_path):
    """Two ICWs x two RTTs (and two loss rates), 1 load per point, through the CLI with --json."""
    out = tmp_path / "icw"
    r = CliRunner().invoke(
        _app(),
        [
            "icw",
            "--json",
            "--out",
            str(out),
            "--reps",
            "1",
            "--icw",
            "1",
            "--icw",
            "16",
            "--rtt",
            "20",
            "--rtt",
            "60",
            "--loss",
            "0",
            "--loss",
            "5",
            "--only",
            "rtt",
            "--only",
            "loss",
        ],
    )
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(res) >= {"plt_vs_rtt", "plt_vs_loss", "transfer_rtts", "fairness", "output_dir"}
    assert res["output_dir"] == str(out)
    pts = {(p["icw"], p["rtt_ms"]): p for p in res["plt_vs_rtt"]}
    assert set(pts) == {(1, 20), (16, 20), (1, 60), (16, 60)}
    for rtt in (20, 60):
        assert pts[(16, rtt)]["plt_ms"] < pts[(1, rtt)]["plt_ms"]
        assert len(pts[(1, rtt)]["ci"]) == 2
    # the saving of a larger ICW grows with the RTT
    assert pts[(1, 60)]["plt_ms"] - pts[(16, 60)]["plt_ms"] > pts[(1, 20)]["plt_ms"] - pts[(16, 20)]["plt_ms"]
    assert {(p["icw"], p["loss"]) for p in res["plt_vs_loss"]} == {(1, 0), (16, 0), (1, 0.05), (16, 0.05)}
    ck = res["checks"]
    assert ck["trace_vs_loader"]["ok"], ck
    assert ck["fig19_monotone"]["ok"] and ck["fig19_savings_grow"]["ok"], ck
    full = json.loads((out / "results.json").read_text())
    for p in full["plt_vs_rtt"]:  # both PLTs stored per load; they agree within 1 RTT
        assert len(p["plt_runs_ms"]) == len(p["loader_runs_ms"]) == 1
        assert abs(p["plt_runs_ms"][0] - p["loader_runs_ms"][0]) <= p["rtt_ms"]
    for name in ("fig19_plt_vs_rtt", "fig20_plt_vs_loss"):
        for ext in ("png", "svg"):
            assert (out / f"{name}.{ext}").stat().st_size > 1000
    assert "PLT vs RTT" in (out / "tables.md").read_text()
    runs = [r for r in _db_runs(out / "loss" / "results.sqlite") if r["status"] == "ok"]
    assert len({r["run_key"] for r in runs}) == len(runs) == 4  # (a failed attempt is retried)
    # the trace's PLT, the loader's beside it
    assert all(abs(r["plt_ms"] - json.loads(r["metrics"])["loader_plt_ms"]) < 100 for r in runs)


@pytest.mark.root
@pytest.mark.slow
def test_transfer_times_from_request_rows(tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[icw]\nparts = ['transfer']\n[icw.transfer]\nicws = [1, 32]\nrtts_ms = [20]\npages = ['google']\n")
    out = tmp_path / "icw"
    r = CliRunner().invoke(_app(), ["icw", "--config", str(path), "--json", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    xs = {int(k): v for k, v in json.loads((out / "results.json").read_text())["transfer_samples"].items()}
    assert set(xs) == {1, 32} and all(len(v) >= 5 for v in xs.values())
    assert all(x >= 0.9 for v in xs.values() for x in v)  # at least one RTT each
    assert sum(xs[32]) < sum(xs[1])
    (t1, t32) = json.loads(r.stdout.strip().splitlines()[-1])["transfer_rtts"]
    assert (t1["icw"], t32["icw"]) == (1, 32) and t1["p95"] > t32["p95"]


@pytest.mark.root
@pytest.mark.slow
def test_fairness_10s():
    from pltlab.run.config import RunConfig
    from pltlab.run.flows import FlowsRunner

    cfg = RunConfig(
        rtt="100ms", rate="4mbit", loss="25%", icw=32, client_rmem=None, extra={"seconds": 10.0, "loss_up": 0.0}
    )
    with FlowsRunner(None, cfg) as fr:
        rec = fr.load(Point(), 1)
    m = rec["metrics"]
    assert rec["plt_ms"] is None and rec["valid"] and m["seconds"] == 10
    assert m["long_bytes"] > 0 and len(m["downloads"]) >= 1 and m["long_intervals_kbyte_s"]
    assert m["downlink_dropped"] > 0  # the 25 % loss was there
    # both directions, as a page load's metrics: the downlink's random drops, none on the loss-free uplink
    d = m["link_drops"]
    assert d["downlink"]["loss"] == m["downlink_dropped"] and d["uplink"]["loss"] == 0
    assert not os.path.exists(names.workdir(fr.topo.run_id))


# ---- resume after SIGKILL ---------------------------------------------------------------
@pytest.mark.root
def test_reproduce_icw_killed_and_resumed_repeats_no_load(tmp_path):
    """`pltlab reproduce icw` killed with SIGKILL once some loads are committed, then run again
    with --resume: every load exactly once as ok, the ones from before the kill untouched."""
    out = tmp_path / "icw"
    args = [
        sys.executable,
        "-m",
        "pltlab",
        "reproduce",
        "icw",
        "--only",
        "rtt",
        "--rtt",
        "20",
        "--icw",
        "3",
        "--icw",
        "10",
        "--reps",
        "3",
        "--json",
        "-o",
        str(out),
    ]
    db = out / "rtt" / "results.sqlite"
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline:  # kill once two loads are in, mid-study
        if db.exists():
            try:
                if len(_db_runs(db)) >= 2:
                    break
            except sqlite3.OperationalError:  # the tables are being made
                pass
        time.sleep(0.05)
    p.send_signal(signal.SIGKILL)
    p.wait()
    before = _db_runs(db)
    assert 2 <= len(before) < 6, len(before)
    cp = subprocess.run(args, capture_output=True, text=True)
    assert cp.returncode == 2 and "--resume" in cp.stderr  # not without --resume
    cp = subprocess.run(args + ["--resume"], capture_output=True, text=True, timeout=300)
    assert cp.returncode == 0, cp.stderr
    after = _db_runs(db)
    ok = [r for r in after if r["status"] == "ok"]
    assert len(ok) == 2 * 3 and len({r["run_key"] for r in ok}) == 6  # every load once as ok
    assert all(r["valid"] for r in ok)
    assert after[: len(before)] == before  # committed before the kill: same ids, times, values
    assert {(r["icw"], r["rep"]) for r in ok} == {(i, k) for i in (3, 10) for k in (1, 2, 3)}
    con = sqlite3.connect(db)
    assert con.execute("SELECT COUNT(*) FROM runners WHERE closed IS NULL").fetchone()[0] == 0
    con.close()
    res = json.loads(cp.stdout.strip().splitlines()[-1])
    assert res["checks"]["fig19_monotone"]["ok"] and res["checks"]["all_loads_done"]["ok"]
    assert [p["n"] for p in res["plt_vs_rtt"]] == [3, 3]
    assert not any(
        n.startswith(names.PREFIX) and "trace" in n and names.run_id_of(n) in {r["runner_id"] for r in after}
        for n in os.listdir("/tmp")
    )  # kill's leftovers gone


def test_params_are_the_study_parameters():
    p = study_file.resolve(quick=True)
    assert p.reps == 2 and p.fairness_seconds == 60
