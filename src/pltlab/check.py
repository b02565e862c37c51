"""`pltlab check`: what this machine offers, and a fidelity self-test of the emulated link."""

import os
import platform
import shutil

from pltlab import dataplane, probes
from pltlab.errors import PltError
from pltlab.net import LinkSpec, TcpKnobs, Topology, TopologySpec, names, netem, nsutil

RTTS_MS = (20, 100, 200)
RATE_MBIT = 4
LOSS = 0.05

# Targets (docs/performance.md): beyond these the verdict is "degraded".
MAX_P99_ERR_MS = 0.3
MAX_RATE_ERR = 0.01
MAX_LOSS_ERR = 0.005
MIN_THROUGHPUT_GBIT = 2.0


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


def _spec(backend: str, sched_fifo: bool, **link) -> TopologySpec:
    return TopologySpec(link=LinkSpec.build(**link), knobs=TcpKnobs(cc="cubic"), backend=backend,
                        sched_fifo=sched_fifo)


def rtt_test(rtt_ms: int, samples: int, backend: str, sched_fifo: bool) -> dict:
    with Topology(_spec(backend, sched_fifo, rtt=f"{rtt_ms}ms")) as topo:
        probes.start_server(topo)
        limit = 30 + samples * rtt_ms / 1000 * 2
        res = probes.client(topo, ["ping", "--connect", probes.target(topo), "--count", str(samples),
                                   "--warmup", "5", "--timeout-s", str(limit)], timeout=limit + 10)
        lateness = (topo.down() or {})
    # network RTT from kernel timestamps (see `pltlab-dp probe ping`); the application's too
    errs = [s / 1000.0 - rtt_ms for s in res["samples_us"]]
    app = [s / 1000.0 - rtt_ms for s in res["app_samples_us"]]
    return {
        "configured_ms": rtt_ms,
        "samples": len(errs),
        "p50_err_ms": round(_pct(errs, 0.5), 4),
        "p99_err_ms": round(_pct(errs, 0.99), 4),
        "max_err_ms": round(max(errs), 4),
        "min_err_ms": round(min(errs), 4),
        "app_p50_err_ms": round(_pct(app, 0.5), 4),
        "app_p99_err_ms": round(_pct(app, 0.99), 4),
        "emulator_lateness": _lateness_summary(lateness),
    }


def _lateness_summary(stats: dict) -> dict | None:
    if not stats:
        return None
    out = {}
    for d in ("uplink", "downlink"):
        late = (stats.get(d) or {}).get("lateness_us")
        if late:
            out[d] = {k: late.get(k) for k in ("p50", "p99", "max")}
    return out or None


def rate_test(seconds: float, backend: str, sched_fifo: bool, mtu: int = 1500) -> dict:
    with Topology(_spec(backend, sched_fifo, rtt="20ms", rate=f"{RATE_MBIT}mbit")) as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["bulk", "--connect", probes.target(topo), "--seconds", str(seconds),
                                   "--warmup", "2"], timeout=seconds + 30)
    achieved = res["goodput_bps"] / 1e6
    # TCP payload per 1500-byte IP packet: 1500 - 20 (IP) - 20 (TCP) - 12 (timestamps) = 1448.
    expected = RATE_MBIT * (mtu - 52) / mtu
    return {"configured_mbit": RATE_MBIT, "expected_goodput_mbit": round(expected, 4),
            "achieved_mbit": round(achieved, 4), "seconds": res["seconds"],
            "error": round(achieved / expected - 1, 5)}


def loss_test(packets: int, backend: str, sched_fifo: bool, seed: int = 1) -> dict:
    with Topology(_spec(backend, sched_fifo, rtt="2ms", loss=LOSS, seed=seed)) as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["udp", "--connect", probes.target(topo), "--count", str(packets),
                                   "--pps", "20000"], timeout=60)
    return {"configured": LOSS, "packets": res["sent"], "measured": round(res["loss"], 5)}


def throughput_test(seconds: float, backend: str, sched_fifo: bool) -> float:
    with Topology(_spec(backend, sched_fifo, rtt="0ms")) as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["bulk", "--connect", probes.target(topo), "--seconds", str(seconds),
                                   "--warmup", "1"], timeout=seconds + 30)
    return round(res["goodput_bps"] / 1e9, 3)


def run_check(quick: bool = False, backend: str = "auto", sched_fifo: bool = False,
              progress=None) -> dict:
    say = progress or (lambda msg: None)
    result: dict = {"env": environment()}
    if not result["env"]["tun"]:
        raise PltError("/dev/net/tun is missing: the link emulator needs TUN devices")
    samples = 50 if quick else 200
    # The floor: the same ping-pong with no delay (kernel stacks, TUN and wake-ups of this machine).
    say(f"RTT 0 ms baseline: {samples} ping-pong samples")
    base = rtt_test(0, samples, backend, sched_fifo)
    result["rtt_baseline"] = {"p50_ms": base["p50_err_ms"], "p99_ms": base["p99_err_ms"],
                              "max_ms": base["max_err_ms"]}
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
    problems = []
    for r in result["rtt"]:
        if r["p99_err_ms"] > MAX_P99_ERR_MS or r["p50_err_ms"] < -0.05:
            problems.append(f"RTT {r['configured_ms']} ms: p99 error {r['p99_err_ms']} ms")
    if abs(result["rate"]["error"]) > MAX_RATE_ERR:
        problems.append(f"goodput {result['rate']['achieved_mbit']} Mbit/s vs "
                        f"{result['rate']['expected_goodput_mbit']} expected")
    if abs(result["loss"]["measured"] - LOSS) > MAX_LOSS_ERR:
        problems.append(f"loss measured {result['loss']['measured']:.4f} vs {LOSS}")
    if result["throughput_gbit"] < MIN_THROUGHPUT_GBIT:
        problems.append(f"unshaped throughput {result['throughput_gbit']} Gbit/s < {MIN_THROUGHPUT_GBIT}")
    result["problems"] = problems
    result["verdict"] = "ok" if not problems else "degraded"
    return result
