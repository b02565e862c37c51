"""Mahimahi record folders in and out (docs/formats.md "Mahimahi record folders").

A record folder (what `mm-webrecord DIR` writes) holds one file per request, `save.XXXXXX`
(mkstemp's six letters and digits), each one protobuf `RequestResponse` message of Mahimahi's
`http_record.proto`: the server's ip and port, the scheme, and the request and response each as
their first line, header lines (key, value) and body as received (chunk framing included). The
schema is declared here (`SCHEMA`, the same field numbers and types) and read with the protobuf
library: no generated code, no build step.

In: every request of a folder is an object of one page (archive.exchanges: bodies kept as on the
wire, the document found by its Referers or named with `--url`, repairs once per kind), each
object keeping its server's recorded address (`Obj.server_ip`) and its request headers.
Out: one file per object, `save.NNNNNN` in page order, which `mm-webreplay DIR` serves: bodies as
pltlab's replay sends them (recorded wire bytes, else encoded or synthesized by archive.wire),
framed by Content-Length (or chunked where the recording was), and the request's headers as
recorded (Mahimahi's replay matches the Host and User-Agent headers: `--user-agent` gives the
browser's where the recording has none)."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from urllib.parse import urlsplit

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import DecodeError

from pltlab.archive import exchanges, httpmsg, repairs, synth, wire
from pltlab.archive.model import DEFAULT_PORTS, Obj, Page
from pltlab.errors import PltError

RECORD_NAME = re.compile(r"save\.[A-Za-z0-9]{6}")
MAX_RECORD_BYTES = 1 << 31  # one file: a message of the protobuf library's largest size
HTTP, HTTPS = 1, 2  # RequestResponse.Scheme


def _schema() -> descriptor_pb2.FileDescriptorProto:
    """Mahimahi's http_record.proto (package MahimahiProtobufs, proto2) as a descriptor."""
    F = descriptor_pb2.FieldDescriptorProto
    f = descriptor_pb2.FileDescriptorProto(name="pltlab_mahimahi_http_record.proto", package="MahimahiProtobufs")
    f.syntax = "proto2"

    def message(name: str, *fields) -> None:
        m = f.message_type.add(name=name)
        for fname, number, ftype, label, type_name in fields:
            fd = m.field.add(name=fname, number=number, type=ftype, label=label)
            if type_name:
                fd.type_name = type_name
        if name == "RequestResponse":
            e = m.enum_type.add(name="Scheme")
            e.value.add(name="HTTP", number=HTTP)
            e.value.add(name="HTTPS", number=HTTPS)

    opt, rep = F.LABEL_OPTIONAL, F.LABEL_REPEATED
    message(
        "HTTPMessage",
        ("first_line", 1, F.TYPE_BYTES, opt, ""),
        ("header", 2, F.TYPE_MESSAGE, rep, ".MahimahiProtobufs.HTTPHeader"),
        ("body", 3, F.TYPE_BYTES, opt, ""),
    )
    message("HTTPHeader", ("key", 1, F.TYPE_BYTES, opt, ""), ("value", 2, F.TYPE_BYTES, opt, ""))
    message(
        "RequestResponse",
        ("ip", 1, F.TYPE_STRING, opt, ""),
        ("port", 2, F.TYPE_UINT32, opt, ""),
        ("scheme", 3, F.TYPE_ENUM, opt, ".MahimahiProtobufs.RequestResponse.Scheme"),
        ("request", 4, F.TYPE_MESSAGE, opt, ".MahimahiProtobufs.HTTPMessage"),
        ("response", 5, F.TYPE_MESSAGE, opt, ".MahimahiProtobufs.HTTPMessage"),
    )
    return f


SCHEMA = _schema()
_POOL = descriptor_pool.DescriptorPool()
_POOL.Add(SCHEMA)
RequestResponse = message_factory.GetMessageClass(_POOL.FindMessageTypeByName("MahimahiProtobufs.RequestResponse"))


# ---- reading ---------------------------------------------------------------------------------


def _files(folder: str) -> list[str] | None:
    """The folder's file names, sorted (hidden files left out); None if it holds a folder."""
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError:
        return None
    names = []
    for e in entries:
        if e.name.startswith("."):
            continue
        if e.is_dir():
            return None
        names.append(e.name)
    return names


def parse(path: str) -> RequestResponse:
    """One record file; one PltError naming it when it is no whole RequestResponse message."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    if len(raw) > MAX_RECORD_BYTES:
        raise PltError(f"{path}: larger than a Mahimahi record can be ({MAX_RECORD_BYTES} bytes)")
    rr = RequestResponse()
    try:
        rr.ParseFromString(raw)
    except DecodeError:
        raise PltError(
            f"{path}: not a Mahimahi record (protobuf RequestResponse): truncated, or another kind of file"
        ) from None
    if not (rr.HasField("request") and rr.request.first_line and rr.HasField("response")):
        what = "no request" if not rr.request.first_line else "no response"
        raise PltError(f"{path}: not a whole Mahimahi record ({what}): truncated, or another kind of file")
    return rr


def claims(folder: str, listed_elsewhere: Callable[[str], bool]) -> bool:
    """A folder of files only, none of another format's, with a record file name (save.XXXXXX)
    or whose first file is a RequestResponse."""
    names = _files(folder)
    if not names or any(listed_elsewhere(os.path.join(folder, n)) for n in names):
        return False
    if any(RECORD_NAME.fullmatch(n) for n in names):
        return True
    try:
        parse(os.path.join(folder, names[0]))
    except PltError:
        return False
    return True


def _exchange(path: str, rr) -> tuple[exchanges.Exchange, repairs.Counts]:
    try:
        method, target, _ = httpmsg.request_line(httpmsg.latin1(rr.request.first_line))
    except ValueError as e:
        raise PltError(f"{path}: {e}") from None
    req_headers = [(httpmsg.latin1(h.key), httpmsg.latin1(h.value)) for h in rr.request.header]
    counts = repairs.Counts()
    port = rr.port if rr.HasField("port") else None
    if rr.HasField("scheme"):
        scheme = "https" if rr.scheme == HTTPS else "http"
    else:
        scheme = "https" if port == 443 else "http"
    if target.lower().startswith(("http://", "https://")):
        url = target  # absolute form (a request to a proxy)
    else:
        host = httpmsg.header(req_headers, "host")
        if not host:
            counts.add(repairs.NO_HOST)
            host = f"[{rr.ip}]" if ":" in rr.ip else rr.ip
            if not host:
                raise PltError(f"{path}: no Host header and no server address: the request's URL is unknown")
        if port and ":" not in host.rsplit("]", 1)[-1] and port != DEFAULT_PORTS[scheme]:
            host = f"{host}:{port}"
        url = f"{scheme}://{host}{target if target.startswith('/') else '/' + target}"
    return exchanges.Exchange(
        where=path,
        url=url,
        method=method,
        request_headers=req_headers,
        request_body=_request_body(req_headers, rr.request.body),
        status_line=httpmsg.latin1(rr.response.first_line) if rr.response.first_line else None,
        response_headers=[(httpmsg.latin1(h.key), httpmsg.latin1(h.value)) for h in rr.response.header],
        response_body=rr.response.body,
        ip=rr.ip,
    ), counts


def _request_body(headers, body: bytes) -> bytes:
    return httpmsg.dechunk(body)[0] if httpmsg.is_chunked(headers) else body


def load(folder: str, url: str | None = None) -> list[Page]:
    """The folder's page: every record an object of it (``url``: its document, else found)."""
    names = _files(folder)
    if names is None:
        raise PltError(f"{folder}: not a Mahimahi record folder (it holds folders)")
    if not names:
        raise PltError(f"{folder}: no record file in this folder")
    objs, counts, dropped = [], {}, repairs.Counts()
    for n in names:
        path = os.path.join(folder, n)
        x, c = _exchange(path, parse(path))
        o = exchanges.to_obj(x, c)
        if o is None:
            dropped.update(c)
            continue
        objs.append(o)
        counts[id(o)] = c
    return exchanges.pages(objs, counts, dropped, folder.rstrip("/") or folder, named=url, one=True)


# ---- writing ---------------------------------------------------------------------------------

_FRAMING = ("content-length", "transfer-encoding")
REASONS = {200: "OK", 204: "No Content", 301: "Moved Permanently", 302: "Found", 304: "Not Modified", 404: "Not Found"}
SPARE_NET = "100.64"  # addresses for hosts with none recorded: 100.64.0.1, ... (shared address space)


def target(url: str) -> str:
    """The request target of a URL (origin form: path and query)."""
    s = urlsplit(url)
    return (s.path or "/") + (f"?{s.query}" if s.query else "")


def request_headers(page: Page, o: Obj, user_agent: str | None) -> list[tuple[str, str]]:
    """The request's headers as recorded (Host as its URL says); for a page recorded without
    them, Host, the browser's User-Agent if given, an Accept for the document and a Referer (the
    object's initiator) for the others, so that an import finds the document again."""
    netloc = urlsplit(o.url).netloc
    recorded = o.extras.get(exchanges.REQUEST_HEADERS)
    if recorded:
        hs = [(k, netloc if k.lower() == "host" else v) for k, v in recorded]
        if not any(k.lower() == "host" for k, _ in hs):
            hs.insert(0, ("Host", netloc))
    else:
        hs = [("Host", netloc)]
        if o is page.objects[0]:
            hs.append(("Accept", "text/html,application/xhtml+xml,*/*;q=0.8"))
        else:
            hs.append(("Referer", o.initiator or page.url))
    if user_agent is not None:
        hs = [(k, v) for k, v in hs if k.lower() != "user-agent"] + [("User-Agent", user_agent)]
    return hs


def response_parts(o: Obj, fit: wire.Fit) -> tuple[list[tuple[str, str]], bytes]:
    """The response's headers and body bytes as an HTTP/1.1 server sends them: the body as
    pltlab's replay sends it, framed by Content-Length, or chunked where the recording was; a
    Content-Encoding the replay does not apply (archive.wire) is dropped."""
    no_body = 100 <= o.status < 200 or o.status in wire.NO_BODY or o.method.upper() == "HEAD"
    chunked = httpmsg.is_chunked(o.headers) and not no_body
    hs, framed = [], False
    for k, v in o.headers:
        low = k.lower()
        if low == "content-encoding" and not fit.encoding:
            continue
        if low in _FRAMING and not no_body:
            if not framed:  # in the place and spelling recorded where it is the same header
                if chunked:
                    hs.append((k, v) if low == "transfer-encoding" else ("Transfer-Encoding", "chunked"))
                else:
                    hs.append((k if low == "content-length" else "Content-Length", str(len(fit.wire))))
                framed = True
            continue
        hs.append((k, v))
    if not framed and not no_body:
        hs.append(("Transfer-Encoding", "chunked") if chunked else ("Content-Length", str(len(fit.wire))))
    return hs, httpmsg.chunk(fit.wire) if chunked else fit.wire


def addresses(pages: list[Page]) -> tuple[dict[str, str], int]:
    """host -> address of its responses where recorded, and the hosts given one of SPARE_NET."""
    ips: dict[str, str] = {}
    for p in pages:
        for o in p.objects:
            if o.server_ip and o.host not in ips:
                ips[o.host] = o.server_ip
    spare = 0
    for p in pages:
        for o in p.objects:
            if o.host not in ips:
                spare += 1
                ips[o.host] = f"{SPARE_NET}.{spare // 254}.{spare % 254 + 1}"
    return ips, spare


def _message(msg, first_line: str, headers, body: bytes) -> None:
    msg.first_line = httpmsg.to_bytes(first_line)
    for k, v in headers:
        h = msg.header.add()
        h.key, h.value = httpmsg.to_bytes(k), httpmsg.to_bytes(v)
    msg.body = body


def record(page: Page, o: Obj, fit: wire.Fit, ip: str, user_agent: str | None) -> bytes:
    """One object as a serialized RequestResponse."""
    rr = RequestResponse(ip=o.server_ip or ip, port=o.port, scheme=HTTPS if o.scheme == "https" else HTTP)
    _message(
        rr.request, f"{o.method} {target(o.url)} HTTP/1.1", request_headers(page, o, user_agent), o.request_body or b""
    )
    headers, body = response_parts(o, fit)
    reason = o.status_text or REASONS.get(o.status, "")
    _message(rr.response, f"HTTP/1.1 {o.status} {reason}".rstrip(), headers, body)
    return rr.SerializeToString()


def fresh_folder(out: str) -> str:
    """A new folder beside ``out`` to write into, renamed to ``out`` when whole (``commit``)."""
    out = os.path.abspath(out)
    if os.path.exists(out) and not (os.path.isdir(out) and not os.listdir(out)):
        raise PltError(f"{out}: exists and is not an empty folder")
    parent = os.path.dirname(out)
    try:
        os.makedirs(parent, exist_ok=True)
        return tempfile.mkdtemp(prefix=".pltlab-export-", dir=parent)
    except OSError as e:
        raise PltError(f"{out}: cannot write here: {e.strerror or e}") from None


def commit(tmp: str, out: str) -> None:
    out = os.path.abspath(out)
    try:
        if os.path.isdir(out):
            os.rmdir(out)
        os.rename(tmp, out)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PltError(f"{out}: cannot write: {e.strerror or e}") from None


def write(pages: list[Page], out: str, user_agent: str | None = None) -> dict:
    """One page as a Mahimahi record folder ``out`` (new, or empty); nothing left on failure."""
    if len(pages) != 1:
        raise PltError(f"a Mahimahi record folder holds one page; {len(pages)} given (name one page)")
    page = pages[0]
    if len(page.objects) > 999_999:
        raise PltError(f"{page.url}: {len(page.objects)} objects: a folder holds at most 999,999 records")
    ips, spare = addresses(pages)
    tmp = fresh_folder(out)
    st = synth.Structure(page)
    no_ua = 0
    try:
        for i, o in enumerate(page.objects):
            fit = wire.for_object(page, o, st)
            no_ua += user_agent is None and not exchanges.request_header(o, "user-agent")
            with open(os.path.join(tmp, f"save.{i:06d}"), "wb") as f:
                f.write(record(page, o, fit, ips[o.host], user_agent))
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise PltError(f"{out}: cannot write: {e.strerror or e}") from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    commit(tmp, out)
    notes = []
    if spare:
        hosts = "1 host" if spare == 1 else f"{spare} hosts"
        notes.append(f"{hosts} recorded without a server address: given {SPARE_NET}.x.y addresses")
    if no_ua:
        notes.append(
            f"{no_ua} requests carry no User-Agent: Mahimahi's replay answers them only to a client that sends "
            "none (give the browser's with --user-agent)"
        )
    return {"page": page.url, "files": len(page.objects), "out": os.path.abspath(out), "notes": notes}
