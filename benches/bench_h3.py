#!/usr/bin/env python3
"""HTTP/3 over QUIC (issue 26, deliverable 5): fidelity of QUIC's full and 0-RTT handshakes
against the analytic PLT of pages whose critical path is known, repeatability, and page loads
over h3 and h2 under random loss (does head-of-line blocking show?).

    python3 benches/bench_h3.py [--quick] [fidelity|fidelity-fan|repeat|loss ...]

Needs root (namespaces). The pages are generated (pltlab.archive.generate), served over https
(schemes "https") and h3 (protocol "h3") to the built-in loader; the link is unshaped and the
objects fit in QUIC's initial window, so a page costs whole round trips:

    QUIC 1 (its handshake carries TLS 1.3: no TCP round trip) + the requests on the critical
    path, less 1 with 0-RTT (the document's request rides in the client's first flight, beside
    the Initial that resumes the warm visit's ticket, and is answered at once: 0.5-RTT data)

chain of n: n requests one after the other; fan of k: the document, then k objects at once on
its one QUIC connection: 2 requests. There is no TFO (a TCP option) over QUIC.

loss: a document and 40 objects of ~3 KB on one connection, at 1 % and 2 % random loss each way,
over h3 and over h2 (TLS full both), several loads each, beside lossless loads. Over h2 a lost
segment holds back every byte TCP received after it, whatever stream it belongs to; over h3 a
lost packet holds back only the streams it carried (RFC 9000 §2.2). The replay answers one
response after the other (RFC 9218 order, same urgency), so after a loss the next objects are
complete over h3 and stuck behind the hole over h2. Per object: how much later its last byte
came than in the lossless loads (its median there). An object of 2-3 packets is hit by a loss
in 2-6 % of loads at 1-2 %, so the median object was not hit: its delay is the head-of-line
blocking (and the senders' smaller windows after a loss, which both have); and the objects
delayed by half a round trip or more per datagram the link dropped (about 1 if a loss stalls
one stream, more if it stalls a byte stream). No targets: measured figures. (Objects of 20 KB
were tried first: there the window after a loss delayed every object of both protocols.)

--quick: the chain at 20 ms with full handshakes (1 load), 3 loads for repeatability, and the
loss comparison at 2 % with 1 load each: a plumbing check.
"""

import statistics
import sys

import record
from bench_run import _fidelity_line, chain  # benches/ is the script's folder

from pltlab.archive.generate import generate
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig, run_page

MODES = ("full", "0rtt")
LOSS_RTT = 100  # ms
LOSS_OBJECTS, LOSS_OBJECT_BYTES = 40, 3_000  # (META says so in words)

META = {
    "name": "bench_h3",
    "area": "h3",
    "title": "HTTP/3 over QUIC: fidelity, repeatability, loss against h2",
    "command": "python3 benches/bench_h3.py",
    "quick": "python3 benches/bench_h3.py --quick",
    "duration": "~2 min",
    "needs": "root",
    "figures": {
        "fidelity_chain": {
            "name": "h3 5-object chain: PLT - analytic (QUIC 1 + 5 requests, less 1 with 0-RTT)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the analytic PLT",
            "on": "generated chain of 5 over https + h3, RTT 20/100/200 ms, TLS full/0rtt, median of 3",
        },
        "fidelity_fan": {
            "name": "h3 fan of 8: PLT - analytic (QUIC 1 + 2 requests on the critical path, less 1 with 0-RTT)",
            "unit": "ms",
            "target": "within 2 % + 2 ms of the analytic PLT",
            "on": "generated document + 8 objects (~9 KB) on one QUIC connection, the same grid, median of 3",
        },
        "repeat": {
            "name": "repeatability: CV of the 5-object chain over h3 + 0-RTT at 100 ms",
            "unit": "%",
            "target": ("<=", 1.0),
            "on": "10 loads",
        },
        "loss_plt": {
            "name": "PLT under random loss, h3 and h2",
            "unit": "ms",
            "target": None,
            "on": "document + 40 objects of ~3 KB on one connection, RTT 100 ms, unshaped, loss each way, "
            "TLS full, median of 10 loads",
        },
        "loss_ratio": {
            "name": "PLT ratio h3 / h2 (medians) at 0, 1 and 2 % loss",
            "unit": "",
            "target": None,
            "on": "the loss loads",
        },
        "loss_object_delay": {
            "name": "head-of-line blocking: median object's delay under loss (last byte - its lossless median)",
            "unit": "ms",
            "target": None,
            "on": "every object but the document, of every load; the median object was not hit by a loss",
        },
        "loss_objects_delayed": {
            "name": "head-of-line blocking: objects delayed by half an RTT or more under loss",
            "unit": "%",
            "target": None,
            "on": "every object but the document, of every load",
        },
        "loss_delayed_per_drop": {
            "name": "head-of-line blocking: objects delayed by half an RTT or more per datagram the link dropped",
            "unit": "",
            "target": None,
            "on": "the loss loads; drops: the emulator's dropped_loss, both ways, over the runner's life",
        },
    },
}


def fan(children: int):
    # ~9 KB: the responses, their QPACK headers and QUIC framing fit in quinn's initial window
    # (12,000 bytes) and its pacer's first burst (10 packets), as bench_tls's fan does in TCP's
    return generate(objects=children + 1, total_bytes=(children + 1) * 1000, origins=1, depth=1, seed=5)


def hol_page():
    """A document and LOSS_OBJECTS objects it references, one origin: one connection."""
    n = LOSS_OBJECTS + 1
    return generate(objects=n, total_bytes=n * LOSS_OBJECT_BYTES, origins=1, depth=1, seed=7)


def analytic_rtts(critical_requests: int, tls: str) -> int:
    """QUIC's handshake is 1 round trip (TLS 1.3 inside it, RFC 9001), 0 before the first
    request with 0-RTT; then one round trip per request on the critical path."""
    return 1 + critical_requests - int(tls == "0rtt")


def _cfg(rtt, **kw) -> RunConfig:
    return RunConfig(rtt=f"{rtt}ms", schemes="https", protocol="h3", **kw)


def fidelity(b, reps: int = 3, only: str = "", rtts=(20, 100, 200), modes=MODES):
    n, kids = 5, 8
    pages = (
        ("fidelity_chain", f"{n}-object chain", chain(n), n),
        ("fidelity_fan", f"fan of {kids}", fan(kids), 2),
    )
    for key, name, page, critical in (p for p in pages if only in p[1]):
        for rtt in rtts:
            for tls in modes:
                runs = run_page(page, _cfg(rtt, reps=reps, tls=tls))
                bad = [r["invalid_reason"] for r in runs if not r["valid"]]
                if bad:
                    print(f"  ({len(bad)} invalid: {bad[0]})", flush=True)
                plts = [r["plt_ms"] for r in runs if r["valid"]]
                conns = sorted({len(r["connections"] or ()) for r in runs})
                _fidelity_line(
                    b,
                    key,
                    f"h3 {name}, TLS {tls}",
                    rtt,
                    None,
                    plts,
                    analytic_rtts(critical, tls) * rtt,
                    on=f"QUIC connections per load {conns}" + (f"; {len(bad)} invalid" if bad else ""),
                )


def repeat(b, reps: int = 10):
    """CV of 10 loads of the 5-object chain over h3 + 0-RTT at 100 ms."""
    plts = [r["plt_ms"] for r in run_page(chain(5), _cfg(100, reps=reps, tls="0rtt")) if r["valid"]]
    cv = statistics.pstdev(plts) / statistics.fmean(plts) if len(plts) > 1 else float("nan")
    print(
        f"repeat: h3 + 0-RTT, 5-object chain, 100 ms: n {len(plts)}, median {statistics.median(plts):.1f} ms, "
        f"CV {cv:.2%} (target <= 1 %)",
        flush=True,
    )
    b.figure(
        "repeat", cv * 100, samples=plts, on=f"{len(plts)} valid loads of {reps} (PLT distribution in ms beside it)"
    )


def _loads(protocol: str, loss: float, reps: int) -> tuple[list[dict], dict]:
    """The valid loads of the HOL page over ``protocol`` at ``loss`` % each way, and the
    datagrams the link dropped (both ways) over all of them (the emulator's counts, for the
    runner's life: the loads and any re-run of a late one)."""
    cfg = RunConfig(
        rtt=f"{LOSS_RTT}ms",
        loss=f"{loss}%",
        reps=reps,
        schemes="https",
        protocol=protocol,
        **({"tfo": "off"} if protocol == "h2" else {}),
    )
    with PageRunner(hol_page(), cfg) as pr:
        runs = [pr.load(Point(tfo=False), rep) for rep in range(1, reps + 1)]
    bad = [r["invalid_reason"] for r in runs if not r["valid"]]
    if bad:
        print(f"  {protocol} at {loss} % loss: {len(bad)} invalid: {bad[0]}", flush=True)
    stats = pr.topo.link_stats or {}
    dropped = {d: (stats.get(d) or {}).get("dropped_loss", 0) for d in ("uplink", "downlink")}
    return [r for r in runs if r["valid"]], dropped


def lossless_reference(runs: list[dict]) -> dict[str, float]:
    """Per URL, the median of its last byte over the lossless loads."""
    ends: dict[str, list[float]] = {}
    for r in runs:
        for q in r["requests"]:
            ends.setdefault(q["url"], []).append(q["last_byte_ms"])
    return {u: statistics.median(v) for u, v in ends.items()}


def object_delays(runs: list[dict], reference: dict[str, float]) -> list[float]:
    """Per object but the document (index 0), per load: its last byte minus its lossless median."""
    return [
        q["last_byte_ms"] - reference[q["url"]]
        for r in runs
        for q in r["requests"]
        if q["index"] and q["url"] in reference
    ]


def loss(b, reps: int = 10, losses=(1, 2), base_reps: int = 3):
    med: dict[tuple[str, float], float] = {}
    late_at = LOSS_RTT / 2  # a retransmission costs about a round trip: half of one tells it
    for protocol in ("h3", "h2"):
        base, _ = _loads(protocol, 0, base_reps)
        if not base:
            print(f"loss: {protocol}: no valid lossless load", flush=True)
            continue
        ref = lossless_reference(base)
        med[protocol, 0] = statistics.median(r["plt_ms"] for r in base)
        print(f"loss: {protocol} lossless: median PLT {med[protocol, 0]:.1f} ms of {len(base)}", flush=True)
        for p in losses:
            runs, dropped = _loads(protocol, p, reps)
            where = f"{protocol}, {p} % loss each way"
            if not runs:
                b.figure("loss_plt", None, name=f"PLT: {where}", on="no valid load")
                continue
            plts = [r["plt_ms"] for r in runs]
            med[protocol, p] = statistics.median(plts)
            delays = object_delays(runs, ref)
            late = sum(d >= late_at for d in delays)
            share = late / len(delays) * 100 if delays else float("nan")
            dmed = statistics.median(delays) if delays else float("nan")
            drops = sum(dropped.values())
            per_drop = late / drops if drops else float("nan")
            print(
                f"loss: {where}: median PLT {med[protocol, p]:.1f} ms (lossless {med[protocol, 0]:.1f}); "
                f"median object delay {dmed:+.1f} ms; objects delayed >= {late_at:g} ms: {share:.0f} % "
                f"({late} of {len(delays)}); datagrams dropped {dropped}: {per_drop:.2f} delayed objects per drop",
                flush=True,
            )
            on = f"{len(runs)} valid loads of {reps}"
            b.figure("loss_plt", med[protocol, p], name=f"PLT: {where}", samples=plts, on=on)
            b.figure(
                "loss_object_delay",
                dmed,
                name=f"median object's delay under loss: {where}",
                samples=delays,
                on=f"{len(delays)} objects of {len(runs)} loads",
            )
            b.figure(
                "loss_objects_delayed",
                share,
                name=f"objects delayed by >= {late_at:g} ms: {where}",
                on=f"{late} of {len(delays)} objects of {len(runs)} loads",
            )
            b.figure(
                "loss_delayed_per_drop",
                per_drop,
                name=f"objects delayed per datagram dropped: {where}",
                on=f"{late} delayed objects; datagrams dropped up {dropped['uplink']}, down {dropped['downlink']} "
                f"in {len(runs)} loads",
            )
    for p in (0, *losses):
        if ("h3", p) in med and ("h2", p) in med:
            ratio = med["h3", p] / med["h2", p]
            print(f"loss: PLT h3 / h2 at {p} % loss: {ratio:.3f}", flush=True)
            b.figure(
                "loss_ratio",
                ratio,
                name=f"PLT ratio h3 / h2 at {p} % loss",
                on=f"medians {med['h3', p]:.1f} / {med['h2', p]:.1f} ms",
            )


ALL = {
    "fidelity": fidelity,
    "fidelity-fan": lambda b: fidelity(b, only="fan"),
    "repeat": repeat,
    "loss": loss,
}
DEFAULT = ("fidelity", "repeat", "loss")
QUICK = {
    "fidelity": lambda b: fidelity(b, reps=1, only="chain", rtts=(20,), modes=("full",)),
    "repeat": lambda b: repeat(b, reps=3),
    "loss": lambda b: loss(b, reps=1, losses=(2,), base_reps=1),
}


def main() -> int:
    return record.sections_main(
        __doc__, META, ALL, QUICK, DEFAULT, "chain at 20 ms, full handshakes, 1 load; 3 loads for repeat; loss at 2 %"
    )


if __name__ == "__main__":
    sys.exit(main())
