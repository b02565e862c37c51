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

import decimal
import socket
from collections.abc import Iterator
from dataclasses import dataclass

import dpkt

from pltlab.errors import PltError

SYN, ACK, FIN, RST = dpkt.tcp.TH_SYN, dpkt.tcp.TH_ACK, dpkt.tcp.TH_FIN, dpkt.tcp.TH_RST
LINKTYPE_RAW = 101  # the file's value (dpkt.pcap.DLT_RAW is the platform's DLT: 12 or 14 on some)
RAW_LINKTYPES = (LINKTYPE_RAW, dpkt.pcap.DLT_IPV4)  # 228: raw IPv4
_NANO = (dpkt.pcap.TCPDUMP_MAGIC_NANO, dpkt.pcap.PMUDPCT_MAGIC_NANO)
_SWAPPED = (dpkt.pcap.PMUDPCT_MAGIC, dpkt.pcap.PMUDPCT_MAGIC_NANO, dpkt.pcap.PACPDOM_MAGIC)
FILE_HEADER = len(dpkt.pcap.FileHdr())  # 24 bytes


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


def _file_header(path: str, head: bytes) -> tuple[type, int]:
    """(dpkt's record header class, timestamp ticks per second) of the raw-IP pcap whose first
    bytes are ``head`` (``path`` named in the errors)."""
    try:
        fh = dpkt.pcap.FileHdr(head)
    except dpkt.UnpackError:
        raise PltError(f"packet trace {path}: no pcap header") from None
    if fh.magic not in dpkt.pcap.MAGIC_TO_PKT_HDR:
        raise PltError(f"packet trace {path}: not a pcap file (magic {int.from_bytes(head[:4], 'little'):08x})")
    magic = fh.magic  # as read in network byte order: it says the file's byte order
    if magic in _SWAPPED:  # a little-endian file: its header read so, as dpkt's Reader does
        fh = dpkt.pcap.LEFileHdr(head)
    if fh.linktype not in RAW_LINKTYPES:
        raise PltError(f"packet trace {path}: link type {fh.linktype}, expected raw IP (101)")
    return dpkt.pcap.MAGIC_TO_PKT_HDR[magic], 1_000_000_000 if magic in _NANO else 1_000_000


def records(path: str) -> tuple[bytes, Iterator[tuple[float, bytes, bytes]]]:
    """(the file header, its records: (time, the record as in the file, header and packet, the
    packet)) of a raw-IP pcap, by dpkt's definitions of the format. dpkt's Reader gives a packet's
    time and captured bytes only: the per-load cut (pltlab.run.loadpcaps) copies each record
    whole (its original length and nanoseconds as written), so the records are read here with
    dpkt's header classes, as its Reader reads them."""
    try:
        f = open(path, "rb")  # (closed by the iterator)
    except OSError as e:
        raise PltError(f"cannot read packet trace {path}: {e.strerror}") from None
    try:
        head = f.read(FILE_HEADER)
        ph, tps = _file_header(path, head)
    except BaseException:
        f.close()
        raise

    def it() -> Iterator[tuple[float, bytes, bytes]]:
        with f:
            while True:
                raw = f.read(ph.__hdr_len__)
                if len(raw) < ph.__hdr_len__:  # the end (or a record header cut short: a killed writer)
                    return
                h = ph(raw)
                pkt = f.read(h.caplen)
                yield h.tv_sec + h.tv_usec / tps, raw + pkt, pkt

    return head, it()


def read_pcap(path: str) -> list[Segment]:
    """The IPv4 TCP segments of a pcap (other packets skipped), in file order."""
    _, recs = records(path)
    return [seg for t, _, pkt in recs if (seg := _tcp(t, pkt)) is not None]


def tcp_of(p: bytes) -> tuple[dpkt.ip.IP, dpkt.tcp.TCP] | None:
    """The IPv4 header and TCP header of a raw IP packet (dpkt), else None: not IPv4 TCP, or its
    headers malformed or cut short. The TCP header is read from the captured bytes whatever the
    IP total length says (a packet captured whole, or cut by the snap length)."""
    try:
        ip = dpkt.ip.IP(p)
        if ip.v != 4 or ip.p != dpkt.ip.IP_PROTO_TCP:
            return None
        return ip, dpkt.tcp.TCP(p[ip.hl * 4 :])
    except dpkt.UnpackError:
        return None


def _tcp(t: float, p: bytes) -> Segment | None:
    got = tcp_of(p)
    if got is None:
        return None
    ip, tcp = got
    total = ip.len or len(p)
    return Segment(
        t,
        socket.inet_ntoa(ip.src),
        socket.inet_ntoa(ip.dst),
        tcp.sport,
        tcp.dport,
        tcp.seq,
        tcp.ack,
        tcp.flags & 0x3F,
        max(0, total - ip.hl * 4 - tcp.off * 4),
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
    every: list[_Conn] = []  # every incarnation, a reused 4-tuple's earlier ones too
    owner: list[_Conn | None] = [None] * len(segments)  # each client segment's incarnation
    start = None
    first_req = None
    # pass 1: start, and per connection the last byte the server sent
    for i, s in enumerate(segments):
        sp = server_port(s)
        if sp is None or (ports is not None and sp not in ports):
            continue
        up = s.src == client_ip
        key = (s.sport, s.dst, s.dport) if up else (s.dport, s.src, s.sport)
        if up:
            if s.flags & SYN and not s.flags & ACK:
                if start is None:
                    start = s.t
                old = conns.get(key)
                if old is None or old.last_data_t is not None:  # (a retransmitted SYN keeps its own)
                    conns[key] = _Conn()  # a new incarnation: a reused 4-tuple's old one is over
                    every.append(conns[key])
            elif s.payload and first_req is None:
                first_req = s.t
            owner[i] = conns.get(key)
            continue
        c = conns.get(key)
        if c is None:  # (the trace began after its SYN)
            c = conns[key] = _Conn()
            every.append(c)
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
    for s, c in zip(segments, owner):
        if not s.flags & ACK:
            continue
        if c is None or c.base is None or c.last_data_t is None or c.acked_t is not None:
            continue
        if s.t >= c.last_data_t and _rel(s.ack, c.base) >= c.last_end:
            c.acked_t = s.t
    ends, unacked = [], 0
    for c in every:
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
        "connections": len(ends),
        "unacked": unacked,
    }


def plt_from_pcap(path: str, client_ip: str | None = "198.18.0.1", ports=(80, 443)) -> dict:
    return trace_plt(read_pcap(path), client_ip, ports)


# ---- writing (tests and synthetic traces) ------------------------------------------------
def write_pcap(path: str, packets: list[tuple[float, bytes]]) -> None:
    """A nanosecond LINKTYPE_RAW pcap like the emulator's, from (time, IP packet) pairs (dpkt's
    Writer; times to the nanosecond as the emulator writes them)."""
    with open(path, "wb") as f:
        w = dpkt.pcap.Writer(f, snaplen=262144, linktype=LINKTYPE_RAW, nano=True)
        for t, p in packets:
            w.writepkt(p, decimal.Decimal(round(t * 1e9)) / 1_000_000_000)


def ipv4_tcp(src: str, dst: str, sport: int, dport: int, seq: int, ack: int, flags: int, payload: int = 0) -> bytes:
    """An IPv4/TCP packet (dpkt: checksums computed) with ``payload`` zero bytes."""
    tcp = dpkt.tcp.TCP(
        sport=sport,
        dport=dport,
        seq=seq & 0xFFFFFFFF,
        ack=ack & 0xFFFFFFFF,
        flags=flags,
        win=65535,
        data=bytes(payload),
    )
    ip = dpkt.ip.IP(
        src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP, ttl=64, df=1, data=tcp
    )
    return bytes(ip)
