#!/usr/bin/env python3
"""TLS 1.3 over h2 (issue 14): fidelity of full, resumed and 0-RTT handshakes, TFO off and on,
against the analytic PLT of pages whose critical path is known, and repeatability over h2.

    python3 benches/bench_tls.py [fidelity|repeat ...]

Needs root (namespaces). The pages are generated (pltlab.archive.generate), served over https
(schemes "https") and h2 (protocol "h2") to the built-in loader; the link is unshaped and the
objects fit in the initial window, so a page costs whole round trips:

    TCP 1 + TLS 1 + the requests on the critical path, less 1 with TFO (the ClientHello rides in
    the SYN), less 1 with 0-RTT (the document's request rides with the ClientHello)

chain of n: n requests one after the other; fan of k: the document, then k objects at once on
its one h2 connection: 2 requests.
"""

import statistics
import sys

from bench_run import _fidelity_line, chain  # benches/ is the script's folder

from pltlab.archive.generate import generate
from pltlab.run.runner import RunConfig, run_page

MODES = ("full", "resume", "0rtt")


def fan(children: int):
    # ~9 KB: the responses, their frames and records, and the session tickets a 0-RTT
    # connection gets just before them all fit in the initial window of 10 segments
    return generate(objects=children + 1, total_bytes=(children + 1) * 1000, origins=1, depth=1, seed=5)


def analytic_rtts(critical_requests: int, tfo: bool, tls: str) -> int:
    return 2 + critical_requests - int(tfo) - int(tls == "0rtt")


def fidelity(reps: int = 3, only: str = ""):
    n, kids = 5, 8
    pages = ((f"{n}-object chain", chain(n), n), (f"fan of {kids}", fan(kids), 2))
    for name, page, critical in (p for p in pages if only in p[0]):
        for rtt in (20, 100, 200):
            for tls in MODES:
                cfg = RunConfig(rtt=f"{rtt}ms", reps=reps, schemes="https", protocol="h2", tls=tls)
                runs = run_page(page, cfg)
                bad = [r["invalid_reason"] for r in runs if not r["valid"]]
                if bad:
                    print(f"  ({len(bad)} invalid: {bad[0]})", flush=True)
                for tfo in (False, True):
                    plts = [r["plt_ms"] for r in runs if r["tfo"] == tfo and r["valid"]]
                    if plts:
                        _fidelity_line(f"h2 {name}, TLS {tls}", rtt, tfo, plts, analytic_rtts(critical, tfo, tls) * rtt)


def repeat(reps: int = 10):
    """CV of 10 loads of the 5-object chain over h2 + TLS 0-RTT at 100 ms, TFO on."""
    cfg = RunConfig(rtt="100ms", reps=reps, tfo="on", schemes="https", protocol="h2", tls="0rtt")
    plts = [r["plt_ms"] for r in run_page(chain(5), cfg) if r["valid"]]
    cv = statistics.pstdev(plts) / statistics.fmean(plts)
    print(
        f"repeat: h2 + 0-RTT + TFO, 5-object chain, 100 ms: n {len(plts)}, median {statistics.median(plts):.1f} ms, CV {cv:.2%} (target <= 1 %)"
    )


ALL = {"fidelity": fidelity, "fidelity-fan": lambda: fidelity(only="fan"), "repeat": repeat}

if __name__ == "__main__":
    for what in sys.argv[1:] or ["fidelity", "repeat"]:
        ALL[what]()
