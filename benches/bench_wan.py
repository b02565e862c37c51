#!/usr/bin/env python3
"""Emulated-WAN figures (issue: Emulated WAN): topology set-up time, RTT error of the link,
goodput at a shaped rate, random loss, unshaped throughput. Needs root.

    python3 benches/bench_wan.py [--sched-fifo] [--quick]

RTT error is measured at the link (`pltlab check`'s RTT test: kernel timestamps at both ends,
the server's turnaround taken out); the application's round trip is kept beside it.
"""

import argparse
import os
import statistics
import sys
import time

import record

from pltlab.net import check
from pltlab.net.topology import Topology
from pltlab.net.wan import TopologySpec

META = {
    "name": "bench_wan",
    "area": "link",
    "title": "Emulated WAN",
    "command": "python3 benches/bench_wan.py",
    "quick": "python3 benches/bench_wan.py --quick",
    "duration": "~2 min",
    "needs": "root",
    "figures": {
        "topology": {
            "name": "topology with 85 origins up + down",
            "unit": "s",
            "target": ("<=", 1.0),
            "on": "shared server namespace and one namespace per origin; median of 5",
        },
        "rtt_p99": {
            "name": "link RTT error p99",
            "unit": "ms",
            "target": ("<=", 0.3),
            "on": "2,000 ping-pong samples per RTT (20, 100, 200 ms); p50, max, stalls and the application's RTT beside it",
        },
        "goodput": {
            "name": "goodput at 4 Mbit/s over 10 s / expected (1448/1500 of the rate)",
            "unit": "x",
            "target": ("between", 0.99, 1.01),
            "on": "one bulk TCP transfer, RTT 20 ms",
        },
        "loss": {
            "name": "loss rate at 5 % configured",
            "unit": "",
            "target": ("between", 0.045, 0.055),
            "on": "10,000 UDP datagrams, seeds 1, 1, 2",
        },
        "loss_seeded": {
            "name": "the same seed gives the same loss (seed 1 twice)",
            "unit": "",
            "target": ("==", True),
            "on": "the two seed-1 runs above",
        },
        "throughput": {
            "name": "unshaped TCP throughput, MTU 1500",
            "unit": "Gbit/s",
            "target": (">=", 2.0),
            "on": "median of 3 bulk transfers of 5 s, RTT 0",
        },
    },
}


def topology_time(b, reps: int, origins: int):
    for per_ns in (False, True):
        times = []
        for _ in range(reps):
            t = time.monotonic()
            with Topology(TopologySpec(origins=origins, origin_namespaces=per_ns)):
                pass
            times.append(time.monotonic() - t)
        mode = "one namespace per origin" if per_ns else "shared server namespace"
        print(
            f"topology {origins} origins up+down ({mode}): median {statistics.median(times):.3f} s, "
            f"max {max(times):.3f} s (target <= 1 s)",
            flush=True,
        )
        b.figure(
            "topology",
            statistics.median(times),
            name=f"topology with {origins} origins up + down, {mode}",
            samples=times,
            on=f"median of {reps}",
        )


def rtt(b, samples: int, fifo: bool):
    for r in check.RTTS_MS:
        res = check.rtt_test(r, samples, "userspace", fifo)
        print(
            f"RTT {r:>3} ms: error p50 {res['p50_err_ms']:+.3f}  p99 {res['p99_err_ms']:+.3f}  "
            f"max {res['max_err_ms']:+.3f} ms  (n={res['samples']}, {res['flows']} connections; "
            f"target p99 <= 0.3 ms)  stalls {res['stalls']}: without them p99 "
            f"{res['p99_err_without_stalls_ms']:+.3f} max {res['max_err_without_stalls_ms']:+.3f} ms  "
            f"application p50 {res['app_p50_err_ms']:+.3f} p99 {res['app_p99_err_ms']:+.3f} ms",
            flush=True,
        )
        b.figure(
            "rtt_p99",
            res["p99_err_ms"],
            name=f"link RTT error p99 at {r} ms",
            dist={
                "n": res["samples"],
                "p50": res["p50_err_ms"],
                "p99": res["p99_err_ms"],
                "max": res["max_err_ms"],
                "stalls": res["stalls"],
                "p99_without_stalls": res["p99_err_without_stalls_ms"],
                "app_p50": res["app_p50_err_ms"],
                "app_p99": res["app_p99_err_ms"],
            },
            on=f"{res['samples']} samples over {res['flows']} connections, sched_fifo={fifo}",
        )


def goodput(b, seconds: float, fifo: bool):
    res = check.rate_test(seconds, "userspace", fifo)
    ratio = res["achieved_mbit"] / res["expected_goodput_mbit"]
    print(
        f"goodput at 4 Mbit/s over {res['seconds']:.1f} s: {res['achieved_mbit']:.4f} Mbit/s = "
        f"{ratio:.4f} x expected {res['expected_goodput_mbit']:.4f} (target within 1 %)",
        flush=True,
    )
    b.figure(
        "goodput",
        ratio,
        on=f"one transfer of {res['seconds']:.1f} s: {res['achieved_mbit']:.4f} Mbit/s vs {res['expected_goodput_mbit']}",
    )


def loss(b, packets: int, fifo: bool):
    runs = [check.loss_test(packets, "userspace", fifo, seed=s) for s in (1, 1, 2)]
    rates = [r["measured"] for r in runs]
    print(
        f"loss 5 % over {packets:,} datagrams: measured {rates} (seeds 1, 1, 2; target 0.05 +- 0.005; "
        "seed 1 twice must match)",
        flush=True,
    )
    for seed, rate in zip((1, 1, 2), rates):
        b.figure("loss", rate, name=f"loss rate at 5 % configured, seed {seed}", on=f"{packets:,} UDP datagrams")
    b.check("loss_seeded", rates[0] == rates[1], on=f"seed 1 twice: {rates[0]} and {rates[1]}")


def throughput(b, seconds: float, reps: int, fifo: bool):
    vals = [check.throughput_test(seconds, "userspace", fifo) for _ in range(reps)]
    print(
        f"unshaped TCP throughput, MTU 1500: {vals} Gbit/s, median {statistics.median(vals):.2f} (target >= 2 Gbit/s)",
        flush=True,
    )
    b.figure("throughput", statistics.median(vals), samples=vals, on=f"median of {reps} transfers of {seconds:g} s")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sched-fifo", action="store_true", help="emulator under SCHED_FIFO")
    ap.add_argument(
        "--quick", action="store_true", help="small sizes: 50 samples, 10 origins, short transfers (plumbing check)"
    )
    a = ap.parse_args()
    q = a.quick
    with record.Bench(META, quick=q) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            print(f"sched_fifo={a.sched_fifo}", flush=True)
            topology_time(b, 1 if q else 5, 10 if q else 85)
            rtt(b, check.QUICK_SAMPLES if q else check.SAMPLES, a.sched_fifo)
            goodput(b, 5 if q else 10, a.sched_fifo)
            loss(b, 10_000, a.sched_fifo)  # half a second each: quick too (fewer would miss by chance)
            throughput(b, 1 if q else 5, 1 if q else 3, a.sched_fifo)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
