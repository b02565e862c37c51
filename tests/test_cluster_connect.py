"""Joining a Ray cluster (issue 31): an address where no cluster answers is one line in seconds,
Ray's own messages stay off the terminal, the address given is the one dialled (loopback
included), and Ctrl-C / SIGTERM end a cluster sweep within seconds in every phase, nothing of it
left behind. Every address here is on loopback."""

import glob
import json
import os
import re
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time

import pytest

from tests.conftest import ROOT, leaked, pltlab_cmd, project_state, sigint_default
from tests.test_sweep import _exp, _pages, _runs, _runs_so_far

ray = pytest.importorskip("ray", reason="Ray is not installed (make setup installs pltlab[cluster])")

from pltlab.cli.cluster import CONNECT_TIMEOUT_S  # noqa: E402
from pltlab.cluster import connect  # noqa: E402
from pltlab.cluster.driver import ClusterExecutor  # noqa: E402
from pltlab.cluster.local import ray_processes  # noqa: E402
from pltlab.experiments import spec, sweep  # noqa: E402
from tests.test_cluster import _wait_gone  # noqa: E402

# what Ray writes on its own: its C++ log lines ("[2026-... W 123 456] rpc_client.h:153: ..."),
# its Python warnings ("2026-... WARNING worker.py:1681 -- ..."), its crash report on SIGTERM
RAY_LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\d [\d:,.]+ [IWEF] \d+ \d+\]|\b(?:INFO|WARNING|ERROR) [\w.]+\.py:\d+ --|\*\*\* SIGTERM|"
    r"rpc_client|gcs_client",
    re.M,
)


def _closed_port() -> int:
    """A loopback port where nothing listens (it was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def silent_port():
    """127.0.0.1:PORT accepting TCP connections (the kernel completes them) that never answers:
    a port of something that is not a Ray cluster."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(64)
        yield s.getsockname()[1]


def _one_line_error(stderr: str) -> str:
    errs = [ln for ln in stderr.splitlines() if ln.startswith("pltlab: error:")]
    assert len(errs) == 1 and stderr.rstrip().endswith(errs[0]), stderr
    assert not RAY_LINE.search(stderr), f"Ray's own lines on the terminal:\n{stderr}"
    return errs[0]


def test_the_cli_default_timeout_is_the_connect_modules():
    assert CONNECT_TIMEOUT_S == connect.CONNECT_TIMEOUT_S and CONNECT_TIMEOUT_S + 10 <= 30


@pytest.mark.slow
def test_sweep_at_a_closed_port_is_one_line_in_seconds(tmp_path):
    before = ray_processes()
    port, path = _closed_port(), _exp(tmp_path, reps=1)
    cp = pltlab_cmd("sweep", path, "-o", str(tmp_path / "o"), "--connect-timeout", "5")
    assert cp.returncode == 2 and cp.stderr.strip() == "pltlab: error: --connect-timeout needs --cluster"
    cp = pltlab_cmd("sweep", path, "-o", str(tmp_path / "o"), "--cluster", "10.0.0.1")  # a typo: said at once
    assert cp.returncode == 2 and cp.stderr.strip() == (
        "pltlab: error: --cluster 10.0.0.1: not an address: give HOST:PORT (as `pltlab cluster up` prints it) or local"
    )
    t0 = time.monotonic()
    cp = pltlab_cmd("sweep", path, "-o", str(tmp_path / "out"), "--cluster", f"127.0.0.1:{port}")
    took = time.monotonic() - t0
    assert cp.returncode == 2 and took < 30, (cp.returncode, took)
    assert _one_line_error(cp.stderr) == (
        f"pltlab: error: --cluster 127.0.0.1:{port}: no Ray cluster answers: nothing listens at 127.0.0.1:{port} "
        "(connection refused); is it up (pltlab cluster up), is the address right?"
    )
    assert not ray_processes() - before


@pytest.mark.slow
def test_cluster_status_at_a_closed_port_is_one_line_and_leaves_no_log():
    port = _closed_port()
    logs = set(glob.glob(os.path.join(tempfile.gettempdir(), "pltlab-cluster-status-*")))
    t0 = time.monotonic()
    cp = pltlab_cmd("cluster", "status", f"127.0.0.1:{port}")
    took = time.monotonic() - t0
    assert cp.returncode == 2 and took < 30 and cp.stdout == "", (cp.returncode, took, cp.stdout)
    assert _one_line_error(cp.stderr).startswith(
        f"pltlab: error: cluster status 127.0.0.1:{port}: no Ray cluster answers: nothing listens at 127.0.0.1:{port}"
    )
    assert set(glob.glob(os.path.join(tempfile.gettempdir(), "pltlab-cluster-status-*"))) == logs
    cp = pltlab_cmd("cluster", "status", "127.0.0.1")
    assert cp.returncode == 2 and cp.stderr.strip() == (
        "pltlab: error: cluster status 127.0.0.1: not an address: give HOST:PORT (as `pltlab cluster up` prints it) "
        "or auto"
    )
    cp = pltlab_cmd("cluster", "status", f"127.0.0.1:{port}", "--connect-timeout", "0")
    assert cp.returncode == 2 and "invalid --connect-timeout 0: must be more than 0 seconds" in cp.stderr


@pytest.mark.slow
def test_a_port_that_is_not_a_ray_cluster_gives_up_after_the_timeout(tmp_path, silent_port):
    """ray.init would wait there for many minutes: one line after --connect-timeout, naming the
    log where Ray's messages went (about the address given, not this machine's)."""
    addr = f"127.0.0.1:{silent_port}"
    out = tmp_path / "out"
    t0 = time.monotonic()
    cp = pltlab_cmd("sweep", _exp(tmp_path, reps=1), "-o", str(out), "--cluster", addr, "--connect-timeout", "6")
    took = time.monotonic() - t0
    assert cp.returncode == 2 and 6 <= took < 30, (cp.returncode, took, cp.stderr)
    line = _one_line_error(cp.stderr)
    assert line.startswith(f"pltlab: error: --cluster {addr}: {addr} accepts connections but no Ray cluster answered ")
    assert line.endswith(f"(Ray's messages: {out / 'cluster.log'})")
    log = (out / "cluster.log").read_text()
    assert f"pltlab: joining {addr}" in log
    dialled = set(re.findall(r"at address (\S+?:\d+)", log))  # "Failed to connect to GCS at address ..."
    assert dialled <= {addr}, dialled


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_while_connecting_ends_the_sweep_at_once(tmp_path, silent_port, sig):
    before = ray_processes()
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", "sweep", _exp(tmp_path, reps=1), "-o", str(out)]
        + ["--cluster", f"127.0.0.1:{silent_port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        preexec_fn=sigint_default,
    )
    try:
        deadline = time.monotonic() + 60
        while not (out / "cluster.log").exists() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert (out / "cluster.log").exists(), "never began joining"
        time.sleep(1.5)  # inside ray.init, which would wait for minutes
        t0 = time.monotonic()
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        took = time.monotonic() - t0
    finally:
        p.kill()
    print(f"connecting: ended {took:.1f} s after signal {sig}")
    assert p.returncode == 128 + sig and took < 5, (p.returncode, took, err)
    assert not RAY_LINE.search(err), err
    assert not _wait_gone(before, 5)


ONE_LOAD = 'name = "one"\npages = ["alpha.har"]\nrtt = ["10ms"]\ntfo = ["off"]\nrepetitions = 1\nseed = 3\n'
MANY_LOADS = 'name = "many"\npages = ["alpha.har"]\nrtt = ["10ms"]\ntfo = ["off", "on"]\nrepetitions = 30\nseed = 3\n'
DRIVER = """
import sys
from pltlab.experiments import spec, sweep
from pltlab.cluster.driver import ClusterExecutor
fake = float(sys.argv[5]) if len(sys.argv) > 5 else None
ex = ClusterExecutor(sys.argv[3], check=sys.argv[4:5] == ["check"], fake_load_s=fake)
sweep.run(spec.load(sys.argv[1]), sys.argv[2], executor=ex)
"""


def _node_workers(gcs: str) -> list[int]:
    """The processes of pltlab's actors and clean-up tasks on the nodes of the cluster at ``gcs``
    (children of its raylets: others' Ray clusters on this machine are not looked at)."""
    procs = {}
    for d in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{d}/stat") as f:
                ppid = int(f.read().rpartition(")")[2].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        procs[int(d)] = (ppid, cmd)
    raylets = {pid for pid, (_, cmd) in procs.items() if b"raylet" in cmd and f"--gcs-address={gcs}".encode() in cmd}
    return [
        pid
        for pid, (ppid, cmd) in procs.items()
        if ppid in raylets and cmd.startswith((b"ray::NodeWorker", b"ray::clean_after"))
    ]


def _sigterm_driver(args: list[str], ready, what: str) -> float:
    """Run DRIVER with ``args``, SIGTERM it once ``ready()`` holds: the seconds it took to end
    (exit status 143, none of Ray's lines on stderr)."""
    p = subprocess.Popen(
        [sys.executable, "-c", DRIVER, *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=ROOT
    )
    try:
        deadline = time.monotonic() + 120
        while not ready() and time.monotonic() < deadline and p.poll() is None:
            time.sleep(0.05)
        assert ready(), p.stderr.read() if p.poll() is not None else f"{what}: not ready in 120 s"
        t0 = time.monotonic()
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=60)
        took = time.monotonic() - t0
    finally:
        p.kill()
    print(f"{what}: the driver ended {took:.1f} s after SIGTERM")
    assert p.returncode == 143, (p.returncode, err)
    assert not RAY_LINE.search(err), err
    return took


@pytest.mark.slow
@pytest.mark.root
def test_loopback_cluster_real_load_then_sigterm_mid_check_and_mid_loads_leaves_nothing(tmp_path, monkeypatch):
    """`pltlab cluster up --node-ip 127.0.0.1`: a cluster reached by its loopback address runs a
    real load; a driver SIGTERMed during the node's self-check, then one SIGTERMed while real
    loads run, end within seconds, no namespace, actor or Ray process of theirs left; `pltlab
    cluster down` stops the head. Every driver is a process of its own, without a token."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    before, state = ray_processes(), project_state()
    port = 6440 + os.getpid() % 50
    addr = f"127.0.0.1:{port}"
    _pages(tmp_path)
    (tmp_path / "one.toml").write_text(ONE_LOAD)
    (tmp_path / "many.toml").write_text(MANY_LOADS)
    try:
        cp = pltlab_cmd("cluster", "up", "--port", str(port), "--node-ip", "127.0.0.1", timeout=180)
        assert cp.returncode == 0, cp.stderr
        assert cp.stdout.startswith(f"cluster at {addr} (this machine alone)"), cp.stdout
        # one real load (namespaces, replay, loader) on the node, reached at 127.0.0.1
        cp = subprocess.run(
            [sys.executable, "-c", DRIVER, str(tmp_path / "one.toml"), str(tmp_path / "one"), addr],
            capture_output=True,
            text=True,
            timeout=180,
            cwd=ROOT,
        )
        assert cp.returncode == 0 and not RAY_LINE.search(cp.stderr), cp.stderr
        assert "cluster: 1 slot(s) on 1 node(s)" in cp.stderr
        (run,) = _runs(tmp_path / "one")
        assert run["status"] == "ok" and run["valid"] and run["plt_ms"] > 10, run
        # SIGTERM during the node's self-check (`pltlab check`: about a minute, namespaces of its own)
        checking = tmp_path / "checking"
        took = _sigterm_driver(
            [str(tmp_path / "many.toml"), str(checking), addr, "check"],
            lambda: bool(leaked(state).get("namespaces")),
            "self-check",
        )
        assert took < 20 and not _runs_so_far(checking)
        assert not leaked(state), f"left by the driver SIGTERMed in the check: {leaked(state)}"
        assert not _node_workers(addr)
        # SIGTERM while real loads run
        out = tmp_path / "many"
        took = _sigterm_driver(
            [str(tmp_path / "many.toml"), str(out), addr], lambda: len(_runs_so_far(out)) >= 2, "loads"
        )
        assert took < 20
        assert not leaked(state), f"left by the driver SIGTERMed mid-loads: {leaked(state)}"
        assert not _node_workers(addr)
        n, distinct = (
            sqlite3.connect(out / "results.sqlite")
            .execute("SELECT COUNT(*), COUNT(DISTINCT run_key) FROM runs")
            .fetchone()
        )
        assert 2 <= n == distinct < 60
    finally:
        cp = pltlab_cmd("cluster", "down", timeout=120)
    assert cp.returncode == 0 and "(1 `pltlab cluster up`)" in cp.stdout, cp.stdout + cp.stderr
    assert not _wait_gone(before)


@pytest.mark.slow
def test_sigterm_mid_sweep_on_a_two_node_loopback_cluster(cluster, tmp_path):
    """On the two-node loopback cluster of test_cluster (fake loads): SIGTERM while the loads run
    ends the driver within seconds, every actor of it gone, and the sweep resumes to the end."""
    path = _exp(tmp_path, reps=3)  # 24 runs
    out = tmp_path / "out"
    took = _sigterm_driver(
        [path, str(out), cluster.address, "-", "0.5"], lambda: len(_runs_so_far(out)) >= 3, "fake loads"
    )
    assert took < 15
    deadline = time.monotonic() + 10
    while _node_workers(cluster.address) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _node_workers(cluster.address)
    n = len(_runs(out))
    assert 3 <= n < 24
    ex = ClusterExecutor(cluster.address, check=False, fake_load_s=0.0)
    st = sweep.run(spec.load(path), str(out), resume=True, executor=ex)
    assert st["runs"] == 24 - n
    runs = _runs(out)
    assert len(runs) == 24 and len({r["run_key"] for r in runs}) == 24
    assert len({json.loads(r["node"])["node_id"] for r in runs}) == 2  # both nodes
    assert {n["NodeManagerAddress"] for n in ray.nodes() if n["Alive"]} == {"127.0.0.1"}  # all on loopback


from tests.test_cluster import cluster  # noqa: E402, F401 - the two-node loopback cluster fixture
