#!/usr/bin/env python3
"""Precision of the emulated link under load (issue 12): link RTT error at 20/100/200 ms, 2,000
samples each, while Chromium loads a page on the same machine.

    python3 benches/bench_precision.py [--runs 5] [--samples 2000] [--no-chromium] [--no-sched-fifo] [--standby-us N]

The load: `pltlab run nytimes --client chromium --rtt 100ms` in the background (its own
namespaces), restarted whenever it finishes, for as long as the measurements last. Each run
measures the three RTTs (`pltlab check`'s RTT test: several ping connections, kernel
timestamps) and prints the error distribution, the stalls (samples the machine explains, see
pltlab.net.check) and the p99 with and without them. Target: p99 <= 0.3 ms at every RTT in 5 of 5
runs. Needs root.
"""

import argparse
import subprocess
import sys
import time

from pltlab.net import check

RTTS = (20, 100, 200)


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
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--samples", type=int, default=check.SAMPLES)
    ap.add_argument("--no-chromium", action="store_true", help="measure without the background load")
    ap.add_argument("--no-sched-fifo", action="store_true", help="emulator without SCHED_FIFO")
    ap.add_argument(
        "--standby-us", type=int, default=None, help="emulator standby tick (0: none; default: the project's)"
    )
    a, _ = ap.parse_known_args()  # (benches/run.py passes its own arguments)
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
    try:
        for run in range(1, a.runs + 1):
            for rtt in RTTS:
                if bg:
                    bg.poll()
                r = check.rtt_test(rtt, a.samples, "userspace", fifo, standby_us=a.standby_us)
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
        f"{ok_kept}/{total} without stalls" + (f"; background Chromium runs started: {bg.started}" if bg else "")
    )
    return 0 if ok_all == total else 1


if __name__ == "__main__":
    rc = main()
    if sys.argv[0].endswith("bench_precision.py"):  # not when run by benches/run.py
        sys.exit(rc)
