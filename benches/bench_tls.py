#!/usr/bin/env python3
"""TLS 1.3 over h2 (issue 14): fidelity of full, resumed and 0-RTT handshakes, TFO off and on,
against the analytic PLT of pages whose critical path is known, and repeatability over h2.

    python3 benches/bench_tls.py [--quick] [fidelity|fidelity-fan|repeat ...]

Needs root (namespaces). The pages are generated (pltlab.archive.generate), served over https
(schemes "https") and h2 (protocol "h2") to the built-in loader; the link is unshaped and the
objects fit in the initial window, so a page costs whole round trips:

    TCP 1 + TLS 1 + the requests on the critical path, less 1 with TFO (the ClientHello rides in
    the SYN), less 1 with 0-RTT (the document's request rides with the ClientHello)

chain of n: n requests one after the other; fan of k: the document, then k objects at once on
its one h2 connection: 2 requests. --quick: the chain at 20 ms with full handshakes (1 load)
and 3 loads for repeatability: a plumbing check.
"""

import statistics
import sys

import record
from bench_run import _fidelity_line, chain  # benches/ is the script's folder

from pltlab.archive.generate import generate
from pltlab.run.runner import RunConfig, run_page

MODES = ("full", "resume", "0rtt")

META = {
    "name": "bench_tls",
    "area": "tls",
    "title": "TLS 1.3 over HTTP/2: fidelity and repeatability",
    "command": "python3 benches/bench_tls.py",
    "quick": "python3 benches/bench_tls.py --quick",
    "duration": "~6 min",
    "needs": "root",
    "figures": {
        "fidelity_chain": {
            "name": "h2 5-object chain: PLT - analytic (TCP 1 + TLS 1 + 5 requests, less 1 with TFO, less 1 with 0-RTT)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the analytic PLT",
            "on": "generated chain of 5 over https + h2, RTT 20/100/200 ms, TLS full/resume/0rtt, TFO off/on, median of 3",
        },
        "fidelity_fan": {
            "name": "h2 fan of 8: PLT - analytic (2 requests on the critical path)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the analytic PLT",
            "on": "generated document + 8 objects (~9 KB) over https + h2, the same grid, median of 3",
        },
        "repeat": {
            "name": "repeatability: CV of the 5-object chain over h2 + 0-RTT + TFO at 100 ms",
            "unit": "%",
            "target": ("<=", 1.0),
            "on": "10 loads",
        },
    },
}


def fan(children: int):
    # ~9 KB: the responses, their frames and records, and the session tickets a 0-RTT
    # connection gets just before them all fit in the initial window of 10 segments
    return generate(objects=children + 1, total_bytes=(children + 1) * 1000, origins=1, depth=1, seed=5)


def analytic_rtts(critical_requests: int, tfo: bool, tls: str) -> int:
    return 2 + critical_requests - int(tfo) - int(tls == "0rtt")


def fidelity(b, reps: int = 3, only: str = "", rtts=(20, 100, 200), modes=MODES):
    n, kids = 5, 8
    pages = (
        ("fidelity_chain", f"{n}-object chain", chain(n), n),
        ("fidelity_fan", f"fan of {kids}", fan(kids), 2),
    )
    for key, name, page, critical in (p for p in pages if only in p[1]):
        for rtt in rtts:
            for tls in modes:
                cfg = RunConfig(rtt=f"{rtt}ms", reps=reps, schemes="https", protocol="h2", tls=tls)
                runs = run_page(page, cfg)
                bad = [r["invalid_reason"] for r in runs if not r["valid"]]
                if bad:
                    print(f"  ({len(bad)} invalid: {bad[0]})", flush=True)
                for tfo in (False, True):
                    plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
                    _fidelity_line(
                        b,
                        key,
                        f"h2 {name}, TLS {tls}",
                        rtt,
                        tfo,
                        plts,
                        analytic_rtts(critical, tfo, tls) * rtt,
                        on=f"{len(bad)} invalid" if bad else "",
                    )


def repeat(b, reps: int = 10):
    """CV of 10 loads of the 5-object chain over h2 + TLS 0-RTT at 100 ms, TFO on."""
    cfg = RunConfig(rtt="100ms", reps=reps, tfo="on", schemes="https", protocol="h2", tls="0rtt")
    plts = [r["plt_ms"] for r in run_page(chain(5), cfg) if r["valid"]]
    cv = statistics.pstdev(plts) / statistics.fmean(plts) if len(plts) > 1 else float("nan")
    print(
        f"repeat: h2 + 0-RTT + TFO, 5-object chain, 100 ms: n {len(plts)}, median {statistics.median(plts):.1f} ms, "
        f"CV {cv:.2%} (target <= 1 %)",
        flush=True,
    )
    b.figure(
        "repeat", cv * 100, samples=plts, on=f"{len(plts)} valid loads of {reps} (PLT distribution in ms beside it)"
    )


ALL = {
    "fidelity": fidelity,
    "fidelity-fan": lambda b: fidelity(b, only="fan"),
    "repeat": repeat,
}
QUICK = {
    "fidelity": lambda b: fidelity(b, reps=1, only="chain", rtts=(20,), modes=("full",)),
    "repeat": lambda b: repeat(b, reps=3),
}


def main() -> int:
    return record.sections_main(
        __doc__, META, ALL, QUICK, ("fidelity", "repeat"), "chain at 20 ms, full handshakes, 1 load; 3 loads for repeat"
    )


if __name__ == "__main__":
    sys.exit(main())
