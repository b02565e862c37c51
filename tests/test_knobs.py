"""The knob registry (pltlab.run.knobs): each setting declared once, and everything derived from
it: RunConfig's typed fields, the CLI options of `run` and `shell`, experiment files' keys and
configurations, the results columns and the report's labels. None of these tests needs root."""

import dataclasses
import json
import os
import sqlite3
import subprocess
import sys
import textwrap

import pytest
import typer
from typer.testing import CliRunner

from pltlab.cli import app
from pltlab.errors import PltError
from pltlab.experiments import results, spec
from pltlab.net.wan import LinkSpec
from pltlab.report import statistics
from pltlab.run import knobs
from pltlab.run.config import RunConfig


def test_every_knob_parses_its_defaults_and_its_own_output():
    for k in knobs.KNOBS.values():
        assert k.value == k.parse(k.default, k.name)
        for v in k.defaults.values():
            k.parse(v, k.name)
        json.dumps(k.key(k.value))  # canonical form: JSON (run keys, digests)
        if k.field == k.name:  # a value given by field is parsed again: must be a no-op
            assert k.parse(k.value, k.name) == k.value
        assert set(k.scopes) <= set(knobs.SCOPES) and k.help and k.label


def test_runconfig_fields_are_the_knobs():
    assert [f.name for f in dataclasses.fields(RunConfig)] == [k.field for k in knobs.KNOBS.values()]
    cfg = RunConfig()
    assert all(getattr(cfg, k.field) == k.value for k in knobs.KNOBS.values())
    assert set(cfg.columns()) == set(knobs.columns()) <= set(results.RUN_COLUMNS)


def test_runconfig_holds_parsed_values():
    cfg = RunConfig(
        rtt="50ms",
        rate="4mbit",
        rate_up="256kbit",
        loss="1%",
        queue="64KB",
        icw=10,
        tfo="on",
        client_rmem="kernel",
        seed=3,
    )
    assert (cfg.rtt_us, cfg.rate_bps, cfg.rate_up_bps, cfg.loss, cfg.queue) == (
        50_000,
        4_000_000,
        256_000,
        0.01,
        (None, 64_000),
    )
    assert (cfg.icw, cfg.tfo_modes, cfg.client_rmem) == (10, (True,), None)
    # the link as LinkSpec.build made it from the same strings
    assert cfg.link() == LinkSpec.build(rtt="50ms", rate="4mbit", rate_up="256kbit", loss="1%", queue="64KB", seed=3)
    assert RunConfig().link() == LinkSpec.build(rtt="100ms")
    # by TOML key or CLI option alike; by field: already parsed, taken as is
    same = RunConfig.from_knobs(
        {
            "--rtt": "50ms",
            "rate": 4,
            "--rate-up": "256kbit",
            "loss": 0.01,
            "queue": "64000B",
            "initcwnd": 10,
            "tfo": ["on"],
            "client_rmem": "kernel",
            "seed": 3,
        }
    )
    assert same == cfg
    assert RunConfig(rtt_us=50_000).rtt_us == 50_000 and RunConfig(rtt=50).rtt_us == 50_000
    # dataclasses.replace (the traced kind does this) keeps the parsed values
    assert dataclasses.replace(cfg, seed=9) == RunConfig.from_knobs({**cfg.__dict__, "seed": 9})
    assert cfg.columns() == {
        "rtt_ms": 50.0,
        "rate_down_bps": 4_000_000,
        "rate_up_bps": 256_000,
        "loss": 0.01,
        "loss_burst": 1.0,
        "queue": "64000B",
        "icw": 10,
        "cc": "cubic",
        "initrwnd": None,
        "rack": "on",
        "tlp": "on",
        "ss_after_idle": "on",
        "sack": "on",
        "frto": "on",
        "wscale": "on",
        "timestamps": "on",
        "client": "builtin",
        "protocol": "recorded",
        "server_priority": "rfc9218",
        "keepalive": "on",
        "tls": "full",
        "warm": True,
        "overrides": [],
        "network": "emulated",
        "dns_ms": 0.0,
        "seed": 3,
        "max_conns_per_host": 6,
        "client_rmem": None,
        "model": "archive",
        "schemes": "recorded",
        "network_stack": "off",
        "client_hello": None,  # the built-in loader's own
        "hosts": "recorded",
        "quic_cc": "cubic",  # (protocol recorded: QUIC's knobs apply to any h3 origins)
        "quic_icw": 10,
        "h3_discovery": "forced",
        "calibrated": True,
    }
    assert RunConfig(rate="4mbit").columns()["rate_up_bps"] == 4_000_000  # the uplink: the downlink's


@pytest.mark.parametrize(
    "values,needle",
    [
        ({"rtt": "10 parsecs"}, "invalid rtt '10 parsecs': unknown unit"),
        ({"--rtt": "-5ms"}, "invalid --rtt '-5ms': must not be negative"),
        ({"initcwnd": 0}, "invalid initcwnd 0: must be an integer from 1 to 1024"),
        ({"cc": "vegas"}, "invalid cc 'vegas': unknown congestion control (choose from cubic, reno, bbr)"),
        ({"--client": "lynx"}, "invalid --client 'lynx'"),
        ({"warmup": "tepid"}, "invalid warmup 'tepid': warm or cold"),
        ({"tfo": "maybe"}, "invalid tfo 'maybe': on, off or both"),
        ({"tfo": ["on", "on"]}, "each of on and off at most once"),
        ({"client_rmem": "1GiB"}, "invalid client_rmem '1GiB' (1073741824 bytes)"),
        ({"origin_rtt": ["x y=5ms"]}, "invalid origin_rtt 'x y=5ms'"),
        ({"origin_rtt": {"0": "20s"}}, "0: invalid origin rtt '20s': at most 10 s"),
        ({"pcap": "/nonexistent/dir/x.pcap"}, "does not exist"),
        ({"calibrated": "yes"}, "invalid calibrated 'yes': true or false"),
        ({"bogus": 1}, "unknown setting 'bogus'"),
        ({"icw": 3, "initcwnd": 4}, "'initcwnd' and 'icw' set the same setting"),
    ],
)
def test_a_bad_value_is_one_line_naming_the_knob(values, needle):
    with pytest.raises(PltError) as e:
        RunConfig.from_knobs(values, where="study.toml")
    assert str(e.value).startswith("study.toml: ") and needle in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("k", [k for k in knobs.KNOBS.values() if "sweep" in k.scopes], ids=lambda k: k.name)
def test_a_bad_experiment_value_names_file_and_key(k):
    bad = {"calibrated": "yes", "warm": "tepid", "tfo": "maybe", "origin_rtt": ["nope"]}.get(
        k.name, [[]] if k.sweep else {}
    )
    with pytest.raises(PltError) as e:
        spec.from_dict({"pages": ["amazon"], k.toml: bad}, "x.toml")
    assert str(e.value).startswith(f"x.toml: key '{k.toml}': ") and "\n" not in str(e.value)


def test_every_experiment_key_of_earlier_versions_is_still_read():
    keys = (
        "rtt",
        "rate",
        "rate_up",
        "loss",
        "queue",
        "tfo",
        "initcwnd",
        "cc",
        "client",
        "warmup",
        "origin_rtt",
        "name",
        "pages",
        "corpus",
        "repetitions",
        "seed",
        "max_conns_per_host",
        "client_rmem",
        "model",
        "schemes",
        "calibrated",
    )
    assert set(keys) <= set(spec.LIST_KEYS + spec.SCALAR_KEYS)
    doc = {
        "name": "old",
        "pages": ["amazon"],
        "corpus": ".",
        "rtt": ["10ms", "20ms"],
        "rate": "4mbit",
        "rate_up": "256kbit",
        "loss": "1%",
        "queue": 1000,
        "tfo": ["off", "on"],
        "initcwnd": ["default", 10],
        "cc": "reno",
        "client": "builtin",
        "warmup": ["warm", "cold"],
        "origin_rtt": [{}, {"0": "5ms"}],
        "repetitions": 2,
        "seed": 4,
        "max_conns_per_host": 4,
        "client_rmem": "kernel",
        "model": "chromium",
        "schemes": "chromium",
        "calibrated": False,
    }
    assert set(doc) == set(keys)
    exp = spec.from_dict(doc, "old.toml")
    assert len(exp.configs) == 2 * 2 * 2 * 2 and exp.tfo_modes == (False, True) and exp.repetitions == 2
    cfg = exp.run_config(len(exp.configs) - 1)
    assert (cfg.rtt_us, cfg.icw, cfg.warm, cfg.overrides, cfg.cc, cfg.seed) == (
        20_000,
        10,
        False,
        ((0, 5000, None),),
        "reno",
        4,
    )
    assert (cfg.max_conns_per_host, cfg.client_rmem, cfg.model, cfg.schemes, cfg.calibrated) == (
        4,
        None,
        "chromium",
        "chromium",
        False,
    )


# Digests (and so run keys and resumes) of experiments written before the registry: computed with
# the code of commit b320be8 (spec.py's LIST_KEYS/_parse), e.g.
#   git archive b320be8 src | tar -x -C /tmp/orig && PYTHONPATH=/tmp/orig/src python3 -c \
#     'from pltlab.experiments import spec; print(spec.from_dict(DOC, "x.toml").digest())'
DIGESTS = [
    ({"pages": ["amazon"]}, "84b02b1c73028224"),
    (
        {
            "name": "tfo-icw",
            "pages": ["amazon", "wikipedia"],
            "rtt": ["20ms", "100ms", "200ms"],
            "rate": "4mbit",
            "rate_up": "256kbit",
            "tfo": ["off", "on"],
            "initcwnd": ["default", 10],
            "repetitions": 5,
        },
        "7faac03b9430febe",
    ),
    (
        {
            "name": "all-keys",
            "pages": ["amazon"],
            "rtt": ["10ms", 50, "1.5s"],
            "rate": ["unlimited", "8mbit", 100],
            "rate_up": ["1mbit"],
            "loss": ["0%", 0.01, "2.5%"],
            "queue": [1000, "64KB", "100p"],
            "tfo": "on",
            "initcwnd": ["default", 3, 32],
            "cc": ["cubic", "bbr"],
            "client": "builtin",
            "warmup": ["warm", "cold"],
            "origin_rtt": [{}, {"0": "10ms/1%"}, {"1": 20}],
            "repetitions": 7,
            "seed": 42,
            "max_conns_per_host": 4,
            "client_rmem": "kernel",
            "model": "chromium",
            "schemes": "chromium",
            "calibrated": False,
        },
        "99adfcb876bf9a40",
    ),
    ({"pages": ["wikipedia"], "client_rmem": "2MiB", "tfo": ["on", "off"], "seed": 0}, "eb6d0819a78412b8"),
]


@pytest.mark.parametrize("doc,digest", DIGESTS, ids=["minimal", "readme", "every-key", "rmem"])
def test_digests_of_earlier_experiments_are_unchanged(doc, digest):
    exp = spec.from_dict(doc, "x.toml")
    assert exp.digest() == digest


def test_run_keys_of_earlier_experiments_are_unchanged():
    exp = spec.from_dict(DIGESTS[2][0], "x.toml")
    assert exp.configs[1].key() == (
        '["10000us",null,"1000000bit","0","1000",null,"cubic","builtin",true,[[0,10000,0.01]]]'
    )
    # the reproduce-tfo study (its configurations made with Config(...)), also computed at b320be8
    from pltlab.studies import tfo

    assert tfo.experiment(quick=True).digest() == "93a71ac887de6bd6"


def test_configs_are_typed_and_made_like_runconfigs():
    c = spec.Config(rtt="100000us", rate="4000000bit", loss="0", queue="1000", icw=3)
    assert (c.rtt_us, c.rate_bps, c.loss, c.queue, c.icw, c.warm) == (100_000, 4_000_000, 0.0, (1000, None), 3, True)
    assert c == spec.Config.from_knobs({"rtt": "100ms", "rate": "4mbit", "initcwnd": 3})
    assert c.key() == '["100000us","4000000bit",null,"0","1000",3,"cubic","builtin",true,[]]'
    with pytest.raises(PltError, match="unknown setting 'seed'"):
        spec.Config(seed=3)  # one value per experiment, not a point of its cross product


def _options(command: str) -> set[str]:
    cmd = typer.main.get_command(app).commands[command]
    return {o for p in cmd.params for o in p.opts + p.secondary_opts}


def test_cli_options_are_the_scopes_knobs():
    for scope in ("run", "shell"):
        opts = _options(scope)
        for k in knobs.KNOBS.values():
            declared = {o for decl in k.option for o in decl.split("/")}
            assert (declared <= opts) == (scope in k.scopes), (scope, k.name)


def test_run_options_reach_the_runconfig(monkeypatch, tmp_path):
    """What `pltlab run` passes to the loads: its options parsed by the registry (no loads here)."""
    from pltlab.run import batch

    seen = {}
    monkeypatch.setattr(batch, "run_page", lambda page, cfg, on_run=None: seen.setdefault("cfg", cfg) and [])
    res = CliRunner().invoke(
        app,
        [
            "run",
            "amazon",
            "--rtt",
            "20ms",
            "--rate",
            "4mbit",
            "--tfo",
            "off",
            "--cold",
            "--icw",
            "7",
            "--origin-rtt",
            "1=5ms/1%",
            "--no-calibration",
            "--reps",
            "2",
            "--json",
        ],
    )
    assert res.exit_code == 0, res.output
    cfg = seen["cfg"]
    assert (cfg.rtt_us, cfg.rate_bps, cfg.tfo_modes, cfg.warm, cfg.icw, cfg.overrides, cfg.calibrated, cfg.reps) == (
        20_000,
        4_000_000,
        (False,),
        False,
        7,
        ((1, 5000, 0.01),),
        False,
        2,
    )
    assert cfg.sched_fifo is True and cfg.client_rmem == 1 << 20  # defaults where not given
    res = CliRunner().invoke(app, ["run", "amazon", "--loss", "150%"])
    assert res.exit_code != 0 and "invalid --loss '150%'" in str(res.exception)


def test_shell_defaults_differ_where_the_registry_says(monkeypatch):
    from pltlab.net import shell

    got = {}
    monkeypatch.setattr(
        shell,
        "run_shell",
        lambda spec, cmd, serve=True, keep_alive=True: got.update(spec=spec, cmd=cmd, keep_alive=keep_alive) or 0,
    )
    res = CliRunner().invoke(app, ["shell", "--origins", "3", "--origin-rtt", "2=5ms", "--mtu", "9000", "--", "true"])
    assert res.exit_code == 0, res.output
    spec_ = got["spec"]
    assert spec_.link.rtt_us == 0 and spec_.sched_fifo is False and spec_.origins == 3  # the shell's defaults
    assert spec_.knobs.mtu == 9000 and [(o.origin, o.rtt_us) for o in spec_.overrides] == [(2, 5000)]
    assert got["cmd"] == ["true"] and got["keep_alive"] is True
    res = CliRunner().invoke(app, ["shell", "--keepalive", "off", "--", "true"])
    assert res.exit_code == 0 and got["keep_alive"] is False, res.output


def test_a_new_knob_is_one_entry(tmp_path):
    """Added to the registry (before anything else is imported), a knob is an option of `run` and
    `shell`, a key of experiment files whose list multiplies, a RunConfig field, a results column
    and a configuration's label; experiments that do not set it keep their digests."""
    script = textwrap.dedent("""
        import json
        from pltlab.run import knobs
        fake = knobs.Knob("fake_gain", knobs._int(1, 9), 3, "A knob of the test.", type=int, column="fake_col",
                          sql="INTEGER", describe=lambda v: f"gain {v}", sweep=True,
                          scopes=("run", "shell", "sweep"), cli_type=int)
        knobs._ALL = knobs._ALL + (fake,)
        knobs.KNOBS[fake.name] = fake
        knobs.ALIASES = knobs._aliases(knobs._ALL)

        import typer
        from typer.testing import CliRunner
        from pltlab.cli import app
        from pltlab.experiments import results, spec
        from pltlab.report import statistics
        from pltlab.run.config import RunConfig

        out = {}
        out["run_help"] = CliRunner().invoke(app, ["run", "--help"], terminal_width=200).output
        out["shell_help"] = CliRunner().invoke(app, ["shell", "--help"], terminal_width=200).output
        cfg = RunConfig.from_knobs({"--fake-gain": 5})
        out["field"] = cfg.fake_gain
        out["columns"] = cfg.columns()
        out["db"] = "fake_col" in results.RUN_COLUMNS
        exp = spec.from_dict({"pages": ["amazon"], "fake_gain": [3, 7]}, "x.toml")
        out["configs"] = [c.key() for c in exp.configs]
        out["run_config"] = exp.run_config(1).fake_gain
        out["digest_without"] = spec.from_dict({"pages": ["amazon"]}, "x.toml").digest()
        out["label"] = statistics._fmt_dim("fake_col", 7)
        try:
            spec.from_dict({"pages": ["amazon"], "fake_gain": 10}, "x.toml")
        except Exception as e:
            out["error"] = str(e)
        print(json.dumps(out))
    """)
    cp = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert cp.returncode == 0, cp.stderr
    out = json.loads(cp.stdout)
    assert "--fake-gain" in out["run_help"] and "--fake-gain" in out["shell_help"]
    assert "A knob of the test" in out["run_help"]
    assert out["field"] == 5 and out["columns"]["fake_col"] == 5 and out["db"]
    old = '["100000us",null,null,"0","1000",null,"cubic","builtin",true,[]'
    assert out["configs"] == [old + "]", old + ',{"fake_gain":7}]']  # the default: the key of before
    assert out["run_config"] == 7 and out["digest_without"] == DIGESTS[0][1]
    assert out["label"] == "gain 7"
    assert out["error"].startswith("x.toml: key 'fake_gain': invalid fake_gain 10: must be an integer from 1 to 9")


def test_results_columns_come_from_the_registry_and_old_databases_gain_them(tmp_path):
    assert all(results.RUN_COLUMNS[k.column] == k.sql for k in knobs.KNOBS.values() if k.column)
    db = sqlite3.connect(tmp_path / "results.sqlite")  # a database of before the registry's new columns
    old = (
        "run_key",
        "attempt",
        "status",
        "page",
        "config_key",
        "rtt_ms",
        "rate_down_bps",
        "rate_up_bps",
        "loss",
        "queue",
        "icw",
        "cc",
        "client",
        "warm",
        "overrides",
        "tfo",
        "rep",
        "seed",
        "plt_ms",
        "valid",
    )
    db.execute(f"CREATE TABLE runs (id INTEGER PRIMARY KEY, {', '.join(old)})")
    db.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    for i, (icw, tfo) in enumerate([(None, 0), (None, 1), (10, 0), (10, 1)]):
        db.execute(
            f"INSERT INTO runs ({', '.join(old)}) VALUES ({', '.join('?' * len(old))})",
            (
                f"k{i}",
                1,
                "ok",
                "p",
                f"c{icw}",
                50.0,
                4_000_000,
                4_000_000,
                0.01,
                "1000",
                icw,
                "cubic",
                "builtin",
                1,
                "[]",
                tfo,
                1,
                1,
                100.0 - 10 * tfo,
                1,
            ),
        )
    db.commit()
    db.close()
    runs, _ = statistics.load_runs(str(tmp_path))  # the report reads it as it is
    a = statistics.analyse(runs)
    assert a["varying"] == ["icw"] and [g["config"] for g in a["rows"]] == ["initcwnd 10", "initcwnd default"]
    res = results.Results(str(tmp_path))  # a resume adds the columns it lacks
    assert {"model", "client_rmem", "max_conns_per_host"} <= set(res.rows()[0])
    res.close()


def test_report_labels_are_the_knobs():
    fmt = statistics._fmt_dim
    assert [
        fmt("rate_down_bps", None),
        fmt("rate_up_bps", 256_000),
        fmt("loss", 0.01),
        fmt("icw", None),
        fmt("warm", 0),
        fmt("overrides", '[["cdn.test", 5000, null]]'),
        fmt("cc", "bbr"),
        fmt("queue", "1000"),
        fmt("protocol", "h2"),
        fmt("server_priority", "round-robin"),
        fmt("tls", "0rtt"),
        fmt("hosts", "unpreloaded"),
        fmt("loss_burst", 4.0),
        fmt("rack", "off"),
    ] == [
        "down unlimited",
        "up 0.256 Mbit/s",
        "loss 1%",
        "initcwnd default",
        "cold",
        "origin RTT cdn.test=5ms",
        "cc bbr",
        "queue 1000",
        "protocol h2",
        "server priority round-robin",
        "TLS 0rtt",
        "hosts renamed out of the HSTS preload list",
        "loss in bursts of 4",
        "rack off",
    ]
    assert statistics.DIMS == (
        "rate_down_bps",
        "rate_up_bps",
        "loss",
        "loss_burst",
        "queue",
        "icw",
        "cc",
        "initrwnd",
        "rack",
        "tlp",
        "ss_after_idle",
        "sack",
        "frto",
        "wscale",
        "timestamps",
        "client",
        "protocol",
        "server_priority",
        "keepalive",
        "tls",
        "warm",
        "overrides",
        "network",
        "dns_ms",
        "hosts",
        "quic_cc",
        "quic_icw",
        "h3_discovery",
    )


def test_the_knob_table_prints():
    res = CliRunner().invoke(app, ["knobs", "--json"])
    assert res.exit_code == 0 and [r["knob"] for r in json.loads(res.stdout)] == list(knobs.KNOBS)
    md = subprocess.run([sys.executable, "-m", "pltlab.run.knobs"], capture_output=True, text=True, check=True).stdout
    assert md == knobs.markdown() and md.count("\n") == len(knobs.KNOBS) + 2
    with open(os.path.join(os.path.dirname(__file__), "..", "docs", "api.md")) as f:
        assert knobs.markdown() in f.read(), "docs/api.md: paste `python -m pltlab.run.knobs` again"
