"""The "flows" measurement kind: a long flow against back-to-back short downloads on one
bottleneck (the ICW study's fairness experiment).

A long flow (iperf3 -R, or `pltlab-dp probe bulk`: origin 0 -> client) runs for ``seconds`` while
the client downloads ``download_bytes`` again and again, each on a new connection (`pltlab-dp
probe fetch` from origin 1); both servers send with the configuration's ICW. The link is the
configuration's (its loss on the downlink, the data direction; ``loss_up`` on the uplink). The
kind's parameters come from ``RunConfig.extra``: seconds, download_bytes, long_flow, loss_up.

The load's record carries the raw measurement in ``metrics`` (every download's time and bytes,
the long flow's bytes, seconds and 1-s interval rates, and the link's drops per direction, by
loss and by queue overflow, as a page load's `link_drops`); the statistics (rates, ratio, bootstrap
interval) are the study's. Every load runs in a fresh topology with link seed seed + rep - 1.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time

from pltlab import dataplane
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net import probes
from pltlab.net.topology import Topology
from pltlab.net.wan import TopologySpec
from pltlab.run.config import RunConfig
from pltlab.run.point import Point
from pltlab.run.runner import link_drops
from pltlab.run.traced import FreshTopologies, check_icw

IPERF_PORT = 5201
LONG_FLOWS = ("iperf3", "probe")  # iperf3 -R, or `pltlab-dp probe bulk` (no 1-s intervals)
SHORT_BYTES = 49152  # the ICW study's 48 KB downloads
DEFAULTS = {"seconds": 300.0, "download_bytes": SHORT_BYTES, "long_flow": "iperf3", "loss_up": 0.0}


def params(cfg: RunConfig) -> dict:
    """The kind's parameters (``cfg.extra`` over DEFAULTS), checked."""
    p = {**DEFAULTS, **{k: v for k, v in (cfg.extra or {}).items() if k in DEFAULTS}}
    if not 0 < p["seconds"] <= 86_400:
        raise PltError(f"invalid fairness duration {p['seconds']!r} s: must be > 0 (at most 86400)")
    if p["long_flow"] not in LONG_FLOWS:
        raise PltError(f"unknown long-flow tool {p['long_flow']!r} (choose from {', '.join(LONG_FLOWS)})")
    return p


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
        p = topo.popen(
            "client",
            [
                dataplane.binary(),
                "probe",
                "bulk",
                "--connect",
                probes.target(topo, 0),
                "--seconds",
                f"{seconds:g}",
                "--warmup",
                "0",
                "--timeout-s",
                f"{seconds + 60:g}",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )

        def finish_probe():
            out, err = _wait(p, "long flow (probe bulk)")
            r = dataplane.result(subprocess.CompletedProcess(p.args, p.returncode, out, err), "long flow (probe bulk)")
            return r["bytes"], r["seconds"], [], None

        return finish_probe
    srv = topo.popen(
        0,
        ["iperf3", "-s", "-1", "-B", topo.origin_ips[0], "-p", str(IPERF_PORT)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
    )
    time.sleep(0.3)  # iperf3 -s has no ready line
    if srv.poll() is not None:
        raise PltError("iperf3 server did not start")
    iperf = topo.popen(
        "client",
        [
            "iperf3",
            "-c",
            topo.origin_ips[0],
            "-p",
            str(IPERF_PORT),
            "-R",
            "-t",
            f"{seconds:g}",
            "-i",
            "1",
            "-J",
            "--connect-timeout",
            "30000",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )

    def finish_iperf():
        out, err = _wait(iperf, "iperf3 client")
        try:
            rep = json.loads(out)
        except ValueError:
            raise PltError(f"iperf3 printed no JSON: {(err or '').strip()[-200:]}") from None
        if rep.get("error"):
            raise PltError(f"iperf3 failed: {rep['error']}")
        intervals = [
            iv["sum"]["bytes"] / iv["sum"]["seconds"] / 1000
            for iv in rep.get("intervals", [])
            if iv["sum"]["seconds"] > 0
        ]
        recv = rep["end"]["sum_received"]
        return (recv["bytes"], recv["seconds"], intervals, rep["end"].get("sum_sent", {}).get("retransmits"))

    return finish_iperf


class FlowsRunner(FreshTopologies):
    """One configuration: each load is one long-flow-vs-downloads run in its own topology (the
    page is not loaded: it only names the measurement in the results)."""

    def __init__(self, page: Page | None, cfg: RunConfig):
        if cfg.icw is not None:
            check_icw(cfg.icw)
        super().__init__(cfg)
        self.params = params(cfg)

    def load(self, point: Point, rep: int) -> dict:
        if point.tfo:
            raise PltError("the flows measurement has no TFO mode")
        p = self.params
        seconds, size = p["seconds"], p["download_bytes"]
        link = dataclasses.replace(self.cfg.link(), loss_up=p["loss_up"], seed=self.link_seed(rep))
        spec = TopologySpec(
            origins=2,
            link=link,
            backend="userspace",
            knobs=self.cfg.tcp(),
        )
        fetches, errors = [], []
        with self.topology(spec) as topo:
            probes.start_server(topo, 1)
            finish = _start_long_flow(topo, p["long_flow"], seconds)
            t0 = time.monotonic()
            target = probes.target(topo, 1)
            while time.monotonic() - t0 < seconds:
                left = seconds - (time.monotonic() - t0)
                try:
                    res = probes.client(
                        topo,
                        [
                            "fetch",
                            "--connect",
                            target,
                            "--bytes",
                            str(size),
                            "--count",
                            "1",
                            "--timeout-s",
                            f"{max(left, 1) + 60:.0f}",
                        ],
                        timeout=left + 90,
                    )
                except PltError as e:  # one download failed: the run goes on without it
                    errors.append(str(e))
                    continue
                f = res["fetches"][0]
                if time.monotonic() - t0 > seconds:
                    break  # finished after the long flow's end: not while sharing
                fetches.append([f["ms"], f["bytes"], f["retrans"]])
            long_bytes, long_s, intervals, long_retrans = finish()
        dropped = ((topo.link_stats or {}).get("downlink") or {}).get("dropped_loss")
        both = link_drops(topo.link_stats)  # per direction, by loss and by queue overflow
        if not fetches:
            raise PltError(f"fairness ICW {self.cfg.icw}: no {size}-byte download finished within {seconds:g} s")
        long_kbs = long_bytes / long_s / 1000 if long_s else 0.0
        short_kbs = sum(f[1] for f in fetches) / sum(f[0] for f in fetches)  # bytes/ms = KB/s
        ratio = short_kbs / long_kbs if long_kbs > 0 else float("inf")
        metrics = {
            **p,
            "downloads": fetches,
            "download_errors": errors,
            "long_bytes": long_bytes,
            "long_seconds": long_s,
            "long_intervals_kbyte_s": intervals,
            "long_retransmits": long_retrans,
            "downlink_dropped": dropped,
            "link_drops": both,
            "link_seed": self.link_seed(rep),
        }
        return {
            "plt_ms": None,
            "valid": True,
            "invalid_reason": None,
            "not_found": 0,
            "tfo_counters": {"client": {}, "server": {}},
            "requests": [],
            "metrics": metrics,
            "seed": self.link_seed(rep),
            "link_aids_missing": dict(topo.link_aids_missing),
            "summary": f"long flow {long_kbs:.1f} KB/s, {len(fetches)} downloads {short_kbs:.1f} KB/s "
            f"(short/long {ratio:.2f})",
        }
