"""Body sizes and Content-Encoding of a HAR entry, whichever tool exported it.

An object has two sizes (pltlab.archive.model.Obj): `size`, the decoded body, and
`transfer_size`, the body as it crossed the wire with its Content-Encoding applied (no headers,
no chunk or frame overhead). What the exporters write (checked against shared/corpus/har and
har-conformance):

- HAR 1.2: response.bodySize = encoded body (-1 unknown, 0 when served from the cache),
  content.size = decoded, content.compression = bytes saved (size - bodySize). Chrome DevTools
  ("WebInspector"), chrome-har and Safari's network loads follow it.
- Chrome: response._transferSize = headers + body on the wire (with headersSize -1 under HTTP/2,
  so the headers cannot be taken out); 0 when served from the memory or disk cache.
- Browsertime 1.0 (Chrome 48-56): bodySize copies content.size (the decoded size) or counts
  HTTP/2 frame overhead; compression = content.size - (headers + body).
- Firefox: content.size -1 (not recorded); bodySize = the encoded body.
- Safari: entries from its memory cache have bodySize -1 and content.size 0 (or a compression
  equal to the size); the decoded body is in content.text.
- WebPageTest: bodySize = content.size = _objectSize = the *encoded* body;
  _objectSizeUncompressed = the decoded body (newer agents); _bytesIn = headers + body (under
  HTTP/2 it also counts other streams); some agents leave every size at 0.

Rules, first that applies:

decoded size (`size`)
  1. the recorded body, when it is complete (valid base64, no truncation marker, its length agrees
     with the recorded decoded size where one is recorded)
  2. WebPageTest: _objectSizeUncompressed; its content.size only for identity bodies
  3. content.size >= 0 (0 only when nothing says the body had bytes)
  4. the transfer size: exact for identity; for an encoded body a repair ("no content size
     recorded: the transfer size was used")

transfer size (`transfer_size`): for identity the decoded size; for an encoded body
  1. the Content-Length header: the body bytes as sent (not for HEAD, 1xx, 204, 304)
  2. response.bodySize > 0, unless it only copies the decoded size while content.compression says
     otherwise (Browsertime): then content.size - content.compression
  3. content.size - content.compression, when 0 < compression < size
  4. Chrome's _transferSize - headersSize, when headersSize > 0
  5. WebPageTest: _objectSize > 0, else _bytesIn - headersSize
  6. Chrome's _transferSize with the headers' size unknown: an upper bound, a repair
  7. none: None (the replay sends `size` bytes), a repair unless the body is empty

An encoded body whose transfer size is not smaller than its decoded size is kept as recorded
(tiny and already-compressed bodies grow under gzip).

A size field that is no whole number of bytes ("abc", -5, 1.5, true; -1 means not recorded, and
content.compression may be negative) counts as not recorded, a repair; one above the object
limit (1 GiB, pltlab.units) is an error naming the entry (pltlab.archive.entries)."""

from __future__ import annotations

from pltlab.archive import repairs


def as_int(v) -> int | None:
    """A recorded size as an int (None: absent or not a number)."""
    if type(v) is int or v is None:  # the common cases, at once
        return v
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str):
        d = v.strip()
        if d.isascii() and d.isdigit() and len(d) <= 18:
            return int(d)
    return None


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    for k, v in headers:
        if k.lower() == name:
            return v
    return None


def content_encoding(headers: list[tuple[str, str]], e: dict) -> str:
    """The recorded Content-Encoding, lower-case; stacked codings as written ("gzip, br");
    identity is ""."""
    vals = [v.strip() for k, v in headers if k.lower() == "content-encoding" and v.strip()]
    if not vals and isinstance(e.get("_contentEncoding"), str):  # WebPageTest's copy
        vals = [e["_contentEncoding"].strip()] if e["_contentEncoding"].strip() else []
    enc = ", ".join(vals).lower()
    return "" if enc == "identity" else enc


def is_webpagetest(e: dict) -> bool:
    return "_objectSize" in e or "_bytesIn" in e


def recorded_size(e: dict, content: dict, encoding: str) -> int | None:
    """The decoded body size as the exporter recorded it (None: not recorded)."""
    if is_webpagetest(e):
        full = as_int(e.get("_objectSizeUncompressed"))
        if full is not None and full > 0:
            return full
        if encoding:
            return None  # WebPageTest's content.size is the encoded size
    s = as_int(content.get("size"))
    return s if s is not None and s >= 0 else None


def _transfer(
    e: dict, resp: dict, content: dict, headers, method: str, status: int, decoded: int | None
) -> tuple[int | None, str | None]:
    """Encoded body bytes as recorded (rules 1-6 above) and the repair kind when approximate."""
    if method.upper() != "HEAD" and status >= 200 and status not in (204, 304):
        cl = as_int(header(headers, "content-length"))
        if cl is not None and cl >= 0:
            return cl, None
    bs = as_int(resp.get("bodySize"))
    cmp = as_int(content.get("compression"))
    by_cmp = decoded - cmp if decoded and cmp and 0 < cmp < decoded else None
    if bs is not None and bs > 0:
        return (by_cmp, None) if bs == decoded and by_cmp is not None else (bs, None)
    if by_cmp is not None:
        return by_cmp, None
    ts, hs = as_int(resp.get("_transferSize")), as_int(resp.get("headersSize"))
    if ts is not None and hs is not None and hs > 0 and ts >= hs:
        return ts - hs, None
    if is_webpagetest(e):
        obj = as_int(e.get("_objectSize"))
        if obj is not None and obj > 0:
            return obj, None
        got = as_int(e.get("_bytesIn"))
        if got is not None and hs is not None and 0 < hs < got:
            return got - hs, None
    if ts is not None and ts > 0:
        return ts, repairs.HEADERS_IN_TRANSFER
    return None, None


def sizes(
    e: dict,
    resp: dict,
    content: dict,
    headers,
    method: str,
    status: int,
    encoding: str,
    body_len: int | None,
    recorded: int | None,
    cached: bool,
    counts: repairs.Counts,
) -> tuple[int, int | None]:
    """(size, transfer_size) of an entry by the rules above; `body_len` is the length of a
    complete recorded body, `recorded` the recorded decoded size."""
    decoded = body_len
    if decoded is None and recorded is not None and recorded > 0:
        decoded = recorded
    wire, approx = _transfer(e, resp, content, headers, method, status, decoded)
    if cached:  # the cache's 0 or -1 is not what a cold load transfers
        wire = wire if approx is None and wire else None
    if decoded is None:
        if wire is None or (recorded == 0 and not wire):
            decoded = 0
        else:
            decoded = wire
            counts.add(approx)
            counts.add(repairs.NO_CONTENT_SIZE if encoding and wire > 0 and not cached else None)
            approx = None
    if not encoding:
        return decoded, decoded
    if wire is None:
        counts.add(repairs.NO_TRANSFER_SIZE if decoded > 0 and not cached else None)
        return decoded, None
    counts.add(approx)
    return decoded, wire
