#!/usr/bin/env python3
"""`pltlab run` figures (issue: replay + loaders): tool overhead, fidelity against analytic PLTs,
repeatability, built-in loader vs Chromium.

    python3 benches/bench_run.py [overhead|fidelity|fanout|repeat|repeat-kernel|repeat-chromium|compare|compare-20|compare-200|compare-uncalibrated|compare-h2|compare-h2-recent|chromium-tfo ...]

Needs root (namespaces). Timings are noisy on a shared 2-core machine: run it on a quiet one.
"""

import dataclasses
import statistics
import sys

from pltlab.archive import bundled
from pltlab.archive.generate import generate
from pltlab.net.spec import DEFAULT_CLIENT_RMEM
from pltlab.run.runner import PageRunner, RunConfig, run_page

PAPER = ("amazon", "nytimes", "wsj", "wikipedia")


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


def overhead():
    page = bundled.load("nytimes")
    runs = run_page(page, RunConfig(rtt="0ms", reps=5, tfo_modes=(False,)))
    plts = [r["plt_ms"] for r in runs]
    print(
        f"tool overhead: nytimes ({len(page.objects)} objects, {len(page.hosts)} hosts) at RTT 0, "
        f"unshaped, built-in loader: median {statistics.median(plts):.1f} ms, max {max(plts):.1f} ms "
        f"(target <= 100 ms)",
        flush=True,
    )


def _fidelity_line(what, rtt, tfo, plts, analytic):
    med = statistics.median(plts)
    ok = abs(med - analytic) <= 0.02 * analytic + 2
    print(
        f"fidelity: {what}, RTT {rtt} ms, TFO {'on ' if tfo else 'off'}: median {med:.1f} ms vs "
        f"analytic {analytic} ms: error {med - analytic:+.1f} ms ({(med / analytic - 1):+.2%}; "
        f"target within 2 % + 2 ms: {'ok' if ok else 'MISSED'})",
        flush=True,
    )


def fidelity():
    n = 10
    for rtt in (20, 100, 200):
        runs = run_page(chain(n), RunConfig(rtt=f"{rtt}ms", reps=3))
        for tfo in (False, True):
            plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
            _fidelity_line(f"{n}-object chain", rtt, tfo, plts, (n + (0 if tfo else 1)) * rtt)


def fanout():
    kids, conns = 30, 6
    for rtt in (20, 100, 200):
        runs = run_page(fan(kids), RunConfig(rtt=f"{rtt}ms", reps=3, max_conns_per_host=conns))
        for tfo in (False, True):
            plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
            used = {len({q["conn_id"] for q in r["requests"]}) for r in runs if r["tfo"] == tfo}
            _fidelity_line(
                f"{conns} connections / {kids} objects (conns used {sorted(used)})",
                rtt,
                tfo,
                plts,
                fanout_rtts(kids, conns, tfo) * rtt,
            )


def repeatability(client="builtin", reps=10, client_rmem=DEFAULT_CLIENT_RMEM):
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


def _runs(page, cfg):
    """The built-in loader on Chromium's schemes (HSTS upgrades) and with its model of Chromium
    (dependencies as Chromium sees them, request priorities: docs/loaders.md), or Chromium."""
    out = []
    with PageRunner(page, dataclasses.replace(cfg, schemes="chromium", model="chromium")) as pr:
        for rep in range(1, cfg.reps + 1):
            for tfo in cfg.tfo_modes:
                out.append(pr.load(tfo, rep))
    return out


def compare(reps=3, tfo=False, calibrate=True, rtt=100, names=PAPER, protocol="recorded"):
    """Per page: (with ``calibrate``) Chromium's compute measured twice (pltlab.loaders.calibrate,
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
        for what, at in cals:
            pages[what] = measure(bundled.load(name), loads=3, rtt=at)
            cal = pages[what].extras[PAGE_KEY]
            print(
                f"  {name}: calibration at RTT {at} ({cal['browser']}): Chromium PLTs {cal['load_plt_ms']} ms, "
                f"{cal['matched']}/{cal['objects']} objects matched, tail {cal['tail_ms']:.1f} ms, "
                f"tight mode +{cal['tight_delay_ms']:.1f} ms",
                flush=True,
            )
        med = {}
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
            med[what] = statistics.median(r["plt_ms"] for r in runs)
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


def chromium_tfo(reps=5):
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


ALL = {
    "overhead": overhead,
    "fidelity": fidelity,
    "fanout": fanout,
    "repeat": repeatability,
    "repeat-kernel": lambda: repeatability(client_rmem=None),
    "repeat-chromium": lambda: repeatability("chromium", 10),
    "compare": compare,
    "compare-tfo": lambda: compare(tfo=True),
    "compare-uncalibrated": lambda: compare(calibrate=False),
    "compare-20": lambda: compare(rtt=20),
    "compare-200": lambda: compare(rtt=200),
    # over h2: wikipedia (HSTS-preloaded: https for Chromium) and the three pages recorded over h2
    "compare-h2": lambda: compare(protocol="h2"),
    "compare-h2-recent": lambda: compare(names=("filamentgroup", "arcelormittal", "linkedin"), protocol="h2"),
    "chromium-tfo": chromium_tfo,
}

if __name__ == "__main__":
    for what in sys.argv[1:] or [
        "overhead",
        "fidelity",
        "fanout",
        "repeat",
        "repeat-kernel",
        "repeat-chromium",
        "compare",
    ]:
        ALL[what]()
