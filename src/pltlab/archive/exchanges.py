"""Recorded HTTP exchanges (a request and its response as they crossed the wire, with no timing:
Mahimahi record folders, Web Page Replay archives) as objects, and their pages.

**Bodies as on the wire.** The response body is de-framed (chunked, or cut at Content-Length),
then decoded with its Content-Encoding: the object keeps the decoded body (what references are
parsed from, what size is counted) and, for an encoded body, the recorded encoded bytes
(`Obj.wire_body`), which the replay sends byte for byte. A chunked response keeps its
`Transfer-Encoding: chunked` header (the replay frames it in chunks again; chunk boundaries are
not kept). What cannot be kept as recorded is a repair, counted once per kind.

**The page's document** (`split`), with no timing to go by: a top-level navigation is a GET
recorded without a Referer (or with `Sec-Fetch-Site: none`) that asks for a document
(`Sec-Fetch-Dest: document`; without Sec-Fetch headers, an Accept of text/html or an HTML
response) and is not the target of a recorded redirect; its redirect chain belongs to it. Every
other request belongs to the navigation its Referer leads to (through the recorded objects it
names; a Referer that is an origin alone, as browsers send cross-origin, to the navigation whose
document is on that origin). One page per navigation where the archive keeps several
(`one=False`); else the navigation with the most requests is the page's and the others are
objects of it (a repair line). No navigation at all: the HTML response most Referers name, else
the first response. A URL the user names (`pltlab import --url`) is the document, every request
an object of its page."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from pltlab.archive import httpmsg, repairs, urls, wire
from pltlab.archive.deps import link_redirects
from pltlab.archive.entries import protocol_name
from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.archive.resource_kinds import kind
from pltlab.archive.sizes import content_encoding
from pltlab.errors import PltError
from pltlab.units import MAX_OBJECT_BYTES, MAX_PAGE_BYTES, show

EPOCH_ISO = "1970-01-01T00:00:00.000Z"
REQUEST_HEADERS = "request_headers"  # Obj.extras: the request's headers as recorded, [[name, value], ...]


@dataclass
class Exchange:
    """One recorded request and its response (None: none recorded), heads as text."""

    where: str  # how errors name it: "<file>" or "<archive>: <url> (request n)"
    url: str
    method: str
    request_headers: list[tuple[str, str]]
    request_body: bytes
    status_line: str | None
    response_headers: list[tuple[str, str]] = field(default_factory=list)
    response_body: bytes = b""  # as recorded: framing (chunks) included
    protocol: str = ""  # the negotiated protocol where the archive says; else the status line's
    ip: str = ""


def _decoded(data: bytes, enc: str, counts: repairs.Counts) -> tuple[bytes | None, bytes | None]:
    """(decoded body or None, the encoded bytes or None) of an encoded body."""
    if not enc or not data:
        return data, None
    if not wire.supported(enc):
        counts.add(repairs.UNKNOWN_CODING)
        return None, data
    try:
        return wire.decode(data, enc), data
    except Exception:  # zlib.error, brotli.error, zstandard.ZstdError, ValueError: not that coding
        counts.add(repairs.UNDECODABLE)
        return None, data


def _body(x: Exchange, status: int, headers, counts: repairs.Counts) -> tuple[bytes | None, bytes | None, int, str]:
    """(decoded body or None, wire bytes or None, size, encoding) of the response."""
    if 100 <= status < 200 or status in wire.NO_BODY or x.method.upper() == "HEAD":
        return b"", None, 0, content_encoding(headers, {})
    raw = x.response_body
    if httpmsg.is_chunked(headers):
        data, whole = httpmsg.dechunk(raw)
        counts.add(None if whole else repairs.CHUNKS_BROKEN)
    else:
        cl = httpmsg.header(headers, "content-length")
        n = int(cl.strip()) if cl is not None and cl.strip().isdigit() else None
        data = raw
        if n is not None and len(raw) > n:
            data = raw[:n]
            counts.add(repairs.PAST_LENGTH)
        elif n is not None and len(raw) < n:
            counts.add(repairs.SHORT_OF_LENGTH)
    enc = content_encoding(headers, {})
    body, wire_bytes = _decoded(data, enc, counts)
    return body, wire_bytes, len(body) if body is not None else len(data), enc


def to_obj(x: Exchange, counts: repairs.Counts) -> Obj | None:
    """The exchange as an Obj, or None when nothing can replay it (counted); a field no HTTP
    message has is one PltError naming it."""
    scheme = urls.scheme(x.url)
    if scheme not in urls.HTTP:
        counts.add(repairs.not_http(scheme or "no scheme"))
        return None
    urls.check(x.url, x.where)
    if x.status_line is None:
        counts.add(repairs.NO_RESPONSE)
        return None
    try:
        version, status, reason = httpmsg.status_line(x.status_line)
    except ValueError as e:
        raise PltError(f"{x.where}: {e}") from None
    protocol = x.protocol or protocol_name(version)
    headers = repairs.clean_headers(x.response_headers, protocol, status, counts)
    body, wire_bytes, size, enc = _body(x, status, headers, counts)
    if size > MAX_OBJECT_BYTES:
        raise PltError(f"{x.where}: {show(x.url)}: an object of {size} bytes: at most {MAX_OBJECT_BYTES} bytes (1 GiB)")
    redirect = (httpmsg.header(headers, "location") or "") if 300 <= status < 400 else ""
    if redirect:
        try:
            urljoin(x.url, redirect)
        except ValueError as e:
            raise PltError(f"{x.where}: redirect target {show(redirect)}: {e}") from None
    o = Obj(
        url=x.url,
        method=x.method,
        status=status,
        status_text=reason,
        headers=headers,
        mime=httpmsg.header(headers, "content-type") or "",
        body=body,
        size=size,
        redirect_url=redirect,
        extras={REQUEST_HEADERS: [[k, v] for k, v in x.request_headers]},
        encoding=enc,
        transfer_size=len(wire_bytes) if wire_bytes is not None else size,
        protocol=protocol,
        server_ip=x.ip.strip().strip("[]"),
        request_body=x.request_body or None,
        wire_body=wire_bytes,
    )
    o._parts()
    return o


# ---- pages -----------------------------------------------------------------------------------


def request_header(o: Obj, name: str) -> str | None:
    for k, v in o.extras.get(REQUEST_HEADERS) or ():
        if k.lower() == name:
            return v
    return None


def is_navigation(o: Obj) -> bool:
    """A top-level document request the user started (no Referer: typed, bookmarked, scripted)."""
    if o.method.upper() != "GET":
        return False
    referer = request_header(o, "referer")
    dest = (request_header(o, "sec-fetch-dest") or "").lower()
    if dest:
        site = (request_header(o, "sec-fetch-site") or "").lower()
        return dest == "document" and (site == "none" or not referer)
    if referer:
        return False
    accept = (request_header(o, "accept") or "").lower()
    return "text/html" in accept or kind(o.mime, o.url) == "html"


def _origin(url: str) -> str:
    s = urlsplit(url)
    return f"{s.scheme}://{s.netloc}".lower()


def _target(o: Obj) -> str | None:
    return strip_fragment(urljoin(o.url, o.redirect_url)) if o.redirect_url else None


def split(
    objs: list[Obj], src: str, named: str | None = None, one: bool = False
) -> tuple[list[tuple[Obj, list[Obj], int]], int]:
    """The pages of a recording: (document, its objects in recorded order with the document first,
    how many other navigations were folded into it), and how many requests led to no navigation
    (put in the first page). ``named``: the document the user named (the recording is then one
    page); ``one``: the recording is one page (Mahimahi's folders)."""
    index: dict[str, Obj] = {}
    for o in objs:
        index.setdefault(strip_fragment(o.url), o)
    if named is not None:
        main = index.get(strip_fragment(named))
        if main is None:
            raise PltError(f"{src}: {show(named)} (--url) is not a recorded request URL here")
        return [(main, _first(main, objs), 0)], 0
    targets = {t for o in objs if (t := _target(o))}
    heads = [o for o in objs if is_navigation(o) and strip_fragment(o.url) not in targets]
    if not heads:
        main = _likely_document(objs)
        return [(main, _first(main, objs), 0)], 0
    owner: dict[int, int] = {}
    finals = []  # each navigation's document origin, after its redirects
    for i, h in enumerate(heads):
        cur = h
        while cur is not None and id(cur) not in owner:
            owner[id(cur)] = i
            last = cur
            t = _target(cur)
            cur = index.get(t) if t else None
        finals.append(_origin(last.url))
    unplaced = []
    for o in objs:
        if id(o) not in owner:
            p = _page_of(o, index, owner, heads, finals)
            if p is None:
                unplaced.append(o)
            else:
                owner[id(o)] = p
    groups: list[list[Obj]] = [[] for _ in heads]
    for o in objs:
        if id(o) in owner:
            groups[owner[id(o)]].append(o)
    if one or len(heads) == 1:
        best = max(range(len(heads)), key=lambda i: (len(groups[i]), -i))
        return [(heads[best], _first(heads[best], objs), len(heads) - 1)], 0
    groups[0] += unplaced
    return [(h, _first(h, g), 0) for h, g in zip(heads, groups)], len(unplaced)


def _first(main: Obj, objs: list[Obj]) -> list[Obj]:
    return [main] + [o for o in objs if o is not main]


def _page_of(o: Obj, index, owner, heads, finals) -> int | None:
    """The navigation ``o``'s Referer leads to (through the recorded objects it names)."""
    seen = {id(o)}
    cur = o
    while True:
        if id(cur) in owner:
            return owner[id(cur)]
        ref = request_header(cur, "referer")
        if not ref:
            return None
        t = index.get(strip_fragment(ref))
        if t is not None and id(t) not in seen:
            seen.add(id(t))
            cur = t
            continue
        try:
            s = urlsplit(ref)
        except ValueError:
            return None
        if s.path in ("", "/") and not s.query:  # an origin alone (cross-origin Referer policy)
            return next((i for i, f in enumerate(finals) if f == _origin(ref)), None)
        return None


def _likely_document(objs: list[Obj]) -> Obj:
    """With no navigation recorded: the HTML response most Referers name, else the first."""
    named: dict[str, int] = {}
    for o in objs:
        ref = request_header(o, "referer")
        if ref:
            named[strip_fragment(ref)] = named.get(strip_fragment(ref), 0) + 1
    html = [(i, o) for i, o in enumerate(objs) if kind(o.mime, o.url) == "html" and o.status < 400]
    if not html:
        return objs[0]
    return max(html, key=lambda io: (named.get(strip_fragment(io[1].url), 0), -io[0]))[1]


def pages(
    objs: list[Obj],
    counts: dict[int, repairs.Counts],
    dropped: repairs.Counts,
    src: str,
    named: str | None = None,
    one: bool = False,
    extras: dict | None = None,
    started: str = EPOCH_ISO,
) -> list[Page]:
    """The recording's pages (``split``), each with its repairs counted: ``counts`` per object
    (by id), ``dropped`` (requests nothing replays) with the first page."""
    if not objs:
        raise PltError(f"{src}: no request with a response recorded")
    out = []
    found, unplaced = split(objs, src, named, one)
    for n, (main, members, folded) in enumerate(found):
        if urls.scheme(main.url) not in urls.HTTP:
            raise PltError(f"{src}: the page's document {show(main.url)} is not an http(s) URL")
        c = repairs.Counts()
        if n == 0:
            c.update(dropped)
        for o in members:
            c.update(counts.get(id(o), {}))
        c.add(repairs.OTHER_NAVIGATIONS if folded else None, folded)
        c.add(repairs.UNPLACED if n == 0 and unplaced else None, unplaced)
        total = sum(o.size for o in members)
        if total > MAX_PAGE_BYTES:
            raise PltError(f"{src}: {main.url}: {total} bytes in its objects: a page is at most {MAX_PAGE_BYTES} bytes")
        page = Page(
            url=main.url,
            objects=members,
            started=started,
            extras={
                "source": os.path.basename(src.rstrip("/")),
                **(extras or {}),
                "repairs": dict(c),
                "unreplayable": c.unreplayable(),
            },
            id=f"{src}#{n + 1}",
        )
        link_redirects(page)
        out.append(page)
    return out
