"""`pltlab reproduce tfo`: one bundled page, one repetition, the JSON object of the issue."""

import json

import pytest

from pltlab.errors import PltError
from tests.conftest import pltlab_cmd


@pytest.mark.root
@pytest.mark.slow  # the suite's longest test (6 real loads at 4 Mbit/s, twice the study): `make test-slow`
def test_reproduce_tfo_json_one_page(tmp_path):
    out = tmp_path / "o"
    cp = pltlab_cmd("reproduce", "tfo", "--pages", "wikipedia", "--reps", "1", "--json", "-o", str(out), timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    assert set(res) == {"rows", "invalid_runs", "output_dir"} and res["invalid_runs"] == 0
    assert [r["rtt_ms"] for r in res["rows"]] == [20, 100, 200]
    for r in res["rows"]:
        assert set(r) == {"page", "rtt_ms", "plt_notfo_ms", "plt_tfo_ms", "improvement", "improvement_ci", "n"}
        assert r["page"] == "wikipedia" and r["n"] == 1
        assert (
            r["improvement"] == round(1 - r["plt_tfo_ms"] / r["plt_notfo_ms"], 4)
            or abs(r["improvement"] - (1 - r["plt_tfo_ms"] / r["plt_notfo_ms"])) < 1e-3
        )
        assert 0 < r["improvement"] < 0.6  # TFO saves handshakes; transfer time dominates at 4 Mbit/s
    imps = [r["improvement"] for r in res["rows"]]
    assert imps[0] < imps[2]  # grows with RTT
    assert (out / "report.html").is_file() and (out / "table.md").is_file()
    html = (out / "report.html").read_text()  # the study's comparison with the paper is in the report
    assert "TFO improvement with its 95 % BCa bootstrap interval" in html and "Published: " in html
    assert json.loads((out / "study.json").read_text())["study"] == "tfo"
    # run through the experiment engine: resumable; a finished run resumed runs nothing more
    cp = pltlab_cmd(
        "reproduce", "tfo", "--pages", "wikipedia", "--reps", "1", "--json", "-o", str(out), "--resume", timeout=300
    )
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["rows"] == res["rows"]
    cp = pltlab_cmd("report", str(out))  # the report of the study's folder keeps the comparison
    assert cp.returncode == 0, cp.stderr
    assert "Published: " in (out / "report.html").read_text()


def test_the_commands_are_the_registered_studies():
    """One registry: `reproduce` has one command per row of STUDIES, its options the study's
    declared parameters, the shared ones and the cluster's."""
    import typer

    from pltlab.cli import app
    from pltlab.studies import STUDIES, engine

    group = typer.main.get_command(app).commands["reproduce"]
    assert list(group.commands) == list(STUDIES) == ["tfo", "icw", "handshakes", "ablations"]
    for name, s in STUDIES.items():
        assert callable(s.options) and s.HELP
        if hasattr(s, "runs"):  # a study of studies (the ablations): other studies' runs, then its own summary
            assert callable(s.finished) and callable(s.begin) and callable(s.finish) and callable(s.text)
        else:
            assert callable(s.experiments) and callable(s.sections)
        opts = [p.name for p in group.commands[name].params]
        assert opts == [p.name for p in engine.declared(s.PARAMS)] + ["cluster", "slots", "connect_timeout"]
        assert {"quick", "json", "output", "resume"} <= set(opts)


def test_a_study_is_a_module_and_a_registry_line(monkeypatch):
    """A study declaring its parameters gets `reproduce <name>` with those options, no command of
    its own: they reach its ``options`` (the shared ones stay the command's)."""
    import types

    import typer
    from typer.testing import CliRunner

    from pltlab.cli import studies as study_commands
    from pltlab.studies import STUDIES, engine

    seen = {}

    def options(values):
        seen.update(values)
        raise PltError("stop here")

    toy = types.SimpleNamespace(
        NAME="toy",
        HELP="A toy study.",
        PARAMS=(engine.Param("rtt", float, 50.0, "RTT in ms."), engine.Param("page", str, None, "A page.", many=True)),
        options=options,
    )
    monkeypatch.setitem(STUDIES, "toy", toy)
    app = typer.Typer()
    study_commands.add(app, "toy")

    @app.command()
    def other():  # keeps `toy` a subcommand
        pass

    r = CliRunner().invoke(app, ["toy", "--help"], terminal_width=200)
    assert r.exit_code == 0 and "RTT in ms." in r.stdout and "[default: 50.0]" in r.stdout
    assert "--quick" in r.stdout and "--output" in r.stdout and "--cluster" in r.stdout
    r = CliRunner().invoke(app, ["toy", "--rtt", "20", "--page", "a", "--page", "b", "--quick", "-o", "x"])
    assert r.exit_code == 2 and "pltlab: error: stop here" in r.stderr
    assert seen == {"rtt": 20.0, "page": ["a", "b"], "quick": True}


def test_reproduce_bad_page_is_one_line(tmp_path):
    cp = pltlab_cmd("reproduce", "tfo", "--pages", "bogus", "-o", str(tmp_path / "o"))
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "bogus" in cp.stderr
    assert not (tmp_path / "o").exists()
