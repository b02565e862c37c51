"""Teardown on Ctrl-C and SIGTERM, and `pltlab clean` after a SIGKILLed runner."""

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from tests.conftest import pltlab_cmd, project_state


def _start_runner(*shell_args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "pltlab", "shell", *shell_args, "--", "sleep", "60"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_run(p: subprocess.Popen, timeout: float = 20.0) -> str:
    """The runner's run id, once its topology is up and the command started."""
    ready, _, _ = select.select([p.stderr], [], [], timeout)
    line = p.stderr.readline() if ready else ""
    m = re.search(r"pltlab shell: run ([0-9a-f]{6})", line)
    assert m, f"the run did not come up: {line!r}"
    time.sleep(0.3)  # let it reach the command
    return m.group(1)


def _ours(run_id: str) -> dict:
    """What of run ``run_id`` exists: namespaces and data-plane processes inside them."""
    st = project_state()
    nss = [n for n in st["namespaces"] if n.startswith(f"plt-{run_id}-")]
    return {"namespaces": nss, "processes": _procs_in(nss)}


def _procs_in(nss: list[str]) -> list[int]:
    inodes = set()
    for ns in nss:
        try:
            inodes.add(os.stat(f"/run/netns/{ns}").st_ino)
        except FileNotFoundError:
            pass
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                if os.stat(f"/proc/{pid}/ns/net").st_ino in inodes:
                    out.append(int(pid))
            except OSError:
                continue
    return out


def _wait_until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


@pytest.mark.root
def test_ctrl_c_tears_down():
    p = _start_runner("--rtt", "10ms")
    run_id = _wait_for_run(p)
    assert _ours(run_id)["namespaces"]
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    p.wait(timeout=20)
    assert p.returncode != 0
    assert _ours(run_id) == {"namespaces": [], "processes": []}


@pytest.mark.root
def test_sigterm_tears_down():
    p = _start_runner("--rtt", "10ms", "--origins", "4")
    run_id = _wait_for_run(p)
    assert len(_ours(run_id)["processes"]) >= 5  # emulator + 4 origin servers (+ the command)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)
    assert p.returncode == 128 + signal.SIGTERM
    assert _ours(run_id) == {"namespaces": [], "processes": []}


@pytest.mark.root
def test_sigkill_then_clean_removes_leftovers_and_only_ours():
    foreign = f"pltx-foreign-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        p = _start_runner("--rtt", "10ms", "--origins", "3", "--origin-namespaces")
        run_id = _wait_for_run(p)
        left = _ours(run_id)["namespaces"]
        assert len(left) == 5  # client, server router, 3 origins
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        assert _ours(run_id)["namespaces"] == left, "SIGKILL leaves the namespaces behind"
        # The data-plane processes die with their parent (PR_SET_PDEATHSIG).
        assert _wait_until(lambda: not _ours(run_id)["processes"])
        dry = pltlab_cmd("clean", "--dry-run", "--run", run_id)
        assert dry.returncode == 0 and all(ns in dry.stdout for ns in left)
        cp = pltlab_cmd("clean", "--run", run_id)
        assert cp.returncode == 0, cp.stderr
        assert f"removed {len(left)} namespaces" in cp.stdout
        assert _ours(run_id) == {"namespaces": [], "processes": []}
        assert foreign in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", foreign])


def test_clean_rejects_bad_run_id():
    cp = pltlab_cmd("clean", "--run", "../etc")
    assert cp.returncode != 0
    assert cp.stderr.strip().count("\n") == 0 and "invalid run id" in cp.stderr


@pytest.mark.root
def test_ctrl_c_during_a_run_says_interrupted():
    """A Ctrl-C in the middle of `pltlab run` ends it with 130 and one line saying so (typer
    alone would exit silently)."""
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", "run", "wikipedia", "--rtt", "200ms", "--reps", "5"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    time.sleep(4)  # set up and loading
    os.killpg(p.pid, signal.SIGINT)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + signal.SIGINT, err
    assert err.strip().splitlines()[-1] == "pltlab: interrupted", err
