#!/usr/bin/env python3
"""Emulated-WAN figures (issue: Emulated WAN): RTT error, goodput, loss, throughput, topology time.

python3 benches/bench_wan.py [--sched-fifo]
"""

import json
import statistics
import sys
import time

from pltlab.net import check
from pltlab.net.spec import TopologySpec
from pltlab.net.topology import Topology

FIFO = "--sched-fifo" in sys.argv


def rtt():
    for r in check.RTTS_MS:
        res = check.rtt_test(r, check.SAMPLES, "userspace", FIFO)
        print(
            f"RTT {r:>3} ms: error p50 {res['p50_err_ms']:+.3f}  p99 {res['p99_err_ms']:+.3f}  "
            f"max {res['max_err_ms']:+.3f} ms  (n={res['samples']}, {res['flows']} connections; "
            f"target p99 <= 0.3 ms)  stalls {res['stalls']}: without them p99 "
            f"{res['p99_err_without_stalls_ms']:+.3f} max {res['max_err_without_stalls_ms']:+.3f} ms  "
            f"application p50 {res['app_p50_err_ms']:+.3f} p99 {res['app_p99_err_ms']:+.3f} ms  "
            f"emulator lateness {json.dumps(res['emulator_lateness'])}"
        )


def goodput():
    res = check.rate_test(10, "userspace", FIFO)
    print(
        f"goodput at 4 Mbit/s over {res['seconds']:.1f} s: {res['achieved_mbit']:.4f} Mbit/s = "
        f"{res['achieved_mbit'] / res['expected_goodput_mbit']:.4f} x expected "
        f"{res['expected_goodput_mbit']:.4f} (target within 1 %)"
    )


def loss():
    runs = [check.loss_test(10_000, "userspace", FIFO, seed=s) for s in (1, 1, 2)]
    print(
        f"loss 5 % over 10,000 datagrams: measured {[r['measured'] for r in runs]} "
        f"(seeds 1, 1, 2; target 0.05 +- 0.005; seed 1 twice must match)"
    )


def throughput():
    vals = [check.throughput_test(5, "userspace", FIFO) for _ in range(3)]
    print(
        f"unshaped TCP throughput, MTU 1500: {vals} Gbit/s, median {statistics.median(vals):.2f} (target >= 2 Gbit/s)"
    )


def topology_time():
    for per_ns in (False, True):
        times = []
        for _ in range(5):
            t = time.monotonic()
            with Topology(TopologySpec(origins=85, origin_namespaces=per_ns)):
                pass
            times.append(time.monotonic() - t)
        mode = "one namespace per origin" if per_ns else "shared server namespace"
        print(
            f"topology 85 origins up+down ({mode}): median {statistics.median(times):.3f} s, "
            f"max {max(times):.3f} s (target <= 1 s)"
        )


if __name__ == "__main__":
    print(f"sched_fifo={FIFO}")
    topology_time()
    rtt()
    goodput()
    loss()
    throughput()
