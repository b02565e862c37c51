"""QUIC through the emulated link (issue 26, deliverable 5; root): a page loaded over h3 with
`pltlab run --pcap` leaves per-load pcaps holding its QUIC datagrams as the wire carries them
(UDP 443, no datagram above the link's MTU, a padded client Initial first, the server's first
answer a round trip later), and random loss drops single datagrams: every datagram the client
sent that the emulator did not drop reached the replay, and no GSO super-packet ever reached the
emulator (quinn's UDP_SEGMENT batches are split by the kernel before the TUN:
docs/dataplane-interfaces.md "The link: UDP datagrams through the TUN emulator")."""

import json
import socket
import time

import dpkt
import pytest

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.run.config import RunConfig
from pltlab.run.pcaptrace import records
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner
from tests.conftest import pltlab_cmd

pytestmark = pytest.mark.root

LINK_MTU = 1500  # the link's MTU (knob mtu, default)
MIN_INITIAL = 1200  # RFC 9000 §14.1: a client's datagram carrying an Initial is padded to 1200 bytes


def _ipv4(path: str) -> list[tuple[float, dpkt.ip.IP]]:
    """(time, IP) of the IPv4 packets of a raw-IP pcap (the kernel's own IPv6 router
    solicitations pass the link too)."""
    _, recs = records(path)
    return [(t, dpkt.ip.IP(pkt)) for t, _, pkt in recs if pkt[0] >> 4 == 4]


def _udp(path: str) -> list[tuple[float, dpkt.ip.IP, dpkt.udp.UDP]]:
    """(time, IP, UDP) of every UDP datagram of a raw-IP pcap; asserts its IPv4 holds nothing
    else but UDP (an h3 load opens no TCP connection) and ICMP (a port closed after the load)."""
    out = []
    for t, ip in _ipv4(path):
        if ip.p == dpkt.ip.IP_PROTO_UDP:
            out.append((t, ip, ip.data))
        else:
            assert ip.p == dpkt.ip.IP_PROTO_ICMP, f"IP protocol {ip.p} in an h3 load's pcap"
    return out


def _long_header_type(payload: bytes) -> int | None:
    """A QUIC v1 long header's packet type (0 Initial, 1 0-RTT, 2 Handshake, 3 Retry), else None."""
    if len(payload) < 5 or not payload[0] & 0x80 or payload[1:5] != b"\x00\x00\x00\x01":
        return None
    return (payload[0] >> 4) & 0x3


def test_the_per_load_pcap_shows_the_quic_datagrams_of_an_h3_load(tmp_path):
    har = tmp_path / "page.har"
    write_page(generate(objects=8, total_bytes=60_000, origins=2, depth=1, seed=7), str(har))
    out = tmp_path / "pcaps"
    rtt_ms = 20
    cp = pltlab_cmd(
        "run", str(har), "--rtt", f"{rtt_ms}ms", "--reps", "2", "--protocol", "h3", "--schemes", "https",
        "--pcap", str(out), "--json",
    )  # fmt: skip
    assert cp.returncode == 0, cp.stderr
    runs = json.loads(cp.stdout)["runs"]
    assert len(runs) == 2 and all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    for r in runs:
        assert {q["protocol"] for q in r["requests"]} == {"h3"}
        grams = _udp(r["pcap"])
        servers = {c["ip"] for c in r["connections"]}
        up = [(t, ip, u) for t, ip, u in grams if u.dport == 443]
        down = [(t, ip, u) for t, ip, u in grams if u.sport == 443]
        assert up and down and len(up) + len(down) == len(grams)  # every datagram is QUIC's, port 443
        assert {socket.inet_ntoa(ip.dst) for _, ip, _ in up} == servers
        # wire datagrams, never a GSO super-packet: none above the link's MTU (quinn sends at most
        # 1200-byte UDP payloads, its PLPMTUD being off)
        assert max(ip.len for _, ip, _ in grams) <= LINK_MTU
        assert max(len(u.data) for _, _, u in grams) <= 1200
        # each connection begins with the client's Initial, padded to >= 1200 bytes, and the
        # server's first datagram to that port comes a round trip later (delay per datagram)
        for port in {u.sport for _, _, u in up}:
            t0, _, first = next(g for g in up if g[2].sport == port)
            assert _long_header_type(first.data) == 0 and len(first.data) >= MIN_INITIAL
            t1 = next(t for t, _, u in down if u.dport == port)
            assert rtt_ms / 1000 <= t1 - t0 < rtt_ms / 1000 + 0.1, (t0, t1)
        # the loader's own count of the datagrams it sent, as of its last response, are all in
        # the pcap (which goes on until the load ended: the connections' closing datagrams)
        assert len(up) >= sum(c["datagrams_out"] for c in r["connections"]) > 0


def test_loss_drops_single_quic_datagrams_and_no_gso_batch_reaches_the_link(tmp_path):
    """At 5 % loss each way the emulator drops datagrams both ways and splits none (no GSO
    super-packet reached it); per load, the client's datagrams in the pcap (captured before the
    loss) that the replay never received are datagrams the emulator dropped on the way up."""
    page = generate(objects=11, total_bytes=200_000, origins=1, depth=1, seed=3)
    cfg = RunConfig(rtt="20ms", loss="5%", protocol="h3", schemes="https", pcap=str(tmp_path / "pcaps"))
    received = []
    with PageRunner(page, cfg) as pr:
        runs = []
        for rep in (1, 2, 3):
            before = pr.replay.snapshot()["quic_datagrams_in"]
            runs.append(pr.load(Point(tfo=False), rep))
            time.sleep(0.2)  # the load's last datagrams are through the link (20 ms)
            received.append(pr.replay.snapshot()["quic_datagrams_in"] - before)
    assert all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    up, down = pr.topo.link_stats["uplink"], pr.topo.link_stats["downlink"]
    assert up["dropped_loss"] > 0 and down["dropped_loss"] > 0
    for d in (up, down):
        assert d["gso_segmented"] == 0 and d["gso_passthrough"] == 0
    lost, icmp_up = [], 0
    for r, got in zip(runs, received):
        if r["late_reruns"]:  # (the replay also got the earlier tries' datagrams: not in the pcap)
            continue
        ips = [ip for _, ip in _ipv4(r["pcap"])]
        sent = sum(1 for ip in ips if ip.p == dpkt.ip.IP_PROTO_UDP and ip.data.dport == 443)
        icmp_up += sum(
            1 for ip in ips if ip.p == dpkt.ip.IP_PROTO_ICMP and socket.inet_ntoa(ip.dst) in pr.host_ips.values()
        )
        assert 0 <= sent - got < sent, (sent, got)
        lost.append(sent - got)
    assert sum(lost) > 0 or len(lost) < 2, lost  # ~50 client datagrams a load at 5 %
    if len(lost) == len(runs):  # no re-run: the link's drops are those datagrams (and any ICMP)
        assert sum(lost) <= up["dropped_loss"] <= sum(lost) + icmp_up, (lost, icmp_up, up["dropped_loss"])
