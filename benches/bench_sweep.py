#!/usr/bin/env python3
"""`pltlab sweep` / `pltlab reproduce tfo` figures (issue: experiments, results, reports):
sweep efficiency (sum of PLTs / wall time, target >= 0.7) on the full TFO table, and the table's
checks: every improvement in [0 %, 60 %], growing with RTT per page, CI half-width <= 3 points at
5 repetitions, no PLT above 3x the page's analytic bound.

    python3 benches/bench_sweep.py [--reps N]     (default 5: about 15 minutes on 2 cores)
"""

import argparse
import tempfile

from rich.console import Console

from pltlab.experiments import sweep
from pltlab.loaders import plan as plans
from pltlab.report import build
from pltlab.studies import tfo as reproduce


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=reproduce.REPS)
    args = ap.parse_args()
    exp = reproduce.experiment(reps=args.reps)
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as out:
        res = sweep.run(exp, out, console=Console(stderr=True, quiet=True))
        built = build(out)
    rows = reproduce.rows(built["analysis"])
    print(
        f"sweep efficiency: {res['runs']} runs, sum of PLTs {res['plt_sum_ms'] / 1000:.1f} s / wall "
        f"{res['wall_s']:.1f} s = {res['efficiency']:.3f} (target >= 0.7); {res['failed']} failed, "
        f"{res['invalid']} invalid"
    )
    pages = {e.label: e.page for e in exp.pages}
    ok_range = ok_grow = ok_ci = ok_bound = True
    for r in rows:
        lo, hi = r["improvement_ci"]
        half = (hi - lo) / 2 * 100
        bound = analytic_ms(pages[r["page"]], r["rtt_ms"])
        worst = max(
            x["plt_ms"]
            for g in built["analysis"]["rows"]
            if g["page"] == r["page"] and g["rtt_ms"] == r["rtt_ms"]
            for side in (False, True)
            for x in g["runs"][side]
        )
        ok_range &= 0 <= r["improvement"] <= 0.6
        ok_ci &= half <= 3
        ok_bound &= worst <= 3 * bound
        print(
            f"tfo table: {r['page']:9s} RTT {r['rtt_ms']:>3g} ms: no TFO {r['plt_notfo_ms']:8.1f} ms, "
            f"TFO {r['plt_tfo_ms']:8.1f} ms, improvement {r['improvement']:+.2%} "
            f"(CI half-width {half:.2f} pp, n={r['n']}); worst PLT {worst:.0f} ms = "
            f"{worst / bound:.2f}x analytic {bound:.0f} ms"
        )
    for page in pages:
        imps = [r["improvement"] for r in sorted(rows, key=lambda r: r["rtt_ms"]) if r["page"] == page]
        grows = all(b >= a for a, b in zip(imps, imps[1:]))
        ok_grow &= grows
        print(
            f"tfo table: {page}: improvement {' -> '.join(f'{x:.1%}' for x in imps)} "
            f"({'grows' if grows else 'does NOT grow'} with RTT)"
        )
    print(
        f"tfo table checks: improvements in [0, 60 %]: {ok_range}; growing with RTT: {ok_grow}; "
        f"CI half-width <= 3 pp: {ok_ci}; no PLT > 3x analytic: {ok_bound}"
    )


if __name__ == "__main__":
    main()
