"""Topology up/down, isolation, per-namespace knobs: real namespaces, real kernel."""

import os
import subprocess
import sys
import time

import pytest

from pltlab.errors import PltError
from pltlab.net import names, nsutil
from pltlab.net.topology import Topology
from pltlab.net.wan import TcpKnobs, TopologySpec
from tests.conftest import leaked, project_state

pytestmark = pytest.mark.root

CONNECT = """
import socket, sys, time
s = socket.socket(); s.settimeout(5)
t = time.monotonic()
try:
    s.connect((sys.argv[1], 80)); print("connected")
except OSError as e:
    print(type(e).__name__, e.errno, round(time.monotonic() - t, 3))
"""


def test_up_down_creates_and_removes_everything():
    before = project_state()
    with Topology(TopologySpec(origins=3)) as topo:
        state = project_state()
        assert topo.client_ns in state["namespaces"] and topo.server_ns in state["namespaces"]
        assert len(state["dataplane_processes"]) == len(before["dataplane_processes"]) + 1
        ip = subprocess.run(["ip", "-n", topo.server_ns, "-o", "addr"], capture_output=True, text=True).stdout
        for o in topo.origin_ips:
            assert f"inet {o}/32" in ip
        tun = subprocess.run(
            ["ip", "-n", topo.client_ns, "-d", "link", "show", topo.tun], capture_output=True, text=True
        ).stdout
        assert "tun type tun" in tun and "mtu 1500" in tun
    assert not leaked(before)


def test_client_namespace_reaches_nothing_outside():
    with Topology(TopologySpec(origins=1)) as topo:
        routes = subprocess.run(
            ["ip", "-n", topo.client_ns, "route", "show", "table", "all"], capture_output=True, text=True
        ).stdout
        assert "default" not in routes
        for outside in ("192.0.2.1", "10.0.0.1", "8.8.8.8"):
            out = topo.run("client", [sys.executable, "-c", CONNECT, outside]).stdout.split()
            assert out[0] == "OSError" and int(out[1]) == 101, out  # ENETUNREACH
            assert float(out[2]) < 0.05  # fails at once, no timeout
        # ...while the origin is routed through the emulated link (refused: nothing listens on 80).
        out = topo.run("client", [sys.executable, "-c", CONNECT, topo.origin_ips[0]]).stdout.split()
        assert out[0] == "ConnectionRefusedError", out


def test_per_namespace_tcp_knobs():
    knobs = TcpKnobs(tfo_client=1, tfo_server=2, initcwnd=16, initrwnd=20, cc="cubic", mtu=1400)
    with Topology(TopologySpec(knobs=knobs)) as topo:
        assert nsutil.sysctl_get(topo.client_ns, "net.ipv4.tcp_fastopen") == "1"
        assert nsutil.sysctl_get(topo.server_ns, "net.ipv4.tcp_fastopen") == "2"
        assert nsutil.sysctl_get(topo.server_ns, "net.ipv4.tcp_no_metrics_save") == "1"
        sroute = subprocess.run(["ip", "-n", topo.server_ns, "route"], capture_output=True, text=True).stdout
        assert "initcwnd 16" in sroute and "congctl cubic" in sroute
        croute = subprocess.run(["ip", "-n", topo.client_ns, "route"], capture_output=True, text=True).stdout
        assert "initrwnd 20" in croute and "congctl cubic" in croute
        link = subprocess.run(
            ["ip", "-n", topo.client_ns, "link", "show", topo.tun], capture_output=True, text=True
        ).stdout
        assert "mtu 1400" in link
        key1 = nsutil.sysctl_get(topo.server_ns, "net.ipv4.tcp_fastopen_key")
        topo.reset_tfo()
        assert nsutil.sysctl_get(topo.server_ns, "net.ipv4.tcp_fastopen_key") != key1
    # The host's own settings are untouched.
    assert (
        nsutil.sysctl_get(None, "net.ipv4.tcp_congestion_control")
        == open("/proc/sys/net/ipv4/tcp_congestion_control").read().strip()
    )


def test_two_runs_coexist():
    with Topology() as a, Topology() as b:
        assert a.run_id != b.run_id
        assert a.client_ns != b.client_ns


def test_same_run_id_twice_is_refused():
    with Topology() as a:
        with pytest.raises(PltError, match="is in use"):
            with Topology(run_id=a.run_id):
                pass
        # the refused one removed nothing of the run that has the id
        assert os.path.isdir(a.workdir) and os.path.exists(nsutil.ns_path(a.client_ns))
        a.run("client", ["true"])


def test_new_run_ids_avoid_ids_in_use(monkeypatch):
    """Ids are random, but a live run's is never handed out again (a test session's prefix
    leaves only 256 of them)."""
    with Topology() as a:
        seq = iter([a.run_id[-3:] + "000", "abcdef"])  # token_hex(3): 6 digits, sliced to 6 with the tag
        monkeypatch.setattr(names.secrets, "token_hex", lambda n: next(seq))
        monkeypatch.setenv("PLTLAB_RUN_ID_PREFIX", a.run_id[:3])
        assert names.in_use(a.run_id)
        assert names.new_run_id() == (a.run_id[:3] + "abcdef")[:6]


def test_85_origins_up_and_down_quickly():
    t = time.monotonic()
    with Topology(TopologySpec(origins=85)) as topo:
        assert len(topo.origin_ips) == 85
    assert time.monotonic() - t < 3.0  # the 1 s target is tracked in benches/, not here


def test_origin_namespaces_mode():
    with Topology(TopologySpec(origins=3, origin_namespaces=True)) as topo:
        for i in range(3):
            assert topo.origin_ns(i) == names.origin_ns(topo.run_id, i)
            addr = subprocess.run(["ip", "-n", topo.origin_ns(i), "-o", "addr"], capture_output=True, text=True).stdout
            assert f"inet {topo.origin_ips[i]}/32" in addr
        out = topo.run("client", [sys.executable, "-c", CONNECT, topo.origin_ips[2]]).stdout.split()
        assert out[0] == "ConnectionRefusedError", out  # routed through router ns to origin 2


def test_failure_during_up_leaves_nothing(monkeypatch):
    from pltlab.net import topology

    def boom(self):
        raise PltError("injected failure")

    monkeypatch.setattr(topology.Topology, "_start_link", boom)
    before = project_state()
    with pytest.raises(PltError, match="injected"):
        with Topology(TopologySpec(origins=2)):
            pass
    assert not leaked(before)


def test_netem_backend_is_refused_clearly_without_netem():
    from pltlab.net import netem

    with Topology() as topo:
        has = netem.available(topo.client_ns)
    if has:
        pytest.skip("this kernel has netem")
    with pytest.raises(PltError, match="no netem"):
        with Topology(TopologySpec(backend="netem")):
            pass
