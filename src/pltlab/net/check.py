"""`pltlab check`: what this machine offers, and a fidelity self-test of the emulated link.

RTT fidelity: SAMPLES ping-pong round trips per RTT (several connections at once, so 2,000
samples at 200 ms take seconds, not minutes), each measured at the link (kernel timestamps, see
`pltlab-dp probe ping`). Stall rule (pltlab.net.lateness.classify): a sample whose error exceeds
the target is a *stall* when the delays the emulator logged during that sample (its wake-ups
waiting for a CPU, its vCPU not run by the hypervisor, packets released late) account for the
excess, i.e. its error minus those delays is within the target. Stalls are the machine's, not the
emulator's timing: the p99 is reported with and without them, with their count; loads hit by
them are re-run (pltlab.run.runner).
"""

import math
import os
import platform
import shutil

from pltlab import dataplane
from pltlab.errors import PltError
from pltlab.net import lateness, names, netem, nsutil, probes
from pltlab.net.topology import Topology, require_root
from pltlab.net.wan import LinkSpec, TcpKnobs, TopologySpec

RTTS_MS = (20, 100, 200)
RATE_MBIT = 4
LOSS = 0.05

# Targets (the same as benches/bench_wan.py's, measured by `make bench BENCH=wan`): beyond these
# the verdict is "degraded".
MAX_P99_ERR_MS = 0.3
MAX_RATE_ERR = 0.01
MAX_LOSS_ERR = 0.005
MIN_THROUGHPUT_GBIT = 2.0

SAMPLES, QUICK_SAMPLES = 2000, 50
FLOW_SECONDS = 10.0  # parallel ping connections: enough that one RTT test takes about this long
MAX_FLOWS = 32


def environment() -> dict:
    env = {
        "kernel": platform.release(),
        "cpus": os.cpu_count(),
        "tun": os.path.exists("/dev/net/tun"),
        "tcp_fastopen_host": _read("/proc/sys/net/ipv4/tcp_fastopen"),
        "cc_available": (_read("/proc/sys/net/ipv4/tcp_available_congestion_control") or "").split(),
        "cc_default": _read("/proc/sys/net/ipv4/tcp_congestion_control"),
        "chromium": shutil.which("chromium") or shutil.which("chromium-browser"),
        "tc": shutil.which("tc"),
    }
    try:
        env["dataplane"] = dataplane.binary()
    except PltError:
        env["dataplane"] = None
    # Probe what a fresh namespace of ours looks like: default TFO, netem.
    probe_ns = names.run_prefix(names.new_run_id()) + "p"
    nsutil.create_netns(probe_ns)
    try:
        env["tcp_fastopen_new_netns"] = nsutil.sysctl_get(probe_ns, "net.ipv4.tcp_fastopen")
        env["netem"] = netem.available(probe_ns)
    finally:
        nsutil.remove_netns(probe_ns)
    return env


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _pct(values: list[float], q: float) -> float:
    s = sorted(values)
    if not s:
        return float("nan")
    k = min(len(s) - 1, max(0, round(q * (len(s) - 1))))
    return s[k]


LATE_EVENT_US = 50  # the emulator logs delays from this size on: stalls are told apart with them


def _spec(backend: str, sched_fifo: bool, standby_us: int | None = None, extra: dict | None = None, **link):
    extra = dict(extra or {}, **({} if standby_us is None else {"standby_us": standby_us}))
    return TopologySpec(
        link=LinkSpec.build(**link),
        knobs=TcpKnobs(cc="cubic"),
        backend=backend,
        sched_fifo=sched_fifo,
        idle_poll=True,  # as runs have it (knob idle_poll)
        late_event_us=LATE_EVENT_US,
        **extra,
    )


def flows_for(rtt_ms: float, samples: int) -> int:
    """Parallel ping connections so that ``samples`` round trips take about FLOW_SECONDS."""
    return max(1, min(MAX_FLOWS, math.ceil(samples * rtt_ms / 1000 / FLOW_SECONDS)))


def rtt_test(
    rtt_ms: int,
    samples: int,
    backend: str,
    sched_fifo: bool,
    flows: int | None = None,
    standby_us: int | None = None,
    spec_extra: dict | None = None,
) -> dict:
    """``standby_us``: the emulator's standby tick (None: TopologySpec's default);
    ``spec_extra``: more TopologySpec fields (tests: injected stalls)."""
    flows = flows or flows_for(rtt_ms, samples)
    with Topology(_spec(backend, sched_fifo, standby_us, spec_extra, rtt=f"{rtt_ms}ms")) as topo:
        probes.start_server(topo)
        limit = 30 + samples / flows * (rtt_ms / 1000 + 0.005) * 3
        res = probes.client(
            topo,
            [
                "ping",
                "--connect",
                probes.target(topo),
                "--count",
                str(samples),
                "--warmup",
                "5",
                "--flows",
                str(flows),
                "--timeout-s",
                str(limit),
            ],
            timeout=limit + 10,
        )
        stats = topo.down() or {}
    return rtt_figures(rtt_ms, res, stats)


def rtt_figures(rtt_ms: float, res: dict, stats: dict, target_ms: float = MAX_P99_ERR_MS) -> dict:
    """Error distribution of one ping run (network RTT from kernel timestamps; the application's
    beside it), its stalls by the stall rule, and the emulator's own lateness."""
    errs = [s / 1000.0 - rtt_ms for s in res["samples_us"]]
    app = [s / 1000.0 - rtt_ms for s in res["app_samples_us"]]
    stalls = lateness.classify(
        errs,
        res.get("at_ns") or [0] * len(errs),
        [s / 1000.0 for s in res["app_samples_us"]],
        lateness.events(stats),
        target_ms,
    )
    kept = [e for e, st in zip(errs, stalls) if not st]
    return {
        "configured_ms": rtt_ms,
        "samples": len(errs),
        "flows": res.get("flows", 1),
        "p50_err_ms": round(_pct(errs, 0.5), 4),
        "p99_err_ms": round(_pct(errs, 0.99), 4),
        "max_err_ms": round(max(errs), 4),
        "min_err_ms": round(min(errs), 4),
        "stalls": sum(stalls),
        "p99_err_without_stalls_ms": round(_pct(kept, 0.99), 4),
        "max_err_without_stalls_ms": round(max(kept), 4) if kept else None,
        "app_p50_err_ms": round(_pct(app, 0.5), 4),
        "app_p99_err_ms": round(_pct(app, 0.99), 4),
        "emulator_lateness": _lateness_summary(stats),
        # what the emulator's standby thread did for a stalled main loop (link/emulator.rs)
        "standby": (stats or {}).get("standby"),
    }


def _lateness_summary(stats: dict) -> dict | None:
    if not stats:
        return None
    out = {}
    for d in ("uplink", "downlink"):
        for k in ("lateness_us", "ingress_us"):
            h = (stats.get(d) or {}).get(k)
            if h:
                out[f"{d}_{k[:-3]}"] = {q: h.get(q) for q in ("p50", "p99", "max")}
    ev = stats.get("late_events")
    if ev:
        out["late_events"] = ev.get("count")
        out["late_event_us"] = ev.get("threshold_us")
    return out or None


def rate_test(seconds: float, backend: str, sched_fifo: bool, mtu: int = 1500) -> dict:
    with Topology(_spec(backend, sched_fifo, rtt="20ms", rate=f"{RATE_MBIT}mbit")) as topo:
        probes.start_server(topo)
        res = probes.client(
            topo,
            ["bulk", "--connect", probes.target(topo), "--seconds", str(seconds), "--warmup", "2"],
            timeout=seconds + 30,
        )
    achieved = res["goodput_bps"] / 1e6
    # TCP payload per 1500-byte IP packet: 1500 - 20 (IP) - 20 (TCP) - 12 (timestamps) = 1448.
    expected = RATE_MBIT * (mtu - 52) / mtu
    return {
        "configured_mbit": RATE_MBIT,
        "expected_goodput_mbit": round(expected, 4),
        "achieved_mbit": round(achieved, 4),
        "seconds": res["seconds"],
        "error": round(achieved / expected - 1, 5),
    }


def loss_test(packets: int, backend: str, sched_fifo: bool, seed: int = 1) -> dict:
    with Topology(_spec(backend, sched_fifo, rtt="2ms", loss=LOSS, seed=seed)) as topo:
        probes.start_server(topo)
        res = probes.client(
            topo, ["udp", "--connect", probes.target(topo), "--count", str(packets), "--pps", "20000"], timeout=60
        )
    return {"configured": LOSS, "packets": res["sent"], "measured": round(res["loss"], 5)}


def throughput_test(seconds: float, backend: str, sched_fifo: bool) -> float:
    with Topology(_spec(backend, sched_fifo, rtt="0ms")) as topo:
        probes.start_server(topo)
        res = probes.client(
            topo,
            ["bulk", "--connect", probes.target(topo), "--seconds", str(seconds), "--warmup", "1"],
            timeout=seconds + 30,
        )
    return round(res["goodput_bps"] / 1e9, 3)


def run_check(quick: bool = False, backend: str = "auto", sched_fifo: bool = True, progress=None) -> dict:
    say = progress or (lambda msg: None)
    require_root()
    result: dict = {"env": environment()}
    if not result["env"]["tun"]:
        raise PltError("/dev/net/tun is missing: the link emulator needs TUN devices")
    samples = QUICK_SAMPLES if quick else SAMPLES
    # The floor: the same ping-pong with no delay (kernel stacks, TUN and wake-ups of this machine).
    say(f"RTT 0 ms baseline: {samples} ping-pong samples")
    base = rtt_test(0, samples, backend, sched_fifo, flows=1)
    result["rtt_baseline"] = {"p50_ms": base["p50_err_ms"], "p99_ms": base["p99_err_ms"], "max_ms": base["max_err_ms"]}
    result["rtt"] = []
    for rtt in RTTS_MS:
        say(f"RTT {rtt} ms: {samples} ping-pong samples")
        result["rtt"].append(rtt_test(rtt, samples, backend, sched_fifo))
    say(f"rate {RATE_MBIT} Mbit/s: bulk transfer")
    result["rate"] = rate_test(3 if quick else 10, backend, sched_fifo)
    say(f"loss {LOSS:.0%}: 10,000 datagrams")
    result["loss"] = loss_test(10_000, backend, sched_fifo)
    say("unshaped throughput")
    result["throughput_gbit"] = throughput_test(2 if quick else 5, backend, sched_fifo)
    result["quick"] = quick
    result["sched_fifo"] = sched_fifo
    result["stall_rule"] = (
        "a sample above the target whose error minus the emulator's logged delays "
        f"during it (each >= its late_event_us) is within {MAX_P99_ERR_MS} ms"
    )
    problems = []
    for r in result["rtt"]:
        rtt = r["configured_ms"]
        if r["p99_err_without_stalls_ms"] > MAX_P99_ERR_MS or r["p50_err_ms"] < -0.05:
            problems.append(f"RTT {rtt} ms: p99 error {r['p99_err_without_stalls_ms']} ms without stalls")
        elif r["p99_err_ms"] > MAX_P99_ERR_MS:
            problems.append(
                f"RTT {rtt} ms: p99 error {r['p99_err_ms']} ms: {r['stalls']} of "
                f"{r['samples']} samples stalled by the machine (without them "
                f"{r['p99_err_without_stalls_ms']} ms); loads during such stalls are re-run"
            )
    if abs(result["rate"]["error"]) > MAX_RATE_ERR:
        problems.append(
            f"goodput {result['rate']['achieved_mbit']} Mbit/s vs {result['rate']['expected_goodput_mbit']} expected"
        )
    if abs(result["loss"]["measured"] - LOSS) > MAX_LOSS_ERR:
        problems.append(f"loss measured {result['loss']['measured']:.4f} vs {LOSS}")
    if result["throughput_gbit"] < MIN_THROUGHPUT_GBIT:
        problems.append(f"unshaped throughput {result['throughput_gbit']} Gbit/s < {MIN_THROUGHPUT_GBIT}")
    result["problems"] = problems
    result["verdict"] = "ok" if not problems else "degraded"
    return result
