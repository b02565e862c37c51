"""The study's four measurements. Every function takes an ``on_event(dict)`` callback for
progress and returns plain dicts (JSON-ready)."""

from __future__ import annotations

import json
import random
import subprocess
import time

from pltlab import dataplane
from pltlab.archive import bundled
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net import LinkSpec, TcpKnobs, Topology, TopologySpec, probes
from pltlab.run.config import RunConfig
from pltlab.run.traced import check_icw, traced_load
from pltlab.studies.icw import stats

FIG19_RTTS = (50, 100, 200, 800, 1500)
FIG19_ICWS = (1, 3, 8, 16)
FIG20_LOSSES = (0.0, 0.01, 0.02, 0.05, 0.10, 0.15, 0.20, 0.25)
FIG18_ICWS = (1, 3, 5, 7, 10, 16, 32)
FIG18_RTTS = (50, 200, 800)
FAIR_ICWS = (32, 3)
SHORT_BYTES = 49152  # the study's 48 KB downloads


def _emit(on_event, **kw):
    if on_event:
        on_event(kw)


def _point(runs: list[dict], seed: int) -> dict:
    tr = [r["trace_plt_ms"] for r in runs]
    ld = [r["loader_plt_ms"] for r in runs]
    s = stats.summary(tr, seed=seed)
    return {"plt_ms": round(s["geomean"], 3), "ci": [round(x, 3) for x in s["ci"]], "n": s["n"],
            "loader_plt_ms": round(stats.geomean(ld), 3),
            "max_abs_diff_ms": round(max(abs(a - b) for a, b in zip(tr, ld)), 3),
            "plt_runs_ms": tr, "loader_runs_ms": ld,
            "trace_connections": [r["trace"]["connections"] for r in runs]}


def _cfg(rtt_ms: float, icw: int, cc: str, loss: float = 0.0, seed: int = 1,
         rate: str | None = None, conns: int = 6, timeout_s: float = 900) -> RunConfig:
    return RunConfig(rtt=f"{rtt_ms}ms", icw=icw, cc=cc, loss=f"{loss * 100:g}%" if loss else None,
                     rate=rate, seed=seed, tfo_modes=(False,), reps=1, max_conns_per_host=conns,
                     load_timeout_s=timeout_s, client_rmem=None)  # the 2011 clients: 64 KB, autotuned


def _load(pg: Page, cfg: RunConfig, rep: int, on_event, **where) -> tuple[dict | None, str]:
    """One traced load, retried once: (record, "") or, if both attempts fail, (None, error),
    reported as events, so one unlucky load does not end a study of an hour."""
    err = ""
    for attempt in (1, 2):
        try:
            return traced_load(pg, cfg, rep), ""
        except PltError as e:
            err = str(e)
            _emit(on_event, **where, rep=rep, attempt=attempt, error=err)
    return None, err


def _measure(page: Page, reps: int, cfg_of, seed: int, what: str, on_event, **where) -> dict:
    """One point: ``reps`` traced loads (load ``rep`` with ``cfg_of(rep)``), each retried once;
    loads that fail twice are left out and listed in ``failed_loads``."""
    runs, failed = [], []
    for rep in range(1, reps + 1):
        cfg = cfg_of(rep)
        r, err = _load(page, cfg, rep, on_event, **where)
        if r is None:
            failed.append({"rep": rep, "seed": cfg.seed, "error": err})
            continue
        runs.append(r)
        _emit(on_event, **where, rep=rep, trace_plt_ms=r["trace_plt_ms"], loader_plt_ms=r["loader_plt_ms"])
    if not runs:
        raise PltError(f"{what}: every load failed (last: {failed[-1]['error'] if failed else '?'})")
    return {**_point(runs, seed), "failed_loads": failed}


def plt_vs_rtt(page: Page, rtts=FIG19_RTTS, icws=FIG19_ICWS, reps: int = 5, cc: str = "cubic",
               seed: int = 1, rate: str | None = None, max_conns_per_host: int = 6,
               load_timeout_s: float = 900, on_event=None) -> list[dict]:
    """Fig. 19: PLT (trace) per (ICW, RTT), no loss; geometric mean of ``reps`` loads."""
    icws = [check_icw(i) for i in icws]
    out = []
    for rtt in rtts:
        for icw in icws:
            cfg = _cfg(rtt, icw, cc, seed=seed, rate=rate, conns=max_conns_per_host,
                       timeout_s=load_timeout_s)
            out.append({"icw": icw, "rtt_ms": rtt,
                        **_measure(page, reps, lambda rep: cfg, seed, f"ICW {icw}, RTT {rtt} ms",
                                   on_event, fig="plt_vs_rtt", icw=icw, rtt_ms=rtt)})
    return out


def plt_vs_loss(page: Page, losses=FIG20_LOSSES, icws=FIG19_ICWS, rtt_ms: float = 100,
                reps: int = 5, cc: str = "cubic", seed: int = 1, rate: str | None = None,
                max_conns_per_host: int = 6, load_timeout_s: float = 900,
                on_event=None) -> list[dict]:
    """Fig. 20: PLT (trace) per (ICW, loss) at ``rtt_ms``. Load ``rep`` of every ICW uses link
    seed ``seed + rep - 1`` in a fresh topology: every ICW sees the same drop pattern (by packet
    index) for the same repetition."""
    icws = [check_icw(i) for i in icws]
    out = []
    for loss in losses:
        for icw in icws:
            def cfg(rep, icw=icw, loss=loss):
                return _cfg(rtt_ms, icw, cc, loss, seed + rep - 1, rate, max_conns_per_host,
                            load_timeout_s)
            out.append({"icw": icw, "loss": loss, "rtt_ms": rtt_ms,
                        **_measure(page, reps, cfg, seed, f"ICW {icw}, loss {loss:.0%}", on_event,
                                   fig="plt_vs_loss", icw=icw, loss=loss)})
    return out


def transfer_times(pages=bundled.PAPER, icws=FIG18_ICWS, rtts=FIG18_RTTS, reps: int = 1,
                   cc: str = "cubic", seed: int = 1, rate: str | None = None,
                   max_conns_per_host: int = 6, load_timeout_s: float = 900, on_event=None) -> dict:
    """Fig. 18: per object, (last byte received - request sent) / RTT, from the loader's
    per-request timings, over the bundled corpus' pages at each RTT. Returns
    {icw: [transfer time in RTTs, ...]} (all pages, RTTs and repetitions pooled)."""
    icws = [check_icw(i) for i in icws]
    out: dict[int, list[float]] = {i: [] for i in icws}
    loaded = [(name, bundled.load(name)) for name in pages]
    for rtt in rtts:
        for name, page in loaded:
            for icw in icws:
                for rep in range(1, reps + 1):
                    r, _ = _load(page, _cfg(rtt, icw, cc, seed=seed, rate=rate,
                                            conns=max_conns_per_host, timeout_s=load_timeout_s),
                                 rep, on_event, fig="transfer_rtts", icw=icw, rtt_ms=rtt, page=name)
                    if r is None:
                        continue  # reported as an event; the CDF pools the other loads
                    xs = [(q["last_byte_ms"] - q["request_ms"]) / rtt for q in r["requests"]
                          if q.get("request_ms") is not None and q.get("last_byte_ms") is not None
                          and q.get("status") != 404]
                    out[icw] += xs
                    _emit(on_event, fig="transfer_rtts", icw=icw, rtt_ms=rtt, page=name, rep=rep,
                          objects=len(xs), loader_plt_ms=r["loader_plt_ms"])
    return out


def quantile(xs, q: float) -> float:
    xs = sorted(xs)
    return stats._pct(xs, q) if xs else float("nan")


# ---- fairness -------------------------------------------------------------------------
IPERF_PORT = 5201


def _wait(p: subprocess.Popen, what: str, timeout: float = 120) -> tuple[str, str]:
    """A long-flow process's (stdout, stderr); killed with an error if it does not finish."""
    try:
        return p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        raise PltError(f"{what} did not finish") from None


def _start_long_flow(topo: Topology, tool: str, seconds: float):
    """Start the long flow (origin 0 -> client) for ``seconds``; returns finish() ->
    (bytes, seconds, [KB/s per 1-s interval], retransmits or None)."""
    if tool == "probe":  # `pltlab-dp probe bulk` on one connection: no intervals, no retransmits
        probes.start_server(topo, 0)
        p = topo.popen("client", [dataplane.binary(), "probe", "bulk", "--connect",
                                  probes.target(topo, 0), "--seconds", f"{seconds:g}",
                                  "--warmup", "0", "--timeout-s", f"{seconds + 60:g}"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                       text=True)

        def finish_probe():
            out, err = _wait(p, "long flow (probe bulk)")
            r = dataplane.result(subprocess.CompletedProcess(p.args, p.returncode, out, err),
                                 "long flow (probe bulk)")
            return r["bytes"], r["seconds"], [], None
        return finish_probe
    if tool != "iperf3":
        raise PltError(f"unknown long-flow tool {tool!r} (choose from iperf3, probe)")
    srv = topo.popen(0, ["iperf3", "-s", "-1", "-B", topo.origin_ips[0], "-p", str(IPERF_PORT)],
                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    time.sleep(0.3)  # iperf3 -s has no ready line
    if srv.poll() is not None:
        raise PltError("iperf3 server did not start")
    iperf = topo.popen("client", ["iperf3", "-c", topo.origin_ips[0], "-p", str(IPERF_PORT),
                                  "-R", "-t", f"{seconds:g}", "-i", "1", "-J",
                                  "--connect-timeout", "30000"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       stdin=subprocess.DEVNULL, text=True)

    def finish_iperf():
        out, err = _wait(iperf, "iperf3 client")
        try:
            rep = json.loads(out)
        except ValueError:
            raise PltError(f"iperf3 printed no JSON: {(err or '').strip()[-200:]}") from None
        if rep.get("error"):
            raise PltError(f"iperf3 failed: {rep['error']}")
        intervals = [iv["sum"]["bytes"] / iv["sum"]["seconds"] / 1000
                     for iv in rep.get("intervals", []) if iv["sum"]["seconds"] > 0]
        recv = rep["end"]["sum_received"]
        return (recv["bytes"], recv["seconds"], intervals,
                rep["end"].get("sum_sent", {}).get("retransmits"))
    return finish_iperf


def fairness(icw: int = 32, seconds: float = 300, rtt_ms: float = 100, loss: float = 0.25,
             loss_up: float = 0.0, rate: str = "4mbit", cc: str = "cubic", seed: int = 1,
             download_bytes: int = SHORT_BYTES, long_flow: str = "iperf3",
             on_event=None) -> dict:
    """A long flow (``long_flow``: iperf3 -R, or probe bulk; origin 0 -> client) sharing the
    bottleneck with back-to-back ``download_bytes`` downloads on new connections (probe fetch
    from origin 1) for ``seconds``; both servers send with ``icw``. Loss ``loss`` on the
    downlink (the data direction) and ``loss_up`` on the uplink. Throughputs in KB/s (1000 B)."""
    check_icw(icw)
    if seconds <= 0:
        raise PltError(f"invalid fairness duration {seconds!r} s: must be > 0")
    link = LinkSpec.build(rtt=f"{rtt_ms}ms", rate=rate, loss_down=f"{loss * 100:g}%",
                          loss_up=f"{loss_up * 100:g}%", seed=seed)
    spec = TopologySpec(origins=2, link=link, knobs=TcpKnobs(initcwnd=icw, cc=cc),
                        backend="userspace")
    fetches = []
    with Topology(spec) as topo:
        probes.start_server(topo, 1)
        finish = _start_long_flow(topo, long_flow, seconds)
        t0 = time.monotonic()
        target = probes.target(topo, 1)
        while time.monotonic() - t0 < seconds:
            left = seconds - (time.monotonic() - t0)
            try:
                res = probes.client(topo, ["fetch", "--connect", target, "--bytes", str(download_bytes),
                                           "--count", "1", "--timeout-s", f"{max(left, 1) + 60:.0f}"],
                                    timeout=left + 90)
            except PltError as e:
                _emit(on_event, fig="fairness", icw=icw, error=str(e))
                continue
            f = res["fetches"][0]
            if time.monotonic() - t0 > seconds:
                break  # finished after the long flow's end: not while sharing
            fetches.append({"ms": f["ms"], "bytes": f["bytes"], "retrans": f["retrans"]})
        long_bytes, long_s, intervals, long_retrans = finish()
    link_stats = topo.link_stats
    long_kbs = long_bytes / long_s / 1000 if long_s else 0.0
    if not fetches:
        raise PltError(f"fairness ICW {icw}: no {download_bytes}-byte download finished "
                       f"within {seconds:g} s")
    short_each = [f["bytes"] / f["ms"] for f in fetches]  # bytes/ms = KB/s
    short_kbs = sum(f["bytes"] for f in fetches) / sum(f["ms"] for f in fetches)
    ratio = short_kbs / long_kbs if long_kbs > 0 else float("inf")
    # CI of the ratio: short = time-weighted mean rate (resample downloads: sum bytes / sum ms),
    # long = mean of its 1-s interval rates (resample intervals; probe bulk: none, fixed).
    rng = random.Random(seed)
    boots = []
    for _ in range(2000):
        fs = [rng.choice(fetches) for _ in fetches]
        s = sum(f["bytes"] for f in fs) / sum(f["ms"] for f in fs)
        iv = [rng.choice(intervals) for _ in intervals] if intervals else [long_kbs]
        m = sum(iv) / len(iv)
        boots.append(s / m if m > 0 else float("inf"))
    boots.sort()
    ci = [stats._pct(boots, 0.025), stats._pct(boots, 0.975)]
    res = {"icw": icw, "seconds": seconds, "rtt_ms": rtt_ms, "loss": loss, "loss_up": loss_up,
           "rate": rate, "download_bytes": download_bytes, "long_flow": long_flow,
           "long_kbyte_s": round(long_kbs, 3), "short_kbyte_s": round(short_kbs, 3),
           "ratio": round(ratio, 3), "ratio_ci": [round(x, 3) for x in ci],
           "short_downloads": len(fetches),
           "short_median_kbyte_s": round(quantile(short_each, 0.5), 3),
           "long_bytes": long_bytes, "long_retransmits": long_retrans,
           "downlink_dropped": (link_stats or {}).get("downlink", {}).get("dropped_loss")}
    _emit(on_event, fig="fairness", **{k: res[k] for k in ("icw", "long_kbyte_s", "short_kbyte_s", "ratio")})
    return res
