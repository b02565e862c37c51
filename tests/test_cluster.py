"""Sweeps on a Ray cluster (pltlab.cluster): simulated nodes on this machine (Ray's own
ray.cluster_utils.Cluster), a real sweep end to end, a node lost mid-sweep, nodes left out by the
gate, the driver SIGKILLed and resumed; without --cluster Ray is never loaded."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import threading
import time

import pytest

from pltlab.experiments import spec, sweep
from tests.conftest import ROOT, pltlab_cmd
from tests.test_sweep import _exp, _runs, _runs_so_far

ray = pytest.importorskip("ray", reason="Ray is not installed (make setup installs pltlab[cluster])")

from ray.cluster_utils import Cluster  # noqa: E402

from pltlab.cluster.driver import SLOT, ClusterExecutor  # noqa: E402
from pltlab.cluster.local import ray_processes  # noqa: E402
from pltlab.errors import PltError  # noqa: E402

MB = 1024**2
SMALL = {"num_cpus": 1, "object_store_memory": 80 * MB}


def _wait_gone(before: set[int], seconds: float = 20) -> set[int]:
    deadline = time.time() + seconds
    while time.time() < deadline:
        left = ray_processes() - before
        if not left:
            return left
        time.sleep(0.2)
    return ray_processes() - before


def _auth_off(monkeypatch) -> None:
    """Ray's test clusters without token authentication, whatever Ray did in this process before
    (a `ray.init()` of its own sets RAY_AUTH_MODE=token here, and Ray's C++ side keeps the mode it
    first read: both reset, as Ray's own tests do)."""
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    try:
        from ray._private.authentication_test_utils import reset_auth_token_state
    except ImportError:  # an older Ray: no token authentication
        return
    reset_auth_token_state()


def _on_loopback(monkeypatch) -> None:
    """Clusters of Ray's test utility on 127.0.0.1 (every node's address, its GCS bound there):
    Ray keeps loopback when it takes the machine for a cluster of its own (what
    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 sets at import)."""
    from ray._private import ray_constants

    monkeypatch.setattr(ray_constants, "ENABLE_RAY_CLUSTER", False)


@pytest.fixture
def cluster(monkeypatch):
    """A head without slots and two simulated nodes with one slot each, all on 127.0.0.1 (a
    two-node loopback cluster on this machine); torn down afterwards, and no Ray process of it
    left."""
    before = ray_processes()
    _auth_off(monkeypatch)
    _on_loopback(monkeypatch)
    c = Cluster(initialize_head=True, head_node_args={**SMALL, "object_store_memory": 100 * MB})
    c.pltlab_nodes = [c.add_node(resources={SLOT: 1}, **SMALL) for _ in range(2)]
    assert c.address.startswith("127.0.0.1:")
    ray.init(address=c.address, log_to_driver=False)
    try:
        yield c
    finally:
        ray.shutdown()
        c.shutdown()
        assert not _wait_gone(before), "stray Ray processes"


def _node_ids() -> list[str]:
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"] and n["Resources"].get(SLOT))


def _check_row_invariants(out, path, n):
    runs = _runs(out)
    keys = [r["run_key"] for r in runs]
    assert len(runs) == n and len(set(keys)) == n, "a run lost or recorded twice"
    assert set(keys) == {it.key for it in sweep.schedule(spec.load(str(path)))}
    assert all(r["status"] == "ok" and r["attempt"] == 1 for r in runs)
    return runs


@pytest.mark.slow
def test_node_lost_mid_sweep_its_load_runs_elsewhere_once(cluster, tmp_path):
    path = _exp(tmp_path, reps=3)  # 24 runs
    out = tmp_path / "out"
    victim = cluster.pltlab_nodes[1]
    killed = {}

    def kill_when_started():
        deadline = time.time() + 60
        while time.time() < deadline and len(_runs_so_far(out)) < 6:
            time.sleep(0.05)
        killed["at"] = len(_runs_so_far(out))
        cluster.remove_node(victim)  # its raylet and worker die, a load in flight with them

    t = threading.Thread(target=kill_when_started)
    t.start()
    from rich.console import Console

    log = tmp_path / "log.txt"
    with open(log, "w") as f:
        st = sweep.run(
            spec.load(str(path)),
            str(out),
            console=Console(file=f, width=200),
            executor=ClusterExecutor(cluster.address, check=False, fake_load_s=0.3),
        )
    t.join()
    assert st["runs"] == 24 and st["failed"] == 0
    runs = _check_row_invariants(out, path, 24)
    nodes = [json.loads(r["node"])["node_id"] for r in runs]
    assert len(set(nodes)) == 2 and 6 <= killed["at"] < 24
    late = [n for r, n in zip(runs, nodes) if r["id"] > killed["at"] + 2]  # after the loss: one node
    assert len(set(late)) == 1
    assert "lost: its load runs again elsewhere" in log.read_text()
    for nid in set(nodes):  # one load per node at a time
        assert _max_at_once([r for r, n in zip(runs, nodes) if n == nid]) == 1
    for r in runs:  # the node that ran it: host, kernel, CPU, versions
        n = json.loads(r["node"])
        assert n["host"] and n["kernel"] == r["kernel"] and n["cpu"] and n["pltlab"] == r["pltlab_version"]
    meta = json.loads(
        sqlite3.connect(out / "results.sqlite").execute("SELECT value FROM meta WHERE key='cluster'").fetchone()[0]
    )
    assert sum(v["runs_total"] for v in meta["nodes"].values()) == 24


def _max_at_once(runs: list[dict]) -> int:
    """The most loads that ran at the same time (from their start and wall times)."""
    ev = sorted(
        [(r["started_at"], 1) for r in runs] + [(r["started_at"] + r["wall_ms"] / 1000, -1) for r in runs],
        key=lambda e: (e[0], e[1]),
    )
    most = cur = 0
    for _, d in ev:
        cur += d
        most = max(most, cur)
    return most


@pytest.mark.slow
def test_local_cluster_runs_as_many_loads_at_once_as_slots(tmp_path):
    """--cluster local --slots 2: two loads at once on this machine, never three; Ray stopped after."""
    assert not ray.is_initialized()
    before = ray_processes()
    path = _exp(tmp_path, reps=2)
    st = sweep.run(
        spec.load(str(path)),
        str(tmp_path / "out"),
        executor=ClusterExecutor("local", slots=2, check=False, fake_load_s=0.4),
    )
    assert st["runs"] == 16 and not ray.is_initialized()
    runs = _check_row_invariants(tmp_path / "out", path, 16)
    assert _max_at_once(runs) == 2
    assert not _wait_gone(before)


@pytest.mark.slow
def test_nodes_with_another_version_or_a_failed_check_are_left_out(cluster, tmp_path):
    path = _exp(tmp_path, reps=1)
    a, b = _node_ids()
    good = {
        "rtt": [{"rtt_ms": 20, "p50_err_ms": 0.01, "p99_err_ms": 0.05, "p99_err_without_stalls_ms": 0.05, "stalls": 0}],
        "rate_error": 0.0001,
        "verdict": "ok",
        "problems": [],
    }
    inject = {a: {"node": {"pltlab": "9.9.9"}, "check": good}, b: {"check": good}}
    from rich.console import Console

    log = tmp_path / "log.txt"
    with open(log, "w") as f:
        st = sweep.run(
            spec.load(str(path)),
            str(tmp_path / "out"),
            console=Console(file=f, width=300),
            executor=ClusterExecutor(cluster.address, fake_load_s=0.0, inject=inject),
        )
    assert st["runs"] == 8
    runs = _check_row_invariants(tmp_path / "out", path, 8)
    assert {json.loads(r["node"])["node_id"] for r in runs} == {b}  # all on the admitted node
    text = log.read_text()
    left = [ln for ln in text.splitlines() if "left out" in ln]
    assert len(left) == 1 and a[:8] in left[0] and "pltlab version '9.9.9' differs from the driver's" in left[0]
    # a check that fails, one that misses the RTT target: both left out, nothing run, one line each
    bad = json.loads(json.dumps(good))
    bad["rtt"][0]["p99_err_without_stalls_ms"] = 1.7
    inject = {a: {"check": {"error": "injected: no TUN"}}, b: {"check": bad}}
    log2 = tmp_path / "log2.txt"
    with open(log2, "w") as f, pytest.raises(PltError, match="every node was left out"):
        sweep.run(
            spec.load(str(path)),
            str(tmp_path / "out2"),
            console=Console(file=f, width=300),
            executor=ClusterExecutor(cluster.address, fake_load_s=0.0, inject=inject),
        )
    left = sorted(ln for ln in log2.read_text().splitlines() if "left out" in ln)
    assert len(left) == 2
    assert any(a[:8] in ln and "link self-check failed: injected: no TUN" in ln for ln in left)
    assert any(b[:8] in ln and "RTT 20 ms p99 error 1.7 ms (target 0.3 ms)" in ln for ln in left)
    db = sqlite3.connect(tmp_path / "out2" / "results.sqlite")
    assert db.execute("SELECT COUNT(*) FROM runs").fetchone()[0] == 0
    nodes = json.loads(db.execute("SELECT value FROM meta WHERE key='cluster'").fetchone()[0])["nodes"]
    assert {nid: v["admitted"] for nid, v in nodes.items()} == {a: False, b: False}
    assert nodes[b]["check"]["rtt"][0]["p99_err_without_stalls_ms"] == 1.7  # figures stored


DRIVER = """
import sys
from pltlab.experiments import spec, sweep
from pltlab.cluster.driver import ClusterExecutor
sweep.run(spec.load(sys.argv[1]), sys.argv[2], resume=True,
          executor=ClusterExecutor(sys.argv[3], check=False, fake_load_s=0.2))
"""


@pytest.mark.slow
def test_driver_sigkilled_then_resumed_loses_and_repeats_nothing(cluster, tmp_path):
    path = _exp(tmp_path, reps=3)
    out = tmp_path / "out"
    p = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(path), str(out), cluster.address],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        cwd=ROOT,
    )
    deadline = time.time() + 120
    try:
        while time.time() < deadline and len(_runs_so_far(out)) < 5:
            time.sleep(0.05)
    finally:
        p.send_signal(signal.SIGKILL)
        p.wait()
    n_killed = len(_runs(out))
    assert 5 <= n_killed < 24
    # the killed driver's actors go with it; the resumed driver gets both slots back
    st = sweep.run(
        spec.load(str(path)),
        str(out),
        resume=True,
        executor=ClusterExecutor(cluster.address, check=False, fake_load_s=0.0),
    )
    assert st["runs"] == 24 - n_killed
    _check_row_invariants(out, path, 24)


@pytest.mark.slow
def test_cluster_cli_up_status_down(tmp_path):
    """A head on loopback (--node-ip 127.0.0.1): the address printed is the one joined; `down`
    stops it and nothing else."""
    before = ray_processes()
    port = 6390 + os.getpid() % 50
    try:
        cp = pltlab_cmd("cluster", "up", "--slots", "2", "--port", str(port), "--node-ip", "127.0.0.1", timeout=180)
        assert cp.returncode == 0, cp.stderr
        assert f"--cluster 127.0.0.1:{port}" in cp.stdout
        cp = pltlab_cmd("cluster", "status", f"127.0.0.1:{port}", "--json", timeout=120)
        assert cp.returncode == 0, cp.stderr
        got = json.loads(cp.stdout)
        assert got["address"] == f"127.0.0.1:{port}"  # dialled as given (Ray would dial the node's address)
        nodes = got["nodes"]
        assert len(nodes) == 1 and nodes[0]["slots"] == 2 and nodes[0]["alive"]
        assert nodes[0]["address"] == "127.0.0.1"
    finally:
        cp = pltlab_cmd("cluster", "down", timeout=120)
    assert cp.returncode == 0, cp.stderr
    assert "Ray stopped on this machine (1 `pltlab cluster up`)" in cp.stdout
    assert not _wait_gone(before)


def test_without_cluster_ray_is_never_imported_and_slots_need_it(tmp_path):
    code = (
        "import sys, pltlab.cli, pltlab.cli.experiments, pltlab.experiments.sweep, pltlab.studies.engine\n"
        "from pltlab.cli.cluster import executor\n"
        "assert executor(None, 1) is None\n"
        "assert 'ray' not in sys.modules and 'pltlab.cluster' not in sys.modules, 'ray loaded'\n"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert cp.returncode == 0, cp.stderr
    path = _exp(tmp_path, reps=1)
    cp = pltlab_cmd("sweep", str(path), "-o", str(tmp_path / "out"), "--slots", "2")
    assert cp.returncode != 0 and cp.stderr.strip() == "pltlab: error: --slots needs --cluster"
    assert not (tmp_path / "out").exists()


@pytest.mark.root
@pytest.mark.slow
def test_real_sweep_on_a_two_node_cluster_end_to_end(tmp_path, monkeypatch):
    """A real sweep (namespaces, replay, loader) through `pltlab sweep --cluster`: one node with
    the one slot (loads on one machine must not overlap), the other without, the check for real.
    The test's cluster asks for no token (Ray's test utilities): the CLI is told so."""
    before = ray_processes()
    _auth_off(monkeypatch)
    _on_loopback(monkeypatch)
    c = Cluster(initialize_head=True, head_node_args={**SMALL, "object_store_memory": 100 * MB})
    try:
        c.add_node(resources={SLOT: 1}, **SMALL)
        c.add_node(resources={}, **SMALL)
        path = _exp(tmp_path, reps=1)
        out = tmp_path / "out"
        cp = pltlab_cmd("sweep", str(path), "-o", str(out), "--cluster", c.address, timeout=400)
        assert cp.returncode == 0, cp.stderr
        assert "cluster: 1 slot(s) on 1 node(s)" in cp.stderr
    finally:
        c.shutdown()
    assert not _wait_gone(before)
    runs = _runs(out)
    assert len(runs) == 8 and len({r["run_key"] for r in runs}) == 8
    assert all(r["status"] == "ok" and r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    for r in runs:
        assert (r["tfo_active"] > 0) == bool(r["tfo"]) and r["plt_ms"] > r["rtt_ms"]
        n = json.loads(r["node"])
        assert n["kernel"] == os.uname().release and n["pltlab_dp"] == r["dp_version"] and n["cpu"]
    db = sqlite3.connect(out / "results.sqlite")
    assert db.execute("SELECT COUNT(*) FROM requests").fetchone()[0] == sum(r["objects"] for r in runs)
    nodes = json.loads(db.execute("SELECT value FROM meta WHERE key='cluster'").fetchone()[0])["nodes"]
    (v,) = nodes.values()
    assert "| alpha | rtt_ms=10 | off | " in re.sub(" +", " ", (out / "nodes.md").read_text())  # split by node
    assert v["admitted"] and v["runs_total"] == 8 and [r["rtt_ms"] for r in v["check"]["rtt"]] == [20, 100, 200]


@pytest.mark.root
@pytest.mark.slow
def test_real_loads_on_two_nodes_one_at_a_time_each(tmp_path, monkeypatch):
    """benches/local_cluster.py's two nodes on loopback, real loads (namespaces, replay, loader),
    one per node at once: both nodes load, side by side, every load valid; after it no Ray
    process and nothing for `pltlab clean` is left (the self-check is left out: < 60 s)."""
    sys.path.insert(0, os.path.join(ROOT, "benches"))
    import local_cluster

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    before = local_cluster.leftovers()
    path = _exp(tmp_path, reps=1)  # 8 runs
    out = tmp_path / "out"
    with local_cluster.cluster(2, 1) as c:
        ray.init(address=c.address, log_to_driver=False)
        try:
            st = sweep.run(spec.load(str(path)), str(out), executor=ClusterExecutor(c.address, check=False))
        finally:
            ray.shutdown()
    assert local_cluster.leftovers() == before
    assert st["runs"] == 8 and st["failed"] == 0
    runs = _check_row_invariants(out, path, 8)
    assert all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    nodes = [json.loads(r["node"])["node_id"] for r in runs]
    assert len(set(nodes)) == 2
    assert _max_at_once(runs) == 2  # the two nodes loaded at the same time
    for nid in set(nodes):
        assert _max_at_once([r for r, n in zip(runs, nodes) if n == nid]) == 1
