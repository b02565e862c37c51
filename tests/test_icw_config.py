"""ICW-study experiment files (`pltlab reproduce icw --config FILE`): parsing, precedence
(defaults < file < CLI), one-line errors, and file-driven runs."""

import json
import os

import pytest
import typer
from typer.testing import CliRunner

from pltlab.archive import bundled
from pltlab.cli import studies as study_commands
from pltlab.errors import PltError
from pltlab.run import kinds
from pltlab.studies.icw import parts as study
from pltlab.studies.icw import study_file
from tests.fakes import FakeRunner

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLE = os.path.join(ROOT, "examples", "icw-study.toml")
VARIANT = os.path.join(ROOT, "examples", "icw-study-rfc6928.toml")


def _app() -> typer.Typer:
    app = typer.Typer()
    study_commands.add(app, "icw")  # as `reproduce` makes it from the study's PARAMS

    @app.command()
    def other():  # keeps `icw` a subcommand, as under `reproduce`
        pass

    return app


def _write(tmp_path, text: str) -> str:
    p = tmp_path / "study.toml"
    p.write_text(text)
    return str(p)


# ---- parsing and precedence ---------------------------------------------------------------
def test_example_file_is_the_default_study():
    vals = study_file.load(EXAMPLE)
    assert set(vals) == set(study_file.FIELDS)  # the example sets every parameter
    p = study_file.resolve(vals)
    assert p == study_file.resolve() == study_file.Params()
    # ... and those are the constants the study used before files existed
    assert p.icws == (1, 3, 8, 16) and p.rtts == (50, 100, 200, 800, 1500)
    assert p.losses == (0.0, 0.01, 0.02, 0.05, 0.10, 0.15, 0.20, 0.25) and p.loss_rtt_ms == 100
    assert p.transfer_icws == (1, 3, 5, 7, 10, 16, 32) and p.transfer_rtts == (50, 200, 800)
    assert p.transfer_pages == ("amazon", "nytimes", "wsj", "wikipedia") and p.transfer_reps == 1
    assert (p.fairness_icws, p.fairness_seconds, p.fairness_rtt_ms, p.fairness_rate) == ((32, 3), 300, 100, "4mbit")
    assert (p.fairness_loss, p.fairness_loss_up, p.fairness_download_bytes) == (0.25, 0.0, 49152)
    assert (p.cc, p.reps, p.seed, p.rate, p.max_conns_per_host, p.fairness_long_flow) == (
        "cubic",
        5,
        1,
        None,
        6,
        "iperf3",
    )


def test_knob_names_and_the_older_names_are_the_same_study():
    """rtt/loss/initcwnd/repetitions with units, as in experiment files; rtts_ms/losses (percent)/
    icws/reps/rtt_ms, the study's older names, give the same parameters."""
    knobs = study_file.from_dict(
        {
            "icw": {
                "repetitions": 3,
                "initcwnd": [3, 10],
                "rtt": {"rtt": ["20ms", "1.5s", 60]},
                "loss": {"loss": ["0%", "2.5%", "0.1"], "rtt": "60ms"},
                "transfer": {"initcwnd": 3, "rtt": "200ms", "repetitions": 2},
                "fairness": {"initcwnd": 32, "rtt": "100ms", "loss": "25%", "loss_up": 1},
            }
        }
    )
    old = study_file.from_dict(
        {
            "icw": {
                "reps": 3,
                "icws": [3, 10],
                "rtt": {"rtts_ms": [20, 1500, 60]},
                "loss": {"losses": [0, 2.5, 10], "rtt_ms": 60},
                "transfer": {"icws": 3, "rtts_ms": 200, "reps": 2},
                "fairness": {"icws": 32, "rtt_ms": 100, "loss": 25, "loss_up": 1},
            }
        }
    )
    assert knobs == old
    assert knobs["rtts"] == (20, 1500, 60) and knobs["losses"] == (0.0, 0.025, 0.1)
    assert knobs["fairness_loss"] == 0.25 and knobs["fairness_loss_up"] == 0.01


def test_variant_file():
    vals = study_file.load(VARIANT)
    p = study_file.resolve(vals)
    assert (p.cc, p.reps, p.icws, p.rate) == ("bbr", 3, (3, 10, 32), "8mbit")
    assert p.losses == (0.0, 0.01, 0.03, 0.06) and p.loss_rtt_ms == 60
    assert (p.fairness_download_bytes, p.fairness_long_flow, p.fairness_loss) == (100000, "probe", 0.02)
    assert p.seed == 1 and p.max_conns_per_host == 6  # not in the file: defaults
    assert "seed" not in vals


def test_quick_and_precedence():
    f = study_file.from_dict({"icw": {"quick": True, "reps": 4, "icws": 8, "fairness": {"seconds": 30}}})
    assert f == {"quick": True, "reps": 4, "icws": (8,), "fairness_seconds": 30}  # one value = list of one
    p = study_file.resolve(f)
    assert p.quick and p.reps == 4 and p.icws == (8,) and p.fairness_seconds == 30
    assert p.losses == study_file.QUICK["losses"] and p.transfer_pages == ("amazon", "wikipedia")
    # given values (the CLI) beat the file; quick=False brings back the full defaults
    p2 = study_file.resolve(f, quick=False, icws=[1, 16], reps=None)
    assert not p2.quick and p2.icws == (1, 16) and p2.reps == 4
    assert p2.losses == study.FIG20_LOSSES and p2.fairness_seconds == 30


# ---- errors: one line naming the file and the key, exit 2, nothing written ------------------
BAD = [
    (
        '[icw]\ncolor = "red"\n',
        "key 'icw.color': unknown key (known here: quick, cc, repetitions, seed, "
        "parts, rate, max_conns_per_host, load_timeout_s, initcwnd, stack, knobs, [icw.rtt], [icw.loss], [icw.transfer], "
        "[icw.fairness])",
    ),
    (
        "[icw.fairness]\nsecs = 3\n",
        "key 'icw.fairness.secs': unknown key (known here: initcwnd, seconds, "
        "rtt, rate, loss, loss_up, download_bytes, long_flow)",
    ),
    (
        '[icw.rtt]\nrtt = ["50 parsecs"]\n',
        "key 'icw.rtt.rtt': invalid RTT '50 parsecs': unknown unit 'parsecs' (use us, ms or s)",
    ),
    ('[icw.rtt]\nrtt = ["0ms"]\n', "key 'icw.rtt.rtt': invalid RTT 0 ms: must be in (0, 10000]"),
    ('[icw.loss]\nloss = ["100%"]\n', "key 'icw.loss.loss': invalid loss '100%': must be below 100%"),
    ("[icw]\nreps = 2\nrepetitions = 3\n", "key 'icw.repetitions': set twice (also as icw.reps)"),
    ("pages = ['amazon']\n", "key 'pages': unknown key (an ICW-study file holds one table, [icw])"),
    (
        '[icw]\nreps = "5"\n',
        "key 'icw.reps': invalid number of loads per point '5': must be an integer from 1 to 10000",
    ),
    ('[icw]\nicws = ["8"]\n', "key 'icw.icws': invalid ICW '8': must be an integer from 1 to 1024 segments"),
    ("[icw]\nquick = 1\n", "key 'icw.quick': invalid value 1: must be true or false"),
    ("[icw]\nrtt = 100\n", "key 'icw.rtt': must be a table ([icw.rtt])"),
    ("[icw.fairness]\nrate = 4\n", "key 'icw.fairness.rate': invalid rate 4: a string such as \"4mbit\""),
    ('[icw]\ncc = "vegas"\n', "key 'icw.cc': unknown congestion control 'vegas' (choose from cubic, reno, bbr)"),
    ("[icw]\nicws = [1, 0]\n", "key 'icw.icws': invalid ICW 0: must be an integer from 1 to 1024 segments"),
    (
        "[icw.transfer]\nicws = [2000]\n",
        "key 'icw.transfer.icws': invalid ICW 2000: must be an integer from 1 to 1024 segments",
    ),
    (
        "[icw.fairness]\nicws = [0]\n",
        "key 'icw.fairness.icws': invalid ICW 0: must be an integer from 1 to 1024 segments",
    ),
    ("[icw.rtt]\nrtts_ms = [50, -20]\n", "key 'icw.rtt.rtts_ms': invalid RTT -20 ms: must be in (0, 10000]"),
    ("[icw.loss]\nrtt_ms = -1\n", "key 'icw.loss.rtt_ms': invalid RTT -1 ms: must be in (0, 10000]"),
    ("[icw.loss]\nlosses = [0, 150]\n", "key 'icw.loss.losses': invalid loss 150 %: must be in [0, 100)"),
    ("[icw.fairness]\nloss = 100.5\n", "key 'icw.fairness.loss': invalid loss 100.5 %: must be in [0, 100)"),
    ("[icw.rtt]\nrtts_ms = []\n", "key 'icw.rtt.rtts_ms': empty list"),
    ("[icw]\nicws = [3, 3]\n", "key 'icw.icws': duplicate values in [3, 3]"),
    (
        '[icw.transfer]\npages = ["nope"]\n',
        "key 'icw.transfer.pages': unknown bundled page 'nope': one of amazon, nytimes, wsj, wikipedia, google, "
        "filamentgroup, arcelormittal, linkedin, aftonbladet, github, sitespeed-h1, mitmproxy, mitmproxy-small, "
        "sitespeed-run-sizes, sitespeed-run-h2, sitespeed-run, sitespeed-redirect, filamentgroup-2, filamentgroup-3, "
        "enorm-magazin, expressen, expressen-2, expressen-3, wikipedia-org, github-wpt, llentab, squoosh, "
        "vkontakte, vk",
    ),
    (
        '[icw.fairness]\nlong_flow = "netperf"\n',
        "key 'icw.fairness.long_flow': unknown long-flow tool 'netperf' (choose from iperf3, probe)",
    ),
]


@pytest.mark.parametrize("text,msg", BAD, ids=[m.split("'")[1] + f"-{i}" for i, (_, m) in enumerate(BAD)])
def test_bad_file_is_one_clear_error(tmp_path, text, msg):
    path = _write(tmp_path, text)
    with pytest.raises(PltError) as e:
        study_file.load(path)
    assert str(e.value) == f"{path}: {msg}"
    out = tmp_path / "o"
    r = CliRunner().invoke(_app(), ["icw", "--config", path, "--out", str(out)])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [f"pltlab: error: {path}: {msg}"]
    assert not out.exists()


def test_unreadable_and_invalid_toml(tmp_path):
    r = CliRunner().invoke(_app(), ["icw", "--config", str(tmp_path / "none.toml"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    assert r.stderr.strip().splitlines() == [
        f"pltlab: error: {tmp_path / 'none.toml'}: cannot read: No such file or directory"
    ]
    path = _write(tmp_path, "[icw\n")
    r = CliRunner().invoke(_app(), ["icw", "--config", path, "--out", str(tmp_path / "o")])
    assert r.exit_code == 2 and len(r.stderr.strip().splitlines()) == 1
    assert r.stderr.startswith(f"pltlab: error: {path}: not valid TOML:")
    assert not (tmp_path / "o").exists()


def test_bad_cli_value_over_a_good_file(tmp_path):
    """A flag's own bad value names the value (flags have no file key)."""
    for flag, val, msg in (
        ("--icw", "0", "invalid ICW 0: must be an integer from 1 to 1024 segments"),
        ("--loss", "101", "invalid loss 101.0 %: must be in [0, 100)"),
        ("--rtt", "-5", "invalid RTT -5.0 ms: must be in (0, 10000]"),
    ):
        r = CliRunner().invoke(_app(), ["icw", "--config", EXAMPLE, flag, val, "--out", str(tmp_path / "o")])
        assert r.exit_code == 2
        assert r.stderr.strip().splitlines() == [f"pltlab: error: {msg}"]
    assert not (tmp_path / "o").exists()


def test_sweep_refuses_an_icw_file():
    from pltlab.experiments import spec

    with pytest.raises(PltError, match="an ICW-study file: run it with `pltlab reproduce icw --config FILE`"):
        spec.load(EXAMPLE)


# ---- the CLI passes every file value (or its override) to the runs -------------------------
class Recorder(FakeRunner):
    """A fake runner of every measurement kind: records (kind, page, RunConfig, rep) per load and
    answers with a plausible record (no network)."""

    loads: list = []
    kind = "?"

    def load(self, point, rep):
        Recorder.loads.append((self.kind, self.page.url, self.cfg, rep))
        rec = {
            "plt_ms": 100.0 + rep,
            "valid": True,
            "invalid_reason": None,
            "not_found": 0,
            "tfo_counters": {"client": {}, "server": {}},
            "requests": [],
        }
        if self.kind == "traced_load":
            rec["metrics"] = {"loader_plt_ms": 100.0 + rep, "connections": 4}
        elif self.kind == "page_load":
            rtt = self.cfg.columns()["rtt_ms"]
            rec["requests"] = [
                {"index": i, "request_ms": 0.0, "last_byte_ms": rtt * (i + 1), "status": 200} for i in range(3)
            ] + [{"index": 3, "request_ms": 0.0, "last_byte_ms": 1.0, "status": 404}]
        else:
            rec["plt_ms"] = None
            rec["metrics"] = {
                **self.cfg.extra,
                "downloads": [[1000.0, 20000, 0], [500.0, 20000, 1]],
                "long_bytes": 10_000,
                "long_seconds": 1.0,
                "long_intervals_kbyte_s": [10.0, 10.0],
                "long_retransmits": 0,
                "downlink_dropped": 0,
            }
        return rec


def _fake_kinds(monkeypatch):
    Recorder.loads = []
    for k in kinds.KINDS:
        monkeypatch.setitem(kinds.KINDS, k, type(f"Fake_{k}", (Recorder,), {"kind": k}))


def test_cli_overrides_file_and_reaches_every_run(tmp_path, monkeypatch):
    _fake_kinds(monkeypatch)
    out = tmp_path / "o"
    r = CliRunner().invoke(
        _app(),
        [
            "icw",
            "--config",
            VARIANT,
            "--out",
            str(out),
            "--json",
            "--cc",
            "reno",
            "--reps",
            "2",
            "--icw",
            "10",
            "--icw",
            "16",
            "--rtt",
            "40",
            "--loss",
            "0",
            "--loss",
            "4",
            "--fairness-seconds",
            "7",
        ],
    )
    assert r.exit_code == 0, r.stderr
    by = {}
    for kind, url, cfg, rep in Recorder.loads:
        by.setdefault(kind, []).append((url, cfg, rep))
    assert set(by) == {"traced_load", "page_load", "flows"}
    for _, _, cfg, _ in Recorder.loads:  # the file's and the flags' common settings reach every run
        assert cfg.cc == "reno" and cfg.client_rmem is None and cfg.max_conns_per_host == 6
        assert cfg.load_timeout_s == 900 or cfg.extra
    traced = {
        (c.columns()["rtt_ms"], c.icw, c.columns()["loss"], c.columns()["rate_down_bps"], rep)
        for _, c, rep in by["traced_load"]
    }
    rtt_part = {(40.0, i, 0.0, 8_000_000, rep) for i in (10, 16) for rep in (1, 2)}  # rate: the file
    loss_part = {(60.0, i, lo, 8_000_000, rep) for i in (10, 16) for lo in (0.0, 0.04) for rep in (1, 2)}
    assert traced == rtt_part | loss_part and len(by["traced_load"]) == 4 + 8
    urls = [bundled.load(n).url for n in ("amazon", "wikipedia")]  # the file's pages, RTT, ICWs
    assert sorted((url, c.columns()["rtt_ms"], c.icw) for url, c, _ in by["page_load"]) == sorted(
        (u, 60.0, i) for u in urls for i in (3, 10, 32)
    )
    assert all(c.backend == "userspace" for _, c, _ in by["page_load"])
    fair = sorted(
        (
            c.icw,
            c.columns()["rtt_ms"],
            c.columns()["loss"],
            c.columns()["rate_down_bps"],
            tuple(sorted(c.extra.items())),
        )
        for _, c, _ in by["flows"]
    )
    extra = (("download_bytes", 100000), ("long_flow", "probe"), ("loss_up", 0.0), ("seconds", 7.0))
    assert fair == [(10, 60.0, 0.02, 8_000_000, extra), (32, 60.0, 0.02, 8_000_000, extra)]
    full = json.loads((out / "results.json").read_text())
    assert full["config_file"] == VARIANT and full["cc"] == "reno" and full["reps"] == 2
    assert full["params"]["icws"] == [10, 16] and full["params"]["fairness_long_flow"] == "probe"
    tr = {t["icw"]: t for t in full["transfer_rtts"]}
    assert set(tr) == {3, 10, 32} and tr[3]["n"] == 2 * 3 and tr[3]["p50"] == 2.0  # 404s left out
    f10 = next(f for f in full["fairness"] if f["icw"] == 10)
    assert f10["short_kbyte_s"] == round(40000 / 1500, 3) and f10["long_kbyte_s"] == 10.0
    assert f10["ratio"] == pytest.approx(40 / 15, abs=1e-3) and f10["short_downloads"] == 2
    assert "back-to-back 100000 B downloads" in (out / "tables.md").read_text()
    # --only restricts the file's parts (a new folder: a used one needs --resume)
    Recorder.loads = []
    r = CliRunner().invoke(
        _app(), ["icw", "--config", VARIANT, "--out", str(tmp_path / "o2"), "--json", "--only", "transfer"]
    )
    assert r.exit_code == 0, r.stderr
    assert {k for k, *_ in Recorder.loads} == {"page_load"} and Recorder.loads[0][2].cc == "bbr"
    assert (tmp_path / "o2" / "transfer" / "results.sqlite").is_file()
    assert not (tmp_path / "o2" / "rtt").exists()


# ---- real runs driven by a file ----------------------------------------------------------
@pytest.mark.root
@pytest.mark.slow
def test_mini_study_from_file(tmp_path):
    """Two ICWs x two RTTs, 1 load per point, only the rtt part, every setting from the file."""
    path = _write(
        tmp_path,
        "[icw]\nparts = ['rtt']\nreps = 1\nicws = [1, 16]\ncc = 'reno'\nseed = 7\n"
        "max_conns_per_host = 2\n[icw.rtt]\nrtts_ms = [20, 60]\n",
    )
    out = tmp_path / "icw"
    r = CliRunner().invoke(_app(), ["icw", "--config", path, "--json", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert res["plt_vs_loss"] == [] and res["transfer_rtts"] == [] and res["fairness"] == []
    full = json.loads((out / "results.json").read_text())
    assert full["config_file"] == path and full["cc"] == "reno" and full["seed"] == 7 and full["reps"] == 1
    assert full["params"]["parts"] == ["rtt"] and full["params"]["max_conns_per_host"] == 2
    pts = {(p["icw"], p["rtt_ms"]): p for p in full["plt_vs_rtt"]}
    assert set(pts) == {(1, 20), (16, 20), (1, 60), (16, 60)}
    for p in pts.values():
        assert p["n"] == 1 and len(p["plt_runs_ms"]) == 1
        assert p["trace_connections"] == [4]  # 2 per host (file), not the default 6 + 6
        assert abs(p["plt_runs_ms"][0] - p["loader_runs_ms"][0]) <= p["rtt_ms"]
    for rtt in (20, 60):
        assert pts[(16, rtt)]["plt_ms"] < pts[(1, rtt)]["plt_ms"]
        assert pts[(1, rtt)]["plt_ms"] > 3 * rtt  # handshake + request + several windows


@pytest.mark.root
@pytest.mark.slow
def test_fairness_from_file_with_probe_long_flow(tmp_path):
    """The fairness part with the file's bottleneck, download size and long-flow tool."""
    path = _write(
        tmp_path,
        "[icw]\nparts = ['fairness']\n[icw.fairness]\nicws = [10]\nseconds = 4\n"
        "rtt_ms = 40\nrate = '8mbit'\nloss = 0\ndownload_bytes = 20000\n"
        "long_flow = 'probe'\n",
    )
    out = tmp_path / "icw"
    r = CliRunner().invoke(_app(), ["icw", "--config", path, "--json", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    (f,) = json.loads((out / "results.json").read_text())["fairness"]
    assert (f["icw"], f["seconds"], f["rtt_ms"], f["rate"], f["loss"]) == (10, 4, 40, "8mbit", 0.0)
    assert f["download_bytes"] == 20000 and f["long_flow"] == "probe"
    assert f["short_downloads"] >= 2 and f["downlink_dropped"] == 0
    assert f["long_bytes"] > 100_000
    assert 0 < f["long_kbyte_s"] + f["short_kbyte_s"] <= 1000 * 1.05  # 8 Mbit/s = 1000 KB/s
    assert f["ratio_ci"][0] <= f["ratio"] <= f["ratio_ci"][1]
    assert "back-to-back 20000 B downloads" in (out / "tables.md").read_text()
