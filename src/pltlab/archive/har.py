"""HAR 1.2 in and out. One archive file holds one page; imported HARs may hold several.

Our own fields: `_initiator` ({"type", "url"}, Chrome's convention) and `_pltlab` (start/end
relative to the page start, whether the body is known, whether the recording got it from its
cache, provenance) on entries and pages; Chromium's measured compute (pltlab.loaders.calibrate):
`_pltlab_compute_ms` (ms >= 0) on entries and `_pltlab_calibration` ({"tail_ms", "browser",
"machine", ...}) on the page. Sizes are written as the HAR spec has them: response.bodySize =
the encoded body on the wire (-1: not recorded), content.size = the decoded body,
content.compression = their difference; httpVersion = the recorded protocol ("" unknown).

Reading other tools' HARs (pltlab.archive.entries, .sizes) repairs what cannot be replayed as
recorded and counts each repair per kind in the page's extras["repairs"] (pltlab.archive.repairs)."""

from __future__ import annotations

import base64
import json
import os
from datetime import datetime, timedelta, timezone

from pltlab.archive import repairs
from pltlab.archive.deps import link_redirects
from pltlab.archive.entries import HTTP_VERSION, body_text, parse_time, read_entry
from pltlab.archive.model import Obj, Page
from pltlab.archive.sizes import content_encoding
from pltlab.errors import PltError
from pltlab.loaders.calibrate import KEY as COMPUTE_KEY, PAGE_KEY as CAL_KEY, check_calibration

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
CREATOR = "pltlab"
TEXT_TYPES = ("text/", "application/javascript", "application/x-javascript", "application/json",
              "application/xml", "image/svg+xml", "application/ecmascript")


def is_text(mime: str) -> bool:
    m = mime.lower()
    return m.startswith(TEXT_TYPES) or m.endswith(("+json", "+xml"))


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


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
    init = {"type": o.initiator_type or ("other" if o.initiator is None else "parser")}
    if o.initiator:
        init["url"] = o.initiator
    version = HTTP_VERSION.get(o.protocol, "")
    request = {"method": o.method, "url": o.url, "httpVersion": version, "headers": [],
               "queryString": [], "cookies": [], "headersSize": -1,
               "bodySize": len(o.request_body) if o.request_body is not None else 0}
    if o.request_body is not None:
        request["postData"] = _post_data(o.request_body)
    e = {
        "pageref": "page_1",
        "startedDateTime": _iso(start + timedelta(milliseconds=s)),
        "time": dur,
        "request": request,
        "response": {"status": o.status, "statusText": o.status_text, "httpVersion": version,
                     "headers": [{"name": k, "value": v} for k, v in o.headers], "cookies": [],
                     "content": _content(o), "redirectURL": o.redirect_url, "headersSize": -1,
                     "bodySize": o.transfer_size if o.transfer_size is not None else -1},
        "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": dur,
                    "receive": 0},
        "_initiator": init,
        "_pltlab": ext,
    }
    if o.server_ip:
        e["serverIPAddress"] = o.server_ip
    if compute is not None:
        e["_pltlab_compute_ms"] = compute
    return e


def page_to_har(page: Page) -> dict:
    from pltlab import __version__

    start = parse_time(page.started, "page") or EPOCH
    timings = {"onContentLoad": -1, "onLoad": page.on_load_ms if page.on_load_ms is not None else -1}
    ext = dict(page.extras)
    cal = ext.pop(CAL_KEY, None)
    pm = {"startedDateTime": _iso(start), "id": "page_1", "title": page.title or page.url,
          "pageTimings": timings, "_pltlab": {"url": page.url, **ext}}
    if cal is not None:
        pm["_pltlab_calibration"] = cal
    return {"log": {
        "version": "1.2",
        "creator": {"name": CREATOR, "version": __version__},
        "pages": [pm],
        "entries": [_entry(o, start) for o in page.objects],
    }}


def write_page(page: Page, path: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        json.dump(page_to_har(page), f, ensure_ascii=False, separators=(",", ":"))


# ---- reading ---------------------------------------------------------------------------------

def load(path: str) -> dict:
    """Parse a HAR file; any problem is one PltError naming the file."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    try:
        doc = json.loads(raw.decode("utf-8-sig"))
    except (UnicodeDecodeError, ValueError) as e:
        raise PltError(f"{path}: not valid HAR (JSON error: {e})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("log"), dict) \
            or not isinstance(doc["log"].get("entries"), list):
        raise PltError(f"{path}: not valid HAR (no log.entries list)")
    return doc


def _page_ids(refs: list, src: str) -> list[str]:
    """"<src>#<pageref>"; a page without a pageref gets its position ("#1", "#2", ...)."""
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
    own = (log.get("creator") or {}).get("name") == CREATOR
    pages_meta = [p for p in log.get("pages") or [] if isinstance(p, dict)]
    order = [p.get("id") for p in pages_meta]
    meta = {p.get("id"): p for p in pages_meta}
    groups: dict = {}
    for i, e in enumerate(log["entries"]):
        if not isinstance(e, dict):
            raise PltError(f"{src}: entry {i} is not an object")
        ref = e.get("pageref")
        if ref is None and len(order) == 1:
            ref = order[0]
        try:
            groups.setdefault(ref, []).append((i, e))
        except TypeError:
            raise PltError(f"{src}: entry {i}: invalid pageref {ref!r}") from None
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
        objs = [o for i, e in groups[ref]
                if (o := read_entry(e, start, f"{src}: entry {i}", counts, own)) is not None]
        if not objs:
            continue
        objs.sort(key=lambda o: o.start_ms if o.start_ms is not None else float("inf"))
        ext = dict(pm.get("_pltlab") or {})
        ext.pop(CAL_KEY, None)
        if pm.get("_pltlab_calibration") is not None:
            ext[CAL_KEY] = check_calibration(pm["_pltlab_calibration"], f"{src}: page {ref}: _pltlab_calibration")
        url = ext.pop("url", None) or objs[0].url
        stored_id = ext.pop("id", None) if own else None  # kept by pltlab.archive.corpus
        if not own:
            if ext.get("source") is None:
                ext["source"] = os.path.basename(src)
            if pm.get("_cached") in (1, True, "1"):  # WebPageTest's repeat view
                counts.add(repairs.REPEAT_VIEW, len(objs))
            given = ext.get("repairs") if isinstance(ext.get("repairs"), dict) else {}
            ext["repairs"] = {**given, **{k: given.get(k, 0) + n for k, n in counts.items()}}
            ext["unreplayable"] = int(ext.get("unreplayable") or 0) + counts.unreplayable()
        onload = (pm.get("pageTimings") or {}).get("onLoad")
        page = Page(url=url, objects=objs, title=str(pm.get("title") or ""),
                    started=_iso(start) if start else _iso(EPOCH),
                    on_load_ms=onload if isinstance(onload, (int, float)) and onload >= 0 else None,
                    extras=ext, id=str(stored_id) if stored_id else pid)
        _move_main_first(page)
        link_redirects(page)
        pages.append(page)
    if not pages:
        raise PltError(f"{src}: no entry with a response")
    return pages


def _move_main_first(page: Page) -> None:
    main = page.find(page.url)
    if main is not None and main is not page.objects[0]:
        page.objects.remove(main)
        page.objects.insert(0, main)


def read_page(path: str) -> Page:
    """One page from an archive file (a HAR with several pages yields its first)."""
    return har_to_pages(load(path), path)[0]
