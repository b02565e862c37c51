"""UDP through the emulated link (issue 26, step 1: QUIC's datagrams): delayed, dropped per
datagram and counted like TCP segments; a UDP_SEGMENT (GSO) send reaches the emulator as wire
datagrams, never as one super-packet (docs/dataplane-interfaces.md, "The link")."""

import dataclasses
import json
import select
import subprocess
import sys

import pytest

from pltlab.net.topology import Topology
from pltlab.net.wan import LinkSpec, TopologySpec

pytestmark = pytest.mark.root

PORT = 9443
SOL_UDP, UDP_SEGMENT = 17, 103  # linux/udp.h

# echoes every datagram back (its length and its first 8 bytes), counts what it received
SERVER = r"""
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind((sys.argv[1], int(sys.argv[2])))
s.settimeout(5)  # (ends by itself should the "stop" be lost)
print("ready", flush=True)
try:
    while True:
        data, peer = s.recvfrom(65535)
        if data == b"stop":
            break
        s.sendto(len(data).to_bytes(4, "big") + data[:8], peer)
except socket.timeout:
    pass
"""

# mode "echo": N single datagrams one after the other, the round trip of each (ms);
# mode "burst": one sendmsg of N x SIZE bytes with UDP_SEGMENT=SIZE, then what came back;
# mode "stream": N single datagrams at once, then what came back within a second
CLIENT = r"""
import json, socket, sys, time
host, port, mode, n, size = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.connect((host, port))
out = {"rtt_ms": [], "echoed": []}
if mode == "echo":
    s.settimeout(2)
    for i in range(n):
        t = time.perf_counter()
        s.send(i.to_bytes(8, "big") + bytes(size - 8))
        s.recv(64)
        out["rtt_ms"].append((time.perf_counter() - t) * 1000)
else:
    if mode == "burst":
        payload = b"".join(i.to_bytes(8, "big") + bytes(size - 8) for i in range(n))
        s.setsockopt(17, 103, size)
        s.send(payload)
    else:
        for i in range(n):
            s.send(i.to_bytes(8, "big") + bytes(size - 8))
    s.settimeout(1)
    try:
        while True:
            r = s.recv(64)
            out["echoed"].append([int.from_bytes(r[:4], "big"), int.from_bytes(r[4:12], "big")])
    except socket.timeout:
        pass
s.send(b"stop")
print(json.dumps(out))
"""


def _topo(**link) -> Topology:
    return Topology(TopologySpec(link=LinkSpec.build(**link)))


def _exchange(topo: Topology, mode: str, n: int, size: int) -> tuple[dict, dict]:
    """Run the echo server on origin 0 and one client; the client's result and the link's
    final statistics."""
    srv = topo.popen(
        0,
        [sys.executable, "-c", SERVER, topo.origin_ips[0], str(PORT)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    ready, _, _ = select.select([srv.stdout], [], [], 10)
    assert ready and srv.stdout.readline().strip() == "ready", srv.stderr.read()
    cp = topo.run("client", [sys.executable, "-c", CLIENT, topo.origin_ips[0], str(PORT), mode, str(n), str(size)])
    srv.wait(timeout=10)
    return json.loads(cp.stdout), topo.down()


def test_udp_datagrams_take_the_configured_rtt():
    with _topo(rtt="20ms") as topo:
        res, stats = _exchange(topo, "echo", 40, 1200)
    rtts = sorted(res["rtt_ms"][5:])  # (the first ones warm up the interpreter's path)
    assert len(rtts) == 35
    assert rtts[0] >= 20, rtts  # never early
    assert rtts[len(rtts) // 2] < 21, rtts  # user-space timing: a little above the link's 20 ms
    for d in ("uplink", "downlink"):
        assert stats[d]["packets_out"] >= 40
        assert stats[d]["gso_passthrough"] == 0


@pytest.mark.parametrize("offload", [True, False])
def test_a_udp_segment_send_reaches_the_link_as_wire_datagrams(offload, monkeypatch):
    """quinn-udp sends with UDP_SEGMENT: the kernel segments it before the TUN (the TUN offers no
    UDP segmentation offload), so the emulator delays and counts each 1,200-byte datagram; also
    with the TUN's checksum offload off (the send does not fail)."""
    made = Topology.link_config
    monkeypatch.setattr(Topology, "link_config", lambda self: dataclasses.replace(made(self), offload=offload))
    with _topo(rtt="10ms") as topo:
        res, stats = _exchange(topo, "burst", 10, 1200)
    assert sorted(res["echoed"]) == [[1200, i] for i in range(10)]  # ten datagrams of 1,200 bytes
    up = stats["uplink"]
    assert up["gso_passthrough"] == 0 and up["gso_segmented"] == 0
    assert up["packets_in"] >= 11  # the ten, one by one (and the "stop")
    assert up["bytes_in"] >= 10 * (1200 + 28)


def test_udp_loss_is_per_datagram_and_seeded():
    """Random loss drops single datagrams; the link's drop count is exactly what went missing,
    and the same seed drops the same datagrams."""
    lost = []
    for _ in range(2):
        with _topo(rtt="2ms", loss_up=0.2, loss_down=0.0, seed=7) as topo:
            res, stats = _exchange(topo, "stream", 200, 200)
        got = {i for _, i in res["echoed"]}
        up = stats["uplink"]
        # (the final "stop" may be dropped too: it is one more datagram the link saw)
        assert up["dropped_loss"] in (200 - len(got), 201 - len(got))
        assert 200 * 0.12 < 200 - len(got) < 200 * 0.28
        assert stats["downlink"]["dropped_loss"] == 0
        lost.append(sorted(set(range(200)) - got))
    assert lost[0] == lost[1]
