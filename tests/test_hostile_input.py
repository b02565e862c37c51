"""Hostile input (issue 12), class by class, through the CLI: a non-zero exit, one error line
naming the file, entry or key and the value, no traceback, nothing written outside the output
folder and nothing half-written; limits refused before any namespace exists; drops and repairs
said, never silent; a sweep whose runs all failed exits non-zero."""

import json
import os

import pytest

from tests.conftest import leaked, pltlab_cmd, project_state

T0 = "2024-01-01T00:00:00.000Z"


def tree(d) -> list[str]:
    return sorted(os.path.relpath(os.path.join(r, n), d) for r, ds, fs in os.walk(d) for n in ds + fs)


def one_error(cp, *needles) -> str:
    """The one line a refused input gives (stderr), checked for every needle."""
    assert cp.returncode != 0, (cp.stdout, cp.stderr)
    assert "Traceback" not in cp.stderr, cp.stderr
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, cp.stderr
    assert lines[0].startswith("pltlab: error: "), lines[0]
    for n in needles:
        assert n in lines[0], (n, lines[0])
    return lines[0]


def entry(url, size=100, status=200, **response):
    return {
        "startedDateTime": T0,
        "time": 5,
        "request": {"method": "GET", "url": url, "headers": []},
        "response": {
            "status": status,
            "headers": [],
            **response,
            "content": {"size": size, "mimeType": "text/html", **response.pop("content", {})},
        },
    }


def write_har(path, entries) -> str:
    with open(path, "w") as f:
        json.dump({"log": {"version": "1.2", "creator": {"name": "test"}, "entries": entries}}, f)
    return str(path)


# ---- 1. an experiment's name is a name: nothing is written outside the output folder -------------


@pytest.mark.parametrize("name", ["../../../x", "/tmp/pltlab-abs", ".hidden", "a/b", "x" * 101, "", "tab\there"])
def test_experiment_name_cannot_leave_the_results_folder(tmp_path, name):
    cwd = tmp_path / "a" / "b" / "c"
    cwd.mkdir(parents=True)
    write_har(cwd / "p.har", [entry("http://a.test/")])
    (cwd / "exp.toml").write_text(f'name = {json.dumps(name)}\npages = ["p.har"]\nrtt = "10ms"\n')
    before = tree(tmp_path)
    cp = pltlab_cmd("sweep", "exp.toml", cwd=cwd)
    one_error(cp, "exp.toml: key 'name'", "names the output folder")
    assert tree(tmp_path) == before and not os.path.exists("/tmp/pltlab-abs")


def test_output_folder_that_is_a_file_is_refused(tmp_path):
    write_har(tmp_path / "p.har", [entry("http://a.test/")])
    (tmp_path / "exp.toml").write_text('name = "ok"\npages = ["p.har"]\n')
    (tmp_path / "taken").write_text("x")
    before = tree(tmp_path)
    one_error(
        pltlab_cmd("sweep", str(tmp_path / "exp.toml"), "-o", str(tmp_path / "taken")), "taken", "not a directory"
    )
    one_error(pltlab_cmd("reproduce", "tfo", "--quick", "-o", str(tmp_path / "taken")), "taken", "not a directory")
    one_error(pltlab_cmd("calibrate", "amazon", "-o", str(tmp_path / "taken" / "sub")), "not a directory")
    assert tree(tmp_path) == before


# ---- 2. archives: one line instead of a traceback, nothing half-written ------------------------

ARCHIVES = {
    "port": ([entry("http://a.test/"), entry("http://a.test:99999/x.js")], ("entry 1", "99999")),
    "port zero": ([entry("http://a.test/"), entry("http://a.test:0/x.js")], ("entry 1", "port 0")),
    "no host": ([entry("http://a.test/"), entry("http:///x.js")], ("entry 1", "has no host")),
    "object of 2e9": (
        [entry("http://a.test/"), entry("http://a.test/big", size=2_000_000_000)],
        ("entry 1", "content.size = 2000000000", "1 GiB"),
    ),
    "object of 1e15": (
        [entry("http://a.test/"), entry("http://a.test/big", size=1000, bodySize=10**15)],
        ("entry 1", "response.bodySize = 1000000000000000"),
    ),
    "content-length": (
        [
            entry(
                "http://a.test/",
                headers=[
                    {"name": "Content-Encoding", "value": "gzip"},
                    {"name": "Content-Length", "value": "5000000000"},
                ],
            )
        ],
        ("entry 0", "5000000000 bytes", "1 GiB"),
    ),
    "page of 5 GiB": (
        [entry("http://a.test/")] + [entry(f"http://a.test/{i}", size=1 << 30) for i in range(5)],
        ("page 1", "5368709220 bytes", "4 GiB"),
    ),
    "ftp document": ([entry("ftp://a.test/"), entry("http://a.test/b")], ("entry 0", "ftp://a.test/", "http(s)")),
    "status": ([entry("http://a.test/", status="abc")], ("entry 0", "invalid status 'abc'")),
    "status range": ([entry("http://a.test/", status=99999)], ("entry 0", "invalid status 99999")),
    "time": ([{**entry("http://a.test/"), "startedDateTime": [[["x"]]]}], ("entry 0", "startedDateTime a list")),
    "method": (
        [{**entry("http://a.test/"), "request": {"url": "http://a.test/", "method": "GET /x HTTP/1.1\r\n"}}],
        ("entry 0", "invalid request method"),
    ),
}


@pytest.mark.parametrize("case", sorted(ARCHIVES))
def test_bad_archive_is_one_line_naming_entry_and_value(tmp_path, case):
    entries, needles = ARCHIVES[case]
    src = write_har(tmp_path / "in.har", entries)
    before = tree(tmp_path)
    one_error(pltlab_cmd("import", src, "-o", str(tmp_path / "new" / "arc")), src, *needles)
    assert tree(tmp_path) == before  # no archive, no folder, no temporary folder
    if case in ("port", "object of 2e9"):  # `run` reads it the same way, before building anything
        one_error(pltlab_cmd("run", src, "--rtt", "10ms"), src, *needles)


@pytest.mark.parametrize(
    "text,needle",
    [
        ('{"log": {"entries": ' + "[" * 100_000 + "]" * 100_000 + "}}", "nested too deeply"),
        ('{"log": {"entries": [' + json.dumps(entry("http://a.test/"))[:-2] + ', "time": NaN}]}}', "NaN"),
        (
            '{"log": {"entries": [{"request": {"url": "http://a.test/"}, "response": {"status": 200, "content": {"size": 1'
            + "0" * 5000
            + "}}}]}}",
            "not valid HAR",
        ),
        (
            '{"log": {"entries": [{"request": {"url": "http://a.test/"}, "response": {"status": 200}, "_pltlab": '
            + "[" * 200
            + "]" * 200
            + '}]}, "x": 1}',
            None,
        ),
    ],
)
def test_absurd_json_is_one_line(tmp_path, text, needle):
    src = tmp_path / "in.har"
    src.write_text(text)
    before = tree(tmp_path)
    cp = pltlab_cmd("import", str(src), "-o", str(tmp_path / "arc"))
    if needle is None:  # deep where nothing reads it: imported (our `_pltlab` is read only in our own files)
        assert cp.returncode == 0, cp.stderr
        return
    one_error(cp, str(src), needle)
    assert tree(tmp_path) == before


def test_own_archive_with_absurd_fields_is_one_line(tmp_path):
    doc = {
        "log": {"creator": {"name": "pltlab"}, "entries": [{**entry("http://a.test/"), "_pltlab": {"start_ms": 1e300}}]}
    }
    (tmp_path / "own.har").write_text(json.dumps(doc))
    one_error(
        pltlab_cmd("import", str(tmp_path / "own.har"), "-o", str(tmp_path / "arc")),
        "entry 0",
        "_pltlab.start_ms 1e+300",
    )
    doc["log"]["entries"][0]["_pltlab"] = {"x": json.loads("[" * 100 + "]" * 100)}
    (tmp_path / "own.har").write_text(json.dumps(doc))
    one_error(
        pltlab_cmd("import", str(tmp_path / "own.har"), "-o", str(tmp_path / "arc")),
        "entry 0",
        "nested more than 64 levels",
    )
    assert not (tmp_path / "arc").exists()


def test_bad_seed_input_is_one_line_naming_file_and_line(tmp_path):
    (tmp_path / "S").mkdir()
    (tmp_path / "S.fetchlog").mkdir()
    (tmp_path / "S.pages").write_text("http://a.test:99999/\n")
    one_error(pltlab_cmd("import", str(tmp_path / "S.pages"), "-o", str(tmp_path / "arc")), "S.pages", "99999")
    (tmp_path / "S.pages").write_text("http://a.test/\n")
    (tmp_path / "S.fetchlog" / "httpa.test").write_text(
        "<transactions>\nh\n0 | 10 | 10 | http://a.test/\nnan | 5 | 5 | http://a.test/x.js\n</transactions>\n"
    )
    one_error(
        pltlab_cmd("import", str(tmp_path / "S.pages"), "-o", str(tmp_path / "arc")),
        "httpa.test:4",
        "transaction time nan",
    )
    (tmp_path / "S.fetchlog" / "httpa.test").write_text(
        "<transactions>\nh\n0 | 10 | 10 | http://a.test/\n</transactions>\n<responses>\nh\n"
        "Found | text/html | | http://a.test/ -> gopher://elsewhere/\n</responses>\n"
    )
    one_error(
        pltlab_cmd("import", str(tmp_path / "S.pages"), "-o", str(tmp_path / "arc")),
        "httpa.test:7",
        "redirect target 'gopher://elsewhere/'",
    )
    assert not (tmp_path / "arc").exists()


# ---- 3. knobs: limits checked at parse time, before any namespace exists -------------------------


@pytest.mark.parametrize(
    "args,needle",
    [
        (["run", "nytimes", "--rtt", "99999999999s"], "invalid --rtt '99999999999s': at most 10 s"),
        (["run", "nytimes", "--rate", "1000gbit"], "invalid --rate '1000gbit'"),
        (["run", "nytimes", "--reps", "10001"], "invalid --reps 10001"),
        (["run", "nytimes", "--icw", "5000"], "invalid --icw 5000"),
        (["run", "nytimes", "--client-rmem", "1GiB"], "invalid --client-rmem '1GiB' (1073741824 bytes)"),
        (["run", "nytimes", "--queue", "99999999999"], "at most 1000000 packets"),
        (["run", "nytimes", "--tfo", "maybe"], "invalid --tfo 'maybe': on, off or both"),
        (["run", "nytimes", "--client", "lynx"], "invalid --client 'lynx'"),
        (["run", "nytimes", "--model", "firefox"], "invalid --model 'firefox'"),
        (["run", "nytimes", "--origin-rtt", "a b=5ms"], "invalid --origin-rtt 'a b=5ms'"),
        (["shell", "--rtt", "99999999999s", "--", "true"], "invalid --rtt '99999999999s': at most 10 s"),
        (["shell", "--rate", "500bit", "--", "true"], "invalid --rate '500bit': must be from 1kbit"),
        (["shell", "--loss", "nan", "--", "true"], "invalid --loss 'nan'"),
        (["shell", "--queue", "100b", "--", "true"], "from 1500 bytes"),
        (["shell", "--seed", "99999999999", "--", "true"], "invalid --seed 99999999999"),
        (["shell", "--origin-rtt", "a.test=5ms", "--", "true"], "name origins by number"),
        (["shell", "--origins", "2", "--origin-rtt", "1=20s", "--", "true"], "invalid origin rtt '20s'"),
        (["shell", "--origins", "2", "--origin-rtt", "²=20ms", "--", "true"], "invalid --origin-rtt"),
        (["shell"], "needs a command"),
        (["reproduce", "tfo", "--reps", "0"], "invalid --reps 0"),
    ],
)
def test_out_of_range_knob_is_refused_before_anything_is_built(tmp_path, args, needle):
    before = project_state()
    cp = pltlab_cmd(*args, cwd=tmp_path)
    one_error(cp, needle)
    assert "pltlab shell: run" not in cp.stderr and not leaked(before)
    assert tree(tmp_path) == []


@pytest.mark.parametrize(
    "line,key,value",
    [
        ('rtt = ["1000000000s"]', "rtt", "'1000000000s': at most 10 s"),
        ("rtt = [inf]", "rtt", "inf"),
        ('rate = ["1000gbit"]', "rate", "'1000gbit'"),
        ("queue = [99999999999]", "queue", "99999999999"),
        ("loss = nan", "loss", "nan"),
        ("seed = 99999999999", "seed", "99999999999"),
        ("repetitions = 10001", "repetitions", "10001"),
        ('origin_rtt = [{"0" = "20s"}]', "origin_rtt", "'20s'"),
        ('origin_rtt = [{"0" = [1]}]', "origin_rtt", "a list"),
        ('client_rmem = "1GiB"', "client_rmem", "1073741824"),
    ],
)
def test_experiment_file_limits_name_file_key_and_value(tmp_path, line, key, value):
    write_har(tmp_path / "p.har", [entry("http://a.test/")])
    (tmp_path / "exp.toml").write_text(f'name = "x"\npages = ["p.har"]\n{line}\n')
    before = tree(tmp_path)
    one_error(pltlab_cmd("sweep", "exp.toml", cwd=tmp_path), f"exp.toml: key '{key}'", value)
    assert tree(tmp_path) == before  # no results/x


@pytest.mark.parametrize(
    "text,key,value",
    [
        ('[icw]\nrate = "1000gbit"\n', "icw.rate", "'1000gbit'"),
        ("[icw]\nseed = 99999999999\n", "icw.seed", "99999999999"),
        ("[icw.rtt]\nrtts_ms = [nan]\n", "icw.rtt.rtts_ms", "nan"),
        ('[icw.fairness]\nrate = "500bit"\n', "icw.fairness.rate", "'500bit'"),
    ],
)
def test_icw_study_file_limits(tmp_path, text, key, value):
    (tmp_path / "study.toml").write_text(text)
    cp = pltlab_cmd("reproduce", "icw", "--config", "study.toml", "-o", "out", cwd=tmp_path)
    one_error(cp, f"study.toml: key '{key}'", value)
    assert tree(tmp_path) == ["study.toml"]


def test_sweep_whose_runs_all_failed_exits_non_zero(tmp_path, monkeypatch):
    from typer.testing import CliRunner

    from pltlab.cli import app
    from pltlab.errors import PltError
    from pltlab.run import kinds

    class Broken:
        def __init__(self, page, cfg):
            raise PltError("replay refused: injected")

    monkeypatch.setitem(kinds.KINDS, "page_load", Broken)
    write_har(tmp_path / "p.har", [entry("http://a.test/")])
    (tmp_path / "exp.toml").write_text('name = "x"\npages = ["p.har"]\nrtt = "10ms"\ntfo = "on"\nrepetitions = 2\n')
    res = CliRunner().invoke(app, ["sweep", str(tmp_path / "exp.toml"), "-o", str(tmp_path / "out")])
    assert res.exit_code == 2, res.output
    assert "0 runs in" in res.output and "all 2 failed" in res.output
    assert (tmp_path / "out" / "results.sqlite").is_file()  # what failed is recorded


# ---- 4. never silent: what an import drops or repairs is said ----------------------------------


def test_dropped_entries_and_bad_sizes_are_said(tmp_path):
    es = [
        entry("http://a.test/"),
        entry("http://a.test/1", size="abc"),
        entry("http://a.test/2", size=-5),
        entry("http://a.test/3", size=1.5),
        entry("http://a.test/4", size=True),
        entry("data:text/plain,hi"),
        entry("gopher://g.test/"),
        {**entry("http://a.test/5"), "response": None},
    ]
    src = write_har(tmp_path / "in.har", es)
    cp = pltlab_cmd("import", src, "-o", str(tmp_path / "arc"))
    assert cp.returncode == 0, cp.stderr
    lines = cp.stdout.splitlines()
    assert (
        f'{src}: 4 entries: size field not a whole number of bytes ("abc", -5, 1.5, true): not recorded, '
        "the other sizes used" in lines
    ), cp.stdout
    for kind in (
        "data: URLs (not fetched over HTTP): dropped",
        "gopher: URLs (not fetched over HTTP): dropped",
        "no response recorded: dropped",
    ):
        assert f"{src}: 1 entry: {kind}" in lines, cp.stdout
    assert "http://a.test/: 5 objects" in cp.stdout
