"""One HAR entry as an Obj: what each exporter records, and the repairs that make it replayable
(counted per kind in a repairs.Counts; sizes by the rules of pltlab.archive.sizes)."""

from __future__ import annotations

import base64
import binascii
import codecs
import functools
import math
import re
from datetime import UTC, datetime
from urllib.parse import urljoin

from pltlab.archive import netinfer, repairs, sizes, urls
from pltlab.archive.calibration import KEY as COMPUTE_KEY
from pltlab.archive.calibration import check_delay
from pltlab.archive.model import Obj
from pltlab.errors import PltError
from pltlab.units import MAX_OBJECT_BYTES, show

HTTP_VERSION = {"http/1.0": "HTTP/1.0", "http/1.1": "HTTP/1.1", "h2": "h2", "h3": "h3", "spdy": "spdy"}
_TRUNCATED = re.compile(r"\[\s*(\.\.\.\s*)?((response|body|content)\s+)?truncated", re.I)
_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.I)
_METHOD = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]{1,32}")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
MAX_NESTING = 64  # levels of a value kept as recorded (our `_pltlab` fields)
MAX_MS = 1e12  # times kept as recorded (ms, about 31 years either way)
# Size fields as exporters write them (bytes; -1: not recorded), per part of an entry.
SIZE_FIELDS = {
    "response": ("bodySize", "headersSize", "_transferSize"),
    "content": ("size", "compression"),
    "entry": ("_objectSize", "_objectSizeUncompressed", "_bytesIn"),
}


def text(v, where: str, field: str, default: str = "") -> str:
    """A recorded text field: a string (a number as written); absent: `default`; else an error."""
    if v is None:
        return default
    if isinstance(v, str):
        return v
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return str(v)
    raise PltError(f"{where}: {field} {show(v)} is not a string")


def number(v) -> bool:
    """A finite JSON number (not a boolean)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def shallow(v, where: str, field: str):
    """`v` when it nests at most MAX_NESTING levels (it is kept and written back as is)."""
    level, depth = [v], 0
    while level:
        depth += 1
        if depth > MAX_NESTING:
            raise PltError(f"{where}: {field} nested more than {MAX_NESTING} levels deep")
        nxt = []
        for x in level:
            if isinstance(x, dict):
                nxt += [y for y in x.values() if isinstance(y, (dict, list))]
            elif isinstance(x, list):
                nxt += [y for y in x if isinstance(y, (dict, list))]
        level = nxt
    return v


def _size_value(v, signed: bool):
    """A recorded size as an int; "bad" when it is no whole number of bytes (or below -1)."""
    if isinstance(v, str) and v.strip() == "-1":
        return -1
    n = sizes.as_int(v)
    if n is None and isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():
        n = MAX_OBJECT_BYTES + 1  # more digits than any size
    if n is None or (n < -1 and not signed):
        return "bad"
    return n


def checked_sizes(e: dict, resp: dict, content: dict, where: str, counts: repairs.Counts) -> tuple[dict, dict, dict]:
    """The entry, response and content with every size field that is no whole number of bytes
    ("abc", -5, 1.5, true) set to None (not recorded), counted; a size above the object limit
    is an error naming the field."""
    parts = {"entry": e, "response": resp, "content": content}
    bad = False
    for part, d in parts.items():
        fixed = None
        for key in SIZE_FIELDS[part]:
            v = d.get(key)
            if v is None or (type(v) is int and -1 <= v <= MAX_OBJECT_BYTES):
                continue  # the common case, at once
            n = _size_value(v, key == "compression")
            if n == "bad":
                bad = True
                fixed = fixed if fixed is not None else dict(d)
                fixed[key] = None
            elif abs(n) > MAX_OBJECT_BYTES:
                name = key if part == "entry" else f"{part}.{key}"
                raise PltError(
                    f"{where}: {name} = {show(v)} bytes: an object is at most {MAX_OBJECT_BYTES} bytes (1 GiB)"
                )
        if fixed is not None:
            parts[part] = fixed
    counts.add(repairs.BAD_SIZE if bad else None)
    return parts["entry"], parts["response"], parts["content"]


def parse_time(s, where: str) -> datetime | None:
    if s is None or s == "":
        return None
    if not isinstance(s, str):
        raise PltError(f"{where}: invalid startedDateTime {show(s)}")
    try:
        t = datetime.fromisoformat(s.replace("Z", "+00:00"))
        return t.astimezone(UTC) if t.tzinfo else t.replace(tzinfo=UTC)
    except (ValueError, OverflowError):  # not a time, or beyond the calendar in UTC
        raise PltError(f"{where}: invalid startedDateTime {show(s)}") from None


def protocol_name(v) -> str:
    """An httpVersion / protocol as recorded -> "http/1.0", "http/1.1", "h2", "h3", "spdy" or ""."""
    if isinstance(v, str):
        return _protocol_of(v)  # an import asks up to 3 times per entry, of a few distinct values
    return _protocol_of(str(v)) if number(v) else ""


@functools.lru_cache(maxsize=256)
def _protocol_of(v: str) -> str:
    s = v.strip().lower().split()
    s = s[0] if s else ""  # WebPageTest writes "2 2" for HTTP/2
    if s.startswith("spdy"):
        return "spdy"
    if s in ("3", "http/3", "http/3.0") or s.startswith(("h3", "quic", "http/2+quic")):
        return "h3"
    if s in ("2", "2.0", "http/2", "http/2.0") or s.startswith("h2"):
        return "h2"
    if s in ("1.1", "http/1.1"):
        return "http/1.1"
    if s in ("1.0", "http/1.0", "0.9", "http/0.9"):
        return "http/1.0"
    return ""


def text_bytes(text: str, mime: str) -> bytes:
    """A HAR text body as bytes: in the MIME type's charset where it has one (the browser decoded
    the body with it), else UTF-8."""
    m = _CHARSET.search(mime or "")
    if m:
        try:
            return text.encode(codecs.lookup(m.group(1)).name)
        except (LookupError, UnicodeEncodeError):
            pass
    return text.encode("utf-8")


def body_text(body: bytes, mime: str) -> str | None:
    """The text to write for a body when text_bytes() gives the same bytes back, else None."""
    m = _CHARSET.search(mime or "")
    for cs in ([m.group(1)] if m else []) + ["utf-8"]:
        try:
            t = body.decode(codecs.lookup(cs).name)
        except (LookupError, UnicodeDecodeError):
            continue
        if text_bytes(t, mime) == body:
            return t
    return None


def _body(content: dict, mime: str, recorded: int | None, counts: repairs.Counts, where: str) -> bytes | None:
    """The recorded body when it is complete; else None (a size-only entry), counted."""
    t = content.get("text")
    if t is None:
        return None
    t = text(t, where, "content.text")
    if _TRUNCATED.search(t[-512:]):
        counts.add(repairs.TRUNCATED)
        return None
    if content.get("encoding") == "base64":
        try:
            body = base64.b64decode("".join(t.split()), validate=True)
        except (binascii.Error, ValueError):
            counts.add(repairs.BAD_BASE64)
            return None
    else:
        body = text_bytes(t, mime)
    if not body and recorded:
        return None  # an empty text for a non-empty response means "not recorded"
    if recorded and len(body) != recorded:
        counts.add(repairs.TRUNCATED if len(body) < recorded else repairs.LONGER)
        return None
    return body


def _request(req: dict, counts: repairs.Counts) -> dict:
    """Some exporters nest the request's own fields (url, method, headers) inside its postData."""
    pd = req.get("postData")
    if req.get("url") or not isinstance(pd, dict) or not isinstance(pd.get("url"), str):
        return req
    counts.add(repairs.REQUEST_IN_POSTDATA)
    own = {"mimeType", "text", "params", "encoding", "comment"}
    lifted = {k: v for k, v in pd.items() if k not in own}
    return {
        **lifted,
        **{k: v for k, v in req.items() if v is not None and k != "postData"},
        "postData": {k: v for k, v in pd.items() if k in own},
    }


def _request_body(req: dict, counts: repairs.Counts) -> bytes | None:
    pd = req.get("postData")
    if not isinstance(pd, dict) or not isinstance(pd.get("text"), str) or not pd["text"]:
        return None  # WebPageTest and others write "" when they did not keep the body
    if isinstance(pd.get("encoding"), str) and pd["encoding"].lower() == "base64":
        try:
            return base64.b64decode("".join(pd["text"].split()), validate=True)
        except (binascii.Error, ValueError):
            counts.add(repairs.BAD_REQUEST_BASE64)
            return None
    return pd["text"].encode("utf-8")


def _protocol(e: dict, req: dict, resp: dict, counts: repairs.Counts) -> str:
    for v in (e.get("_protocol"), resp.get("httpVersion"), req.get("httpVersion")):
        if p := protocol_name(v):
            return p
    hs = req.get("headers")
    names = {
        h["name"].lower()
        for h in (hs if isinstance(hs, list) else [])
        if isinstance(h, dict) and isinstance(h.get("name"), str)
    }
    if ":version" in names and ":host" in names:
        return "spdy"  # only multiplexed protocols have pseudo-headers (old Chrome said "unknown")
    if ":authority" in names or ":method" in names:
        counts.add(repairs.PROTOCOL_INFERRED)
        return "h2"
    return ""


def _from_cache(e: dict, resp: dict, status: int, recorded: int | None) -> bool:
    """Served by the recording browser's cache: a 304, an exporter's cache flag (Chrome's
    `_fromCache`, Safari's `_fetchType`), or nothing transferred for a non-empty body."""
    if status == 304 or e.get("_fromCache") or resp.get("_fromCache"):
        return True
    if isinstance(e.get("_fetchType"), str) and "cache" in e["_fetchType"].lower():
        return True
    if not (200 <= status < 300 and recorded) or sizes.is_webpagetest(e):
        return False
    ts = sizes.as_int(resp.get("_transferSize"))
    return ts == 0 or (ts is None and sizes.as_int(resp.get("bodySize")) == 0)


def _initiator(e: dict) -> tuple[str | None, str | None]:
    """(URL, type) of what the recording says caused the request; values of the wrong type
    count as not recorded."""
    init = e.get("_initiator")
    if isinstance(init, str):  # WebPageTest: the initiator's URL
        itype = e.get("_initiator_type")
        return init or None, (itype if isinstance(itype, str) and itype else None) or ("parser" if init else None)
    if not isinstance(init, dict):
        return None, None
    url = init.get("url") if isinstance(init.get("url"), str) else None
    stack = init.get("stack")
    while not url and isinstance(stack, dict):  # script initiators: innermost frame with a URL
        frames = stack.get("callFrames")
        url = next(
            (
                f["url"]
                for f in (frames if isinstance(frames, list) else [])
                if isinstance(f, dict) and isinstance(f.get("url"), str) and f["url"]
            ),
            None,
        )
        stack = stack.get("parent")
    itype = init.get("type") if isinstance(init.get("type"), str) else None
    return url or None, (None if itype == "other" and not url else itype or None)


def _status(resp: dict, where: str) -> int:
    """0 (failed in the browser) or an HTTP status 100..999 (numbers as strings too)."""
    v = resp.get("status") or 0
    if type(v) is int and 100 <= v <= 999:
        return v  # the common case, at once
    try:
        if isinstance(v, bool) or not isinstance(v, (int, float, str)) or len(str(v)) > 12:
            raise ValueError
        status = int(v)
    except (TypeError, ValueError, OverflowError):
        raise PltError(f"{where}: invalid status {show(v)}") from None
    if status != 0 and not 100 <= status <= 999:
        raise PltError(f"{where}: invalid status {show(v)}: an HTTP status is 100..999")
    return status


def _headers(v, where: str, field: str) -> list[tuple[str, str]]:
    """A recorded header list as (name, value) pairs (numbers as written)."""
    if v is None:
        return []
    if not isinstance(v, list):
        raise PltError(f"{where}: {field} is not a list")
    out = []
    for i, h in enumerate(v):
        if not isinstance(h, dict):
            raise PltError(f"{where}: {field}[{i}] is not an object")
        name, value = h.get("name"), h.get("value")
        if type(name) is not str:
            name = text(name, where, f"{field}[{i}].name")
        if type(value) is not str:
            value = text(value, where, f"{field}[{i}].value")
        out.append((name, value))
    return out


def _own_extras(v, where: str) -> dict:
    """A file of ours: the entry's `_pltlab` object, its times checked."""
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise PltError(f"{where}: _pltlab is not an object")
    ext = dict(shallow(v, where, "_pltlab"))
    for k in ("start_ms", "end_ms"):
        t = ext.get(k)
        if t is not None and (not number(t) or abs(t) > MAX_MS):
            raise PltError(f"{where}: _pltlab.{k} {show(t)}: a time in ms (at most {MAX_MS:g})")
    if not isinstance(ext.get("encoding", ""), str):
        raise PltError(f"{where}: _pltlab.encoding {show(ext['encoding'])} is not a string")
    return ext


def read_entry(
    e: dict, start: datetime | None, where: str, counts: repairs.Counts, own: bool, main: bool = False
) -> Obj | None:
    """The entry as an Obj, or None when nothing can replay it (counted). `own`: a file pltlab
    wrote (its sizes, protocol and cache flag are read as written, nothing is counted). `main`:
    the page's first entry, its document, which must be an http(s) URL. Fields of the wrong
    type and sizes above the limits (pltlab.units) are one PltError naming the entry."""
    req = e.get("request")
    if not isinstance(req, dict):
        raise PltError(f"{where}: entry has no request")
    req = _request(req, counts)
    url = req.get("url")
    if not isinstance(url, str) or not url:
        raise PltError(f"{where}: entry has no request URL")
    scheme = urls.scheme(url)
    if not scheme:
        raise PltError(f"{where}: request URL {show(url)} is not absolute")
    if scheme not in urls.HTTP:
        if main:
            raise PltError(f"{where}: the page's document {show(url)} is not an http(s) URL: nothing to replay")
        counts.add(repairs.not_http(scheme))
        return None
    urls.check(url, where)
    resp = e.get("response")
    if resp is None or (isinstance(resp, dict) and resp.get("status") in (None, "")):
        counts.add(repairs.NO_RESPONSE)
        return None
    if not isinstance(resp, dict):
        raise PltError(f"{where}: response is not an object")
    status = _status(resp, where)
    if status == 0:
        counts.add(repairs.FAILED)
        return None

    content = resp.get("content")
    if content is None:
        content = {}
    elif not isinstance(content, dict):
        raise PltError(f"{where}: response.content is not an object")
    e, resp, content = checked_sizes(e, resp, content, where, counts)
    ext = _own_extras(e.get("_pltlab"), where) if own else {}
    protocol = protocol_name(resp.get("httpVersion")) if own else _protocol(e, req, resp, counts)
    raw = _headers(resp.get("headers"), where, "response.headers")
    headers = repairs.clean_headers(raw, protocol, status, counts)
    mime = text(content.get("mimeType"), where, "content.mimeType") or sizes.header(headers, "content-type") or ""
    enc = sizes.content_encoding(headers, e)
    recorded = sizes.recorded_size(e, content, enc)
    body = _body(content, mime, recorded, counts, where)
    method = text(req.get("method"), where, "request.method") or "GET"
    if not _METHOD.fullmatch(method):
        raise PltError(f"{where}: invalid request method {show(method)}")
    status_text = text(resp.get("statusText"), where, "response.statusText")
    if _CONTROL.search(status_text):
        raise PltError(f"{where}: response.statusText {show(status_text)} has control characters")
    wire_body = None
    if own:
        wire_body = _own_wire(ext.pop("wire", None), where)
        cached = bool(ext.pop("from_cache", False))
        enc = ext.pop("encoding", enc)
        if ext.pop("body", None) == "size-only":
            body = None
        size, transfer = _own_sizes(resp, content, enc, body)
    else:
        cached = _from_cache(e, resp, status, recorded)
        size, transfer = sizes.sizes(
            e,
            resp,
            content,
            headers,
            method,
            status,
            enc,
            None if body is None else len(body),
            recorded,
            cached,
            counts,
        )
        if cached:
            counts.add(repairs.FROM_CACHE)
            counts.add(repairs.CACHE_NO_SIZE if body is None and size == 0 else None)
            if status == 304:
                status, status_text = 200, "OK"
        if protocol in ("h3", "spdy"):
            counts.add(repairs.over(protocol))

    for n in (size, transfer or 0):
        if n > MAX_OBJECT_BYTES:
            raise PltError(f"{where}: {show(url)}: an object of {n} bytes: at most {MAX_OBJECT_BYTES} bytes (1 GiB)")
    ext.pop(COMPUTE_KEY, None)  # only from `_pltlab_compute_ms`
    compute = e.get("_pltlab_compute_ms")
    if compute is not None:
        if not number(compute):
            raise PltError(f"{where}: _pltlab_compute_ms {show(compute)} is not a number")
        ext[COMPUTE_KEY] = check_delay(compute, f"{where}: _pltlab_compute_ms")
    init, itype = _initiator(e)
    t = parse_time(e.get("startedDateTime"), where)
    timed = "start_ms" in ext  # our own files carry exact times (or null when unknown)
    wait = (e.get("timings") or {}).get("wait") if isinstance(e.get("timings"), dict) else None
    if not timed and number(wait) and wait > 0:
        if wait > MAX_MS:
            raise PltError(f"{where}: timings.wait {show(wait)} ms: at most {MAX_MS:g}")
        ext["wait_ms"] = float(wait)  # server think time, for replay's optional think time
    if not timed and (recorded := netinfer.recorded_timings(e)) is not None:
        ext[netinfer.TIMINGS_KEY] = recorded  # the recorded network (pltlab.archive.netinfer)
        conn = e.get("connection")
        if isinstance(conn, (str, int)) and not isinstance(conn, bool) and str(conn):
            ext[netinfer.CONNECTION_KEY] = str(conn)[:64]
    s_ms = ext.pop("start_ms", None)
    e_ms = ext.pop("end_ms", None)
    if not timed and t is not None and start is not None:
        s_ms = (t - start).total_seconds() * 1000
        tm = e.get("time")
        e_ms = s_ms + tm if number(tm) and 0 <= tm <= MAX_MS else None
    redirect = text(resp.get("redirectURL"), where, "response.redirectURL")
    if not redirect and 300 <= status < 400:
        redirect = sizes.header(headers, "location") or ""
    if redirect:
        try:
            urljoin(url, redirect)
        except ValueError as e:
            raise PltError(f"{where}: redirect target {show(redirect)}: {e}") from None
    ip = e.get("serverIPAddress") or e.get("_ip_addr") or ""
    o = Obj(
        url=url,
        method=method,
        status=status,
        status_text=status_text,
        headers=headers,
        mime=mime,
        body=body,
        size=size,
        initiator=init,
        initiator_type=itype,
        start_ms=s_ms,
        end_ms=e_ms,
        redirect_url=redirect,
        extras=ext,
        encoding=enc,
        transfer_size=transfer,
        protocol=protocol,
        server_ip=ip.strip().strip("[]") if isinstance(ip, str) else "",
        from_cache=cached,
        request_body=_request_body(req, counts),
        wire_body=wire_body,
    )
    # Its URL's scheme, host and port (Obj._parts), which every origin and plan asks for, from the
    # split urls.check made (urls.split keeps its last one).
    o._parts()
    return o


def _own_wire(v, where: str) -> bytes | None:
    """A file of ours: `_pltlab.wire`, the encoded body as recorded (base64)."""
    if v is None:
        return None
    try:
        if not isinstance(v, str):
            raise ValueError
        return base64.b64decode(v, validate=True)
    except (binascii.Error, ValueError):
        raise PltError(f"{where}: _pltlab.wire is not base64 (the body as recorded on the wire)") from None


def _own_sizes(resp: dict, content: dict, enc: str, body: bytes | None) -> tuple[int, int | None]:
    """Sizes of a file pltlab wrote: content.size, and bodySize (-1: not recorded). Files from
    before transfer sizes wrote bodySize = content.size without a compression: not recorded."""
    size = len(body) if body is not None else max(0, sizes.as_int(content.get("size")) or 0)
    bs = sizes.as_int(resp.get("bodySize"))
    if bs is None or bs < 0 or (enc and bs == size and "compression" not in content):
        return size, None
    return size, bs
