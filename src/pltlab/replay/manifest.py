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


# The manifest's parts, as rust/src/replay/manifest.rs reads them (`pltlab-dp schema manifest`);
# ABSENT: not written, the server's default.


@dataclass(kw_only=True)
class Listen:
    ip: str
    port: int
    tls: bool
    alpn: list[str] = ABSENT  # TLS addresses: the ALPN protocols offered, in preference order


@dataclass(kw_only=True)
class TlsFiles:
    cert: str
    key: str
    max_early_data: int = ABSENT


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
) -> dict:
    """Manifest serving every object of ``pages``; bodies (recorded or synthesized) go into one
    file in ``workdir``. With ``tls``, every origin also answers https on 443: browsers upgrade
    HSTS-preloaded hosts (wikipedia.org, ...) to https whatever the recorded scheme, and the
    sub-resources of an upgraded page follow it (scheme-relative references, see synth.ref; a
    recorded ``Location: http://...`` of an http response is served scheme-relative).
    ``protocol`` (the knob): what each address's https offers (``alpn``, see address_protocols);
    ``h2_priority`` (knob server_priority): how h2 connections order their responses;
    ``request_timeout_s`` (knob server_timeout_s): a connection's TLS handshake and first request
    head must be in this long after it connected (docs/robustness.md). ``tls``: the certificate and
    key (a TlsFiles or a table of its fields). Returns the manifest as JSON data."""
    if isinstance(tls, dict):
        tls = TlsFiles(**tls)
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
                headers = [
                    [k, _location(v) if k.lower() == "location" and o.scheme == "http" else v]
                    for k, v in o.headers
                    if k.lower() not in _DROP and (k.lower() != "content-encoding" or fit.encoding)
                ]
                if o.mime and not any(k.lower() == "content-type" for k, _ in headers):
                    headers.append(["Content-Type", o.mime])
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
    offered = address_protocols(pages, host_ips, protocol)
    m = Manifest(
        listen=[_listen(ip, port, t, offered[ip]) for ip, port, t in sorted(listen)],
        tls=tls,
        tfo_queue=tfo_queue,
        think_time=think_time,
        h2_priority=h2_priority,
        request_timeout_ms=request_timeout_s * 1000,
        responses=responses,
        stats=os.path.join(workdir, "replay-stats.json"),
    )
    return document(m)


def address_protocols(pages: list[Page], host_ips: dict[str, str], protocol: str) -> dict[str, protocols.Protocol]:
    """What each replay address's https offers (pltlab.protocols): the knob's protocol
    everywhere, or for "recorded" the protocol the pages recorded for the hosts it serves (as the
    table replays it; of several, the later row), HTTP/1.1 where nothing says otherwise."""
    if protocol != protocols.RECORDED:
        one = protocols.get(protocol)
        return {ip: one for ip in host_ips.values()}
    out = {ip: protocols.FALLBACK for ip in host_ips.values()}
    for p in pages:
        for o in p.objects:
            ip = host_ips.get(o.host)
            if ip is not None:
                out[ip] = protocols.preferred(out[ip], protocols.of_recorded(o.protocol))
    return out


def offered(manifest: dict) -> dict[str, protocols.Protocol]:
    """What each address of a built manifest offers over https (its ALPN list, preferred first)."""
    return {e["ip"]: protocols.by_alpn(e["alpn"][0]) or protocols.FALLBACK for e in manifest["listen"] if e.get("alpn")}


def _listen(ip: str, port: int, tls: bool, proto: protocols.Protocol) -> Listen:
    if not tls:
        return Listen(ip=ip, port=port, tls=False)
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
