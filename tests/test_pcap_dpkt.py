"""The pcap reader on dpkt (pltlab.run.pcaptrace, pltlab.run.loadpcaps) gives what the hand-written
reader it replaced gave: the same segments (times to the bit), the same PLT, the same per-load
files byte for byte. The traces are written here with dpkt's own classes; the expected segments
come from the values the packets were built from, and ``_old_*`` is the replaced code, kept as
the reference."""

import decimal
import os
import socket
import struct

import dpkt
import pytest

from pltlab.errors import PltError
from pltlab.run import loadpcaps
from pltlab.run.pcaptrace import read_pcap, trace_plt

C, S = "198.18.0.1", "198.19.0.1"
T0 = 1_795_763_516  # seconds since the epoch, as the emulator's traces have them


def _tcp(src, dst, sport, dport, seq, ack, flags, payload=0, ip_opts=b"", tcp_opts=b""):
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, ack=ack, flags=flags, win=65535, data=bytes(payload))
    if tcp_opts:
        tcp.opts = tcp_opts
        tcp.off = 5 + len(tcp_opts) // 4
    ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=6, ttl=64, data=tcp)
    if ip_opts:
        ip.opts = ip_opts
        ip.hl = 5 + len(ip_opts) // 4
    ip.len = 4 * ip.hl + 4 * tcp.off + payload
    return bytes(ip)


def _udp():
    udp = dpkt.udp.UDP(sport=5353, dport=53, data=b"x" * 12)
    return bytes(dpkt.ip.IP(src=socket.inet_aton(C), dst=socket.inet_aton(S), p=17, data=udp))


def _ipv6():
    return bytes(dpkt.ip6.IP6(src=b"\0" * 15 + b"\1", dst=b"\0" * 15 + b"\2", nxt=6, hlim=64, data=b""))


# (ns after T0, packet, captured bytes or None: whole; the segment expected: src, dst, sport, dport, seq, ack, flags, payload)
PACKETS = [
    (0, _tcp(C, S, 40000, 80, 1000, 0, 0x02, tcp_opts=b"\x02\x04\x05\xb4" * 3), None, (C, S, 40000, 80, 1000, 0, 2, 0)),
    (20_000_123, _tcp(S, C, 80, 40000, 7, 1001, 0x12), None, (S, C, 80, 40000, 7, 1001, 0x12, 0)),
    (20_500_001, _udp(), None, None),
    (
        21_000_999,
        _tcp(C, S, 40000, 80, 1001, 8, 0x18, 300, ip_opts=b"\x01\x01\x01\x00"),
        None,
        (C, S, 40000, 80, 1001, 8, 0x18, 300),
    ),
    (22_000_000, _ipv6(), None, None),
    # cut by the snap length: the payload from the IP total length, not from what was captured
    (40_000_001, _tcp(S, C, 80, 40000, 8, 1301, 0x10, 1448), 60, (S, C, 80, 40000, 8, 1301, 0x10, 1448)),
    (40_100_000, _tcp(S, C, 80, 40000, 1456, 1301, 0x18, 500), None, (S, C, 80, 40000, 1456, 1301, 0x18, 500)),
    (41_000_000, _tcp(C, S, 40000, 80, 1301, 1956, 0x10), None, (C, S, 40000, 80, 1301, 1956, 0x10, 0)),
    (999_999_999, _tcp(C, S, 40000, 80, 1301, 1956, 0x11), None, (C, S, 40000, 80, 1301, 1956, 0x11, 0)),
]


def _write(path, nano=True, big_endian=False, cut_tail=False):
    """The trace: dpkt's Writer (little-endian here), or dpkt's header classes in network byte order."""
    with open(path, "wb") as f:
        if big_endian:
            magic = dpkt.pcap.TCPDUMP_MAGIC_NANO if nano else dpkt.pcap.TCPDUMP_MAGIC
            f.write(bytes(dpkt.pcap.FileHdr(magic=magic, snaplen=262144, linktype=101)))
        else:
            w = dpkt.pcap.Writer(f, snaplen=262144, linktype=101, nano=nano)
        for ns, p, cap, _ in PACKETS:
            frac = ns if nano else ns // 1000
            kept = p if cap is None else p[:cap]
            if big_endian:
                hdr = dpkt.pcap.PktHdr(tv_sec=T0, tv_usec=frac, caplen=len(kept), len=len(p))
                f.write(bytes(hdr) + kept)
            elif cap is None:
                w.writepkt(p, decimal.Decimal(T0) + decimal.Decimal(frac) / (10**9 if nano else 10**6))
            else:  # (dpkt's Writer records a packet whole: the cut one's header by its class)
                f.write(bytes(dpkt.pcap.LEPktHdr(tv_sec=T0, tv_usec=frac, caplen=len(kept), len=len(p))) + kept)
        if cut_tail:
            f.write(b"\x01\x02\x03")  # a record header cut short (a killed writer): ignored


def _expected(nano=True):
    out = []
    for ns, _, _, seg in PACKETS:
        if seg is not None:
            t = T0 + (ns / 1e9 if nano else (ns // 1000) / 1e6)
            out.append((t, *seg))
    return out


def _astuples(segs):
    return [(s.t, s.src, s.dst, s.sport, s.dport, s.seq, s.ack, s.flags, s.payload) for s in segs]


@pytest.mark.parametrize("nano", [True, False])
@pytest.mark.parametrize("big_endian", [False, True])
def test_dpkt_reader_gives_the_old_readers_segments(tmp_path, nano, big_endian):
    path = str(tmp_path / "t.pcap")
    _write(path, nano=nano, big_endian=big_endian, cut_tail=True)
    got = _astuples(read_pcap(path))
    assert got == _expected(nano)  # the values the packets were made of
    assert got == _old_read_pcap(path)  # and what the replaced reader read, to the bit
    r = trace_plt(read_pcap(path), C)
    # from the SYN to the first ACK covering the last byte (server seq 7 + 1 + 1448 + 500 = 1956)
    assert r["plt_ms"] == pytest.approx(41.0, abs=0.001)
    assert r["connections"] == 1 and r["unacked"] == 0


def test_per_load_files_are_the_old_ones_byte_for_byte(tmp_path):
    whole = str(tmp_path / "whole.pcap")
    _write(whole)
    new = {str(tmp_path / "a.pcap"): (T0 - 1, T0 + 0.0205), str(tmp_path / "b.pcap"): (T0 + 0.0206, T0 + 2)}
    old = {
        str(tmp_path / "old-a.pcap"): new[str(tmp_path / "a.pcap")],
        str(tmp_path / "old-b.pcap"): new[str(tmp_path / "b.pcap")],
    }
    loadpcaps.split(whole, new)
    _old_split(whole, old)
    for name in ("a", "b"):
        with open(tmp_path / f"{name}.pcap", "rb") as f, open(tmp_path / f"old-{name}.pcap", "rb") as g:
            assert f.read() == g.read()
    # the connection opened in load a keeps every packet in a (+ the UDP packet at 20.5 ms); b: the IPv6 one
    assert len(read_pcap(str(tmp_path / "a.pcap"))) == 7 and os.path.getsize(tmp_path / "b.pcap") == 24 + 16 + 40


def test_errors_are_one_line(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes(b"short")
    with pytest.raises(PltError, match="no pcap header"):
        read_pcap(str(p))
    p.write_bytes(b"not a pcap at all, but long enough")
    with pytest.raises(PltError, match="not a pcap file \\(magic 20746f6e\\)"):
        read_pcap(str(p))
    with open(p, "wb") as f:
        dpkt.pcap.Writer(f, linktype=1, nano=True)  # Ethernet
    with pytest.raises(PltError, match="link type 1, expected raw IP"):
        read_pcap(str(p))
    with pytest.raises(PltError, match="cannot read packet trace"):
        read_pcap(str(tmp_path / "missing.pcap"))


# ---- the replaced code (struct by hand), the reference ---------------------------------------
_MAGICS = {0xA1B2C3D4: ("<", 10**6), 0xA1B23C4D: ("<", 10**9), 0xD4C3B2A1: (">", 10**6), 0x4D3CB2A1: (">", 10**9)}


def _old_records(data):
    bo, tps = _MAGICS[struct.unpack_from("<I", data)[0]]
    off = 24
    while off + 16 <= len(data):
        sec, frac, incl, _ = struct.unpack_from(bo + "IIII", data, off)
        yield sec + frac / tps, data[off : off + 16 + incl], data[off + 16 : off + 16 + incl]
        off += 16 + incl


def _old_read_pcap(path):
    with open(path, "rb") as f:
        data = f.read()
    out = []
    for t, _, p in _old_records(data):
        if len(p) < 20 or p[0] >> 4 != 4:
            continue
        ihl = (p[0] & 0x0F) * 4
        total = struct.unpack_from("!H", p, 2)[0] or len(p)
        if p[9] != 6 or len(p) < ihl + 20:
            continue
        sport, dport, seq, ack, off_flags = struct.unpack_from("!HHIIH", p, ihl)
        doff = (off_flags >> 12) * 4
        src, dst = socket.inet_ntoa(p[12:16]), socket.inet_ntoa(p[16:20])
        out.append((t, src, dst, sport, dport, seq, ack, off_flags & 0x3F, max(0, total - ihl - doff)))
    return out


def _old_split(whole, loads):
    import bisect

    with open(whole, "rb") as f:
        data = f.read()
    order = sorted(loads.items(), key=lambda kv: kv[1][0])
    starts = [iv[0] for _, iv in order]
    chunks = [[] for _ in order]

    def load_at(t):
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t <= order[i][1][1] else None

    owner = {}
    for t, rec, p in _old_records(data):
        if len(p) < 20 or p[0] >> 4 != 4 or p[9] != 6:
            i = load_at(t)
        else:
            ihl = (p[0] & 0x0F) * 4
            sport, dport = struct.unpack_from("!HH", p, ihl)
            a, b = (p[12:16], sport), (p[16:20], dport)
            key, flags = (min(a, b), max(a, b)), p[ihl + 13] & 0x3F
            if flags & 0x02 and not flags & 0x10:
                owner[key] = load_at(t)
            i = owner.get(key)
        if i is not None:
            chunks[i].append(rec)
    for (path, _), recs in zip(order, chunks):
        with open(path, "wb") as f:
            f.write(data[:24])
            f.writelines(recs)


def test_trace_plt_counts_a_reused_4_tuple_twice_a_resent_syn_once_an_unused_connection_never(tmp_path):
    from pltlab.run.pcaptrace import ACK, FIN, SYN, write_pcap

    ms = 0.001
    pk = [
        (T0, _tcp(C, S, 40000, 80, 100, 0, SYN)),
        (T0 + 10 * ms, _tcp(C, S, 40000, 80, 100, 0, SYN)),  # resent: the same connection
        (T0 + 30 * ms, _tcp(S, C, 80, 40000, 1000, 101, SYN | ACK)),
        (T0 + 30 * ms, _tcp(C, S, 40000, 80, 101, 1001, ACK, 100)),
        (T0 + 50 * ms, _tcp(S, C, 80, 40000, 1001, 201, ACK, 500)),
        (T0 + 50 * ms, _tcp(C, S, 40000, 80, 201, 1501, ACK | FIN)),
        (T0 + 51 * ms, _tcp(C, S, 40001, 80, 7, 0, SYN)),  # opened, never used
        # the first 4-tuple again, another incarnation (other sequence numbers), ending later
        (T0 + 60 * ms, _tcp(C, S, 40000, 80, 900, 0, SYN)),
        (T0 + 80 * ms, _tcp(S, C, 80, 40000, 50_000, 901, SYN | ACK)),
        (T0 + 80 * ms, _tcp(C, S, 40000, 80, 901, 50_001, ACK, 100)),
        (T0 + 100 * ms, _tcp(S, C, 80, 40000, 50_001, 1001, ACK, 300)),
        (T0 + 100 * ms, _tcp(C, S, 40000, 80, 1001, 50_200, ACK)),  # short of the last byte
        (T0 + 120 * ms, _tcp(C, S, 40000, 80, 1001, 50_301, ACK)),
    ]
    path = str(tmp_path / "t.pcap")
    write_pcap(path, pk)
    r = trace_plt(read_pcap(path), C)
    assert r["connections"] == 2 and r["unacked"] == 0
    assert r["plt_ms"] == pytest.approx(120.0, abs=0.001)
