#!/usr/bin/env python3
"""`pltlab run` figures (issue: replay + loaders): tool overhead, fidelity against analytic PLTs,
repeatability, built-in loader vs Chromium.

    python3 benches/bench_run.py [--quick] [SECTION ...]

SECTION: overhead, fidelity, fanout, repeat, repeat-kernel, repeat-chromium, compare, compare-h2,
compare-h2-recent (the default: these), and, not run by default (no target), compare-tfo,
compare-uncalibrated, compare-20, compare-200, chromium-tfo. --quick: overhead (2 loads) and the
chain at 20 ms (1 load): a plumbing check.

Needs root (namespaces) and, for repeat-chromium, compare* and chromium-tfo, Chromium. Timings
are noisy on a shared 2-core machine: run it on a quiet one.
"""

import dataclasses
import os
import statistics
import sys

from pltlab.archive import bundled
from pltlab.archive.generate import generate
from pltlab.net.wan import DEFAULT_CLIENT_RMEM
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig, run_page

PAPER = ("amazon", "nytimes", "wsj", "wikipedia")
RECENT = ("filamentgroup", "arcelormittal", "linkedin")
NO_TARGET = "no target"  # record.NO_TARGET (record is imported in main: tests import this file)
COMPARE_BOUND = 15.0  # %: Chromium within 15 % of the calibrated built-in loader at 100 ms

META = {
    "name": "bench_run",
    "area": "loaders",
    "title": "Page loads over the emulated WAN: overhead, fidelity, repeatability, built-in vs Chromium",
    "command": "python3 benches/bench_run.py",
    "quick": "python3 benches/bench_run.py --quick",
    "duration": "~25 min",
    "needs": "root, Chromium",
    "figures": {
        "overhead": {
            "name": "tool overhead: PLT of nytimes at RTT 0, unshaped, built-in loader",
            "unit": "ms",
            "target": ("<=", 100),
            "on": "bundled nytimes (166 objects, 31 hosts), median of 5 loads",
        },
        "fidelity_chain": {
            "name": "10-object chain: PLT - analytic ((N+1) RTT, TFO N RTT)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the analytic PLT",
            "on": "generated chain of 10 (one origin), RTT 20/100/200 ms, TFO off/on, median of 3 loads",
        },
        "fidelity_fanout": {
            "name": "6 connections / 30 objects: PLT - simulated schedule (8 RTT, TFO 6 RTT)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the simulated schedule",
            "on": "generated fan of 30 small objects behind a document, RTT 20/100/200 ms, TFO off/on, median of 3",
        },
        "repeat": {
            "name": "repeatability: CV of wikipedia at 100 ms, built-in loader",
            "unit": "%",
            "target": ("<=", 1.0),
            "on": "10 loads, client receive buffer 1 MiB (the default)",
        },
        "repeat_kernel": {
            "name": "repeatability with the kernel's receive buffer (--client-rmem kernel)",
            "unit": "%",
            "target": None,
            "on": "10 loads of wikipedia at 100 ms, built-in loader",
        },
        "repeat_chromium": {
            "name": "repeatability: CV of wikipedia at 100 ms, Chromium",
            "unit": "%",
            "target": ("<=", 5.0),
            "on": "10 loads",
        },
        "compare_cal0": {
            "name": "Chromium vs the built-in loader (Chromium model) calibrated at RTT 0, in sample (calibrated on the same page)",
            "unit": "%",
            "target": "within ±15 % at 100 ms (none at 20 and 200 ms)",
            "on": "per page at 100 ms, TFO off, median of 3 loads each; calibration: 3 Chromium loads at RTT 0 "
            "on the same machine (`pltlab calibrate`); the four TFO pages over their recorded protocol and over "
            "h2, the three recent pages over h2",
        },
        "compare_calrtt": {
            "name": "Chromium vs the built-in loader calibrated at the comparison's RTT, in sample (calibrated on the same page)",
            "unit": "%",
            "target": None,
            "on": "the same loads; calibration: 3 Chromium loads at the comparison's RTT",
        },
        "compare_uncal": {
            "name": "Chromium vs the built-in loader, uncalibrated (model only)",
            "unit": "%",
            "target": None,
            "on": "the same loads",
        },
    },
}


def chain(n: int):
    return generate(objects=n, total_bytes=n * 2000, origins=1, depth=n - 1, seed=3)


def fan(children: int):
    """1 origin: the main document and `children` small objects it references (depth 1)."""
    return generate(objects=children + 1, total_bytes=(children + 1) * 1500, origins=1, depth=1, seed=5)


def fanout_rtts(children: int, conns: int, tfo: bool) -> int:
    """Round trips of the built-in loader's schedule (docs/dataplane-interfaces.md) on a page of
    one origin whose main document references `children` objects, all tiny and unshaped: the
    main document costs a handshake (none with warm TFO) + 1 RTT; then its connection takes the
    first child while conns-1 new connections open (a handshake each, none with TFO: the request
    rides in the SYN), and every connection then serves one request per RTT."""
    t = 1 if tfo else 2  # main document done
    free = [t]  # when each connection can send its next request
    opened = 1
    done_at = t
    for _ in range(children):
        free.sort()
        if opened < conns and free[0] > t:  # every connection busy: open one (late binding)
            opened += 1
            start, hs = t, (0 if tfo else 1)
            end = start + hs + 1
            free.append(end)
        else:
            start = free.pop(0)
            end = start + 1
            free.append(end)
        done_at = max(done_at, end)
    return done_at


def overhead(b, reps=5):
    page = bundled.load("nytimes")
    runs = run_page(page, RunConfig(rtt="0ms", reps=reps, tfo_modes=(False,)))
    plts = [r["plt_ms"] for r in runs]
    print(
        f"tool overhead: nytimes ({len(page.objects)} objects, {len(page.hosts)} hosts) at RTT 0, "
        f"unshaped, built-in loader: median {statistics.median(plts):.1f} ms, max {max(plts):.1f} ms "
        f"(target <= 100 ms)",
        flush=True,
    )
    b.figure(
        "overhead",
        statistics.median(plts),
        samples=plts,
        on=f"bundled nytimes ({len(page.objects)} objects, {len(page.hosts)} hosts), median of {len(plts)} loads",
    )


def _fidelity_line(b, key, what, rtt, tfo, plts, analytic, on=""):
    """Print and record one fidelity point: the median PLT against the analytic one, target
    within 2 % + 2 ms (used by bench_tls and bench_h3 too; ``tfo`` None: a transport without TFO)."""
    bound = 0.02 * analytic + 2
    tfo_text = "" if tfo is None else f", TFO {'on' if tfo else 'off'}"
    label = f"{what}, RTT {rtt} ms{tfo_text}: PLT - analytic {analytic} ms"
    if not plts:
        print(f"fidelity: {what}, RTT {rtt} ms{tfo_text}: no valid load: MISSED", flush=True)
        b.figure(key, None, name=label, target=("abs<=", round(bound, 3)), on="no valid load")
        return
    med = statistics.median(plts)
    ok = abs(med - analytic) <= bound
    print(
        f"fidelity: {what}, RTT {rtt} ms{tfo_text}: median {med:.1f} ms vs "
        f"analytic {analytic} ms: error {med - analytic:+.1f} ms ({(med / analytic - 1):+.2%}; "
        f"target within 2 % + 2 ms: {'ok' if ok else 'MISSED'})",
        flush=True,
    )
    b.figure(
        key,
        med - analytic,
        name=label,
        target=("abs<=", round(bound, 3)),
        samples=[p - analytic for p in plts],
        on=f"median of {len(plts)} loads" + (f"; {on}" if on else ""),
    )


def fidelity(b, reps=3, rtts=(20, 100, 200)):
    n = 10
    for rtt in rtts:
        runs = run_page(chain(n), RunConfig(rtt=f"{rtt}ms", reps=reps))
        for tfo in (False, True):
            plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
            _fidelity_line(b, "fidelity_chain", f"{n}-object chain", rtt, tfo, plts, (n + (0 if tfo else 1)) * rtt)


def fanout(b, reps=3, rtts=(20, 100, 200)):
    kids, conns = 30, 6
    for rtt in rtts:
        runs = run_page(fan(kids), RunConfig(rtt=f"{rtt}ms", reps=reps, max_conns_per_host=conns))
        for tfo in (False, True):
            plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
            used = {len({q["conn_id"] for q in r["requests"]}) for r in runs if r["tfo"] == tfo}
            _fidelity_line(
                b,
                "fidelity_fanout",
                f"{conns} connections / {kids} objects",
                rtt,
                tfo,
                plts,
                fanout_rtts(kids, conns, tfo) * rtt,
                on=f"connections used {sorted(used)}",
            )


def repeatability(b, client="builtin", reps=10, client_rmem=DEFAULT_CLIENT_RMEM):
    """``client_rmem`` None: the kernel's receive buffer (docs/performance.md)."""
    page = bundled.load("wikipedia")
    runs = run_page(page, RunConfig(rtt="100ms", reps=reps, tfo_modes=(False,), client=client, client_rmem=client_rmem))
    plts = [r["plt_ms"] for r in runs]
    cv = statistics.pstdev(plts) / statistics.fmean(plts)
    rmem = f", client receive buffer {client_rmem} B" if client_rmem else ", the kernel's receive buffer"
    print(
        f"repeatability: wikipedia at 100 ms, {reps} loads, {client}{rmem}: mean "
        f"{statistics.fmean(plts):.1f} ms, CV {cv:.2%} (target <= {1 if client == 'builtin' else 5} %); "
        f"PLTs {[round(p) for p in plts]}",
        flush=True,
    )
    key = "repeat_chromium" if client == "chromium" else "repeat" if client_rmem else "repeat_kernel"
    b.figure(
        key,
        cv * 100,
        samples=plts,
        on=f"{len(plts)} loads of wikipedia at 100 ms{rmem} (PLT distribution in ms beside it)",
    )


def _runs(page, cfg):
    """The built-in loader on Chromium's schemes (HSTS upgrades) and with its model of Chromium
    (dependencies as Chromium sees them, request priorities: docs/loaders.md), or Chromium."""
    out = []
    with PageRunner(page, dataclasses.replace(cfg, schemes="chromium", model="chromium")) as pr:
        for rep in range(1, cfg.reps + 1):
            for tfo in cfg.tfo_modes:
                out.append(pr.load(Point(tfo=tfo), rep))
    return out


def compare(b, reps=3, tfo=False, calibrate=True, rtt=100, names=PAPER, protocol="recorded"):
    """Per page: (with ``calibrate``) Chromium's compute measured twice (pltlab.loaders.compute_model,
    3 loads each, median): at RTT 0 and at the comparison's RTT; then the built-in loader
    without and with each calibration, then Chromium; both over ``protocol``."""
    from pltlab.archive.calibration import PAGE_KEY
    from pltlab.run.calibrate import calibrate as measure

    print(
        f"built-in (Chromium's schemes, model chromium) vs Chromium, {rtt} ms, TFO {'on' if tfo else 'off'}, "
        f"protocol {protocol}, median of {reps}:",
        flush=True,
    )
    cals = (("cal0", "0ms"), (f"cal{rtt}", f"{rtt}ms")) if calibrate else ()
    for name in names:
        pages = {"builtin": bundled.load(name), "chromium": bundled.load(name)}
        cal_on = {}
        for what, at in cals:
            pages[what] = measure(bundled.load(name), loads=3, rtt=at)
            cal = pages[what].extras[PAGE_KEY]
            cal_on[what] = (
                f"calibrated on 3 loads of Chromium {cal['browser']} at RTT {at}: PLTs {cal['load_plt_ms']} ms, "
                f"{cal['matched']}/{cal['objects']} objects matched"
            )
            print(
                f"  {name}: calibration at RTT {at} ({cal['browser']}): Chromium PLTs {cal['load_plt_ms']} ms, "
                f"{cal['matched']}/{cal['objects']} objects matched, tail {cal['tail_ms']:.1f} ms, "
                f"tight mode +{cal['tight_delay_ms']:.1f} ms",
                flush=True,
            )
        med, plts = {}, {}
        for what, page in pages.items():
            client = "chromium" if what == "chromium" else "builtin"
            runs = _runs(
                page,
                RunConfig(
                    rtt=f"{rtt}ms",
                    reps=reps,
                    tfo_modes=(tfo,),
                    client=client,
                    calibrated=what.startswith("cal"),
                    protocol=protocol,
                ),
            )
            bad = [r["invalid_reason"] for r in runs if not r["valid"]]
            plts[what] = [r["plt_ms"] for r in runs if r["valid"]]
            med[what] = statistics.median(plts[what]) if plts[what] else float("nan")
            med[what + "_n"] = statistics.median(len(r["requests"]) for r in runs)
            if bad:
                print(f"  {name} {what}: invalid: {bad}")
        line = (
            f"  {name:10} objects {len(pages['builtin'].objects):4}: Chromium {med['chromium']:7.1f} ms "
            f"({med['chromium_n']:.0f} req); built-in {med['builtin']:7.1f} ms ({med['builtin_n']:.0f} req): "
            f"Chromium {med['chromium'] / med['builtin'] - 1:+.1%}"
        )
        for what, at in cals:
            line += f"; calibrated at {at} {med[what]:7.1f} ms: Chromium {med['chromium'] / med[what] - 1:+.1%}"
        print(line + " (target within 15 %)", flush=True)
        where = f"{name}, RTT {rtt} ms, TFO {'on' if tfo else 'off'}, protocol {protocol}"
        for what, key in [("builtin", "compare_uncal")] + [
            (w, "compare_cal0" if at == "0ms" else "compare_calrtt") for w, at in cals
        ]:
            target = ("abs<=", COMPARE_BOUND) if key == "compare_cal0" and rtt == 100 else NO_TARGET
            on = (
                f"median of {len(plts['chromium'])} Chromium loads ({med['chromium']:.1f} ms) vs median of "
                f"{len(plts[what])} built-in loads ({med[what]:.1f} ms)"
            )
            b.figure(
                key,
                (med["chromium"] / med[what] - 1) * 100,
                name=f"{META['figures'][key]['name']}: {where}",
                target=target,
                on=on + (f"; {cal_on[what]}" if what in cal_on else ""),
            )


def chromium_tfo(b, reps=5):
    """TFO in Chromium: PLT with and without, and what the counters say."""
    for name in ("wikipedia", "amazon"):
        page = bundled.load(name)
        runs = run_page(page, RunConfig(rtt="100ms", reps=reps, client="chromium"))
        for tfo in (False, True):
            rs = [r for r in runs if r["tfo"] == tfo]
            act = [r["tfo_counters"]["client"]["TCPFastOpenActive"] for r in rs]
            conns = [len({q["conn_id"] for q in r["requests"] if q["conn_id"] is not None}) for r in rs]
            print(
                f"chromium TFO: {name} TFO {'on ' if tfo else 'off'}: median PLT "
                f"{statistics.median(r['plt_ms'] for r in rs):.1f} ms, TCPFastOpenActive {act}, "
                f"connections {conns}, valid {sum(r['valid'] for r in rs)}/{len(rs)}",
                flush=True,
            )
            b.figure(
                "chromium_tfo",
                statistics.median(r["plt_ms"] for r in rs),
                "ms",
                name=f"Chromium with TFO {'on' if tfo else 'off'}: PLT of {name} at 100 ms",
                samples=[r["plt_ms"] for r in rs],
                on=f"{len(rs)} loads; TCPFastOpenActive per load {act}; valid {sum(r['valid'] for r in rs)}/{len(rs)}",
            )


ALL = {
    "overhead": overhead,
    "fidelity": fidelity,
    "fanout": fanout,
    "repeat": repeatability,
    "repeat-kernel": lambda b: repeatability(b, client_rmem=None),
    "repeat-chromium": lambda b: repeatability(b, "chromium", 10),
    "compare": compare,
    "compare-h2": lambda b: compare(b, protocol="h2"),
    "compare-h2-recent": lambda b: compare(b, names=RECENT, protocol="h2"),
    # not by default (no target)
    "compare-tfo": lambda b: compare(b, tfo=True),
    "compare-uncalibrated": lambda b: compare(b, calibrate=False),
    "compare-20": lambda b: compare(b, rtt=20),
    "compare-200": lambda b: compare(b, rtt=200),
    "chromium-tfo": chromium_tfo,
}
DEFAULT = (
    "overhead",
    "fidelity",
    "fanout",
    "repeat",
    "repeat-kernel",
    "repeat-chromium",
    "compare",
    "compare-h2",
    "compare-h2-recent",
)
QUICK = {"overhead": lambda b: overhead(b, reps=2), "fidelity": lambda b: fidelity(b, reps=1, rtts=(20,))}


def main(argv=None) -> int:
    import argparse

    import record

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "sections", nargs="*", metavar="SECTION", help=f"of {', '.join(ALL)} (default: {', '.join(DEFAULT)})"
    )
    ap.add_argument("--quick", action="store_true", help="overhead (2 loads) and the chain at 20 ms (1 load)")
    a = ap.parse_args(argv)
    bad = [x for x in a.sections if x not in ALL]
    if bad:
        ap.error(f"unknown section {bad[0]!r}: one of {', '.join(ALL)}")
    todo = (
        [(n, QUICK[n]) for n in QUICK] if a.quick and not a.sections else [(n, ALL[n]) for n in a.sections or DEFAULT]
    )
    chromium = any("chromium" in n or n.startswith("compare") for n, _ in todo)
    with record.Bench(META, quick=a.quick, chromium=chromium) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            for _, fn in todo:
                fn(b)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
