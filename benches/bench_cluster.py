#!/usr/bin/env python3
"""The cluster driver's figures (docs/cluster.md), on a local Ray cluster with fake loads:

1. driver overhead: ~1,000 runs of the TFO table with an instant load (4 slots): per-run ms and
   results recorded per second while the queue drains (targets <= 50 ms per run, >= 500/s);
2. 50 simulated workers (one threaded actor serving 50 slots) with loads of a few seconds: the
   fraction of slot time spent idle waiting for the driver (target <= 5 %).

    python3 benches/bench_cluster.py [--runs 1000] [--workers 50] [--load-s 2] [--quick]

Needs Ray (`pip install pltlab[cluster]`; skipped without it), not root. --quick: 50 runs, 5
workers, loads of 0.5 s, 4 s per slot (plumbing check).
"""

import argparse
import math
import sys
import tempfile
import time

import record
from rich.console import Console

from pltlab.experiments import results, sweep
from pltlab.studies import tfo

try:
    import ray
except ImportError as e:  # Ray is optional (pltlab[cluster]); pltlab.cluster is imported with it
    ray, RAY_MISSING = None, str(e)

META = {
    "name": "bench_cluster",
    "area": "sweeps",
    "title": "Cluster driver on a local Ray cluster, fake loads",
    "command": "python3 benches/bench_cluster.py",
    "quick": "python3 benches/bench_cluster.py --quick",
    "duration": "~2 min",
    "needs": "Ray (pltlab[cluster])",
    "figures": {
        "per_run_ms": {
            "name": "driver overhead per run, instant loads",
            "unit": "ms",
            "target": ("<=", 50),
            "on": "~1,000 runs of the TFO table with an instant load on 4 local slots",
        },
        "results_per_s": {
            "name": "results recorded per second while the queue drains",
            "unit": "/s",
            "target": (">=", 500),
            "on": "the same sweep",
        },
        "idle": {
            "name": "slot time idle waiting for the driver, 50 simulated workers",
            "unit": "%",
            "target": ("<=", 5.0),
            "on": "one threaded actor serving 50 slots, loads of 2 s, every slot busy ~20 s",
        },
    },
}


def many_slots(workers: int, load_s: float):
    """An executor with ``workers`` slots served by one threaded actor (50 worker processes would
    not fit this machine); the driver's queue, waits and database writes are the same."""
    from pltlab.cluster import driver
    from pltlab.cluster.node import NodeWorker

    class ManySlots(driver.ClusterExecutor):
        def __init__(self):
            super().__init__("local", check=False, fake_load_s=load_s, max_live=10_000)
            self.workers = workers

        def _admit(self, sweep_):
            a = (
                ray.remote(NodeWorker)
                .options(num_cpus=0, max_concurrency=self.workers)
                .remote(sweep_.exp.kind, self.max_live, self.fake)
            )
            node = ray.get(a.probe.remote(False))["node"]
            self.nodes[node["node_id"]] = {"node": node, "slots": self.workers, "admitted": True, "runs": 0}
            self.actors, self.node_of = [a] * self.workers, [node] * self.workers

    return ManySlots()


def timed_sweep(exp, executor) -> tuple[dict, list[float], list[dict]]:
    """Run the sweep; the times rows were recorded at, and the rows."""
    stamps: list[float] = []
    add = results.Results.add_run

    def add_run(self, *args, **kw):
        stamps.append(time.perf_counter())
        return add(self, *args, **kw)

    results.Results.add_run = add_run
    try:
        with tempfile.TemporaryDirectory(prefix="bench-cluster-") as out:
            st = sweep.run(exp, out, console=Console(stderr=True, quiet=True), executor=executor)
            res = results.Results(out)
            rows = res.rows()
            res.close()
    finally:
        results.Results.add_run = add
    return st, stamps, rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="default 1000 (--quick 50)")
    ap.add_argument("--workers", type=int, default=None, help="default 50 (--quick 5)")
    ap.add_argument("--load-s", type=float, default=None, help="default 2 (--quick 0.5)")
    ap.add_argument("--busy-s", type=float, default=None, help="seconds each slot is busy, default 20 (--quick 4)")
    ap.add_argument("--quick", action="store_true", help="50 runs, 5 workers, 0.5 s loads, 4 s busy")
    args = ap.parse_args()
    args.runs = args.runs or (50 if args.quick else 1000)
    args.workers = args.workers or (5 if args.quick else 50)
    args.load_s = args.load_s or (0.5 if args.quick else 2.0)
    args.busy_s = args.busy_s or (4.0 if args.quick else 20.0)
    with record.Bench(META, quick=args.quick) as b:
        if ray is None:
            b.skip(f"needs Ray (pip install pltlab[cluster]): {RAY_MISSING}")
        else:
            measure(b, args)
    return b.exit_code


def measure(b, args) -> None:
    from pltlab.cluster import driver

    per_rep = tfo.experiment(reps=1).n_runs
    ray.init(
        address="local",  # a Ray of its own, even when another one runs on the machine
        num_cpus=1,
        resources={driver.SLOT: 4},
        object_store_memory=driver.OBJECT_STORE_BYTES,
        include_dashboard=False,
        log_to_driver=False,
    )
    try:
        exp = tfo.experiment(reps=math.ceil(args.runs / per_rep))
        st, stamps, _ = timed_sweep(exp, driver.ClusterExecutor("local", slots=4, check=False, fake_load_s=0.0))
        span = stamps[-1] - stamps[0]
        per_run_ms = span / (len(stamps) - 1) * 1000
        print(
            f"driver overhead: {st['runs']} runs with an instant load on 4 local slots: "
            f"{per_run_ms:.2f} ms per run (target <= 50), {(len(stamps) - 1) / span:.0f} results/s "
            f"(target >= 500); whole sweep incl. start-up and export {st['wall_s']:.1f} s",
            flush=True,
        )
        on = f"{st['runs']:,} runs of the TFO table with an instant load on 4 local slots"
        b.figure("per_run_ms", per_run_ms, on=on)
        b.figure("results_per_s", (len(stamps) - 1) / span, on=f"{on}; whole sweep {st['wall_s']:.1f} s")
        want = args.workers * max(1, round(args.busy_s / args.load_s))  # every slot busy ~busy_s
        exp = tfo.experiment(reps=math.ceil(want / per_rep))
        st, stamps, rows = timed_sweep(exp, many_slots(args.workers, args.load_s))
        t0 = min(r["started_at"] for r in rows)
        t1 = max(r["started_at"] + r["wall_ms"] / 1000 for r in rows)
        busy = sum(r["wall_ms"] for r in rows) / 1000
        rounds = math.ceil(len(rows) / args.workers)
        # slots of a last, partly filled round have nothing to run: idle, but not for the driver
        unavoidable = (rounds * args.workers - len(rows)) * args.load_s
        idle = 1 - busy / (args.workers * (t1 - t0) - unavoidable)
        print(
            f"{args.workers} simulated workers, {len(rows)} loads of {args.load_s:g} s: span {t1 - t0:.1f} s "
            f"(ideal {rounds * args.load_s:.1f} s); slots idle waiting for the driver {idle:.2%} of the time "
            f"(target <= 5 %)",
            flush=True,
        )
        b.figure(
            "idle",
            idle * 100,
            name=f"slot time idle waiting for the driver, {args.workers} simulated workers, loads of {args.load_s:g} s",
            on=f"{len(rows)} loads of {args.load_s:g} s: span {t1 - t0:.1f} s, ideal {rounds * args.load_s:.1f} s",
        )
    finally:
        ray.shutdown()


if __name__ == "__main__":
    sys.exit(main())
