"""Process supervision: a data-plane process that dies mid-load ends the load at once, named,
and the run is torn down (conftest's leak check)."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.net.supervise import ProcessDied, Supervisor, command_name, describe, role
from tests.conftest import ROOT

SLOW_RTT = "200ms"


def _slow_page(tmp_path) -> str:
    """One origin, 20 objects each found by the previous one: ~4 s at RTT 200 ms."""
    page = generate(objects=20, total_bytes=20 * 2000, origins=1, depth=19, seed=3)
    path = str(tmp_path / "slow.har")
    write_page(page, path)
    return path


def _children(pid: int) -> dict[str, int]:
    """pltlab-dp subcommand -> pid of the direct children of ``pid`` that run pltlab-dp."""
    out = {}
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            if ppid != pid:
                continue
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except (OSError, ValueError, IndexError):
            continue
        if argv[0].endswith(b"pltlab-dp") and len(argv) > 1:
            out[argv[1].decode()] = int(p)
    return out


def _kill_mid_load(tmp_path, victim: str, *extra: str) -> tuple[str, float, int]:
    """Start `pltlab run` on the slow page, SIGKILL its ``victim`` (a pltlab-dp subcommand)
    once the page is loading; returns (stderr, seconds from the kill to the CLI's exit, pid)."""
    p = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pltlab",
            "run",
            _slow_page(tmp_path),
            "--rtt",
            SLOW_RTT,
            "--tfo",
            "off",
            "--reps",
            "1",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        loading = {}
        while time.monotonic() < deadline and p.poll() is None:
            loading = _children(p.pid)
            if "load" in loading or (extra and "link" in loading and "replay" in loading):
                break
            time.sleep(0.05)
        assert "link" in loading and "replay" in loading, f"the load did not start: {p.poll()}"
        time.sleep(2.5 if extra else 1.0)  # well inside the load (Chromium starts first)
        pid = loading[victim]
        os.kill(pid, signal.SIGKILL)
        t_kill = time.monotonic()
        _, err = p.communicate(timeout=60)
        return err, time.monotonic() - t_kill, pid
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.root
@pytest.mark.parametrize("victim,name", [("link", "link emulator"), ("replay", "replay server"), ("load", "loader")])
def test_a_dead_process_ends_the_load_at_once_and_is_named(tmp_path, victim, name):
    err, seconds, pid = _kill_mid_load(tmp_path, victim)
    line = f"{name} (pltlab-dp {victim}, pid {pid}) died: killed by SIGKILL"
    assert line in err, err
    assert "timed out" not in err
    assert seconds < 2.0, f"{seconds:.2f} s from the kill to the error"


@pytest.mark.root
@pytest.mark.skipif(shutil.which("chromium") is None, reason="chromium not installed")
def test_chromium_load_ends_when_the_emulator_dies(tmp_path):
    err, seconds, pid = _kill_mid_load(tmp_path, "link", "--client", "chromium")
    assert f"link emulator (pltlab-dp link, pid {pid}) died: killed by SIGKILL" in err, err
    assert seconds < 2.0, f"{seconds:.2f} s from the kill to the error"


# ---- the supervisor itself, on plain processes ----------------------------------------------
def _popen(argv, **kw):
    return subprocess.Popen(argv, **kw)


def test_supervised_run_returns_output_like_subprocess_run():
    sup = Supervisor()
    server = subprocess.Popen(["sleep", "30"])
    try:
        sup.watch("test server", server)
        cp = sup.run(
            [sys.executable, "-c", "import sys; print('x' * 200000); print('e', file=sys.stderr)"], _popen, timeout=30
        )
        assert cp.returncode == 0 and cp.stdout == "x" * 200000 + "\n" and cp.stderr == "e\n"
        cp = sup.run(
            [sys.executable, "-c", "import sys; sys.stdout.write(sys.stdin.read()[::-1]); sys.exit(3)"],
            _popen,
            timeout=30,
            input="abc",
        )
        assert (cp.returncode, cp.stdout) == (3, "cba")
        with pytest.raises(subprocess.TimeoutExpired):
            sup.run(["sleep", "30"], _popen, timeout=0.3)
    finally:
        server.kill()
        server.wait()


def test_a_watched_death_kills_the_child_within_milliseconds():
    sup = Supervisor()
    server = subprocess.Popen(["sleep", "30"])
    sup.watch("test server", server)
    t = time.monotonic()
    killer = subprocess.Popen(["sh", "-c", f"sleep 0.3; kill -9 {server.pid}"])
    with pytest.raises(ProcessDied, match=rf"^test server \(sleep, pid {server.pid}\) died: killed by SIGKILL$"):
        sup.run(["sleep", "30"], _popen, timeout=30)
    assert time.monotonic() - t < 1.5
    killer.wait()
    # dead before the next command: refused at once
    with pytest.raises(ProcessDied, match="test server"):
        sup.run(["true"], _popen)
    sup.forget(server)
    assert sup.run(["true"], _popen).returncode == 0


def test_an_exit_status_and_the_last_stderr_line_are_reported():
    p = subprocess.Popen(["sh", "-c", "exit 3"])
    p.wait()
    assert (
        describe(p, "replay server", lambda: "bind: address in use")
        == f"replay server (sh, pid {p.pid}) died: exited with status 3 (bind: address in use)"
    )
    assert command_name(["/x/pltlab-dp", "probe", "serve", "--listen", "a"]) == "pltlab-dp probe serve"
    assert role(["/x/pltlab-dp", "load", "--plan", "p"]) == "loader"
    assert role(["/x/pltlab-dp", "link", "--config", "c"]) == "link emulator"


def test_a_loader_killed_by_a_signal_is_named():
    sup = Supervisor()
    with pytest.raises(ProcessDied, match=r"^sh \(sh, pid \d+\) died: killed by SIGKILL$"):
        sup.run(["sh", "-c", "kill -9 $$"], _popen, timeout=10)


def test_guard_calls_its_kill_at_once_and_replaces_the_loaders_error():
    sup = Supervisor()
    server = subprocess.Popen(["sleep", "30"])
    sup.watch("replay server", server)
    victim = subprocess.Popen(["sleep", "30"])  # stands for the browser
    t = time.monotonic()
    with pytest.raises(ProcessDied, match="replay server"):
        with sup.guard(victim.kill):
            killer = subprocess.Popen(["sh", "-c", f"sleep 0.2; kill -9 {server.pid}"])
            victim.wait(timeout=10)  # the "load": ends when the guard kills the browser
            raise RuntimeError("browser gone")  # what Playwright would raise
    assert time.monotonic() - t < 1.5
    killer.wait()
    # nothing died: the guard is transparent
    sup.forget()
    with sup.guard(lambda: None):
        pass
