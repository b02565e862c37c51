"""`pltlab run DIR`: every page is its own unit. A page that cannot be read, is refused or fails
while it runs is reported at the end (one line each, exit code 2); the others keep their results."""

import json

import pytest
from typer.testing import CliRunner

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.cli import app
from pltlab.run import runner
from tests.conftest import pltlab_cmd

ARGS = ("--rtt", "20ms", "--reps", "1", "--tfo", "off", "--json")


def _good(path, domain):
    write_page(generate(objects=3, total_bytes=6000, origins=1, depth=2, seed=3, domain=domain), str(path))


def _error_lines(stderr: str) -> list[str]:
    return [ln for ln in stderr.splitlines() if ln.startswith("pltlab: error:")]


@pytest.mark.root
def test_broken_pages_do_not_discard_the_good_one(tmp_path):
    d = tmp_path / "corpus"
    d.mkdir()
    _good(d / "a-good.har", "good")
    (d / "b-broken.har").write_text('{"log": {"entries": [')  # not JSON
    gone = generate(objects=2, total_bytes=4000, origins=1, depth=1, seed=4, domain="gone")
    gone.objects[0].status = 404  # its document was never there: refused before anything is built
    write_page(gone, str(d / "c-gone.har"))
    cp = pltlab_cmd("run", str(d), *ARGS, timeout=180)
    assert cp.returncode == 2, cp.stderr
    res = json.loads(cp.stdout)  # one object at the end, with every page that ran
    status = {p["page_id"]: p["status"] for p in res["pages"]}
    good = [p for p in res["pages"] if p["status"] == "ok"]
    assert len(good) == 1 and "a-good.har" in good[0]["page_id"] and good[0]["loads"] == 1
    assert len(res["runs"]) == 1 and res["runs"][0]["valid"] and res["runs"][0]["page_id"] == good[0]["page_id"]
    assert res["summary"][0]["n"] == 1 and res["failed_pages"] == 2 == list(status.values()).count("failed")
    lines = _error_lines(cp.stderr)
    assert len(lines) == 2, cp.stderr
    assert lines[0].startswith(f"pltlab: error: {d / 'b-broken.har'}: ") and "not valid HAR" in lines[0]
    assert "c-gone.har" in lines[1] and "answered 404: no document to load" in lines[1]
    assert "Traceback" not in cp.stderr


@pytest.mark.root
def test_a_page_failing_while_it_runs_is_one_line_and_the_next_still_runs(tmp_path, monkeypatch):
    d = tmp_path / "corpus"
    d.mkdir()
    _good(d / "a.har", "first")
    _good(d / "b.har", "second")
    real = runner.PageRunner.load

    def load(self, point, rep):
        if "first" in self.page.url:
            raise RuntimeError("the loader crashed")
        return real(self, point, rep)

    monkeypatch.setattr(runner.PageRunner, "load", load)
    res = CliRunner().invoke(app, ["run", str(d), *ARGS])
    assert res.exit_code == 2, res.output
    out = json.loads(res.stdout)
    assert [p["status"] for p in out["pages"]] == ["failed", "ok"]
    assert len(out["runs"]) == 1 and "second" in out["runs"][0]["page"] and out["runs"][0]["valid"]
    (line,) = _error_lines(res.stderr)
    assert line == f"pltlab: error: {out['pages'][0]['page_id']}: RuntimeError: the loader crashed"


def test_runs_table_has_page_ids(tmp_path):
    from pltlab.experiments.results import Results

    res = Results(str(tmp_path))
    rid = res.add_run(
        {"run_key": "k", "attempt": 1, "status": "ok", "page_id": "x.har#page_1"},
        [
            {
                "index": 0,
                "url": "http://a/",
                "transfer_bytes": 120,
                "body_bytes": 300,
                "encoding": "gzip",
                "protocol": "http/1.1",
            }
        ],
    )
    (row,) = res.rows("runs")
    (req,) = res.rows("requests")
    assert row["page_id"] == "x.har#page_1" and req["run_id"] == rid
    assert (req["transfer_bytes"], req["body_bytes"], req["encoding"], req["protocol"]) == (
        120,
        300,
        "gzip",
        "http/1.1",
    )
    res.close()
