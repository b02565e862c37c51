"""The built-in loader (`pltlab-dp load`), run in the client namespace: it executes a plan built
by pltlab (loaders.plan), so its document is judged by the plan (validity.document_problem)."""

from __future__ import annotations

import json
import os
from typing import TYPE_CHECKING

from pltlab import dataplane, protocols
from pltlab.loaders import plan as plans
from pltlab.loaders import validity
from pltlab.loaders.loader import Job, Loader

if TYPE_CHECKING:  # (pyroute2 is slow to import: the loaders table is read by `pltlab --help`)
    from pltlab.net.topology import Topology


def load(topo: Topology, plan: dict, workdir: str, name: str = "plan.json", warmed=None) -> dict:
    """One load. With a plan tls_mode other than full the loader first visits the page for its
    session tickets; ``warmed()`` is called when that visit is over, before the measured load
    starts (the runner takes its counts then)."""
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(plan, f)

    def on_line(line: str) -> str | None:
        if not line.startswith('{"event":"warmed"'):
            return None
        if warmed is not None:
            warmed()
        return "go\n"

    timeout = plan.get("timeout_s", 120) * (2 if plan.get("tls_mode", "full") != "full" else 1) + 30
    cp = topo.run("client", [dataplane.binary(), "load", "--plan", path], check=False, timeout=timeout, on_line=on_line)
    return dataplane.result(cp, "page load")


def warm_tfo(job: Job) -> None:
    """The prior visit that caches a TFO cookie for every origin: one TFO request per origin
    address (the kernel keys cookies by address) for its smallest object, whatever the client."""
    page, replay = job.page, job.replay
    plan = plans.build(page, job.host_ips, tfo=True, ca=replay.ca, offered=replay.offered)
    size = {o.url.split("#", 1)[0]: o.size for o in page.objects}
    pick: dict[str, dict] = {}
    for o in plan["objects"]:
        if o["ip"] not in pick or size.get(o["url"], 0) < size.get(pick[o["ip"]]["url"], 0):
            pick[o["ip"]] = dict(o, parent=None, delay_ms=0.0)
    plan["objects"] = list(pick.values())
    load(job.topo, plan, job.topo.workdir, name="warm.json")


class Builtin(Loader):
    def plan(self, job: Job, tfo: bool) -> dict:
        cfg = job.cfg
        return plans.build(
            job.page,
            job.host_ips,
            tfo=tfo,
            ca=job.replay.ca,
            max_conns_per_host=cfg.max_conns_per_host,
            https_hosts=job.https_hosts,
            model=cfg.model,
            calibrated=cfg.calibrated,
            timeout_s=cfg.load_timeout_s,
            dns_delay_ms=cfg.dns_us / 1000,
            offered=job.replay.offered,
            tls_mode=cfg.tls,
            quic={"cc": cfg.quic_cc, "icw": cfg.quic_icw},
            tfo_tls=plans.tfo_over_tls(cfg.client_hello),
            network_stack=cfg.network_stack == plans.NETWORK_STACK_CALIBRATED,
        )

    def tfo_expected(self, plan: dict | None, tfo: bool) -> bool:
        # with tfo_tls false only a plain-http TCP connection uses TFO (an all-https page: none)
        if not tfo or plan is None or plan.get("tfo_tls", True):
            return tfo
        return any(not o["tls"] for o in plan["objects"])

    def load(self, job: Job, plan: dict | None, tfo: bool, warmed=None) -> dict:
        res = load(job.topo, plan, job.topo.workdir, warmed=warmed)
        tail = plans.tail_ms(job.page, job.cfg.model, job.cfg.calibrated)
        if tail is not None:  # Chromium's measured time from the last response to loadEventEnd
            res["network_plt_ms"], res["tail_ms"] = res["plt_ms"], tail
            res["plt_ms"] = res["plt_ms"] + tail
        return res

    def document_problem(self, res: dict, requests: list[dict], chain, plan: dict | None) -> str | None:
        return validity.document_problem(chain, requests, plan)


LOADER = Builtin(
    "builtin",
    browser="pltlab-loader",
    planned=True,
    upgrades_itself=False,
    timings="plan",
    connections=True,
    default_protocol=protocols.FALLBACK_ALPN,
    title="the built-in loader",
    protocols=("h1", "h2", "h3"),  # h3: QUIC to addresses serving it (plan objects' protocol "h3")
    warm_visit_unimpaired=True,  # rustls/quinn keep tickets from it, no RTT (the kernel: tcp_no_metrics_save)
)
