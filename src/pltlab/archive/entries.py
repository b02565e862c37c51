"""One HAR entry as an Obj: what each exporter records, and the repairs that make it replayable
(counted per kind in a repairs.Counts; sizes by the rules of pltlab.archive.sizes)."""

from __future__ import annotations

import base64
import binascii
import codecs
import re
from datetime import datetime, timezone
from urllib.parse import urlsplit

from pltlab.archive import repairs, sizes
from pltlab.archive.model import Obj
from pltlab.errors import PltError
from pltlab.loaders.calibrate import KEY as COMPUTE_KEY, check_delay

HTTP_VERSION = {"http/1.0": "HTTP/1.0", "http/1.1": "HTTP/1.1", "h2": "h2", "h3": "h3", "spdy": "spdy"}
_TRUNCATED = re.compile(r"\[\s*(\.\.\.\s*)?((response|body|content)\s+)?truncated", re.I)
_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([A-Za-z0-9._:-]+)", re.I)


def parse_time(s, where: str) -> datetime | None:
    if not s:
        return None
    try:
        t = datetime.fromisoformat(str(s).replace("Z", "+00:00"))
    except ValueError:
        raise PltError(f"{where}: invalid startedDateTime {s!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def protocol_name(v) -> str:
    """An httpVersion / protocol as recorded -> "http/1.0", "http/1.1", "h2", "h3", "spdy" or ""."""
    s = str(v or "").strip().lower().split()
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


def _body(content: dict, mime: str, recorded: int | None, counts: repairs.Counts) -> bytes | None:
    """The recorded body when it is complete; else None (a size-only entry), counted."""
    text = content.get("text")
    if text is None:
        return None
    text = str(text)
    if _TRUNCATED.search(text[-512:]):
        counts.add(repairs.TRUNCATED)
        return None
    if content.get("encoding") == "base64":
        try:
            body = base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            counts.add(repairs.BAD_BASE64)
            return None
    else:
        body = text_bytes(text, mime)
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
    return {**lifted, **{k: v for k, v in req.items() if v is not None and k != "postData"},
            "postData": {k: v for k, v in pd.items() if k in own}}


def _request_body(req: dict, counts: repairs.Counts) -> bytes | None:
    pd = req.get("postData")
    if not isinstance(pd, dict) or not isinstance(pd.get("text"), str) or not pd["text"]:
        return None  # WebPageTest and others write "" when they did not keep the body
    if str(pd.get("encoding") or "").lower() == "base64":
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
    names = {str(h.get("name", "")).lower() for h in req.get("headers") or [] if isinstance(h, dict)}
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
    if "cache" in str(e.get("_fetchType") or "").lower():
        return True
    if not (200 <= status < 300 and recorded) or sizes.is_webpagetest(e):
        return False
    ts = sizes.as_int(resp.get("_transferSize"))
    return ts == 0 or (ts is None and sizes.as_int(resp.get("bodySize")) == 0)


def _initiator(e: dict) -> tuple[str | None, str | None]:
    init = e.get("_initiator")
    if isinstance(init, str):  # WebPageTest: the initiator's URL
        return init or None, e.get("_initiator_type") or ("parser" if init else None)
    if not isinstance(init, dict):
        return None, None
    url = init.get("url")
    stack = init.get("stack")
    while not url and isinstance(stack, dict):  # script initiators: innermost frame with a URL
        url = next((f.get("url") for f in stack.get("callFrames", []) if f.get("url")), None)
        stack = stack.get("parent")
    itype = init.get("type")
    return url or None, (None if itype == "other" and not url else itype)


def _status(resp: dict, where: str) -> int:
    try:
        return int(resp.get("status") or 0)
    except (TypeError, ValueError):
        raise PltError(f"{where}: invalid status {resp.get('status')!r}") from None


def read_entry(e: dict, start: datetime | None, where: str, counts: repairs.Counts,
               own: bool) -> Obj | None:
    """The entry as an Obj, or None when nothing can replay it (counted). `own`: a file pltlab
    wrote (its sizes, protocol and cache flag are read as written, nothing is counted)."""
    req = e.get("request")
    if not isinstance(req, dict):
        raise PltError(f"{where}: entry has no request")
    req = _request(req, counts)
    url = req.get("url")
    if not isinstance(url, str) or not url:
        raise PltError(f"{where}: entry has no request URL")
    try:
        scheme = urlsplit(url).scheme.lower()
    except ValueError:
        scheme = ""
    if not scheme:
        raise PltError(f"{where}: request URL {url[:100]!r} is not absolute")
    if scheme not in ("http", "https"):
        counts.add(repairs.not_http(scheme))
        return None
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

    content = resp.get("content") if isinstance(resp.get("content"), dict) else {}
    ext = dict(e.get("_pltlab") or {}) if own else {}
    protocol = protocol_name(resp.get("httpVersion")) if own else _protocol(e, req, resp, counts)
    raw = [(str(h.get("name", "")), str(h.get("value", ""))) for h in resp.get("headers") or []
           if isinstance(h, dict)]
    headers = repairs.clean_headers(raw, protocol, status, counts)
    mime = content.get("mimeType") or sizes.header(headers, "content-type") or ""
    enc = sizes.content_encoding(headers, e)
    recorded = sizes.recorded_size(e, content, enc)
    body = _body(content, str(mime), recorded, counts)
    method = str(req.get("method") or "GET")
    status_text = str(resp.get("statusText") or "")
    if own:
        cached = bool(ext.pop("from_cache", False))
        enc = str(ext.pop("encoding", enc))
        if ext.pop("body", None) == "size-only":
            body = None
        size, transfer = _own_sizes(resp, content, enc, body)
    else:
        cached = _from_cache(e, resp, status, recorded)
        size, transfer = sizes.sizes(e, resp, content, headers, method, status, enc,
                                     None if body is None else len(body), recorded, cached, counts)
        if cached:
            counts.add(repairs.FROM_CACHE)
            counts.add(repairs.CACHE_NO_SIZE if body is None and size == 0 else None)
            if status == 304:
                status, status_text = 200, "OK"
        if protocol in ("h2", "h3", "spdy"):
            counts.add(repairs.over(protocol))

    ext.pop(COMPUTE_KEY, None)  # only from `_pltlab_compute_ms`
    if e.get("_pltlab_compute_ms") is not None:
        ext[COMPUTE_KEY] = check_delay(e["_pltlab_compute_ms"], f"{where}: _pltlab_compute_ms")
    init, itype = _initiator(e)
    t = parse_time(e.get("startedDateTime"), where)
    timed = "start_ms" in ext  # our own files carry exact times (or null when unknown)
    wait = (e.get("timings") or {}).get("wait") if isinstance(e.get("timings"), dict) else None
    if not timed and isinstance(wait, (int, float)) and wait > 0:
        ext["wait_ms"] = float(wait)  # server think time, for replay's optional think time
    s_ms = ext.pop("start_ms", None)
    e_ms = ext.pop("end_ms", None)
    if not timed and t is not None and start is not None:
        s_ms = (t - start).total_seconds() * 1000
        tm = e.get("time")
        e_ms = s_ms + tm if isinstance(tm, (int, float)) and tm >= 0 else None
    redirect = resp.get("redirectURL") or ""
    if not redirect and 300 <= status < 400:
        redirect = sizes.header(headers, "location") or ""
    ip = e.get("serverIPAddress") or e.get("_ip_addr") or ""
    return Obj(url=url, method=method, status=status, status_text=status_text, headers=headers,
               mime=str(mime), body=body, size=size, initiator=init, initiator_type=itype,
               start_ms=s_ms, end_ms=e_ms, redirect_url=str(redirect), extras=ext, encoding=enc,
               transfer_size=transfer, protocol=protocol, server_ip=str(ip).strip().strip("[]"),
               from_cache=cached, request_body=_request_body(req, counts))


def _own_sizes(resp: dict, content: dict, enc: str, body: bytes | None) -> tuple[int, int | None]:
    """Sizes of a file pltlab wrote: content.size, and bodySize (-1: not recorded). Files from
    before transfer sizes wrote bodySize = content.size without a compression: not recorded."""
    size = len(body) if body is not None else max(0, sizes.as_int(content.get("size")) or 0)
    bs = sizes.as_int(resp.get("bodySize"))
    if bs is None or bs < 0 or (enc and bs == size and "compression" not in content):
        return size, None
    return size, bs
