"""Hand-made recordings of other tools, written by their documented structure (docs/formats.md),
not by pltlab's exporters: Mahimahi record folders (protobuf RequestResponse files, by the schema
of archive/mahimahi.py) and Web Page Replay archives (gzipped JSON of Go-serialized messages)."""

from __future__ import annotations

import base64
import gzip
import json
import os

from pltlab.archive.mahimahi import HTTPS, RequestResponse

UA = "Mozilla/5.0 (X11; Linux x86_64) HandMade/1.0"
HTML = (
    b'<!doctype html><html><head><link rel="stylesheet" href="/a.css"></head><body>'
    b'<script src="https://cdn.b.test/x.js"></script><img src="/logo.png">hello</body></html>'
)
CSS = b"body { color: #123; background: url(/logo.png) }\n" * 40
JS = b"fetch('/data.json'); fetch('/data.json');\n"
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 3
CSS_GZ = gzip.compress(CSS, mtime=0)  # a recorded encoding: kept byte for byte
JSON_BODIES = (b'{"n": 1}', b'{"n": 2}')  # two responses for one URL
DOC = "http://www.a.test/"  # the typed URL, redirected to https


def chunked(body: bytes, size: int = 40) -> bytes:
    """``body`` in chunks of ``size`` bytes (one with an extension), as a server frames it."""
    out = b""
    for i in range(0, len(body), size):
        part = body[i : i + size]
        ext = b";x=1" if i == 0 else b""
        out += f"{len(part):x}".encode() + ext + b"\r\n" + part + b"\r\n"
    return out + b"0\r\n\r\n"


def site() -> list[dict]:
    """The hand-made page: a redirect (http -> https), a chunked HTML document, a gzipped style
    sheet, a cross-origin script (Referer: the origin alone), an image, two responses for one URL."""
    nav = [("Accept", "text/html,*/*;q=0.8"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Site", "none")]

    def sub(referer="https://www.a.test/"):
        return [("Referer", referer), ("Sec-Fetch-Dest", "empty"), ("Sec-Fetch-Site", "same-origin")]

    return [
        dict(
            url=DOC,
            ip="192.0.2.10",
            headers=nav,
            status="HTTP/1.1 301 Moved Permanently",
            resp=[("Location", "https://www.a.test/"), ("Content-Length", "0")],
            body=b"",
        ),
        dict(
            url="https://www.a.test/",
            ip="192.0.2.10",
            headers=nav,
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "text/html; charset=utf-8"), ("Transfer-Encoding", "chunked")],
            body=chunked(HTML),
        ),
        dict(
            url="https://www.a.test/a.css",
            ip="192.0.2.10",
            headers=sub(),
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "text/css"), ("Content-Encoding", "gzip"), ("Content-Length", str(len(CSS_GZ)))],
            body=CSS_GZ,
        ),
        dict(
            url="https://cdn.b.test/x.js",
            ip="192.0.2.20",
            headers=[("Referer", "https://www.a.test/"), ("Sec-Fetch-Dest", "script")],
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "application/javascript"), ("Content-Length", str(len(JS)))],
            body=JS,
        ),
        dict(
            url="https://www.a.test/logo.png",
            ip="192.0.2.10",
            headers=sub("https://www.a.test/a.css"),
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "image/png"), ("Content-Length", str(len(PNG)))],
            body=PNG,
        ),
    ] + [
        dict(
            url="https://www.a.test/data.json",
            ip="192.0.2.10",
            headers=sub("https://cdn.b.test/x.js"),
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "application/json"), ("Content-Length", str(len(b)))],
            body=b,
        )
        for b in JSON_BODIES
    ]


def _host_target(url: str) -> tuple[str, str, str, int]:
    scheme, rest = url.split("://", 1)
    host, _, path = rest.partition("/")
    return scheme, host, "/" + path, 443 if scheme == "https" else 80


# ---- Mahimahi --------------------------------------------------------------------------------


def mm_record(folder: str, name: str, r: dict, ua: str = UA) -> str:
    """One RequestResponse file, as Mahimahi's record shell writes it."""
    scheme, host, target, port = _host_target(r["url"])
    rr = RequestResponse(ip=r["ip"], port=port, scheme=HTTPS if scheme == "https" else 1)
    rr.request.first_line = f"{r.get('method', 'GET')} {target} HTTP/1.1".encode()
    for k, v in [("Host", host), ("User-Agent", ua), *r["headers"]]:
        rr.request.header.add(key=k.encode(), value=v.encode())
    rr.request.body = r.get("request_body", b"")
    rr.response.first_line = r["status"].encode()
    for k, v in r["resp"]:
        rr.response.header.add(key=k.encode(), value=v.encode())
    rr.response.body = r["body"]
    path = os.path.join(folder, name)
    with open(path, "wb") as f:
        f.write(rr.SerializeToString())
    return path


def mm_folder(folder: str, records: list[dict] | None = None) -> str:
    """A record folder of ``records`` (default: site()), named save.XXXXXX in a shuffled order."""
    os.makedirs(folder, exist_ok=True)
    names = ["save.q3ZxA1", "save.B7kPz0", "save.aa01Qx", "save.Zt9mN2", "save.0pLk4r", "save.Mm5Ee8", "save.x1Y2z3"]
    for i, r in enumerate(records if records is not None else site()):
        mm_record(folder, names[i] if i < len(names) else f"save.n{i:05d}", r)
    return folder


# ---- Web Page Replay ------------------------------------------------------------------------


def go_request(r: dict, ua: str = UA) -> bytes:
    """A request as Go's Request.Write serializes it (Host first, then the headers)."""
    _, host, target, _ = _host_target(r["url"])
    head = f"{r.get('method', 'GET')} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {ua}\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in r["headers"]) + "\r\n"
    return head.encode() + r.get("request_body", b"")


def go_response(r: dict) -> bytes:
    head = r["status"] + "\r\n" + "".join(f"{k}: {v}\r\n" for k, v in r["resp"]) + "\r\n"
    return head.encode() + r["body"]


def wprgo(path: str, records: list[dict], protocols: dict | None = None, certs: dict | None = None, **extra) -> str:
    """A .wprgo archive: gzipped JSON, requests per host and absolute URL, Go's []byte as base64."""
    reqs: dict = {}
    for r in records:
        _, host, _, _ = _host_target(r["url"])
        entry = {
            "SerializedRequest": base64.b64encode(go_request(r)).decode(),
            "SerializedResponse": base64.b64encode(go_response(r)).decode() if r.get("status") else "",
            "LastServedSessionId": 0,
        }
        reqs.setdefault(host, {}).setdefault(r["url"], []).append(entry)
    doc = {
        "Requests": reqs,
        "Certs": {h: base64.b64encode(der).decode() for h, der in (certs or {}).items()},
        "NegotiatedProtocol": protocols or {},
        **extra,
    }
    with open(path, "wb") as f:
        f.write(gzip.compress(json.dumps(doc).encode()))
    return path
