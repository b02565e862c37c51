"""Teardown on Ctrl-C and SIGTERM, and `pltlab clean` after a SIGKILLed runner."""

import os
import signal
import subprocess
import sys
import time

from tests.conftest import leaked, pltlab_cmd, project_state


def _start_runner(*shell_args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "pltlab", "shell", *shell_args, "--", "sleep", "60"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def _wait_for_run(before: dict, timeout: float = 20.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        st = project_state()
        if len(st["namespaces"]) > len(before["namespaces"]) and \
                len(st["dataplane_processes"]) >= len(before["dataplane_processes"]) + 2:
            time.sleep(0.3)  # let it reach the command
            return st
        time.sleep(0.05)
    raise AssertionError("the run did not come up")


def _wait_until(cond, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_ctrl_c_tears_down():
    before = project_state()
    p = _start_runner("--rtt", "10ms")
    _wait_for_run(before)
    os.killpg(p.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    p.wait(timeout=20)
    assert p.returncode != 0
    assert not leaked(before)


def test_sigterm_tears_down():
    before = project_state()
    p = _start_runner("--rtt", "10ms", "--origins", "4")
    _wait_for_run(before)
    p.send_signal(signal.SIGTERM)
    p.wait(timeout=20)
    assert p.returncode == 128 + signal.SIGTERM
    assert not leaked(before)


def test_sigkill_then_clean_removes_leftovers_and_only_ours():
    before = project_state()
    foreign = f"pltx-foreign-{os.getpid()}"
    subprocess.run(["ip", "netns", "add", foreign], check=True)
    try:
        p = _start_runner("--rtt", "10ms", "--origins", "3", "--origin-namespaces")
        during = _wait_for_run(before)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait(timeout=10)
        left = set(during["namespaces"]) - set(before["namespaces"])
        assert left, "expected leftover namespaces after SIGKILL"
        # The data-plane processes die with their parent (PR_SET_PDEATHSIG).
        assert _wait_until(lambda: not leaked(before).get("dataplane_processes"))
        run_id = sorted(left)[0].split("-")[1]
        dry = pltlab_cmd("clean", "--dry-run", "--run", run_id)
        assert dry.returncode == 0 and all(ns in dry.stdout for ns in left)
        cp = pltlab_cmd("clean", "--run", run_id)
        assert cp.returncode == 0, cp.stderr
        assert f"removed {len(left)} namespaces" in cp.stdout
        assert not leaked(before)
        assert foreign in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    finally:
        subprocess.run(["ip", "netns", "del", foreign])


def test_clean_rejects_bad_run_id():
    cp = pltlab_cmd("clean", "--run", "../etc")
    assert cp.returncode != 0
    assert cp.stderr.strip().count("\n") == 0 and "invalid run id" in cp.stderr
