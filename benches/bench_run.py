#!/usr/bin/env python3
"""`pltlab run` figures (issue: replay + loaders): tool overhead, fidelity against analytic PLTs,
repeatability.

    python3 benches/bench_run.py
"""

import statistics

from pltlab.archive import bundled
from pltlab.archive.generate import generate
from pltlab.experiments.runner import RunConfig, run_page


def chain(n: int):
    return generate(objects=n, total_bytes=n * 2000, origins=1, depth=n - 1, seed=3)


def overhead():
    page = bundled.load("nytimes")
    runs = run_page(page, RunConfig(rtt="0ms", reps=5, tfo_modes=(False,)))
    plts = [r["plt_ms"] for r in runs]
    print(f"tool overhead: nytimes ({len(page.objects)} objects, {len(page.hosts)} hosts) at RTT 0, "
          f"unshaped, built-in loader: median {statistics.median(plts):.1f} ms, max {max(plts):.1f} ms "
          f"(target <= 100 ms)")


def fidelity():
    n = 10
    for rtt in (20, 100, 200):
        runs = run_page(chain(n), RunConfig(rtt=f"{rtt}ms", reps=3))
        for tfo in (False, True):
            plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
            analytic = (n + (0 if tfo else 1)) * rtt  # each object 1 RTT, +1 RTT handshake w/o TFO
            med = statistics.median(plts)
            print(f"fidelity: {n}-object chain, RTT {rtt} ms, TFO {'on ' if tfo else 'off'}: "
                  f"median {med:.1f} ms vs analytic {analytic} ms: error {med - analytic:+.1f} ms "
                  f"({(med / analytic - 1):+.2%}; target within 2 % + 2 ms)")


def repeatability():
    page = bundled.load("wikipedia")
    runs = run_page(page, RunConfig(rtt="100ms", reps=10, tfo_modes=(False,)))
    plts = [r["plt_ms"] for r in runs]
    cv = statistics.pstdev(plts) / statistics.fmean(plts)
    print(f"repeatability: wikipedia at 100 ms, 10 loads, built-in loader: mean "
          f"{statistics.fmean(plts):.1f} ms, CV {cv:.2%} (target <= 1 %)")


if __name__ == "__main__":
    overhead()
    fidelity()
    repeatability()
