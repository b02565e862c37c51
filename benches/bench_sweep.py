#!/usr/bin/env python3
"""`pltlab sweep` / `pltlab reproduce` figures (issue: experiments, results, reports):

- table: the full TFO table (4 pages x RTT 20/100/200 ms x TFO off/on x 5 repetitions, 4 Mbit/s
  down, 256 kbit/s up, cubic, warm cookies, built-in loader) through the sweep engine: sweep
  efficiency (sum of PLTs / wall time, target >= 0.7) and the table's checks: every improvement
  in [0 %, 60 %], growing with RTT per page, CI half-width <= 3 points at 5 repetitions, no PLT
  above 3x the page's analytic bound;
- demo: the wall time of `pltlab reproduce tfo --quick` (the README's main job, `make demo`
  without its set-up; target < 10 min);
- icw-quick: the wall time of `pltlab reproduce icw --quick` and whether its checks passed.

    python3 benches/bench_sweep.py [--reps N] [--quick] [table|demo|icw-quick ...]

Default: all three (about 15 + 6 + 8 minutes on 2 cores). --quick: the table with one page
(wikipedia) and 1 repetition: a plumbing check. Needs root.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import record
from rich.console import Console

from pltlab.experiments import stats, sweep
from pltlab.loaders import plan as plans
from pltlab.report import build
from pltlab.studies import tfo as reproduce

META = {
    "name": "bench_sweep",
    "area": "sweeps",
    "title": "Sweeps and the studies' commands",
    "command": "python3 benches/bench_sweep.py",
    "quick": "python3 benches/bench_sweep.py --quick",
    "duration": "~30 min",
    "needs": "root",
    "figures": {
        "efficiency": {
            "name": "sweep efficiency: sum of PLTs / wall time, full TFO table",
            "unit": "",
            "target": (">=", 0.7),
            "on": "120 runs: amazon, nytimes, wsj, wikipedia x RTT 20/100/200 ms x TFO off/on x 5, 4 Mbit/s / 256 kbit/s",
        },
        "improvement_range": {
            "name": "every TFO improvement of the table in [0 %, 60 %]",
            "unit": "",
            "target": ("==", True),
            "on": "the same table",
        },
        "improvement_grows": {
            "name": "the improvement grows with RTT for each page",
            "unit": "",
            "target": ("==", True),
            "on": "the same table",
        },
        "ci_half_width": {
            "name": "worst 95 % CI half-width of an improvement at 5 repetitions",
            "unit": "pp",
            "target": ("<=", 3.0),
            "on": "the same table (bootstrap)",
        },
        "worst_vs_analytic": {
            "name": "worst PLT / the page's analytic bound",
            "unit": "x",
            "target": ("<=", 3.0),
            "on": "the same table; bound: serialization of every byte + one RTT per dependency level + handshakes",
        },
        "demo_wall": {
            "name": "wall time of `pltlab reproduce tfo --quick` (make demo without its set-up)",
            "unit": "s",
            "target": ("<", 600),
            "on": "48 runs: 4 pages x 3 RTTs x TFO off/on x 2",
        },
        "icw_quick_wall": {
            "name": "wall time of `pltlab reproduce icw --quick`",
            "unit": "s",
            "target": None,
            "on": "the ICW study's four parts, quick (docs/icw-study.md)",
        },
        "icw_quick_checks": {
            "name": "`pltlab reproduce icw --quick`: every shape check passed",
            "unit": "",
            "target": ("==", True),
            "on": "the same run",
        },
    },
}


def depth(page) -> int:
    """Longest parent chain of the loader's plan (links from the main document)."""
    p = plans.build(page, {h: "198.19.0.1" for h in page.hosts}, tfo=False)["objects"]
    best = 0
    for i in range(len(p)):
        d, cur = 0, i
        while p[cur]["parent"] is not None:
            cur, d = p[cur]["parent"], d + 1
        best = max(best, d)
    return best


def analytic_ms(page, rtt_ms: float, rate_bps: float = 4e6) -> float:
    """Serialization of every byte (bodies + ~300 B of headers) plus one RTT per dependency level,
    the handshake and one TLS round trip if any object is https."""
    tls = any(o.scheme == "https" for o in page.objects)
    transfer = sum(o.size + 300 for o in page.objects) * 8 / rate_bps * 1000
    return transfer + (depth(page) + 2 + tls) * rtt_ms


def table(b, reps: int, pages: str | None = None) -> None:
    exp = reproduce.experiment(reps=reps, pages=pages)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as out:
        res = sweep.run(exp, out, console=Console(stderr=True, quiet=True))
        built = build(out)
    rows = reproduce.rows(built["analysis"])
    print(
        f"sweep efficiency: {res['runs']} runs, sum of PLTs {res['plt_sum_ms'] / 1000:.1f} s / wall "
        f"{res['wall_s']:.1f} s = {res['efficiency']:.3f} (target >= 0.7); {res['failed']} failed, "
        f"{res['invalid']} invalid",
        flush=True,
    )
    on = (
        f"{res['runs']} runs ({', '.join(e.label for e in exp.pages)} x RTT 20/100/200 ms x TFO off/on x {reps}); "
        f"{res['failed']} failed, {res['invalid']} invalid"
    )
    b.figure(
        "efficiency",
        res["efficiency"],
        on=f"{on}; {res['plt_sum_ms'] / 1000:.1f} s of PLTs in {res['wall_s']:.1f} s",
    )
    pages_ = {e.label: e.page for e in exp.pages}
    ok_range = ok_ci = ok_bound = True
    worst_half, worst_ratio, where_half, where_ratio = 0.0, 0.0, "", ""
    short, none_ = [], []  # cells under the report's MIN_N loads a side; cells with no interval at all
    for r, g in zip(rows, built["analysis"]["rows"]):
        lo, hi = r["improvement_ci"]
        if lo is None:  # (a load invalid: the report shows no interval under MIN_N a side; judge BCa's own)
            lo, hi = g["improvement_ci"]
            (none_ if lo is None else short).append(f"{r['page']} at {r['rtt_ms']:g} ms (n={r['n']})")
        half = (hi - lo) / 2 * 100 if lo is not None else float("nan")
        bound = analytic_ms(pages_[r["page"]], r["rtt_ms"])
        worst = max(
            x["plt_ms"]
            for g in built["analysis"]["rows"]
            if g["page"] == r["page"] and g["rtt_ms"] == r["rtt_ms"]
            for side in (False, True)
            for x in g["runs"][side]
        )
        ok_range &= 0 <= r["improvement"] <= 0.6
        ok_ci &= not half > 3
        ok_bound &= worst <= 3 * bound
        if half >= worst_half:
            worst_half, where_half = half, f"{r['page']} at {r['rtt_ms']:g} ms"
        if worst / bound >= worst_ratio:
            worst_ratio, where_ratio = worst / bound, f"{r['page']} at {r['rtt_ms']:g} ms"
        print(
            f"tfo table: {r['page']:9s} RTT {r['rtt_ms']:>3g} ms: no TFO {r['plt_notfo_ms']:8.1f} ms, "
            f"TFO {r['plt_tfo_ms']:8.1f} ms, improvement {r['improvement']:+.2%} "
            f"(CI half-width {half:.2f} pp, n={r['n']}); worst PLT {worst:.0f} ms = "
            f"{worst / bound:.2f}x analytic {bound:.0f} ms",
            flush=True,
        )
        b.figure(
            "improvement",
            r["improvement"] * 100,
            "%",
            name=f"TFO improvement, {r['page']} at {r['rtt_ms']:g} ms",
            on=(f"CI [{lo * 100:.1f}, {hi * 100:.1f}] %" if lo is not None else "no interval")
            + f", n={r['n']}; PLT {r['plt_notfo_ms']:.0f} -> {r['plt_tfo_ms']:.0f} ms",
        )
    grows_all, flat = True, []
    for page in pages_:
        imps = [r["improvement"] for r in sorted(rows, key=lambda r: r["rtt_ms"]) if r["page"] == page]
        grows = all(b_ >= a_ for a_, b_ in zip(imps, imps[1:]))
        grows_all &= grows
        if not grows:
            flat.append(page)
        print(
            f"tfo table: {page}: improvement {' -> '.join(f'{x:.1%}' for x in imps)} "
            f"({'grows' if grows else 'does NOT grow'} with RTT)",
            flush=True,
        )
    print(
        f"tfo table checks: improvements in [0, 60 %]: {ok_range}; growing with RTT: {grows_all}; "
        f"CI half-width <= 3 pp: {ok_ci}; no PLT > 3x analytic: {ok_bound}",
        flush=True,
    )
    b.check("improvement_range", ok_range, on=on)
    b.check("improvement_grows", grows_all, on=on + (f"; not growing: {', '.join(flat)}" if flat else ""))
    few = (f"; under {stats.MIN_N} loads a side (interval from fewer loads): {', '.join(short)}" if short else "") + (
        f"; no interval: {', '.join(none_)}" if none_ else ""
    )
    b.figure("ci_half_width", worst_half, on=f"{on}; worst: {where_half}{few}")
    b.figure("worst_vs_analytic", worst_ratio, on=f"{on}; worst: {where_ratio}")


def _pltlab(args: list[str]) -> tuple[float, dict | None, str]:
    """Run `pltlab ARGS --json`: its wall time, its JSON, its last error line (if it failed)."""
    t = time.monotonic()
    cp = subprocess.run([sys.executable, "-m", "pltlab", *args, "--json"], capture_output=True, text=True)
    wall = time.monotonic() - t
    try:
        doc = json.loads(cp.stdout)
    except ValueError:
        doc = None
    err = (cp.stderr.strip().splitlines() or [f"exit code {cp.returncode}"])[-1] if cp.returncode else ""
    return wall, doc, err


def demo(b) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-demo-") as d:
        wall, _, err = _pltlab(["reproduce", "tfo", "--quick", "-o", os.path.join(d, "out")])
    print(f"pltlab reproduce tfo --quick: {wall:.0f} s (target < 600 s){'; ' + err if err else ''}", flush=True)
    b.figure("demo_wall", None if err else wall, on=err or "48 runs, the bundled pages")


def icw_quick(b) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-icw-") as d:
        wall, doc, err = _pltlab(["reproduce", "icw", "--quick", "--out", os.path.join(d, "out")])
    checks = (doc or {}).get("checks") or {}
    ok = bool(checks) and not err and all(v.get("ok", True) for v in checks.values() if isinstance(v, dict))
    failed = [k for k, v in checks.items() if isinstance(v, dict) and not v.get("ok", True)]
    print(
        f"pltlab reproduce icw --quick: {wall:.0f} s; checks {'passed' if ok else 'FAILED: ' + ', '.join(failed)}"
        f"{'; ' + err if err else ''}",
        flush=True,
    )
    b.figure("icw_quick_wall", None if err else wall, on=err or "quick: 2 loads per point, 60 s fairness runs")
    b.check("icw_quick_checks", ok, on=err or (f"failed: {', '.join(failed)}" if failed else f"{len(checks)} checks"))


SECTIONS = ("table", "demo", "icw-quick")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("sections", nargs="*", metavar="SECTION", help=f"of {', '.join(SECTIONS)} (default: all)")
    ap.add_argument("--reps", type=int, default=reproduce.REPS, help="repetitions of the table")
    ap.add_argument("--quick", action="store_true", help="the table with wikipedia only, 1 repetition")
    a = ap.parse_args()
    bad = [x for x in a.sections if x not in SECTIONS]
    if bad:
        ap.error(f"unknown section {bad[0]!r}: one of {', '.join(SECTIONS)}")
    todo = a.sections or (["table"] if a.quick else list(SECTIONS))
    with record.Bench(META, quick=a.quick) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            for x in todo:
                if x == "table":
                    table(b, 1 if a.quick else a.reps, "wikipedia" if a.quick else None)
                elif x == "demo":
                    demo(b)
                else:
                    icw_quick(b)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
