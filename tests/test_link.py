"""The emulated link end to end: real kernel TCP at both ends, pltlab-dp link in between."""

import shutil
import subprocess

import pytest

from pltlab.net import probes
from pltlab.net.topology import Topology
from pltlab.net.wan import LinkSpec, OriginOverride, TcpKnobs, TopologySpec
from tests.conftest import pltlab_cmd

pytestmark = pytest.mark.root


def _topo(origins=1, knobs=None, overrides=(), pcap=None, **link) -> Topology:
    return Topology(
        TopologySpec(
            origins=origins,
            link=LinkSpec.build(**link),
            knobs=knobs or TcpKnobs(),
            overrides=tuple(overrides),
            pcap=pcap,
        )
    )


def _ping_ms(topo, origin=0, count=30) -> list[float]:
    res = probes.client(
        topo, ["ping", "--connect", probes.target(topo, origin), "--count", str(count), "--warmup", "3"]
    )
    assert res["unstamped"] == 0  # every round trip timed by kernel timestamps
    assert all(a + 5 >= s for s, a in zip(res["samples_us"], res["app_samples_us"]))
    return [s / 1000 for s in res["samples_us"]]


@pytest.mark.parametrize("rtt", [20, 100])
def test_rtt_matches_configuration(rtt):
    with _topo(rtt=f"{rtt}ms") as topo:
        probes.start_server(topo)
        samples = sorted(_ping_ms(topo))
        stats = topo.down()
    assert len(samples) == 30
    assert rtt <= samples[0] and samples[len(samples) // 2] < rtt + 0.5, samples
    for d in ("uplink", "downlink"):
        assert stats[d]["packets_out"] > 30 and stats[d]["lateness_us"]["p50"] < 200


def test_per_origin_rtt_override():
    with _topo(origins=2, rtt="100ms", overrides=[OriginOverride(1, 10_000)]) as topo:
        probes.start_server(topo, origin=0)
        probes.start_server(topo, origin=1)
        far, near = sorted(_ping_ms(topo, 0, 10)), sorted(_ping_ms(topo, 1, 10))
    assert 100 <= far[5] < 100.5 and 10 <= near[5] < 10.5


def test_rate_limit_goodput():
    with _topo(rtt="20ms", rate="4mbit") as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["bulk", "--connect", probes.target(topo), "--seconds", "3", "--warmup", "1"])
    expected = 4e6 * 1448 / 1500
    assert res["goodput_bps"] == pytest.approx(expected, rel=0.03)


def _fetches(topo, n, nbytes=1000, tfo=True) -> list[dict]:
    args = ["fetch", "--connect", probes.target(topo), "--bytes", str(nbytes), "--count", str(n)]
    return probes.client(topo, args + (["--tfo"] if tfo else []))["fetches"]


def test_tfo_saves_one_rtt_and_counters_prove_it():
    with _topo(rtt="100ms") as topo:
        probes.start_server(topo)
        c0 = topo.counters()
        first, second = _fetches(topo, 2)
        c1 = topo.counters()
        # First connection: cookie request, 2 RTTs. Second: data in the SYN, 1 RTT.
        assert not first["syn_data"] and second["syn_data"]
        assert 200 <= first["ms"] < 215 and 100 <= second["ms"] < 115, (first, second)
        assert c1["server"]["TCPFastOpenCookieReqd"] - c0["server"]["TCPFastOpenCookieReqd"] == 1
        assert c1["client"]["TCPFastOpenActive"] - c0["client"]["TCPFastOpenActive"] == 1
        assert c1["server"]["TCPFastOpenPassive"] - c0["server"]["TCPFastOpenPassive"] == 1
        # Cold again after a key reset and cookie flush: the next connection pays the full RTT.
        topo.reset_tfo()
        cold = _fetches(topo, 1)[0]
        assert not cold["syn_data"] and cold["ms"] >= 200


def test_no_tfo_means_no_tfo():
    with _topo(rtt="50ms", knobs=TcpKnobs(tfo_client=0, tfo_server=0)) as topo:
        probes.start_server(topo)
        c0 = topo.counters()
        f = _fetches(topo, 3, tfo=True)  # the client asks, but the namespace forbids it
        c1 = topo.counters()
    assert all(x["tfo_unavailable"] and not x["syn_data"] and x["ms"] >= 100 for x in f)
    assert c1["client"].get("TCPFastOpenActive", 0) == c0["client"].get("TCPFastOpenActive", 0)


def _rounds_48k(icw: int) -> float:
    with _topo(rtt="100ms", knobs=TcpKnobs(initcwnd=icw, cc="cubic")) as topo:
        probes.start_server(topo)
        f = _fetches(topo, 1, nbytes=48 * 1024, tfo=False)[0]
    return f["ms"] / 100.0


def test_initcwnd_changes_round_trips_of_48kb():
    r1, r16 = _rounds_48k(1), _rounds_48k(16)
    # 34 segments: ICW 16 needs 2 data rounds (16 + 32), ICW 1 needs about 5-6 (1, 2, 4, 8, 16, ...)
    assert 2.9 < r16 < 3.5, r16
    assert r1 - r16 >= 2.5, (r1, r16)


def _udp_missing(seed: int) -> list[int]:
    with _topo(rtt="2ms", loss="5%", seed=seed) as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["udp", "--connect", probes.target(topo), "--count", "10000"])
    assert res["sent"] == 10000
    return res["missing"]


def test_loss_is_seeded_and_reproducible():
    a, b, c = _udp_missing(7), _udp_missing(7), _udp_missing(8)
    assert a == b
    assert a != c
    assert 0.045 <= len(a) / 10000 <= 0.055


@pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark not installed")
def test_pcap_written_by_emulator_is_readable(tmp_path):
    pcap = tmp_path / "run.pcap"
    with _topo(rtt="10ms", pcap=str(pcap)) as topo:
        probes.start_server(topo)
        _fetches(topo, 1, nbytes=20000, tfo=False)
    out = subprocess.run(
        [
            "tshark",
            "-r",
            str(pcap),
            "-T",
            "fields",
            "-e",
            "ip.src",
            "-e",
            "ip.dst",
            "-e",
            "tcp.flags.syn",
            "-e",
            "tcp.len",
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    rows = [r.split("\t") for r in out.stdout.strip().splitlines()]
    assert any(r[0] == "198.18.0.1" and r[1] == topo.origin_ips[0] and r[2] in ("1", "True") for r in rows)
    assert sum(int(r[3] or 0) for r in rows if r[0] == topo.origin_ips[0]) >= 20000


def test_mahimahi_trace_sets_the_rate(tmp_path):
    # One 1504-byte delivery opportunity per millisecond = 12.032 Mbit/s.
    trace = tmp_path / "12mbit.trace"
    trace.write_text("".join(f"{ms}\n" for ms in range(1, 101)))
    spec = TopologySpec(link=LinkSpec.build(rtt="20ms", trace_down=str(trace)))
    with Topology(spec) as topo:
        probes.start_server(topo)
        res = probes.client(topo, ["bulk", "--connect", probes.target(topo), "--seconds", "3", "--warmup", "1"])
    assert res["goodput_bps"] == pytest.approx(1504 * 8 * 1000 * 1448 / 1500, rel=0.03)


def test_linger_polling_keeps_the_delay():
    """With linger the emulator polls after each packet instead of sleeping; delays stay exact."""
    spec = TopologySpec(link=LinkSpec.build(rtt="20ms"), linger_us=300)
    with Topology(spec) as topo:
        probes.start_server(topo)
        samples = sorted(_ping_ms(topo, count=20))
        stats = topo.down()
    assert 20 <= samples[0] and samples[10] < 20.5, samples
    assert stats["uplink"]["packets_out"] > 20


def test_sched_fifo_is_applied_and_runs_use_it_by_default():
    from pltlab.archive.generate import generate
    from pltlab.run.runner import PageRunner, RunConfig

    with Topology(TopologySpec(link=LinkSpec.build(rtt="10ms"), sched_fifo=True)) as topo:
        probes.start_server(topo)
        assert len(_ping_ms(topo, count=5)) == 5
        stats = topo.down()
    assert stats["sched_fifo_requested"] and stats["sched_fifo_applied"], stats.get("sched_fifo_error")
    page = generate(objects=2, total_bytes=4000, origins=1, depth=1, seed=1)
    fifo = {
        (c, f): PageRunner(page, RunConfig(client=c, sched_fifo=f)).topo.spec.sched_fifo
        for c in ("builtin", "chromium")
        for f in (None, False, True)
    }
    # on by default for every client (measured by benches/bench_precision.py)
    assert fifo == {
        ("builtin", None): True,
        ("chromium", None): True,
        ("builtin", False): False,
        ("chromium", False): False,
        ("builtin", True): True,
        ("chromium", True): True,
    }


def _cpu_latency_target_us() -> int:
    """The kernel's current CPU wake-up latency target (the strictest PM QoS request held)."""
    import os
    import struct

    fd = os.open("/dev/cpu_dma_latency", os.O_RDONLY)
    try:
        return struct.unpack("i", os.read(fd, 4))[0]
    finally:
        os.close(fd)


def test_idle_poll_holds_cpus_polling_while_the_link_is_up_only():
    from pltlab.run.runner import RunConfig

    before = _cpu_latency_target_us()
    with Topology(TopologySpec(link=LinkSpec.build(rtt="10ms"), idle_poll=True)) as topo:
        assert _cpu_latency_target_us() == 0
        probes.start_server(topo)
        assert len(_ping_ms(topo, count=5)) == 5
        stats = topo.down()
    assert stats["idle_poll_requested"] and stats["idle_poll_applied"], stats.get("idle_poll_error")
    # the request went with the emulator (another live run may hold its own: then it stays 0)
    assert _cpu_latency_target_us() == before
    with Topology(TopologySpec(link=LinkSpec.build(rtt="10ms"))) as topo:
        stats = topo.down()
    assert not stats["idle_poll_requested"] and not stats["idle_poll_applied"]
    # runs poll by default, `pltlab shell` does not
    assert RunConfig().topology().idle_poll
    assert not RunConfig(idle_poll=False).topology().idle_poll


def test_client_receive_buffer_knob():
    from pltlab.errors import PltError
    from pltlab.net import nsutil

    with _topo(knobs=TcpKnobs(client_rmem=1 << 20), rtt="1ms") as topo:
        assert nsutil.sysctl_get(topo.client_ns, "net.ipv4.tcp_rmem").split() == ["4096", "1048576", "6291456"]
        assert nsutil.sysctl_get(topo.server_ns, "net.ipv4.tcp_rmem").split()[1] == "131072"  # kernel's
    for bad in (0, 100, 1 << 30, True):
        with pytest.raises(PltError, match="receive buffer"):
            TcpKnobs(client_rmem=bad)
    cp = pltlab_cmd("run", "wikipedia", "--rtt", "10ms", "--client-rmem", "0", "--reps", "1")
    assert cp.returncode == 2 and cp.stderr.strip().startswith("pltlab: error:") and "--client-rmem" in cp.stderr
