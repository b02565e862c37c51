"""Results folders that are never silently wrong: damaged databases refused by every reader and
salvaged, one writer per folder, a full disk said in one line with the database intact (issue 24)."""

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from pltlab.errors import PltError
from pltlab.experiments import lock
from pltlab.experiments.results import DiskFull, Results
from tests.conftest import pltlab_cmd

REQS_PER_RUN = 60


def _folder(path, runs: int = 400) -> str:
    """A results folder with ``runs`` runs of REQS_PER_RUN requests each (and their HARs)."""
    os.makedirs(path, exist_ok=True)
    res = Results(str(path))
    res.set_meta(name="synthetic", digest="d" * 16)
    for i in range(runs):
        row = {"run_key": f"k{i}", "attempt": 1, "status": "ok", "page": "p", "plt_ms": 100.0 + i, "rep": i}
        reqs = [{"index": j, "url": f"http://a.test/{i}/{j}", "host": "a.test", "bytes": 1000} for j in range(60)]
        res.add_run(row, reqs, har={"log": {"entries": [{"n": j} for j in range(REQS_PER_RUN)]}})
    res.close()
    return str(path)


def _damage(folder: str) -> None:
    """16 KB of garbage in the middle of the database (what the probe did)."""
    db = os.path.join(folder, "results.sqlite")
    size = os.path.getsize(db)
    with open(db, "r+b") as f:
        f.seek(size // 2 - size // 2 % 4096)
        f.write(bytes((i * 97 + 13) % 256 for i in range(16384)))


def _contents(folder: str) -> dict:
    """The folder's files and their bytes (SQLite's -wal/-shm and the lock file left out)."""
    out = {}
    for n in os.listdir(folder):
        if not n.endswith(("-wal", "-shm")) and n != lock.LOCK_NAME:
            with open(os.path.join(folder, n), "rb") as f:
                out[n] = f.read()
    return out


def _one_error_line(cp) -> str:
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode != 0 and len(lines) == 1 and lines[0].startswith("pltlab: error: "), cp.stderr
    return lines[0]


def test_damaged_database_refused_by_every_reader(tmp_path):
    folder = _folder(tmp_path / "res")
    with open(os.path.join(folder, "experiment.toml"), "w") as f:
        f.write('name = "synthetic"\npages = ["wikipedia"]\nrtt = "20ms"\n')
    assert pltlab_cmd("export", f"{folder}#3", "-o", str(tmp_path / "ok.har")).returncode == 0
    _damage(folder)
    before = _contents(folder)
    commands = [
        ("report", folder),
        ("compare", folder, folder),
        ("explain", f"{folder}#3"),
        ("export", f"{folder}#3", "-o", str(tmp_path / "x.har")),
        ("predict", folder),
        ("sweep", os.path.join(folder, "experiment.toml"), "-o", folder, "--resume"),
    ]
    for args in commands:
        line = _one_error_line(pltlab_cmd(*args))
        assert "results.sqlite" in line and "damaged" in line and "pltlab salvage" in line, (args, line)
    assert not os.path.exists(tmp_path / "x.har")
    assert _contents(folder) == before  # nothing written, nothing half-written


def test_salvage_keeps_every_whole_run(tmp_path):
    folder = _folder(tmp_path / "res", runs=400)
    _damage(folder)
    cp = pltlab_cmd("salvage", folder, "-o", str(tmp_path / "new"), "--json")
    assert cp.returncode == 0, cp.stderr
    got = json.loads(cp.stdout)
    assert got["tables"]["requests"]["lost_ranges"], "the damage should have cost some request rows"
    db = sqlite3.connect(tmp_path / "new" / "results.sqlite")
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    per_run = dict(db.execute("SELECT run_id, COUNT(*) FROM requests GROUP BY run_id"))
    runs = [r[0] for r in db.execute("SELECT id FROM runs")]
    # every run kept has all of its requests; the damage (16 KB) costs a handful of runs only
    assert runs and all(per_run.get(r) == REQS_PER_RUN for r in runs)
    assert 380 <= len(runs) < 400 and len(got["dropped_runs"]) == 400 - len(runs)
    assert dict(db.execute("SELECT key, value FROM meta"))["name"] == '"synthetic"'
    # the salvaged folder reads like any other (the report refuses it only for what it lacks)
    cp = pltlab_cmd("explain", f"{tmp_path / 'new'}#{runs[0]}")
    assert "damaged" not in cp.stderr
    # never into the damaged folder itself, nor into a folder with something in it
    assert "new folder" in _one_error_line(pltlab_cmd("salvage", folder, "-o", folder))


def test_zeroed_and_truncated_databases_refused(tmp_path):
    folder = _folder(tmp_path / "res", runs=50)
    db = os.path.join(folder, "results.sqlite")
    with open(db, "r+b") as f:
        f.truncate(os.path.getsize(db) // 3)
    assert "results.sqlite" in _one_error_line(pltlab_cmd("report", folder))
    with open(db, "wb") as f:
        f.write(b"\0" * 8192)
    assert "not a results database" in _one_error_line(pltlab_cmd("report", folder))


def test_full_database_is_one_line_and_stays_intact(tmp_path):
    """SQLITE_FULL (here from a page limit, as a full file system gives it) costs the run being
    stored only: one DiskFull line naming the database; every earlier run is still there."""
    folder = _folder(tmp_path / "res", runs=20)
    res = Results(folder)
    pages = res.db.execute("PRAGMA page_count").fetchone()[0]
    res.db.execute(f"PRAGMA max_page_count = {pages + 2}")
    big = [{"index": j, "url": "http://a.test/" + "x" * 2000, "bytes": 1} for j in range(200)]
    with pytest.raises(DiskFull) as e:
        res.add_run({"run_key": "big", "attempt": 1, "status": "ok", "page": "p", "rep": 1}, big)
    assert "results.sqlite" in str(e.value) and "disk full" in str(e.value) and "--resume" in str(e.value)
    assert "\n" not in str(e.value)
    res.close()
    db = sqlite3.connect(os.path.join(folder, "results.sqlite"))
    assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 20
    assert db.execute("SELECT COUNT(*) FROM runs WHERE run_key = 'big'").fetchone()[0] == 0


def _hold(folder: str) -> subprocess.Popen:
    """Another process holding the folder's lock until killed."""
    code = (
        "import sys, time\nfrom pltlab.experiments import lock\n"
        f"with lock.held({folder!r}, 'sweep'):\n    print('held', flush=True)\n    time.sleep(600)\n"
    )
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_one_writer_per_folder(tmp_path):
    folder = _folder(tmp_path / "res", runs=5)
    with open(os.path.join(folder, "experiment.toml"), "w") as f:
        f.write('name = "synthetic"\npages = ["wikipedia"]\nrtt = "20ms"\n')
    p = _hold(folder)
    try:
        for args in (
            ("report", folder),
            ("sweep", os.path.join(folder, "experiment.toml"), "-o", folder, "--resume"),
        ):
            line = _one_error_line(pltlab_cmd(*args))
            assert f"in use by pid {p.pid}" in line and "nothing was run" in line, line
        assert not os.path.exists(os.path.join(folder, "report.html"))
        # readers are not writers: explain and export still work while it runs
        assert pltlab_cmd("explain", f"{folder}#2").returncode in (0, 2)
        assert "in use" not in pltlab_cmd("explain", f"{folder}#2").stderr
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    # a dead holder holds nothing: the lock is free again at once
    with lock.held(folder, "report"):
        pass


def test_lock_is_reentrant_and_leaves_nothing_when_refused(tmp_path):
    folder = str(tmp_path / "new")
    with lock.held(folder, "study"), lock.held(folder, "sweep"):  # a study's sweep in its own folder
        assert lock.contents(folder) == []
    with pytest.raises(PltError):
        with lock.held(str(tmp_path / "other"), "sweep"):
            raise PltError("refused by a check")
    assert not os.path.exists(tmp_path / "other")  # made by the refused command: removed again
    with pytest.raises(PltError, match="no such folder"):
        with lock.held(str(tmp_path / "missing"), "report", create=False):
            pass


def test_sweep_refused_when_the_disk_is_short(tmp_path, monkeypatch):
    """The free-space check: a sweep whose runs cannot fit is refused before anything runs."""
    from pltlab.experiments import spec, sweep

    path = tmp_path / "exp.toml"
    path.write_text('name = "short"\npages = ["wikipedia", "nytimes"]\nrtt = ["20ms", "100ms"]\nrepetitions = 50\n')
    exp = spec.load(str(path))
    need = sweep.space_needed(exp, exp.n_runs)
    # 400 runs of two bundled pages: tens of MB (database, HARs, exports), not hundreds
    assert 20e6 < need < 400e6, need

    class Usage:
        free = need // 2

    monkeypatch.setattr(sweep.shutil, "disk_usage", lambda p: Usage)
    with pytest.raises(PltError, match="MB free") as e:
        sweep.prepare(exp, str(tmp_path / "out"), resume=False)
    assert "nothing was run" in str(e.value) and not os.path.exists(tmp_path / "out")


@pytest.mark.root
def test_sweep_on_a_full_disk_resumes_with_nothing_lost(tmp_path):
    """A real full file system (a small tmpfs) mid-sweep: one line naming what could not be
    written, non-zero exit, the database intact; after freeing space --resume completes every run
    exactly once."""
    from tests.test_sweep import _exp

    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(mnt)], check=True)
    try:
        exp = _exp(tmp_path, reps=3)
        out = mnt / "out"
        p = subprocess.Popen(
            [sys.executable, "-m", "pltlab", "sweep", exp, "-o", str(out), "--no-report"],
            stderr=subprocess.PIPE,
            text=True,
        )
        filler = mnt / "filler"
        deadline = time.time() + 240
        while time.time() < deadline and p.poll() is None:  # fill the disk after a few runs
            try:
                n = (
                    sqlite3.connect(f"file:{out / 'results.sqlite'}?mode=ro", uri=True)
                    .execute("SELECT COUNT(*) FROM runs")
                    .fetchone()[0]
                )
            except sqlite3.Error:
                n = 0
            if n >= 3:
                subprocess.run(["dd", "if=/dev/zero", f"of={filler}", "bs=1M"], capture_output=True)
                break
            time.sleep(0.2)
        _, err = p.communicate(timeout=240)
        lines = [ln for ln in err.splitlines() if ln.startswith("pltlab: error")]
        assert p.returncode != 0 and len(lines) == 1 and "disk full" in lines[0], err[-3000:]
        assert "Traceback" not in err
        db = sqlite3.connect(out / "results.sqlite")
        assert db.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        stored = db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]
        db.close()
        assert 3 <= stored < 24
        filler.unlink()
        cp = pltlab_cmd("sweep", exp, "-o", str(out), "--resume", "--no-report", timeout=400)
        assert cp.returncode == 0, cp.stderr[-3000:]
        db = sqlite3.connect(out / "results.sqlite")
        keys = [r[0] for r in db.execute("SELECT run_key FROM runs WHERE status = 'ok'")]
        assert len(keys) == len(set(keys)) == 24  # every run once, nothing repeated
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


@pytest.mark.root
def test_two_sweeps_started_at_once(tmp_path):
    """Two sweeps on one folder started together: one runs, the other is refused in one line
    naming it before any load; every run stored once."""
    from tests.test_sweep import _exp

    exp = _exp(tmp_path, reps=1)
    out = str(tmp_path / "out")
    cmd = [sys.executable, "-m", "pltlab", "sweep", exp, "-o", out, "--no-report"]
    ps = [subprocess.Popen(cmd, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    errs = [p.communicate(timeout=300)[1] for p in ps]
    codes = sorted(p.returncode for p in ps)
    assert codes[0] == 0 and codes[1] != 0, errs
    loser = errs[[p.returncode for p in ps].index(codes[1])]
    assert "in use by pid" in loser and "Experiment 1" not in loser and "Traceback" not in loser, loser
    keys = [r[0] for r in sqlite3.connect(os.path.join(out, "results.sqlite")).execute("SELECT run_key FROM runs")]
    assert len(keys) == len(set(keys)) == 8
