"""Turning archived pages into the replay server's manifest (docs/dataplane-interfaces.md)."""

import hashlib
import os
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from pltlab import gcpause, protocols
from pltlab.archive import synth, wire
from pltlab.archive.model import Obj, Page
from pltlab.dataplane import ABSENT, document

# Framing headers are the server's business (it sends Content-Length for the encoded body);
# Content-Encoding is kept when the body is sent encoded (archive.wire), dropped otherwise.
_DROP = {
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "proxy-connection",
    "upgrade",
    "trailer",
    "te",
    "alt-svc",
    "strict-transport-security",
}
# Alt-Svc: dropped where the address does not offer h3 (a browser with QUIC on would try a UDP
# port nothing listens on), as recorded where it does; under h3_discovery "alt-svc" a response of
# an h3 address without one gets this (RFC 7838, RFC 9114 §3.1.1).
_DROP_H3 = _DROP - {"alt-svc"}
ALT_SVC_H3 = 'h3=":443"; ma=86400'


# The manifest's parts, as rust/src/replay/manifest.rs reads them (`pltlab-dp schema manifest`);
# ABSENT: not written, the server's default.


@dataclass(kw_only=True)
class Listen:
    ip: str
    port: int
    tls: bool
    transport: str = ABSENT  # "udp": QUIC (h3) beside the address's TCP entries; absent: "tcp"
    alpn: list[str] = ABSENT  # TLS addresses: the ALPN protocols offered, in preference order


@dataclass(kw_only=True)
class TlsFiles:
    cert: str
    key: str
    max_early_data: int = ABSENT


@dataclass(kw_only=True)
class Quic:
    """QUIC's own settings (knobs quic_cc, quic_icw); absent: the server's defaults."""

    cc: str
    initial_window_packets: int  # x 1200 bytes
    max_connections: int = ABSENT
    retry_above: int = ABSENT  # pending unvalidated connections before Retry


@dataclass(kw_only=True)
class FileBody:
    """``length`` bytes of ``file`` from ``offset``."""

    file: str
    offset: int
    length: int


@dataclass(kw_only=True)
class Response:
    """One recorded response and the request it answers."""

    method: str
    scheme: str
    host: str
    path: str
    query: str
    status: int
    headers: list[list[str]]
    body: FileBody | None
    chunked: bool
    wait_ms: float
    cross_scheme: bool
    body_sha256: str = ABSENT  # the recorded request body's SHA-256 (hex), if it had one


@dataclass(kw_only=True)
class Manifest:
    """`pltlab-dp replay --manifest`."""

    listen: list[Listen]
    tls: TlsFiles | None
    tfo_queue: int
    think_time: bool
    h2_priority: str
    request_timeout_ms: int
    responses: list[Response]
    stats: str
    quic: Quic = ABSENT  # only where some address offers h3
    # written only when False (knob keepalive off): a manifest of keep-alive on stays the document
    # it was before the knob (the data plane's default is true)
    keep_alive: bool = ABSENT


@gcpause.paused()  # every object's response and body at once (pltlab.gcpause)
def build(
    pages: list[Page],
    host_ips: dict[str, str],
    workdir: str,
    tls: TlsFiles | dict | None,
    tfo_queue: int = 4096,
    think_time: bool = False,
    protocol: str = "recorded",
    h2_priority: str = "rfc9218",
    request_timeout_s: int = 120,
    keep_alive: bool = True,
    quic_cc: str = "cubic",
    quic_icw: int = 10,
    h3_discovery: str = "forced",
    spoken=None,
) -> dict:
    """Manifest serving every object of ``pages``; bodies (recorded or synthesized) go into one
    file in ``workdir``. With ``tls``, every origin also answers https on 443: browsers upgrade
    HSTS-preloaded hosts (wikipedia.org, ...) to https whatever the recorded scheme, and the
    sub-resources of an upgraded page follow it (scheme-relative references, see synth.ref; a
    recorded ``Location: http://...`` of an http response is served scheme-relative).
    ``protocol`` (the knob): what each address's https offers (``alpn``, see address_protocols);
    ``h2_priority`` (knob server_priority): how h2 connections order their responses;
    ``request_timeout_s`` (knob server_timeout_s): a connection's TLS handshake and first request
    head must be in this long after it connected (docs/robustness.md); ``keep_alive`` False (knob
    keepalive off): every HTTP/1.x response says `Connection: close` and ends its connection. ``tls``: the certificate and
    key (a TlsFiles or a table of its fields). Addresses offering h3 also get a udp listen entry
    on 443 (their TCP entries offer h2 and HTTP/1.1) and the manifest a ``quic`` object
    (``quic_cc``, ``quic_icw``); recorded Alt-Svc headers are kept on h3 addresses only (under
    ``h3_discovery`` "alt-svc" a response there without one gets ALT_SVC_H3).
    ``spoken``: the protocols the loader speaks (address_protocols). Returns the manifest as JSON
    data."""
    if isinstance(tls, dict):
        tls = TlsFiles(**tls)
    offered = address_protocols(pages, host_ips, protocol, spoken)
    h3_ips = {ip for ip, p in offered.items() if p.transport == "udp"}
    blob_path = os.path.join(workdir, "bodies.bin")
    responses, listen = [], set()
    with open(blob_path, "wb") as blob:
        for page in pages:
            st = synth.Structure(page)  # the pages do not change while their bodies are made
            # Every recording, repeated URLs too: the server answers them in this (recorded) order.
            for o in page.objects:
                if o.scheme not in ("http", "https") or o.host not in host_ips:
                    continue
                parts = urlsplit(o.url)
                listen.add((host_ips[o.host], o.port, o.scheme == "https"))
                fit = wire.for_object(page, o, st)
                offset = blob.tell()
                blob.write(fit.wire)
                h3 = host_ips[o.host] in h3_ips
                drop = _DROP_H3 if h3 else _DROP
                headers = [
                    [k, _location(v) if k.lower() == "location" and o.scheme == "http" else v]
                    for k, v in o.headers
                    if k.lower() not in drop and (k.lower() != "content-encoding" or fit.encoding)
                ]
                if o.mime and not any(k.lower() == "content-type" for k, _ in headers):
                    headers.append(["Content-Type", o.mime])
                if h3 and h3_discovery == "alt-svc" and not any(k.lower() == "alt-svc" for k, _ in headers):
                    headers.append(["alt-svc", ALT_SVC_H3])
                chunked = (o.header("transfer-encoding") or "").lower() == "chunked"
                r = Response(
                    method=o.method,
                    scheme=o.scheme,
                    host=o.host,
                    path=parts.path or "/",
                    query=parts.query,
                    status=o.status,
                    headers=headers,
                    body=FileBody(file=blob_path, offset=offset, length=len(fit.wire)),
                    chunked=chunked,
                    wait_ms=_wait_ms(o),
                    cross_scheme=not _self_upgrade(o),
                )
                if o.request_body is not None:
                    r.body_sha256 = hashlib.sha256(o.request_body).hexdigest()
                responses.append(r)
    if tls:
        listen |= {(ip, 443, True) for ip in host_ips.values()}
    elif any(t for _, _, t in listen):
        raise ValueError("https origins need TLS material")
    entries = []
    for ip, port, t in sorted(listen):
        entries.append(_listen(ip, port, t, protocols.over_tcp(offered[ip])))
        if t and port == 443 and ip in h3_ips:  # QUIC beside TCP on the same address
            entries.append(_listen(ip, port, t, offered[ip]))
    m = Manifest(
        listen=entries,
        tls=tls,
        tfo_queue=tfo_queue,
        think_time=think_time,
        h2_priority=h2_priority,
        request_timeout_ms=request_timeout_s * 1000,
        responses=responses,
        stats=os.path.join(workdir, "replay-stats.json"),
    )
    if h3_ips:
        m.quic = Quic(cc=quic_cc, initial_window_packets=quic_icw)
    if not keep_alive:
        m.keep_alive = False
    return document(m)


def address_protocols(
    pages: list[Page], host_ips: dict[str, str], protocol: str, spoken=None
) -> dict[str, protocols.Protocol]:
    """What each replay address's https offers (pltlab.protocols): the knob's protocol
    everywhere, or for "recorded" the protocol the pages recorded for the hosts it serves (as the
    table replays it; of several, the later row), HTTP/1.1 where nothing says otherwise. Under
    "recorded" a row the loader does not speak (``spoken``: its rows' names, Loader.protocols;
    None: every row) is replaced by the latest before it that it does (protocols.speakable: h3
    recordings as h2 while the loader has no HTTP/3)."""
    if protocol != protocols.RECORDED:
        one = protocols.get(protocol)
        return {ip: one for ip in host_ips.values()}
    out = {ip: protocols.FALLBACK for ip in host_ips.values()}
    for p in pages:
        for o in p.objects:
            ip = host_ips.get(o.host)
            if ip is not None:
                out[ip] = protocols.preferred(out[ip], protocols.of_recorded(o.protocol))
    return {ip: protocols.speakable(p, spoken) for ip, p in out.items()}


def offered(manifest: dict) -> dict[str, protocols.Protocol]:
    """What each address of a built manifest offers over https (of its listen entries' ALPN
    lists, preferred first, the later row: h3 where it has a udp entry)."""
    out: dict[str, protocols.Protocol] = {}
    for e in manifest["listen"]:
        if e.get("alpn"):
            p = protocols.by_alpn(e["alpn"][0]) or protocols.FALLBACK
            out[e["ip"]] = protocols.preferred(out[e["ip"]], p) if e["ip"] in out else p
    return out


def _listen(ip: str, port: int, tls: bool, proto: protocols.Protocol) -> Listen:
    if not tls:
        return Listen(ip=ip, port=port, tls=False)
    if proto.transport == "udp":  # QUIC: its ALPN alone (no fallback over UDP: TCP beside it has it)
        return Listen(ip=ip, port=port, tls=True, transport="udp", alpn=[proto.alpn])
    return Listen(ip=ip, port=port, tls=True, alpn=list(proto.offers()))


def _self_upgrade(o: Obj) -> bool:
    """A redirect to the same URL on the other scheme (http://x/ -> https://x/): it must answer
    only its own scheme, or the upgraded request would be redirected again, forever."""
    if not (300 <= o.status < 400 and o.redirect_url):
        return False
    a, b = urlsplit(o.url), urlsplit(urljoin(o.url, o.redirect_url))
    return (
        a.scheme != b.scheme
        and (a.hostname or "") == (b.hostname or "")
        and (a.path or "/") == (b.path or "/")
        and a.query == b.query
    )


def _location(v: str) -> str:
    """A redirect recorded from http to http keeps the scheme it is requested on: the same URL on
    http, https when a browser upgraded the request (HSTS), as synthesized bodies do (synth.ref)."""
    return v[5:] if v[:7].lower() == "http://" else v


def _wait_ms(o) -> float:
    w = o.extras.get("wait_ms")
    return float(w) if isinstance(w, (int, float)) and w > 0 else 0.0
