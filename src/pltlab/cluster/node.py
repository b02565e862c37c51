"""One node of a cluster sweep: what machine it is, its link self-check, whether it may take runs,
and the loads it runs (NodeWorker: one Ray actor per slot, made remote by the driver).

Pages and settings come with each call (the page through Ray's object store, fetched once per
runner), so a node needs no shared file system, only the same pltlab and data plane installed.
"""

import os
import platform
import socket
import subprocess
import time
from collections import OrderedDict

import ray

from pltlab.errors import PltError
from pltlab.experiments.sweep import environment
from pltlab.net import check as link_check
from pltlab.net import clean
from pltlab.run import kinds


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def describe() -> dict:
    """This machine as a run's `node` column records it."""
    env = environment()
    return {
        "host": socket.gethostname(),
        "kernel": platform.release(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "pltlab": env["pltlab"],
        "pltlab_dp": env["pltlab_dp"],
        "python": platform.python_version(),
    }


def check_figures(res: dict) -> dict:
    """The figures of `pltlab check` the gate uses (stored with the results)."""
    return {
        "rtt": [
            {
                "rtt_ms": r["configured_ms"],
                "p50_err_ms": r["p50_err_ms"],
                "p99_err_ms": r["p99_err_ms"],
                "p99_err_without_stalls_ms": r["p99_err_without_stalls_ms"],
                "stalls": r["stalls"],
            }
            for r in res["rtt"]
        ],
        "rate_error": res["rate"]["error"],
        "verdict": res["verdict"],
        "problems": res["problems"],
    }


def refusal(driver: dict, node: dict, figures: dict | None) -> str | None:
    """Why a node may not take runs (None: it may): another pltlab or data plane than the driver's,
    or a link self-check whose RTT or rate error misses the targets (pltlab.net.check)."""
    for key, name in (("pltlab", "pltlab"), ("pltlab_dp", "data plane")):
        if node.get(key) != driver.get(key):
            return f"{name} version {node.get(key)!r} differs from the driver's {driver.get(key)!r}"
    if figures is None:  # not checked (fake loads: benches, tests)
        return None
    if figures.get("error"):
        return f"link self-check failed: {figures['error']}"
    for r in figures["rtt"]:
        if r["p99_err_without_stalls_ms"] > link_check.MAX_P99_ERR_MS or r["p50_err_ms"] < -0.05:
            return (
                f"link self-check: RTT {r['rtt_ms']:g} ms p99 error {r['p99_err_without_stalls_ms']} ms "
                f"(target {link_check.MAX_P99_ERR_MS} ms)"
            )
    if abs(figures["rate_error"]) > link_check.MAX_RATE_ERR:
        return f"link self-check: rate error {figures['rate_error']:+.2%} (target {link_check.MAX_RATE_ERR:.0%})"
    return None


def _running(pid: int) -> bool:
    """Process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def clean_after(pids: list[int], wait_s: float = 5.0) -> dict:
    """On a node whose slots' actors (processes ``pids``) the driver killed: once they are gone
    (at most ``wait_s``), remove what their runners left (namespaces, links, work folders of dead
    runs: pltlab.net.clean) and return its counts."""
    deadline = time.monotonic() + wait_s
    while any(_running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return clean.clean()


class FakeRunner:
    """A load that only waits (benches and tests of the driver: its overhead, lost nodes)."""

    class _Topo:
        def __init__(self):
            self.run_id = f"fake{time.monotonic_ns()}"
            self.link_stats = None

    def __init__(self, seconds: float):
        self.seconds, self.topo = seconds, self._Topo()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def load(self, point, rep: int) -> dict:
        t0 = time.monotonic()
        if self.seconds:
            time.sleep(self.seconds)
        empty = {"client": {}, "server": {}}
        ms = (time.monotonic() - t0) * 1000
        return {
            "plt_ms": ms,
            "valid": True,
            "invalid_reason": None,
            "not_found": 0,
            "tfo_counters": empty,
            "requests": [],
        }


class NodeWorker:
    """The loads of one slot of a node, runners kept up between them (least recently used closed
    first), as the sweep does on one machine. ``inject`` (tests): {node id: {"node": fields that
    replace this machine's, "check": figures or {"error": ...}}}."""

    def __init__(self, kind: str, max_live: int = 4, fake_load_s: float | None = None, inject: dict | None = None):
        self.kind, self.max_live, self.fake = kind, max_live, fake_load_s
        self.inject = (inject or {}).get(ray.get_runtime_context().get_node_id(), {})
        self.live: OrderedDict[tuple, object] = OrderedDict()
        self.stats: dict[str, dict | None] = {}  # runner id -> its link's figures at teardown

    def pid(self) -> int:
        """This slot's process (the driver, interrupted, waits for it to be gone: clean_after)."""
        return os.getpid()

    def probe(self, check: bool) -> dict:
        """This node's description and (``check``) its link self-check figures (about a minute)."""
        node = describe() | self.inject.get("node", {})
        node["node_id"] = ray.get_runtime_context().get_node_id()
        if "check" in self.inject:
            return {"node": node, "check": self.inject["check"]}
        if not check:
            return {"node": node, "check": None}
        try:
            clean.clean()  # what killed sweeps left on this node (dead runs only)
            # the full check: p99 of 50 samples (--quick) is their maximum, one stall away from a miss
            figures = check_figures(link_check.run_check(quick=False))
        except (PltError, OSError, subprocess.SubprocessError, ValueError) as e:
            figures = {"error": str(e) or type(e).__name__}
        return {"node": node, "check": figures}

    def _runner(self, key: tuple, page_ref: list, cfg):
        if key in self.live:
            self.live.move_to_end(key)
            return self.live[key]
        while len(self.live) >= self.max_live:
            self._close(next(iter(self.live)))
        if self.fake is not None:
            pr = FakeRunner(self.fake)
        else:
            pr = kinds.runner(self.kind, ray.get(page_ref[0]), cfg)
        pr.__enter__()
        self.live[key] = pr
        return pr

    def _close(self, key: tuple) -> None:
        pr = self.live.pop(key, None)
        if pr is not None:
            try:
                pr.__exit__(None, None, None)
            finally:
                self.stats[pr.topo.run_id] = pr.topo.link_stats

    def load(self, page_ref: list, page: int, cfg, config: int, point, rep: int) -> dict:
        """One load: {"result": the runner's, ...} or {"error": why}; with its runner and wall time.
        ``page_ref``: [the page's object reference] (in a list: fetched only to build a runner)."""
        t0 = time.time()
        out: dict = {"started_at": t0}
        try:
            pr = self._runner((page, config), page_ref, cfg)
            out["runner_id"] = pr.topo.run_id
            out["result"] = pr.load(point, rep)
        except (PltError, OSError, subprocess.SubprocessError, ValueError) as e:
            self._close((page, config))  # a fresh runner for the retry
            out["error"] = str(e) or type(e).__name__
        out["wall_ms"] = (time.time() - t0) * 1000
        return out

    def close_all(self) -> dict:
        """Tear every runner down: {runner id: its link's figures} (lateness of its runs)."""
        for key in list(self.live):
            self._close(key)
        out, self.stats = self.stats, {}
        return out
