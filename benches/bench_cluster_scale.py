#!/usr/bin/env python3
"""Scale-out of a cluster sweep, simulated from measured costs (docs/cluster.md "Figures").

1. Ray's per-task costs, measured on a local two-node Ray cluster (benches/local_cluster.py: two
   raylets on loopback, each with its own object store): a node's slot started (actor created,
   pltlab imported, first answer: what the driver's admission waits for), a call's submit ->
   start on an idle slot, the gap between a slot's queued calls, each load's result returned to
   the driver (the real results of a study's loads, rebuilt from its database: the same requests),
   and the driver's database write per result; and one node's self-check (`pltlab check`, root).
2. A discrete-event simulation of the driver (benches/cluster_sim.py) from those costs and the
   measured wall time of each load: checked first against the measured span of the two-node run
   the results come from, then the full TFO table (100 pages x 3 RTTs x TFO off/on x 10
   repetitions = 6,000 runs, load times drawn from the one-machine run) on 1, 10 and 100 nodes.

    sudo python3 benches/bench_cluster_scale.py [--runs DIR] [--loads RUNS.csv] [--quick]

--runs: a cluster sweep's output folder (results.sqlite: its loads and their requests); without
it the bench makes one first: `reproduce tfo --quick` on two local nodes (benches/local_cluster.py,
~8 min; --quick: wikipedia, one repetition), root needed;
--loads: the per-load wall times for the scale-out (a runs.csv or an output folder; default the
same as --runs). Needs Ray; the self-check needs root (else --check-s). All on one machine, on
loopback: a real cluster adds its network's round trips to every call (a few per run).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import cluster_sim
import record

try:
    import ray
except ImportError as e:  # Ray is optional (pltlab[cluster])
    ray, RAY_MISSING = None, str(e)

CALLS = 200  # submit -> start samples
RETURN_REPEAT = 3  # each load's result returned this many times (median kept)
NODE_STARTS = 3  # slot start-ups per node
STUDY = (100, 3, 2, 10)  # the full TFO table: pages x RTTs x TFO x repetitions
NODES = (1, 10, 100)

META = {
    "name": "bench_cluster_scale",
    "area": "sweeps",
    "title": "Cluster scale-out: Ray's costs measured on two local nodes, 1-100 nodes simulated",
    "command": "python3 benches/bench_cluster_scale.py",
    "quick": "python3 benches/bench_cluster_scale.py --quick",
    "duration": "~11 min (the two-node study ~8 min, then ~3 min)",
    "needs": "Ray (pltlab[cluster]), root (the two-node study and the self-check; --runs DIR: only the check)",
    "figures": {
        "submit_ms": {"name": "run handed to an idle slot -> its load starts (measured)", "unit": "ms"},
        "gap_ms": {
            "name": "a slot's queued next load starting after the previous one returned (measured)",
            "unit": "ms",
        },
        "return_ms": {"name": "a load's result at the driver after the load ended (measured)", "unit": "ms"},
        "record_ms": {"name": "the driver's database write per result (measured)", "unit": "ms"},
        "node_start_s": {"name": "a node's slot started and answering (measured)", "unit": "s"},
        "check_s": {"name": "a node's self-check, pltlab check (measured)", "unit": "s"},
        "sim_error": {
            "name": "simulated span of the two-node run's loads vs its measured span",
            "unit": "%",
            "target": ("abs<=", 5.0),
        },
        "study_h": {"name": "the full TFO table (6,000 runs): wall time (simulated)", "unit": "h"},
        "efficiency": {"name": "the full TFO table: load time over slot time (simulated)", "unit": "%"},
    },
}


# ---- inputs ---------------------------------------------------------------------------------


def _db(folder: str) -> sqlite3.Connection:
    path = os.path.join(folder, "results.sqlite")
    if not os.path.isfile(path):
        raise SystemExit(f"bench_cluster_scale: {folder}: no results.sqlite (a sweep's output folder is needed)")
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    db.row_factory = sqlite3.Row
    return db


def runs_of(folder: str) -> list[dict]:
    """Every attempt of a sweep, in the order the driver recorded them."""
    return [dict(r) for r in _db(folder).execute("SELECT * FROM runs ORDER BY id")]


def load_times(src: str) -> list[float]:
    """Wall seconds of each load attempt: a runs.csv, or an output folder."""
    if src.endswith(".csv"):
        with open(src) as f:
            return [float(r["wall_ms"]) / 1000 for r in csv.DictReader(f) if r["wall_ms"]]
    return [r["wall_ms"] / 1000 for r in runs_of(src) if r["wall_ms"] is not None]


def results_of(folder: str) -> list[tuple[dict, list[dict]]]:
    """Each attempt's row and requests, and the result a node returned for it, rebuilt."""
    db = _db(folder)
    out = []
    for run in runs_of(folder):
        reqs = [dict(r) for r in db.execute("SELECT * FROM requests WHERE run_id=? ORDER BY idx", (run["id"],))]
        out.append((run, reqs))
    return out


def rebuilt(run: dict, reqs: list[dict]) -> dict:
    """What NodeWorker.load returned for this run (its result's fields as the database has them)."""
    r = {k: run[k] for k in ("plt_ms", "valid", "invalid_reason", "not_found", "tfo_active")}
    r["tfo_counters"] = json.loads(run["tfo_counters"] or "{}")
    r["metrics"] = json.loads(run["metrics"] or "{}")
    r["requests"] = [{k: v for k, v in q.items() if k != "run_id"} for q in reqs]
    return {"started_at": run["started_at"], "wall_ms": run["wall_ms"], "result": r}


# ---- Ray's costs ------------------------------------------------------------------------------


class Probe:
    """A slot's stand-in: answers with its clock, or with one of the results it holds."""

    def __init__(self, results_ref=None):
        self.results = ray.get(results_ref[0]) if results_ref else []

    def stamp(self) -> float:
        return time.time()

    def nap(self, s: float) -> float:
        time.sleep(s)
        return time.time()

    def give(self, i: int) -> tuple[float, dict]:
        return time.time(), self.results[i]  # (the result is serialised after this clock)


def on_node(cls, node_id: str, **kw):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    from pltlab.cluster.driver import SLOT

    return ray.remote(cls).options(
        num_cpus=0,
        resources={SLOT: 1},
        scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        **kw,
    )


def _slots_back(n: int, timeout: float = 30.0) -> None:
    """Wait until every node's slot is free again (a killed actor gives its slot back later)."""
    from pltlab.cluster.driver import SLOT

    deadline = time.time() + timeout
    while ray.available_resources().get(SLOT, 0) < n and time.time() < deadline:
        time.sleep(0.05)


def measure_ray(results: list[dict], check: bool) -> dict:
    from pltlab.cluster.driver import slot_nodes
    from pltlab.cluster.node import NodeWorker

    nodes = [n["NodeID"] for n in slot_nodes()]
    out: dict = {"node_start": [], "submit": [], "gap": [], "return": [], "check": None}
    for nid in nodes:  # the driver's admission: a NodeWorker made on the node, its first answer
        for _ in range(NODE_STARTS):
            t0 = time.time()
            a = on_node(NodeWorker, nid).remote("page_load", 4, 0.0)
            ray.get(a.probe.remote(False))
            out["node_start"].append(time.time() - t0)
            ray.kill(a)
            _slots_back(len(nodes))  # (untimed: the next one must not wait for this one's slot)
    ref = [ray.put(results)]
    a = on_node(Probe, nodes[-1]).remote(ref)
    ray.get(a.stamp.remote())
    for _ in range(CALLS):
        t0 = time.time()
        out["submit"].append(ray.get(a.stamp.remote()) - t0)
        t1 = a.nap.remote(0.02)
        t2 = a.stamp.remote()  # queued behind the nap, as the pipeline's next load is
        end, start = ray.get([t1, t2])
        out["gap"].append(start - end)
    for i in range(len(results)):
        each = []
        for _ in range(RETURN_REPEAT):
            t, _r = ray.get(a.give.remote(i))
            each.append(time.time() - t)
        out["return"].append(statistics.median(each))
    ray.kill(a)
    if check:  # one node alone (a real cluster's nodes check on machines of their own)
        w = on_node(NodeWorker, nodes[0]).remote("page_load", 4, None)
        t0 = time.time()
        got = ray.get(w.probe.remote(True))
        out["check"] = time.time() - t0
        out["check_verdict"] = (got["check"] or {}).get("verdict") or (got["check"] or {}).get("error")
        ray.kill(w)
    return out


def record_times(pairs: list[tuple[dict, list[dict]]]) -> list[float]:
    """The driver's write of each result (Results.add_run: the run and its requests)."""
    from pltlab.experiments.results import Results

    out = []
    with tempfile.TemporaryDirectory(prefix="bench-cluster-scale-") as d:
        res = Results(d)
        for run, reqs in pairs:
            row = {k: v for k, v in run.items() if k != "id"}
            row["run_key"] = f"{row['run_key']}#copy"  # (a fresh key: the original is unique)
            req = [{k: v for k, v in q.items() if k != "run_id"} for q in reqs]
            t0 = time.perf_counter()
            res.add_run(row, req)
            out.append(time.perf_counter() - t0)
        res.close()
    return out


# ---- the simulation ---------------------------------------------------------------------------


def measured_span(runs: list[dict]) -> float:
    """First load's start -> last load's end, as the nodes' clocks (this machine's) saw them."""
    return max(r["started_at"] + r["wall_ms"] / 1000 for r in runs) - min(r["started_at"] for r in runs)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", help="a cluster sweep's output folder (results.sqlite); default: made first")
    ap.add_argument("--loads", help="per-load wall times for the scale-out: runs.csv or a folder (default --runs)")
    ap.add_argument("--nodes-of-run", type=int, default=2, help="nodes the --runs sweep ran on (default 2)")
    ap.add_argument("--check-s", type=float, help="a node's self-check, seconds (default: measured, root)")
    ap.add_argument("--quick", action="store_true", help="no self-check (--check-s or 0), 20 calls")
    a = ap.parse_args()
    global CALLS
    if a.quick:
        CALLS = 20
    with record.Bench(META, quick=a.quick) as b:
        if ray is None:
            b.skip(f"needs Ray (pip install pltlab[cluster]): {RAY_MISSING}")
        elif a.runs is None and os.geteuid() != 0:
            b.skip("needs root to run the two-node study first (or --runs DIR)")
        elif a.runs is None:
            with tempfile.TemporaryDirectory(prefix="bench-cluster-scale-") as d:
                a.runs = two_node_run(os.path.join(d, "two"), a.quick)
                measure(b, a)
        else:
            measure(b, a)
    return b.exit_code


def two_node_run(out: str, quick: bool) -> str:
    """`reproduce tfo --quick` (quick: wikipedia, one repetition) on two local nodes, into ``out``."""
    import subprocess

    study = ["--pages", "wikipedia", "--reps", "1"] if quick else ["--quick"]
    cmd = [sys.executable, str(Path(__file__).resolve().parent / "local_cluster.py"), "--nodes", "2", "--"]
    cmd += ["pltlab", "reproduce", "tfo", *study, "-o", out]
    print("two-node run: " + " ".join(cmd[1:]), flush=True)
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return out


def ms(xs):
    return [x * 1000 for x in xs]


def measure(b, a) -> None:
    import local_cluster

    pairs = results_of(a.runs)
    runs = [r for r, _ in pairs]
    results = [rebuilt(r, q) for r, q in pairs]
    sizes = [len(json.dumps(r)) for r in results]
    check = a.check_s is None and not a.quick and os.geteuid() == 0
    with local_cluster.cluster(2, 1) as c:
        ray.init(address=c.address, log_to_driver=False)
        try:
            got = measure_ray(results, check)
        finally:
            ray.shutdown()
    rec = record_times(pairs)
    on = f"local two-node Ray cluster on loopback; the {len(results)} results of {a.runs}"
    b.figure("submit_ms", statistics.median(ms(got["submit"])), samples=ms(got["submit"]), on=f"{CALLS} calls")
    b.figure("gap_ms", statistics.median(ms(got["gap"])), samples=ms(got["gap"]), on=f"{CALLS} pairs of calls")
    b.figure(
        "return_ms",
        statistics.median(ms(got["return"])),
        samples=ms(got["return"]),
        on=f"{on} (JSON size median {statistics.median(sizes) / 1e3:.0f} KB, max {max(sizes) / 1e3:.0f} KB)",
    )
    b.figure("record_ms", statistics.median(ms(rec)), samples=ms(rec), on=f"the {len(rec)} rows and their requests")
    b.figure(
        "node_start_s", statistics.median(got["node_start"]), samples=got["node_start"], on=f"{NODE_STARTS} per node"
    )
    check_s = got["check"] if got["check"] is not None else (a.check_s or 0.0)
    if got["check"] is not None:
        b.figure("check_s", check_s, on=f"one node alone, verdict {got.get('check_verdict')}")
    else:
        b.skip("not measured here (--quick, --check-s, or not root)", key="check_s")
    print(
        f"measured: submit {statistics.median(ms(got['submit'])):.2f} ms, gap {statistics.median(ms(got['gap'])):.2f} ms, "
        f"return {statistics.median(ms(got['return'])):.2f} ms (p90 {statistics.quantiles(ms(got['return']), n=10)[-1]:.2f}), "
        f"record {statistics.median(ms(rec)):.2f} ms, node start {statistics.median(got['node_start']):.2f} s, "
        f"check {check_s:.0f} s" + ("" if got["check"] is not None else " (given)"),
        flush=True,
    )
    # ---- the simulation, checked on the run it was measured on
    o = cluster_sim.Overheads(
        submit_s=statistics.median(got["submit"]),
        return_s=tuple(got["return"]),
        record_s=statistics.median(rec),
        actor_gap_s=statistics.median(got["gap"]),
    )
    order = sorted(range(len(runs)), key=lambda i: runs[i]["started_at"])  # the order runs started in
    loads_run = [runs[i]["wall_ms"] / 1000 for i in order]
    o = cluster_sim.Overheads(
        submit_s=o.submit_s,
        return_s=tuple(got["return"][i] for i in order),
        record_s=o.record_s,
        actor_gap_s=o.actor_gap_s,
    )
    sim = cluster_sim.simulate(loads_run, a.nodes_of_run, o=o)
    sim_span = sim.last_end_s - sim.first_start_s  # (as measured: first load's start -> last load's end)
    real = measured_span(runs)
    err = (sim_span - real) / real * 100
    print(
        f"the {len(runs)} loads on {a.nodes_of_run} nodes: measured span {real:.1f} s, simulated {sim_span:.1f} s "
        f"({err:+.1f} %; sum of loads {sum(loads_run):.1f} s)",
        flush=True,
    )
    b.figure(
        "sim_error",
        err,
        on=f"{len(runs)} loads of {a.runs} on {a.nodes_of_run} nodes: measured {real:.1f} s, simulated {sim_span:.1f} s",
    )
    # ---- the full TFO table
    times = load_times(a.loads or a.runs)
    n = 1
    for k in STUDY:
        n *= k
    drawn = cluster_sim.draws(times, n)
    ret = cluster_sim.draws(got["return"], n, seed=2)
    full = cluster_sim.Overheads(
        submit_s=o.submit_s,
        return_s=tuple(ret),
        record_s=o.record_s,
        actor_gap_s=o.actor_gap_s,
        node_start_s=statistics.median(got["node_start"]),
        check_s=check_s,
    )
    src = a.loads or a.runs
    for nodes in NODES:
        s = cluster_sim.simulate(drawn, nodes, o=full)
        ideal = sum(drawn) / nodes
        print(
            f"{n:,} runs on {nodes:>3} node(s): {s.makespan_s / 3600:.2f} h (ideal split of the loads "
            f"{ideal / 3600:.2f} h), slots loading {s.efficiency:.1%} of the time, driver busy "
            f"{s.driver_busy_s / s.makespan_s:.2%}",
            flush=True,
        )
        what = (
            f"{n:,} loads drawn from the {len(times)} measured in {src} (mean {statistics.mean(times):.1f} s), "
            f"{nodes} node(s), one load each; ideal split {ideal / 3600:.2f} h"
        )
        b.figure(
            "study_h",
            s.makespan_s / 3600,
            name=f"the full TFO table on {nodes} node(s): wall time (simulated)",
            on=what,
        )
        b.figure(
            "efficiency",
            s.efficiency * 100,
            name=f"the full TFO table on {nodes} node(s): load time over slot time (simulated)",
            on=what,
            driver_busy_pct=round(s.driver_busy_s / s.makespan_s * 100, 3),
        )


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
