"""`pltlab clean` removes only runs whose owning process is gone (owner pid + start time in the
run's work folder); a live run survives it, and `clean RUN_ID` of a live run refuses unless
--force. (PLTLAB_RUN_ID_PREFIX, set by conftest, keeps these cleans to this session's runs.)"""

import os
import signal
import time

import pytest

from pltlab.net import clean, names
from tests.conftest import TAG, pltlab_cmd
from tests.test_teardown import _ours, _start_runner, _wait_for_run, _wait_until


def _gone(run_id: str) -> bool:
    return _ours(run_id)["namespaces"] == [] and not os.path.exists(names.workdir(run_id))


@pytest.mark.root
def test_live_run_survives_clean_and_is_cleaned_once_its_owner_is_killed():
    p = _start_runner("--rtt", "10ms")
    try:
        run_id = _wait_for_run(p)
        left = _ours(run_id)["namespaces"]
        assert len(left) == 2
        assert names.read_owner(run_id) == (p.pid, names.proc_start(p.pid))
        dry = pltlab_cmd("clean", "--dry-run")
        assert dry.returncode == 0 and f"live run {run_id} (kept)" in dry.stdout
        assert not any(ns in dry.stdout for ns in left)
        cp = pltlab_cmd("clean")
        assert cp.returncode == 0, cp.stderr
        assert _ours(run_id)["namespaces"] == left and os.path.isdir(names.workdir(run_id))
        assert p.poll() is None  # its command still runs
        cp = pltlab_cmd("clean", run_id)
        lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
        assert cp.returncode == 2 and len(lines) == 1, cp.stderr
        assert f"run {run_id} is live (owner pid {p.pid})" in lines[0] and "--force" in lines[0]
        assert _ours(run_id)["namespaces"] == left
        os.kill(p.pid, signal.SIGKILL)  # the owner only: its namespaces stay behind
        p.wait(timeout=10)
        assert _ours(run_id)["namespaces"] == left
        dry = pltlab_cmd("clean", "--dry-run")
        assert all(ns in dry.stdout for ns in left) and "live run" not in dry.stdout
        cp = pltlab_cmd("clean")
        assert cp.returncode == 0 and "removed 2 namespaces" in cp.stdout, cp.stdout + cp.stderr
        assert _wait_until(lambda: _gone(run_id))
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
        pltlab_cmd("clean")


@pytest.mark.root
def test_force_removes_a_live_run():
    p = _start_runner("--rtt", "10ms")
    try:
        run_id = _wait_for_run(p)
        cp = pltlab_cmd("clean", "--run", run_id, "--force")
        assert cp.returncode == 0 and "removed 2 namespaces" in cp.stdout, cp.stdout + cp.stderr
        assert _ours(run_id)["namespaces"] == []
        p.wait(timeout=20)  # its command was killed with the namespace: the shell ends
        assert _gone(run_id)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    cp = pltlab_cmd("clean", "--force")
    assert cp.returncode == 2 and "--force needs a RUN_ID" in cp.stderr


@pytest.fixture
def fake_run():
    """A work folder of a run of this session (no namespaces), removed at the end."""
    rid = (TAG + "ffffff")[:6]
    os.makedirs(names.workdir(rid))
    yield rid
    clean.clean(rid, force=True)


def test_owner_record_names_one_process_even_after_pid_reuse(fake_run):
    me, start = os.getpid(), names.proc_start(os.getpid())
    names.write_owner(fake_run)
    assert names.read_owner(fake_run) == (me, start) and names.owner_alive(fake_run) == me
    assert clean.alive(fake_run) and clean.leftovers()["live"] == [fake_run]
    with open(names.owner_path(fake_run), "w") as f:
        f.write(f"{me} {start + 1}\n")  # same pid, another process: the owner is gone
    assert names.owner_alive(fake_run) is None and not clean.alive(fake_run)
    assert names.workdir(fake_run) in clean.leftovers()["workdirs"]
    clean.clean()
    assert not os.path.exists(names.workdir(fake_run))


def test_leftovers_without_owner_record_count_as_dead(fake_run):
    assert clean.alive(fake_run)  # being created: a moment's grace before the record exists
    old = time.time() - 2 * clean.CLAIM_GRACE_S
    os.utime(names.workdir(fake_run), (old, old))
    assert not clean.alive(fake_run) and clean.leftovers()["live"] == []
    assert clean.clean(fake_run)["workdirs"] == 1 and not os.path.exists(names.workdir(fake_run))


def test_settle_waits_out_the_grace_of_a_folder_without_owner(fake_run, monkeypatch):
    """A resumed sweep's clean of a runner killed while claiming (or removing) its folder: no
    owner record, a young folder, which `alive` takes for a run being created. settle waits until
    the grace is over, then it is cleaned; a run with an owner record is not waited for."""
    monkeypatch.setattr(clean, "CLAIM_GRACE_S", 0.5)
    assert clean.alive(fake_run)
    t0 = time.monotonic()
    clean.settle(fake_run)
    assert 0.3 <= time.monotonic() - t0 < 2 and not clean.alive(fake_run)
    assert clean.clean(fake_run)["workdirs"] == 1 and not os.path.exists(names.workdir(fake_run))
    os.makedirs(names.workdir(fake_run))
    names.write_owner(fake_run)
    t0 = time.monotonic()
    clean.settle(fake_run)
    assert time.monotonic() - t0 < 0.1 and clean.alive(fake_run)  # (ours: alive, left alone)
