"""Page load time from the link emulator's packet trace (no tshark needed).

The emulator writes a pcap as seen on the client's interface (rust/src/link/pcap.rs): magic
a1b23c4d (nanosecond timestamps, also read: a1b2c3d4 microseconds, either byte order),
LINKTYPE_RAW (101; 228 = raw IPv4 also accepted): every record is a bare IP packet.

PLT as the study defined it: from the first packet of the first HTTP request (the client's first
SYN: the connection carrying the first request; without any SYN in the trace, the first request
segment) to the final ACK of the last object (the first client segment whose cumulative ACK
covers the last response byte the server sent on its connection; the latest such ACK over all
connections). A connection whose last byte was never acknowledged in the trace ends at its last
data segment instead.
"""

from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass

from pltlab.errors import PltError

SYN, ACK, FIN, RST = 0x02, 0x10, 0x01, 0x04
_MAGICS = {  # magic as read little-endian -> (byte order, ticks per second)
    0xA1B2C3D4: ("<", 1_000_000),
    0xA1B23C4D: ("<", 1_000_000_000),
    0xD4C3B2A1: (">", 1_000_000),
    0x4D3CB2A1: (">", 1_000_000_000),
}
RAW_LINKTYPES = (101, 228)


@dataclass(frozen=True)
class Segment:
    t: float  # seconds since the epoch
    src: str
    dst: str
    sport: int
    dport: int
    seq: int
    ack: int
    flags: int
    payload: int  # TCP payload bytes (from the IP total length, not the captured length)


def read_header(path: str, data: bytes) -> tuple[str, int]:
    """(struct byte order, timestamp ticks per second) of the raw-IP pcap ``data`` read from
    ``path`` (named in the errors); its records start at offset 24."""
    if len(data) < 24:
        raise PltError(f"packet trace {path}: no pcap header")
    magic = struct.unpack_from("<I", data)[0]
    if magic not in _MAGICS:
        raise PltError(f"packet trace {path}: not a pcap file (magic {magic:08x})")
    bo, tps = _MAGICS[magic]
    linktype = struct.unpack_from(bo + "I", data, 20)[0]
    if linktype not in RAW_LINKTYPES:
        raise PltError(f"packet trace {path}: link type {linktype}, expected raw IP (101)")
    return bo, tps


def read_pcap(path: str) -> list[Segment]:
    """The IPv4 TCP segments of a pcap (other packets skipped), in file order."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise PltError(f"cannot read packet trace {path}: {e.strerror}") from None
    bo, tps = read_header(path, data)
    out, off, n = [], 24, len(data)
    hdr = struct.Struct(bo + "IIII")
    while off + 16 <= n:
        sec, frac, incl, _orig = hdr.unpack_from(data, off)
        off += 16
        pkt = data[off : off + incl]
        off += incl
        seg = _tcp(sec + frac / tps, pkt)
        if seg is not None:
            out.append(seg)
    return out


def _tcp(t: float, p: bytes) -> Segment | None:
    if len(p) < 20 or p[0] >> 4 != 4:
        return None
    ihl = (p[0] & 0x0F) * 4
    total = struct.unpack_from("!H", p, 2)[0] or len(p)
    if p[9] != 6 or len(p) < ihl + 20:
        return None
    sport, dport, seq, ack, off_flags = struct.unpack_from("!HHIIH", p, ihl)
    doff = (off_flags >> 12) * 4
    return Segment(
        t,
        str(ipaddress.IPv4Address(p[12:16])),
        str(ipaddress.IPv4Address(p[16:20])),
        sport,
        dport,
        seq,
        ack,
        off_flags & 0x3F,
        max(0, total - ihl - doff),
    )


def _rel(x: int, base: int) -> int:
    """Sequence distance x - base, modulo 2**32, as a signed value."""
    d = (x - base) & 0xFFFFFFFF
    return d - (1 << 32) if d >= 1 << 31 else d


@dataclass
class _Conn:
    base: int | None = None  # first server sequence number seen
    last_end: int = 0  # highest relative end of server payload
    last_data_t: float | None = None
    acked_t: float | None = None  # first client ACK covering last_end (computed in pass 2)


def trace_plt(segments: list[Segment], client_ip: str | None = None, ports: tuple[int, ...] | None = (80, 443)) -> dict:
    """PLT of the page load in ``segments`` (one load per trace). ``client_ip`` defaults to the
    sender of the first SYN; ``ports`` = the servers' ports counted (None = any).
    Returns {"plt_ms", "start", "end", "connections", "unacked"}."""
    if client_ip is None:
        client_ip = next((s.src for s in segments if s.flags & SYN and not s.flags & ACK), None)
        if client_ip is None:
            raise PltError("packet trace has no SYN: cannot tell the client")

    def server_port(s: Segment) -> int | None:
        if s.src == client_ip:
            return s.dport
        if s.dst == client_ip:
            return s.sport
        return None

    conns: dict[tuple, _Conn] = {}
    start = None
    first_req = None
    # pass 1: start, and per connection the last byte the server sent
    for s in segments:
        sp = server_port(s)
        if sp is None or (ports is not None and sp not in ports):
            continue
        up = s.src == client_ip
        key = (s.sport, s.dst, s.dport) if up else (s.dport, s.src, s.sport)
        if up:
            if s.flags & SYN and not s.flags & ACK:
                if start is None:
                    start = s.t
                conns[key] = _Conn()  # a new incarnation of this 4-tuple
            elif s.payload and first_req is None:
                first_req = s.t
            continue
        c = conns.setdefault(key, _Conn())
        if c.base is None:
            c.base = s.seq
        if s.payload:
            end = _rel(s.seq, c.base) + s.payload
            if end > c.last_end or c.last_data_t is None:  # first arrival of the highest byte
                c.last_end, c.last_data_t = end, s.t
    if start is None:
        start = first_req
    if start is None:
        raise PltError("packet trace has no HTTP request")
    # pass 2: the first client ACK covering each connection's last byte
    for s in segments:
        if s.src != client_ip or not s.flags & ACK:
            continue
        c = conns.get((s.sport, s.dst, s.dport))
        if c is None or c.base is None or c.last_data_t is None or c.acked_t is not None:
            continue
        if s.t >= c.last_data_t and _rel(s.ack, c.base) >= c.last_end:
            c.acked_t = s.t
    ends, unacked = [], 0
    for c in conns.values():
        if c.last_data_t is None:
            continue
        if c.acked_t is None:
            unacked += 1
        ends.append(c.acked_t if c.acked_t is not None else c.last_data_t)
    if not ends:
        raise PltError("packet trace has no response data")
    end = max(ends)
    return {
        "plt_ms": round((end - start) * 1000, 3),
        "start": start,
        "end": end,
        "connections": sum(1 for c in conns.values() if c.last_data_t is not None),
        "unacked": unacked,
    }


def plt_from_pcap(path: str, client_ip: str | None = "198.18.0.1", ports=(80, 443)) -> dict:
    return trace_plt(read_pcap(path), client_ip, ports)


# ---- writing (tests and synthetic traces) ------------------------------------------------
def write_pcap(path: str, packets: list[tuple[float, bytes]]) -> None:
    """A nanosecond LINKTYPE_RAW pcap like the emulator's, from (time, IP packet) pairs."""
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B23C4D, 2, 4, 0, 0, 262144, 101))
        for t, p in packets:
            ns = round(t * 1e9)
            f.write(struct.pack("<IIII", ns // 1_000_000_000, ns % 1_000_000_000, len(p), len(p)))
            f.write(p)


def ipv4_tcp(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int, payload: int = 0) -> bytes:
    """An IPv4/TCP packet (checksums zero) with ``payload`` zero bytes."""
    tcp = struct.pack("!HHIIHHHH", sport, dport, seq & 0xFFFFFFFF, ack & 0xFFFFFFFF, (5 << 12) | flags, 65535, 0, 0)
    total = 20 + len(tcp) + payload
    ip = struct.pack(
        "!BBHHHBBH4s4s",
        0x45,
        0,
        total,
        0,
        0x4000,
        64,
        6,
        0,
        ipaddress.IPv4Address(src).packed,
        ipaddress.IPv4Address(dst).packed,
    )
    return ip + tcp + bytes(payload)
