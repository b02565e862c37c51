"""The TCP knobs of 2011 and bursty loss on a real topology (root): each sysctl is set inside the
run's namespaces and read back there, the host's value untouched; the client route carries
initrwnd; Gilbert-Elliott loss drops packets in runs on the wire, random loss mostly alone."""

import dataclasses

import pytest

from pltlab.net import nsutil, probes
from pltlab.net.topology import Topology
from pltlab.net.wan import LinkSpec, TopologySpec
from pltlab.run.config import RunConfig

pytestmark = pytest.mark.root

OFF_2011 = {"rack": "off", "tlp": "off", "wscale": "off", "timestamps": "off", "frto": "off"}


def test_sysctls_are_set_in_the_run_namespaces_only():
    keys = {
        "net.ipv4.tcp_recovery": "0",
        "net.ipv4.tcp_early_retrans": "0",
        "net.ipv4.tcp_window_scaling": "0",
        "net.ipv4.tcp_timestamps": "0",
        "net.ipv4.tcp_frto": "0",
    }
    host = {k: nsutil.sysctl_get(None, k) for k in keys}
    cfg = RunConfig(rtt="2ms", initrwnd=4, origin_namespaces=True, **OFF_2011)
    with Topology(cfg.topology(origins=1)) as topo:
        for ns in (topo.client_ns, topo.server_ns, topo.origin_ns(0)):
            assert {k: nsutil.sysctl_get(ns, k) for k in keys} == keys, ns
        assert {k: nsutil.sysctl_get(None, k) for k in keys} == host  # the host's as they were
        route = nsutil.run(topo.client_ns, ["ip", "route", "show", "198.19.0.0/16"]).stdout
        assert "initrwnd 4" in route, route
    assert {k: nsutil.sysctl_get(None, k) for k in keys} == host


def _loss_runs(burst: float) -> tuple[float, float]:
    """(loss rate, mean run of consecutive losses) on the uplink of a link losing 20 % of packets
    with mean bursts of ``burst``, from the emulator's own drop log (the wire: a receiver's socket
    drops on a busy machine are not the link's) while 4,000 UDP datagrams cross it."""
    link = dataclasses.replace(LinkSpec.build(rtt="2ms", loss="20%", seed=3), loss_burst=burst)
    with Topology(TopologySpec(link=link, backend="userspace")) as topo:
        probes.start_server(topo)
        probes.client(topo, ["udp", "--connect", probes.target(topo), "--count", "4000"])
        up = topo.down()["uplink"]
    lost = up["loss_indices"]  # (the first 1000, ascending: all of them here)
    assert len(lost) == up["dropped_loss"] < 1000
    runs = 1 + sum(1 for a, b in zip(lost, lost[1:]) if b != a + 1)
    return up["dropped_loss"] / up["packets_in"], len(lost) / runs


def test_bursty_loss_drops_in_runs_on_the_wire():
    rate, run = _loss_runs(5)
    assert 0.15 < rate < 0.25 and 4 < run < 6.5, (rate, run)  # bursts of 5 packets on average
    rate, run = _loss_runs(1)
    assert 0.17 < rate < 0.23 and run < 1.45, (rate, run)  # random: 1 / (1 - 0.2) = 1.25 on average
