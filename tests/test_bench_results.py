"""The benches' result files (benches/record.py) and the page made from them
(benches/performance_md.py): met or missed computed from value and target, a missed target a
non-zero exit code, every field in the file, files written whole or not at all, the quiet rule's
arithmetic, and a results folder rendered into tables. No root, no network, a few seconds."""

import json
import math
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

BENCHES = Path(__file__).resolve().parent.parent / "benches"
sys.path.insert(0, str(BENCHES))

import performance_md  # noqa: E402
import record  # noqa: E402
from record import Target  # noqa: E402

META = {
    "name": "bench_fake",
    "area": "archive",
    "title": "A fake bench",
    "command": "python3 benches/bench_fake.py",
    "figures": {
        "speed": {"name": "import time", "unit": "s", "target": ("<=", 2.0), "on": "five pages"},
        "ratio": {"name": "a ratio", "unit": "", "target": ("between", 0.99, 1.01)},
        "err": {"name": "an error", "unit": "ms", "target": "depends on the page"},
        "info": {"name": "context", "unit": "ms", "target": None},
    },
}

FILE_FIELDS = {
    "schema",
    "bench",
    "area",
    "title",
    "status",
    "exit_code",
    "missed",
    "skipped",
    "error",
    "quick",
    "command",
    "argv",
    "started",
    "finished",
    "duration_s",
    "machine",
    "quiet",
    "figures",
}
MACHINE_FIELDS = {
    "hostname",
    "kernel",
    "cpu_model",
    "cpus",
    "memory_gib",
    "python",
    "pltlab",
    "pltlab_dp",
    "git_commit",
}
QUIET_FIELDS = {
    "quiet",
    "rule",
    "cpus",
    "busy_before",
    "idle_s",
    "load1_start",
    "load1_end",
    "others_cpu_share",
    "others_cpu_share_worst_window",
    "own_cpu_share",
    "irq_share",
    "steal_share",
    "samples",
}


@pytest.mark.parametrize(
    "op, bound, met, missed",
    [
        ("<=", 2.0, [2.0, 1.9, -5], [2.01, 100]),
        ("<", 2.0, [1.99], [2.0, 3]),
        (">=", 0.7, [0.7, 0.96], [0.69, 0]),
        (">", 500, [501], [500, 10]),
        ("==", 0, [0, 0.0], [1, -1]),
        ("==", True, [True], [False]),
        ("between", (0.045, 0.055), [0.045, 0.05, 0.055], [0.0449, 0.056]),
        ("abs<=", 4.8, [4.8, -4.8, 0.0], [4.81, -4.81]),
    ],
)
def test_met_is_computed_from_value_and_target(op, bound, met, missed):
    t = Target(op, bound)
    assert all(t.met(v) for v in met), [(v, t.met(v)) for v in met]
    assert not any(t.met(v) for v in missed), [(v, t.met(v)) for v in missed]
    assert t.met(None) is False and t.met(float("nan")) is False  # nothing measured misses
    assert Target.from_json(json.loads(json.dumps(t.to_json()))) == t


def test_target_forms_and_mistakes():
    assert Target.of(("between", 0, 0.6)) == Target("between", (0, 0.6))
    assert Target.of(("<=", 2)) == Target("<=", 2)
    assert Target.of(None) is None
    assert Target("<=", 2).text("s") == "<= 2 s" and Target("abs<=", 4.8).text("ms") == "within ±4.8 ms"
    assert Target("==", True).text() == "yes" and Target("between", (0.99, 1.01)).text("x") == "0.99 x .. 1.01 x"
    with pytest.raises(ValueError):
        Target("~", 1)
    with pytest.raises(ValueError):
        Target("between", (2, 1))
    with pytest.raises(ValueError):
        Target("<=", (1, 2))
    with pytest.raises(ValueError):
        Target("<=", 1).met(True)  # a yes/no figure is compared with ("==", True) only


@pytest.fixture
def fast_machine(monkeypatch):
    """record.machine without its subprocesses (git, pltlab-dp --version): the tests that are not
    about it."""
    monkeypatch.setattr(record, "machine", lambda chromium=False: {"hostname": "test", "cpus": 2})


def run_bench(tmp_path, body, **kw) -> record.Bench:
    b = record.Bench(META, results=tmp_path, argv=["benches/bench_fake.py", "--x"], sample_s=0.05, **kw)
    with b:
        body(b)
    return b


def test_file_has_every_field_and_met_is_not_hand_written(tmp_path):
    def body(b):
        b.figure("speed", 1.5, samples=[1.4, 1.5, 3.0])
        b.figure("ratio", 1.0004)
        b.figure("err", -3.2, target=("abs<=", 4.8), name="an error at 20 ms")
        b.figure("info", 12.0)
        b.check("ok", True, name="a yes/no figure")

    b = run_bench(tmp_path, body)
    assert b.exit_code == 0
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert FILE_FIELDS <= set(data), FILE_FIELDS - set(data)
    assert MACHINE_FIELDS <= set(data["machine"]), MACHINE_FIELDS - set(data["machine"])
    assert QUIET_FIELDS <= set(data["quiet"]), QUIET_FIELDS - set(data["quiet"])
    assert data["status"] == "met" and data["missed"] == [] and data["quick"] is False
    assert data["command"] == "python3 benches/bench_fake.py --x"
    assert time.strptime(data["started"], "%Y-%m-%dT%H:%M:%SZ") <= time.strptime(data["finished"], "%Y-%m-%dT%H:%M:%SZ")
    figs = {f["name"]: f for f in data["figures"]}
    speed = figs["import time"]
    assert speed["target"] == {"op": "<=", "bound": 2.0} and speed["met"] is True and speed["unit"] == "s"
    assert speed["dist"] == {"n": 3, "min": 1.4, "median": 1.5, "max": 3.0} and speed["on"] == "five pages"
    assert figs["an error at 20 ms"]["target"] == {"op": "abs<=", "bound": 4.8}
    assert figs["context"]["target"] is None and figs["context"]["met"] is None
    assert figs["a yes/no figure"]["met"] is True


def test_a_missed_target_is_a_nonzero_exit(tmp_path, fast_machine):
    b = run_bench(tmp_path, lambda b: (b.figure("speed", 2.5), b.figure("ratio", 1.0)))
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert b.exit_code == 1 and data["exit_code"] == 1 and data["status"] == "missed"
    assert data["missed"] == ["import time"]
    # nothing valid measured: missed too (NaN is not JSON: stored as null)
    b = run_bench(tmp_path, lambda b: b.figure("speed", math.nan))
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert b.exit_code == 1 and data["figures"][0]["value"] is None and data["figures"][0]["met"] is False


def test_a_bench_script_exits_nonzero_on_a_missed_target(tmp_path):
    script = tmp_path / "bench_demo.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import sys
            sys.path.insert(0, {str(BENCHES)!r})
            import record
            META = {{"name": "bench_demo", "area": "scale", "figures": {{"t": {{"name": "t", "unit": "s", "target": ("<=", 1)}}}}}}
            with record.Bench(META) as b:
                b.figure("t", float(sys.argv[1]))
            sys.exit(b.exit_code)
            """
        )
    )
    env = dict(os.environ, **{record.RESULTS_ENV: str(tmp_path / "res")})
    for value, rc in (("0.5", 0), ("1.5", 1)):
        cp = subprocess.run([sys.executable, str(script), value], env=env, capture_output=True, text=True, timeout=60)
        assert cp.returncode == rc, cp.stdout + cp.stderr
        data = json.loads((tmp_path / "res" / "bench_demo.json").read_text())
        assert data["status"] == ("met" if rc == 0 else "missed")
        assert data["command"].endswith(f"bench_demo.py {value}")


def test_skipped_error_and_interrupt(tmp_path, fast_machine):
    b = run_bench(tmp_path, lambda b: b.skip("needs root"))
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert b.exit_code == 0 and data["status"] == "skipped" and data["skipped"] == "needs root"
    run_bench(tmp_path, lambda b: b.figure("ratio", 1.0))
    measured = (tmp_path / "bench_fake.json").read_text()
    b = run_bench(tmp_path, lambda b: b.skip("no data here"))  # measured nothing: the measurement stays
    assert b.exit_code == 0 and (tmp_path / "bench_fake.json").read_text() == measured
    # one figure skipped, the other measured: the file is what was measured
    run_bench(tmp_path, lambda b: (b.skip("corpus absent", key="speed"), b.figure("ratio", 1.0)))
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert data["status"] == "met" and data["figures"][0]["skipped"] == "corpus absent"

    def boom(b):
        b.figure("ratio", 1.0)
        raise RuntimeError("replay died")

    with pytest.raises(RuntimeError):
        run_bench(tmp_path, boom)
    data = json.loads((tmp_path / "bench_fake.json").read_text())
    assert data["status"] == "error" and data["exit_code"] == 1 and "replay died" in data["error"]

    before = (tmp_path / "bench_fake.json").read_text()

    def interrupted(b):
        b.figure("speed", 99.0)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_bench(tmp_path, interrupted)
    assert (tmp_path / "bench_fake.json").read_text() == before  # an interrupted run writes nothing


def test_quick_runs_go_to_their_own_folder(tmp_path, fast_machine):
    run_bench(tmp_path, lambda b: b.figure("speed", 1.0), quick=True)
    assert (tmp_path / "quick" / "bench_fake.json").exists() and not (tmp_path / "bench_fake.json").exists()
    assert record.load_results(tmp_path) == {}  # the docs never show a quick run


def test_written_whole_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "bench_fake.json"
    record.write_atomic(path, {"schema": 1, "old": True})
    old = path.read_text()

    def fail(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(record.os, "fsync", fail)
    with pytest.raises(OSError):
        record.write_atomic(path, {"schema": 1, "new": "x" * 100_000})
    assert path.read_text() == old
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench_fake.json"]  # no temporary file left
    monkeypatch.undo()
    with pytest.raises(ValueError):  # not strict JSON: nothing written either
        record.write_atomic(path, {"x": float("nan")})
    assert path.read_text() == old


def test_quiet_rule_arithmetic():
    ticks = os.sysconf("SC_CLK_TCK")
    s = record.QuietSampler(root=os.getpid(), interval=1)
    s.cpus = 2
    s.load_start, s.load_end = (2.5, 0.5, 0.5), (0.6, 0.5, 0.5)  # the load average is recorded, not judged
    s.busy_before = 0.05

    def cpu(busy, irq=0, steal=0):
        return {"busy": busy, "irq": irq, "steal": steal, "total": 0}

    # 20 s on 2 CPUs = 40 s of CPU: the tree used 10 s, the machine 13 s -> others 3 s = 7.5 %
    s.samples = [(0.0, cpu(0), 0), (10.0, cpu(6 * ticks), 5 * ticks), (20.0, cpu(13 * ticks, steal=ticks), 10 * ticks)]
    f = s.figures()
    assert f["quiet"] is True and f["others_cpu_share"] == pytest.approx(0.075, abs=1e-3)
    assert f["own_cpu_share"] == pytest.approx(0.25, abs=1e-3) and f["steal_share"] == pytest.approx(0.025, abs=1e-3)
    assert f["others_cpu_share_worst_window"] == pytest.approx(0.1, abs=1e-3)  # 2 s of 20 in the second window
    assert f["load1_start"] == 2.5 and f["busy_before"] == 0.05
    # others at 15 %: not quiet; nor with the machine busier than 10 % before the start
    s.samples = [(0.0, cpu(0), 0), (10.0, cpu(8 * ticks), 5 * ticks)]
    assert s.figures()["quiet"] is False
    s.samples = [(0.0, cpu(0), 0), (10.0, cpu(5 * ticks), 5 * ticks)]
    assert s.figures()["quiet"] is True
    s.busy_before = 0.2
    assert s.figures()["quiet"] is False
    s.busy_before = None  # not measured: not quiet
    assert s.figures()["quiet"] is False


def test_busy_before_sees_a_busy_machine():
    burn = "import time\nt = time.monotonic()\nwhile time.monotonic() - t < 3: pass"
    s = record.QuietSampler(root=os.getpid(), idle_s=1.0)
    s.cpus = 1  # one CPU's worth of burning: at least about 100 % of one CPU, whatever the machine has
    p = subprocess.Popen([sys.executable, "-c", burn])
    try:
        time.sleep(0.3)
        assert s.measure_idle() >= 0.8
    finally:
        p.wait(timeout=30)


@pytest.mark.root
def test_processes_of_a_namespace_made_during_the_run_are_the_benchs(tmp_path):
    """A process started with `ip netns exec` and re-parented away from the bench's tree (as
    Chromium's are) counts as the bench's when its namespace appeared after the start."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    ns = f"plttest-quiet-{os.getpid()}"
    s = record.QuietSampler(root=os.getpid(), idle_s=0)
    s.start()
    subprocess.run(["ip", "netns", "add", ns], check=True)
    pidfile = tmp_path / "pid"
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass\ntime.sleep(5)"
    try:
        # the shell leaves the burner behind: its parent becomes init (or a subreaper), not us
        subprocess.run(
            ["ip", "netns", "exec", ns, "sh", "-c", f'setsid {sys.executable} -c "$0" & echo $! > {pidfile}', burn],
            check=True,
            timeout=30,
        )
        pid = int(pidfile.read_text())
        assert pid not in record._tree(os.getpid(), record._proc_table())
        deadline = time.monotonic() + 30  # (a loaded machine gives the burner its 0.6 s slowly)
        while s.own_cpu() - s.samples[0][2] < 0.5 * os.sysconf("SC_CLK_TCK") and time.monotonic() < deadline:
            time.sleep(0.2)
        assert s.own_cpu() - s.samples[0][2] >= 0.5 * os.sysconf("SC_CLK_TCK")
    finally:
        s.stop()
        for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
            try:
                os.kill(int(p), 9)
            except OSError:
                pass
        subprocess.run(["ip", "netns", "del", ns], check=False)


@pytest.mark.root
def test_the_control_group_counts_an_orphan_that_ended_between_samples(tmp_path):
    """A process the bench started, re-parented away (setsid, its parent gone) and ended before
    any sample saw it: its CPU is the bench's (the process tree alone loses it), and the bench's
    group is gone after stop."""
    if os.geteuid() != 0:
        pytest.skip("needs root")
    s = record.QuietSampler(root=os.getpid(), idle_s=0, interval=3600)  # no sample but start's and stop's
    s.start()
    if s.group is None:
        s.stop()
        pytest.skip("no cgroup hierarchy to make a group in")
    path = s.group.path
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.6: pass"
    try:
        before = s.own_cpu()
        subprocess.run(
            ["sh", "-c", f'setsid {sys.executable} -c "$0" & echo $! > {tmp_path / "pid"}', burn], check=True
        )
        pid = int((tmp_path / "pid").read_text())
        deadline = time.monotonic() + 60
        while os.path.exists(f"/proc/{pid}") and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not os.path.exists(f"/proc/{pid}")
        assert s.own_cpu() - before >= 0.5 * os.sysconf("SC_CLK_TCK")
    finally:
        f = s.stop()
    assert f["own_counted_by"] == "control group" and not os.path.exists(path)
    assert record.CpuGroup.PREFIX not in Path("/proc/self/cgroup").read_text()  # back where it began


def test_the_tree_counts_its_children_once_reaped():
    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.3: pass"
    before = record.tree_cpu(os.getpid())
    subprocess.run([sys.executable, "-c", burn], check=True, timeout=60)
    assert record.tree_cpu(os.getpid()) - before >= 0.25 * os.sysconf("SC_CLK_TCK")


def fake_benches(d: Path) -> Path:
    d.mkdir()
    for name, area in (("bench_a", "archive"), ("bench_b", "archive"), ("bench_c", "scale")):
        meta = dict(META, name=name, area=area, command=f"python3 benches/{name}.py")
        (d / f"{name}.py").write_text(f"import record\n\nMETA = {meta!r}\n\nraise SystemExit('not imported')\n")
    return d


def test_the_page_shows_each_file_as_a_table_with_missed(tmp_path, fast_machine):
    benches = fake_benches(tmp_path / "benches")
    res = tmp_path / "results"
    for name, speed in (("bench_a", 1.2), ("bench_b", 7.5)):
        m = dict(META, name=name)
        with record.Bench(m, results=res, argv=[f"benches/{name}.py"], sample_s=0.05) as b:
            b.figure("speed", speed, samples=[speed, speed + 1, speed - 0.1])
            b.figure("err", 3.0, target=("abs<=", 2.5), name="an error at 20 ms")
    notes = tmp_path / "notes.md"
    notes.write_text("<!-- comment -->\n## archive\n\n- How it is measured.\n")
    page = performance_md.build(res, benches, notes, tmp_path / "no-docs-results")
    rows = [ln for ln in page.splitlines() if ln.startswith("| import time") and "not measured yet" not in ln]
    assert len(rows) == 2, rows
    a, b_ = rows
    cells = [c.strip() for c in a.strip("|").split("|")]
    assert cells[1].startswith("1.20 s (median of 3") and cells[2] == "<= 2 s" and cells[3] == "met"
    assert cells[6] == "`python3 benches/bench_a.py`"
    cells = [c.strip() for c in b_.strip("|").split("|")]
    assert cells[1].startswith("7.50 s") and cells[3] == "**missed**"
    assert cells[4].endswith("UTC") and cells[5].startswith(("yes (", "**no** ("))
    err_rows = [ln for ln in page.splitlines() if ln.startswith("| an error at 20 ms")]
    assert all("within ±2.5 ms" in r and "**missed**" in r for r in err_rows) and len(err_rows) == 2
    # declared figures the run did not measure, and a bench with no file yet
    assert "| a ratio | not in the last run" in page
    assert "not measured yet (`python3 benches/bench_c.py`)" in page
    assert "## Archives and conformance" in page and "## Scale" in page and "- How it is measured." in page
    assert (
        "| bench_b | Archives and conformance |" in page and "**missed**" in page.split("## Benches")[1].split("##")[0]
    )
    assert "<!--" not in page.split("-->", 1)[1]  # the notes' comment stays out
    # the page is a function of its files: the same files, the same page
    assert performance_md.build(res, benches, notes, tmp_path / "no-docs-results") == page


def test_every_bench_declares_its_figures():
    """Each benches/bench_*.py has a literal META (read without importing it) that the page uses."""
    areas = {a for a, _ in performance_md.AREAS}
    for p in sorted(BENCHES.glob("bench_*.py")):
        m = record.read_meta(p)
        assert m and m["name"] == p.stem and m["area"] in areas, p
        assert m["command"].startswith(f"python3 benches/{p.name}") and m["figures"], p
        for key, spec in m["figures"].items():
            assert spec["name"] and "unit" in spec, (p, key)
            t = spec.get("target")
            assert t is None or isinstance(t, str) or Target.of(t), (p, key)


def test_performance_md_is_generated_from_the_results():
    """docs/performance.md is what benches/performance_md.py makes of benches/results/ (and
    docs/results/): no figure in it that is not in a file. After `make bench`, or a change to the
    benches' META or benches/notes.md: python3 benches/performance_md.py."""
    page = performance_md.OUT.read_text()
    assert page == performance_md.build(), "docs/performance.md is stale: run python3 benches/performance_md.py"
