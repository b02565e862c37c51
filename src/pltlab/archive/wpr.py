"""Web Page Replay archives (.wprgo) in and out (docs/formats.md "Web Page Replay archives").

A .wprgo file is gzipped JSON of Web Page Replay's `Archive` (catapult's
web_page_replay_go/src/webpagereplay/archive.go), keys as Go writes them:

- `Requests`: host -> absolute URL -> list of `{"SerializedRequest", "SerializedResponse",
  "LastServedSessionId"}`, the two messages base64 (Go's []byte) of the HTTP/1.1 serialization Go
  writes (`Request.Write`, `Response.Write`: first line, headers, blank line, body framed by
  Content-Length or chunked, else up to the end); an empty response: the request failed.
- `Certs`: host -> DER certificate (base64) that replay presents, re-signed by its root;
- `NegotiatedProtocol`: host -> ALPN ("h2", "http/1.1"; absent: http/1.1);
- newer fields: `RemoteAddresses` (host -> server address), `DeterministicTimeSeedMs` (the
  time deterministic.js starts its clock at), `ServeResponseInChronologicalSequence`,
  `CurrentSessionId`.

In: one page per navigation (archive.exchanges: a recording of several stories holds several),
objects in the archive's order (Go writes map keys sorted), bodies as on the wire, each host's
protocol as negotiated, addresses where recorded, the certificates kept in the page's extras
(`wpr_certs`) for an export, the time seed as the page's start. Out: every page of the export in
one archive, as `wpr replay` reads it: the recorded certificate of each https host, else a
template one (self-signed for the host name: replay re-signs it with its own root)."""

from __future__ import annotations

import base64
import binascii
import datetime
import gzip
import json
import os
import zlib
from urllib.parse import urlsplit

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pltlab import files
from pltlab.archive import exchanges, httpmsg, mahimahi, repairs, synth, wire
from pltlab.archive.entries import parse_time, protocol_name
from pltlab.archive.har import parse_json
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.units import show

WHAT = "Web Page Replay archive"
CERTS_KEY = "wpr_certs"  # Page.extras: host -> DER certificate (base64) as recorded
EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)


def read(path: str) -> dict:
    """The archive's JSON document, its shape checked; one PltError naming the file otherwise."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    try:
        raw = gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise PltError(f"{path}: not a {WHAT} (gzipped JSON): {e}") from None
    doc = parse_json(raw, path, WHAT)
    if not isinstance(doc, dict) or not isinstance(doc.get("Requests"), dict):
        raise PltError(f"{path}: not a {WHAT} (no Requests object)")
    for key in ("Certs", "NegotiatedProtocol", "RemoteAddresses"):
        v = doc.get(key)
        if v is not None and not (isinstance(v, dict) and all(isinstance(x, str) for x in v.values())):
            raise PltError(f"{path}: {key} is not an object of strings")
    return doc


def _b64(v, where: str, field: str) -> bytes:
    if v is None or v == "":
        return b""
    try:
        if not isinstance(v, str):
            raise ValueError
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise PltError(f"{where}: {field} is not base64 (a serialized HTTP message)") from None


def _address(v: str) -> str:
    """A recorded address ("1.2.3.4", "1.2.3.4:443", "[::1]:443") without its port."""
    v = v.strip()
    if v.startswith("["):
        return v[1:].split("]", 1)[0]
    return v.rsplit(":", 1)[0] if v.count(":") == 1 else v


def _exchange(doc: dict, host: str, url: str, n: int, ar, path: str) -> exchanges.Exchange:
    where = f"{path}: {show(url)} (request {n + 1})"
    if not isinstance(ar, dict):
        raise PltError(f"{where}: not an object")
    req_raw = _b64(ar.get("SerializedRequest"), where, "SerializedRequest")
    resp_raw = _b64(ar.get("SerializedResponse"), where, "SerializedResponse")
    try:
        first, req_headers, rest = httpmsg.split_message(req_raw)
        method, _, _ = httpmsg.request_line(first)
    except ValueError as e:
        raise PltError(f"{where}: SerializedRequest: {e}") from None
    req_body = httpmsg.dechunk(rest)[0] if httpmsg.is_chunked(req_headers) else rest
    cl = httpmsg.header(req_headers, "content-length")
    if cl is not None and cl.strip().isdigit():
        req_body = req_body[: int(cl.strip())]
    status, resp_headers, body = None, [], b""
    if resp_raw:
        try:
            status, resp_headers, body = httpmsg.split_message(resp_raw)
        except ValueError as e:
            raise PltError(f"{where}: SerializedResponse: {e}") from None
    name = (urlsplit(url).hostname or host).lower()
    negotiated = (doc.get("NegotiatedProtocol") or {}).get(name) or (doc.get("NegotiatedProtocol") or {}).get(host)
    remote = (doc.get("RemoteAddresses") or {}).get(name) or (doc.get("RemoteAddresses") or {}).get(host) or ""
    return exchanges.Exchange(
        where=where,
        url=url,
        method=method,
        request_headers=req_headers,
        request_body=req_body,
        status_line=status,
        response_headers=resp_headers,
        response_body=body,
        protocol=protocol_name(negotiated) if negotiated and url.lower().startswith("https:") else "",
        ip=_address(remote),
    )


def load(path: str, url: str | None = None) -> list[Page]:
    """Every page of the archive (one per navigation; ``url``: one page with that document)."""
    doc = read(path)
    objs, counts, dropped = [], {}, repairs.Counts()
    for host, by_url in doc["Requests"].items():
        if not isinstance(by_url, dict):
            raise PltError(f"{path}: Requests[{show(host)}] is not an object of URLs")
        for u, recorded in by_url.items():
            if not isinstance(recorded, list):
                raise PltError(f"{path}: {show(u)}: not a list of requests")
            for n, ar in enumerate(recorded):
                c = repairs.Counts()
                o = exchanges.to_obj(_exchange(doc, host, u, n, ar, path), c)
                if o is None:
                    dropped.update(c)
                    continue
                objs.append(o)
                counts[id(o)] = c
    extras = {}
    if doc.get("Certs"):
        extras[CERTS_KEY] = dict(doc["Certs"])
    started = exchanges.EPOCH_ISO
    seed = doc.get("DeterministicTimeSeedMs")
    if isinstance(seed, int) and not isinstance(seed, bool) and 0 < seed < 253402300799000:  # before year 10000
        t = EPOCH + datetime.timedelta(milliseconds=seed)
        started = t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"
    return exchanges.pages(objs, counts, dropped, path, named=url, extras=extras, started=started)


# ---- writing ---------------------------------------------------------------------------------

_KEY = ec.generate_private_key(ec.SECP256R1())  # template certificates only: replay re-signs them


def template_cert(host: str) -> bytes:
    """A self-signed certificate for ``host`` (DER): what replay copies names from."""
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host[:64] or "pltlab")])
    start = datetime.datetime(2020, 1, 1, tzinfo=datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(_KEY.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + datetime.timedelta(days=3650 * 3))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(_KEY, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.DER)


def _serialized(first: str, headers, body: bytes) -> bytes:
    head = first + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers) + "\r\n"
    return httpmsg.to_bytes(head) + body


def _seed_ms(page: Page) -> int:
    t = parse_time(page.started, f"{page.url}: start")
    return int((t - EPOCH).total_seconds() * 1000) if t else 0


def archive_of(pages: list[Page], user_agent: str | None = None) -> tuple[dict, dict]:
    """The archive's JSON document of ``pages`` and a report of what was made up."""
    reqs: dict[str, dict[str, list]] = {}
    certs: dict[str, str] = {}
    protos: dict[str, str] = {}
    remotes: dict[str, str] = {}
    made = 0
    for page in pages:
        st = synth.Structure(page)
        for host, der in (page.extras.get(CERTS_KEY) or {}).items():
            certs.setdefault(host, der)
        for o in page.objects:
            netloc = urlsplit(o.url).netloc.lower()
            fit = wire.for_object(page, o, st)
            rh = [(k, v) for k, v in mahimahi.request_headers(page, o, user_agent) if k.lower() != "host"]
            rh = [("Host", urlsplit(o.url).netloc)] + rh
            if o.request_body:
                rh = [(k, v) for k, v in rh if k.lower() not in ("content-length", "transfer-encoding")]
                rh.append(("Content-Length", str(len(o.request_body))))
            request = _serialized(f"{o.method} {mahimahi.target(o.url)} HTTP/1.1", rh, o.request_body or b"")
            headers, body = mahimahi.response_parts(o, fit)
            version = "HTTP/2.0" if o.protocol == "h2" else "HTTP/1.1"
            reason = o.status_text or mahimahi.REASONS.get(o.status, "")
            response = _serialized(f"{version} {o.status} {reason}".rstrip(), headers, body)
            url = o.url.split("#", 1)[0]
            reqs.setdefault(netloc, {}).setdefault(url, []).append(
                {
                    "SerializedRequest": base64.b64encode(request).decode("ascii"),
                    "SerializedResponse": base64.b64encode(response).decode("ascii"),
                    "LastServedSessionId": 0,
                }
            )
            if o.scheme == "https":
                if o.host not in certs:
                    certs[o.host] = base64.b64encode(template_cert(o.host)).decode("ascii")
                    made += 1
                if o.protocol in ("h2", "http/1.1"):
                    protos[o.host] = "h2" if o.protocol == "h2" or protos.get(o.host) == "h2" else "http/1.1"
            if o.server_ip:
                remotes.setdefault(o.host, o.server_ip)
    doc = {
        "Requests": reqs,
        "Certs": certs,
        "NegotiatedProtocol": protos,
        "RemoteAddresses": remotes,
        "DeterministicTimeSeedMs": _seed_ms(pages[0]) if pages else 0,
        # Repeated URLs answered in recorded order, as pltlab's replay does.
        "ServeResponseInChronologicalSequence": any(len(v) > 1 for m in reqs.values() for v in m.values()),
        "CurrentSessionId": 0,
    }
    return doc, {"template_certs": made}


def write(pages: list[Page], out: str, user_agent: str | None = None) -> dict:
    """``pages`` as one .wprgo archive at ``out`` (written whole or not at all)."""
    if not pages:
        raise PltError("no page to export")
    doc, made = archive_of(pages, user_agent)
    # Level 1: base64 of bodies (often encoded already) gains little from more, at 5 x the time.
    data = gzip.compress(json.dumps(doc, separators=(",", ":")).encode(), compresslevel=1)
    try:
        with files.replaced(out) as tmp, open(tmp, "wb") as f:
            f.write(data)
    except OSError as e:
        raise PltError(f"{out}: cannot write: {e.strerror or e}") from None
    notes = []
    if made["template_certs"]:
        n = made["template_certs"]
        notes.append(f"{n} https host{'' if n == 1 else 's'} recorded without a certificate: a template one written")
    n = sum(len(p.objects) for p in pages)
    return {"page": pages[0].url, "pages": len(pages), "files": n, "out": os.path.abspath(out), "notes": notes}
