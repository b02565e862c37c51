#!/usr/bin/env python3
"""Precision of the emulated link under load (issue 12): link RTT error at 20/100/200 ms, 2,000
samples each, while Chromium loads a page on the same machine.

    python3 benches/bench_precision.py [--runs 5] [--samples 2000] [--no-chromium] [--no-sched-fifo] [--standby-us N] [--quick]

The load: `pltlab run nytimes --client chromium --rtt 100ms` in the background (its own
namespaces), restarted whenever it finishes, for as long as the measurements last. Each run
measures the three RTTs (`pltlab check`'s RTT test: several ping connections, kernel
timestamps) and prints the error distribution, the stalls (samples the machine explains, see
pltlab.net.check) and the p99 with and without them. Target: p99 <= 0.3 ms at every RTT in 5 of 5
runs. Needs root (and Chromium, unless --no-chromium). --quick: 1 run of 50 samples per RTT, no
Chromium (plumbing check).
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import record

from pltlab.net import check

RTTS = (20, 100, 200)

META = {
    "name": "bench_precision",
    "area": "link",
    "title": "Precision of the emulated link under load",
    "command": "python3 benches/bench_precision.py",
    "quick": "python3 benches/bench_precision.py --quick",
    "duration": "~4 min",
    "needs": "root, Chromium",
    "figures": {
        "tests_met": {
            "name": "RTT tests with link RTT error p99 <= 0.3 ms on all samples",
            "unit": "RTT tests",
            "target": "every test: 5 runs x RTT 20, 100, 200 ms",
            "on": "2,000 samples per test while `pltlab run nytimes --client chromium --rtt 100ms` loads beside it",
        },
        "p99": {
            "name": "link RTT error p99 over the runs, per RTT",
            "unit": "ms",
            "target": None,
            "on": "min / median / max of the runs' p99; stalls per test beside it",
        },
        "tests_met_without_stalls": {
            "name": "RTT tests within 0.3 ms once the samples the machine's stalls explain are set apart",
            "unit": "RTT tests",
            "target": None,
            "on": "the same tests",
        },
    },
}


class Background:
    """`pltlab run ... --client chromium` kept running (restarted when it ends)."""

    def __init__(self, argv: list[str]):
        self.argv, self.p, self.started = argv, None, 0

    def poll(self) -> None:
        if self.p is None or self.p.poll() is not None:
            self.p = subprocess.Popen(
                self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
            )
            self.started += 1

    def stop(self) -> None:
        if self.p is not None and self.p.poll() is None:
            self.p.terminate()  # SIGTERM: pltlab tears its namespaces down
            try:
                self.p.wait(30)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()


def pct(v: list[float], q: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, max(0, round(q * (len(s) - 1))))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=None, help="default 5 (--quick 1)")
    ap.add_argument("--samples", type=int, default=None, help=f"per RTT test, default {check.SAMPLES}")
    ap.add_argument("--no-chromium", action="store_true", help="measure without the background load")
    ap.add_argument("--no-sched-fifo", action="store_true", help="emulator without SCHED_FIFO")
    ap.add_argument(
        "--standby-us", type=int, default=None, help="emulator standby tick (0: none; default: the project's)"
    )
    ap.add_argument("--quick", action="store_true", help="1 run of 50 samples per RTT, no Chromium")
    a = ap.parse_args()
    if a.quick:
        a.no_chromium = True
    a.runs = a.runs or (1 if a.quick else 5)
    a.samples = a.samples or (check.QUICK_SAMPLES if a.quick else check.SAMPLES)
    with record.Bench(META, quick=a.quick, chromium=not a.no_chromium) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            measure(b, a)
    return b.exit_code


def measure(b, a) -> None:
    fifo = not a.no_sched_fifo
    bg = None
    if not a.no_chromium:
        bg = Background(
            [
                sys.executable,
                "-m",
                "pltlab",
                "run",
                "nytimes",
                "--client",
                "chromium",
                "--rtt",
                "100ms",
                "--tfo",
                "off",
                "--reps",
                "50",
            ]
        )
        bg.poll()
        time.sleep(5)  # Chromium up and loading
    print(
        f"samples {a.samples} per RTT, sched_fifo={fifo}, background: "
        f"{'none' if bg is None else ' '.join(bg.argv[1:])}",
        flush=True,
    )
    ok_all = ok_kept = total = 0
    per_rtt: dict[int, list[dict]] = {r: [] for r in RTTS}
    try:
        for run in range(1, a.runs + 1):
            for rtt in RTTS:
                if bg:
                    bg.poll()
                r = check.rtt_test(rtt, a.samples, "userspace", fifo, standby_us=a.standby_us)
                per_rtt[rtt].append(r)
                total += 1
                ok_all += r["p99_err_ms"] <= check.MAX_P99_ERR_MS
                ok_kept += r["p99_err_without_stalls_ms"] <= check.MAX_P99_ERR_MS
                lat = r["emulator_lateness"] or {}
                worst_late = max((v["max"] for k, v in lat.items() if isinstance(v, dict)), default=0)
                print(
                    f"run {run} RTT {rtt:>3} ms: n={r['samples']} flows={r['flows']} error p50 "
                    f"{r['p50_err_ms']:+.3f} p99 {r['p99_err_ms']:+.3f} max {r['max_err_ms']:+.3f} ms | "
                    f"stalls {r['stalls']}, without them p99 {r['p99_err_without_stalls_ms']:+.3f} "
                    f"max {r['max_err_without_stalls_ms']:+.3f} ms | application p50 "
                    f"{r['app_p50_err_ms']:+.3f} p99 {r['app_p99_err_ms']:+.3f} ms | emulator late "
                    f"events {lat.get('late_events')}, worst {worst_late / 1000:.2f} ms | standby rescues "
                    f"{(r['standby'] or {}).get('rescues')}"
                    f"  [{'ok' if r['p99_err_ms'] <= check.MAX_P99_ERR_MS else 'MISSED'}]",
                    flush=True,
                )
    finally:
        if bg:
            bg.stop()
    print(
        f"p99 <= {check.MAX_P99_ERR_MS} ms: {ok_all}/{total} RTT tests on all samples, "
        f"{ok_kept}/{total} without stalls" + (f"; background Chromium runs started: {bg.started}" if bg else ""),
        flush=True,
    )
    load = "none" if bg is None else "`pltlab run nytimes --client chromium --rtt 100ms` beside it"
    on = f"{a.runs} run(s) x RTT {', '.join(map(str, RTTS))} ms, {a.samples} samples each, load: {load}, sched_fifo={fifo}"
    if a.standby_us is not None:
        on += f", standby tick {a.standby_us} us"
    b.figure("tests_met", ok_all, f"of {total} RTT tests", target=(">=", total), on=on)
    b.figure("tests_met_without_stalls", ok_kept, f"of {total} RTT tests", on=on)
    for rtt, rs in per_rtt.items():
        p99s = [r["p99_err_ms"] for r in rs]
        b.figure(
            "p99",
            statistics.median(p99s),
            name=f"link RTT error p99 at {rtt} ms, median over the runs",
            samples=p99s,
            dist={"stalls_per_test_max": max(r["stalls"] for r in rs)},
            on=f"{len(rs)} run(s) of {a.samples} samples",
        )


if __name__ == "__main__":
    sys.exit(main())
