"""HAR 1.2 in and out. One archive file holds one page; imported HARs may hold several.

Our own fields: `_initiator` ({"type", "url"}, Chrome's convention) and `_pltlab` (start/end
relative to the page start, whether the body is known, whether the recording got it from its
cache, provenance, `wire`: the encoded body as recorded on the wire, base64, where an archive kept
it, `timings` and `connection`: an imported entry's recorded timings and connection id, and the
page's `on_content_load_ms`, for `--network recorded`: pltlab.archive.netinfer) on entries and pages; Chromium's measured compute (pltlab.loaders.compute_model):
`_pltlab_compute_ms` (ms >= 0) on entries and `_pltlab_calibration` ({"tail_ms", "browser",
"machine", ...}) on the page. Sizes are written as the HAR spec has them: response.bodySize =
the encoded body on the wire (-1: not recorded), content.size = the decoded body,
content.compression = their difference; httpVersion = the recorded protocol ("" unknown).

Reading other tools' HARs (pltlab.archive.entries, .sizes) repairs what cannot be replayed as
recorded and counts each repair per kind in the page's extras["repairs"] (pltlab.archive.repairs)."""

from __future__ import annotations

import base64
import gzip
import json
import os
import zlib
from datetime import UTC, datetime, timedelta

from pltlab import __version__, gcpause
from pltlab.archive import repairs, urls
from pltlab.archive.calibration import KEY as COMPUTE_KEY
from pltlab.archive.calibration import PAGE_KEY as CAL_KEY
from pltlab.archive.calibration import check_calibration
from pltlab.archive.deps import link_redirects
from pltlab.archive.entries import (
    HTTP_VERSION,
    MAX_MS,
    body_text,
    number,
    parse_time,
    read_entry,
    shallow,
)
from pltlab.archive.model import Obj, Page
from pltlab.archive.netinfer import DCL_KEY
from pltlab.archive.sizes import content_encoding
from pltlab.errors import PltError
from pltlab.units import MAX_PAGE_BYTES, show

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
CREATOR = "pltlab"
TEXT_TYPES = (
    "text/",
    "application/javascript",
    "application/x-javascript",
    "application/json",
    "application/xml",
    "image/svg+xml",
    "application/ecmascript",
)


def is_text(mime: str) -> bool:
    m = mime.lower()
    return m.startswith(TEXT_TYPES) or m.endswith(("+json", "+xml"))


def _iso(t: datetime) -> str:
    try:
        t = t.astimezone(UTC)
    except OverflowError:  # within a day of the calendar's ends: written as it is
        pass
    return (
        f"{t.year:04d}-{t.month:02d}-{t.day:02d}T{t.hour:02d}:{t.minute:02d}:{t.second:02d}."
        f"{t.microsecond // 1000:03d}Z"
    )


# ---- writing ---------------------------------------------------------------------------------


def _content(o: Obj) -> dict:
    c = {"size": o.size, "mimeType": o.mime}
    if o.transfer_size is not None and o.size >= o.transfer_size:
        c["compression"] = o.size - o.transfer_size
    if o.body is None:
        return c
    text = body_text(o.body, o.mime) if is_text(o.mime) else None
    if text is not None:
        c["text"] = text
        return c
    c["text"] = base64.b64encode(o.body).decode("ascii")
    c["encoding"] = "base64"
    return c


def _post_data(body: bytes) -> dict:
    try:
        return {"mimeType": "", "text": body.decode("utf-8")}
    except UnicodeDecodeError:
        return {"mimeType": "", "text": base64.b64encode(body).decode("ascii"), "encoding": "base64"}


def _entry(o: Obj, start: datetime) -> dict:
    s = o.start_ms or 0.0
    dur = max(0.0, (o.end_ms - s)) if o.end_ms is not None else 0.0
    ext = dict(o.extras)
    compute = ext.pop(COMPUTE_KEY, None)
    ext.update(body="full" if o.body is not None else "size-only")
    ext["start_ms"], ext["end_ms"] = o.start_ms, o.end_ms  # null: unknown (not 0)
    if o.from_cache:
        ext["from_cache"] = True
    if o.encoding != content_encoding(o.headers, {}):
        ext["encoding"] = o.encoding  # set without its header: kept beside them
    if o.wire_body is not None:
        ext["wire"] = base64.b64encode(o.wire_body).decode("ascii")
    init = {"type": o.initiator_type or ("other" if o.initiator is None else "parser")}
    if o.initiator:
        init["url"] = o.initiator
    version = HTTP_VERSION.get(o.protocol, "")
    request = {
        "method": o.method,
        "url": o.url,
        "httpVersion": version,
        "headers": [],
        "queryString": [],
        "cookies": [],
        "headersSize": -1,
        "bodySize": len(o.request_body) if o.request_body is not None else 0,
    }
    if o.request_body is not None:
        request["postData"] = _post_data(o.request_body)
    try:
        when = start + timedelta(milliseconds=s)
    except OverflowError:  # a time beyond the calendar (kept in _pltlab.start_ms)
        when = start
    e = {
        "pageref": "page_1",
        "startedDateTime": _iso(when),
        "time": dur,
        "request": request,
        "response": {
            "status": o.status,
            "statusText": o.status_text,
            "httpVersion": version,
            "headers": [{"name": k, "value": v} for k, v in o.headers],
            "cookies": [],
            "content": _content(o),
            "redirectURL": o.redirect_url,
            "headersSize": -1,
            "bodySize": o.transfer_size if o.transfer_size is not None else -1,
        },
        "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": dur, "receive": 0},
        "_initiator": init,
        "_pltlab": ext,
    }
    if o.server_ip:
        e["serverIPAddress"] = o.server_ip
    if compute is not None:
        e["_pltlab_compute_ms"] = compute
    return e


def page_to_har(page: Page) -> dict:
    start = parse_time(page.started, "page") or EPOCH
    timings = {"onContentLoad": -1, "onLoad": page.on_load_ms if page.on_load_ms is not None else -1}
    ext = dict(page.extras)
    cal = ext.pop(CAL_KEY, None)
    pm = {
        "startedDateTime": _iso(start),
        "id": "page_1",
        "title": page.title or page.url,
        "pageTimings": timings,
        "_pltlab": {"url": page.url, **ext},
    }
    if cal is not None:
        pm["_pltlab_calibration"] = cal
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": CREATOR, "version": __version__},
            "pages": [pm],
            "entries": [_entry(o, start) for o in page.objects],
        }
    }


def write_page(page: Page, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        # json.dumps, not json.dump: the same text, from the C encoder (dump streams in Python)
        f.write(json.dumps(page_to_har(page), ensure_ascii=False, separators=(",", ":")))


# ---- reading ---------------------------------------------------------------------------------


def _not_json(name: str):
    raise ValueError(f"{name} is not a JSON value")


def parse_json(raw: bytes, path: str, what: str = "HAR"):
    """Strict JSON (no NaN or Infinity); any problem, absurd nesting included, is one PltError."""
    try:
        with gcpause.paused():  # a large HAR is millions of containers at once
            return json.loads(raw.decode("utf-8-sig"), parse_constant=_not_json)
    except (UnicodeDecodeError, ValueError) as e:
        raise PltError(f"{path}: not valid {what} (JSON error: {e})") from None
    except RecursionError:
        raise PltError(f"{path}: not valid {what} (JSON nested too deeply)") from None


def load(path: str) -> dict:
    """Parse a HAR file (gzipped or not); any problem is one PltError naming the file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":  # gzip (NAME.har.gz)
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise PltError(f"{path}: not a readable gzip file ({e})") from None
    return checked(parse_json(raw, path), path)


def checked(doc, path: str) -> dict:
    """``doc`` (a file's JSON data) when it is a HAR; else one PltError naming the file."""
    if (
        not isinstance(doc, dict)
        or not isinstance(doc.get("log"), dict)
        or not isinstance(doc["log"].get("entries"), list)
    ):
        raise PltError(f"{path}: not valid HAR (no log.entries list)")
    return doc


def _page_ids(refs: list, src: str) -> list[str]:
    """ "<src>#<pageref>"; a page without a pageref gets its position ("#1", "#2", ...)."""
    ids, seen = [], set()
    for i, ref in enumerate(refs):
        base = f"{src}#{ref if isinstance(ref, (str, int)) and str(ref) else i + 1}"
        pid, n = base, 1
        while pid in seen:
            n += 1
            pid = f"{base}~{n}"
        seen.add(pid)
        ids.append(pid)
    return ids


def har_to_pages(doc: dict, src: str) -> list[Page]:
    """Every page of a HAR (Chrome, Firefox, Safari, WebPageTest, sitespeed.io, DevTools-log
    conversions, ours). Entries of a pageref without a `pages` record, or of a HAR without
    `pages`, still form a page. `src` names the file in errors and in page ids."""
    log = doc["log"]
    own = isinstance(log.get("creator"), dict) and log["creator"].get("name") == CREATOR
    pages = log.get("pages")
    if pages is not None and not isinstance(pages, list):
        raise PltError(f"{src}: log.pages is not a list")
    pages_meta = [p for p in pages or [] if isinstance(p, dict)]
    for n, p in enumerate(pages_meta):
        if not _ref_ok(p.get("id")):
            raise PltError(f"{src}: page {n + 1}: invalid id {show(p.get('id'))}")
    order = [p.get("id") for p in pages_meta]
    meta = {p.get("id"): p for p in pages_meta}
    groups: dict = {}
    for i, e in enumerate(log["entries"]):
        if not isinstance(e, dict):
            raise PltError(f"{src}: entry {i} is not an object")
        ref = e.get("pageref")
        if ref is None and len(order) == 1:
            ref = order[0]
        if not _ref_ok(ref):
            raise PltError(f"{src}: entry {i}: invalid pageref {show(ref)}")
        groups.setdefault(ref, []).append((i, e))
    if not groups:
        raise PltError(f"{src}: HAR has no entries")
    refs = [r for r in order if r in groups] + [r for r in groups if r not in order]
    pages = []
    for ref, pid in zip(refs, _page_ids(refs, src)):
        pm = meta.get(ref, {})
        start = parse_time(pm.get("startedDateTime"), f"{src}: page {ref}")
        if start is None:
            times = [parse_time(e.get("startedDateTime"), f"{src}: entry {i}") for i, e in groups[ref]]
            start = min((t for t in times if t is not None), default=None)
        counts = repairs.Counts()
        objs = [
            o
            for n, (i, e) in enumerate(groups[ref])
            if (o := read_entry(e, start, f"{src}: entry {i}", counts, own, main=n == 0)) is not None
        ]
        if not objs:
            continue
        objs.sort(key=lambda o: o.start_ms if o.start_ms is not None else float("inf"))
        where = f"{src}: page {pid[len(src) + 1 :]}"
        ext = _page_extras(pm, where)
        ext.pop(CAL_KEY, None)
        if pm.get("_pltlab_calibration") is not None:
            cal = shallow(pm["_pltlab_calibration"], where, "_pltlab_calibration")
            ext[CAL_KEY] = check_calibration(cal, f"{where}: _pltlab_calibration")
        url = ext.pop("url", None) or objs[0].url
        urls.check(url, where, "page URL")
        stored_id = ext.pop("id", None) if own else None  # kept by pltlab.archive.corpus
        if not own:
            if ext.get("source") is None:
                ext["source"] = os.path.basename(src)
            if pm.get("_cached") in (1, True, "1"):  # WebPageTest's repeat view
                counts.add(repairs.REPEAT_VIEW, len(objs))
            given = ext.get("repairs") or {}
            ext["repairs"] = {**given, **{k: given.get(k, 0) + n for k, n in counts.items()}}
            ext["unreplayable"] = int(ext.get("unreplayable") or 0) + counts.unreplayable()
        total = sum(o.size for o in objs)
        if total > MAX_PAGE_BYTES:
            raise PltError(f"{where}: {total} bytes in its objects: a page is at most {MAX_PAGE_BYTES} bytes (4 GiB)")
        timings = pm.get("pageTimings")
        onload = timings.get("onLoad") if isinstance(timings, dict) else None
        dcl = timings.get("onContentLoad") if isinstance(timings, dict) else None
        if not own and number(dcl) and 0 <= dcl <= MAX_MS:
            ext[DCL_KEY] = float(dcl)  # the recorded network's comparison (pltlab.archive.netinfer)
        title = pm.get("title")
        page = Page(
            url=url,
            objects=objs,
            title=title if isinstance(title, str) else "",
            started=_iso(start) if start else _iso(EPOCH),
            on_load_ms=onload if number(onload) and onload >= 0 else None,
            extras=ext,
            id=str(stored_id) if stored_id else pid,
        )
        _move_main_first(page)
        link_redirects(page)
        pages.append(page)
    if not pages:
        raise PltError(f"{src}: no entry with a response")
    return pages


def _ref_ok(ref) -> bool:
    """A page id or pageref: a string or an integer (or none)."""
    return ref is None or isinstance(ref, str) or (isinstance(ref, int) and not isinstance(ref, bool))


def _page_extras(pm: dict, where: str) -> dict:
    """A page's `_pltlab` object (ours, or kept from an earlier import), its fields checked."""
    v = pm.get("_pltlab")
    if v is None:
        return {}
    if not isinstance(v, dict):
        raise PltError(f"{where}: _pltlab is not an object")
    ext = dict(shallow(v, where, "_pltlab"))
    if "url" in ext and not isinstance(ext["url"], str):
        raise PltError(f"{where}: _pltlab.url {show(ext['url'])} is not a URL")
    if "id" in ext and not isinstance(ext["id"], (str, type(None))):
        raise PltError(f"{where}: _pltlab.id {show(ext['id'])} is not a string")
    rep = ext.get("repairs")
    if rep is not None and not (
        isinstance(rep, dict) and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in rep.values())
    ):
        raise PltError(f"{where}: _pltlab.repairs is not an object of counts")
    un = ext.get("unreplayable")
    if un is not None and (isinstance(un, bool) or not isinstance(un, int) or un < 0):
        raise PltError(f"{where}: _pltlab.unreplayable {show(un)} is not a count")
    return ext


def _move_main_first(page: Page) -> None:
    main = page.find(page.url)
    if main is not None and main is not page.objects[0]:
        page.objects.remove(main)
        page.objects.insert(0, main)


def read_page(path: str) -> Page:
    """One page from an archive file (a HAR with several pages yields its first)."""
    return har_to_pages(load(path), path)[0]
