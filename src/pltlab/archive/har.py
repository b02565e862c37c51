"""HAR 1.2 in and out. One archive file holds one page; imported HARs may hold several.

Our own fields: `_initiator` ({"type", "url"}, Chrome's convention) and `_pltlab` (start/end
relative to the page start, whether the body is known, provenance) on entries and pages; Chromium's
measured compute (pltlab.loaders.calibrate): `_pltlab_compute_ms` (ms >= 0) on entries and
`_pltlab_calibration` ({"tail_ms", "browser", "machine", ...}) on the page."""

from __future__ import annotations

import base64
import binascii
import json
import os
from datetime import datetime, timedelta, timezone

from pltlab.archive.deps import link_redirects
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.loaders.calibrate import KEY as COMPUTE_KEY, PAGE_KEY as CAL_KEY, check_calibration, check_delay

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
TEXT_TYPES = ("text/", "application/javascript", "application/x-javascript", "application/json",
              "application/xml", "image/svg+xml", "application/ecmascript")


def is_text(mime: str) -> bool:
    m = mime.lower()
    return m.startswith(TEXT_TYPES) or m.endswith(("+json", "+xml"))


def _iso(t: datetime) -> str:
    return t.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _parse_time(s, where: str) -> datetime | None:
    if not s:
        return None
    try:
        t = datetime.fromisoformat(str(s).replace("Z", "+00:00"))
    except ValueError:
        raise PltError(f"{where}: invalid startedDateTime {s!r}") from None
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


# ---- writing ---------------------------------------------------------------------------------

def _content(o: Obj) -> dict:
    c = {"size": o.size, "mimeType": o.mime}
    if o.body is None:
        return c
    if is_text(o.mime):
        try:
            c["text"] = o.body.decode("utf-8")
            return c
        except UnicodeDecodeError:
            pass
    c["text"] = base64.b64encode(o.body).decode("ascii")
    c["encoding"] = "base64"
    return c


def _entry(o: Obj, start: datetime) -> dict:
    s = o.start_ms or 0.0
    dur = max(0.0, (o.end_ms - s)) if o.end_ms is not None else 0.0
    ext = dict(o.extras)
    compute = ext.pop(COMPUTE_KEY, None)
    ext.update(body="full" if o.body is not None else "size-only")
    ext["start_ms"], ext["end_ms"] = o.start_ms, o.end_ms  # null: unknown (not 0)
    init = {"type": o.initiator_type or ("other" if o.initiator is None else "parser")}
    if o.initiator:
        init["url"] = o.initiator
    e = {
        "pageref": "page_1",
        "startedDateTime": _iso(start + timedelta(milliseconds=s)),
        "time": dur,
        "request": {"method": o.method, "url": o.url, "httpVersion": "HTTP/1.1", "headers": [],
                    "queryString": [], "cookies": [], "headersSize": -1, "bodySize": 0},
        "response": {"status": o.status, "statusText": o.status_text, "httpVersion": "HTTP/1.1",
                     "headers": [{"name": k, "value": v} for k, v in o.headers], "cookies": [],
                     "content": _content(o), "redirectURL": o.redirect_url, "headersSize": -1,
                     "bodySize": o.size},
        "cache": {},
        "timings": {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": dur,
                    "receive": 0},
        "_initiator": init,
        "_pltlab": ext,
    }
    if compute is not None:
        e["_pltlab_compute_ms"] = compute
    return e


def page_to_har(page: Page) -> dict:
    from pltlab import __version__

    start = _parse_time(page.started, "page") or EPOCH
    timings = {"onContentLoad": -1, "onLoad": page.on_load_ms if page.on_load_ms is not None else -1}
    ext = dict(page.extras)
    cal = ext.pop(CAL_KEY, None)
    pm = {"startedDateTime": _iso(start), "id": "page_1", "title": page.title or page.url,
          "pageTimings": timings, "_pltlab": {"url": page.url, **ext}}
    if cal is not None:
        pm["_pltlab_calibration"] = cal
    return {"log": {
        "version": "1.2",
        "creator": {"name": "pltlab", "version": __version__},
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


def _body(content: dict, where: str) -> bytes | None:
    text = content.get("text")
    if text is None:
        return None
    if content.get("encoding") == "base64":
        try:
            return base64.b64decode("".join(str(text).split()), validate=True)
        except (binascii.Error, ValueError):
            raise PltError(f"{where}: invalid base64 body") from None
    return str(text).encode("utf-8")


def _obj(e: dict, start: datetime | None, where: str) -> tuple[Obj, datetime | None]:
    req, resp = e.get("request"), e.get("response") or {}
    url = req.get("url") if isinstance(req, dict) else None
    if not isinstance(url, str) or not url:
        raise PltError(f"{where}: entry has no request URL")
    if not isinstance(resp, dict):
        raise PltError(f"{where}: response is not an object")
    content = resp.get("content") if isinstance(resp.get("content"), dict) else {}
    headers = [(str(h.get("name", "")), str(h.get("value", ""))) for h in resp.get("headers") or []
               if isinstance(h, dict)]
    mime = content.get("mimeType") or next((v for k, v in headers if k.lower() == "content-type"), "")
    body = _body(content, where)
    ext = dict(e.get("_pltlab") or {})
    ext.pop(COMPUTE_KEY, None)  # only from `_pltlab_compute_ms`
    if e.get("_pltlab_compute_ms") is not None:
        ext[COMPUTE_KEY] = check_delay(e["_pltlab_compute_ms"], f"{where}: _pltlab_compute_ms")
    if ext.pop("body", None) == "size-only" or (body == b"" and (content.get("size") or 0) > 0):
        body = None  # an empty text for a non-empty response means "not recorded"
    size = next((s for s in (content.get("size"), resp.get("bodySize"), e.get("_objectSize"))
                 if isinstance(s, int) and s > 0), 0)
    try:
        status = int(resp.get("status") or 0)
    except (TypeError, ValueError):
        raise PltError(f"{where}: invalid status {resp.get('status')!r}") from None
    init, itype = _initiator(e)
    t = _parse_time(e.get("startedDateTime"), where)
    own = "start_ms" in ext  # our own files carry exact times (or null when unknown)
    wait = (e.get("timings") or {}).get("wait") if isinstance(e.get("timings"), dict) else None
    if not own and isinstance(wait, (int, float)) and wait > 0:
        ext["wait_ms"] = float(wait)  # server think time, for replay's optional think time
    s_ms = ext.pop("start_ms", None)
    e_ms = ext.pop("end_ms", None)
    if not own and t is not None and start is not None:
        s_ms = (t - start).total_seconds() * 1000
        tm = e.get("time")
        e_ms = s_ms + tm if isinstance(tm, (int, float)) and tm >= 0 else None
    redirect = resp.get("redirectURL") or ""
    if not redirect and 300 <= status < 400:
        redirect = next((v for k, v in headers if k.lower() == "location"), "")
    o = Obj(url=url, method=str(req.get("method") or "GET"), status=status,
            status_text=str(resp.get("statusText") or ""), headers=headers, mime=str(mime),
            body=body, size=size, initiator=init, initiator_type=itype, start_ms=s_ms, end_ms=e_ms,
            redirect_url=redirect, extras=ext)
    return o, t


def har_to_pages(doc: dict, src: str) -> list[Page]:
    """Every page of a HAR (Chrome, Firefox, Safari, WebPageTest, sitespeed.io, ours).
    Entries of a pageref without a `pages` record, or of a HAR without `pages`, still form a page."""
    log = doc["log"]
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
        groups.setdefault(ref, []).append((i, e))
    if not groups:
        raise PltError(f"{src}: HAR has no entries")
    pages = []
    for ref in [r for r in order if r in groups] + [r for r in groups if r not in order]:
        pm = meta.get(ref, {})
        start = _parse_time(pm.get("startedDateTime"), f"{src}: page {ref}")
        if start is None:
            times = [_parse_time(e.get("startedDateTime"), f"{src}: entry {i}") for i, e in groups[ref]]
            start = min((t for t in times if t is not None), default=None)
        objs, skipped = [], 0
        for i, e in groups[ref]:
            o, _ = _obj(e, start, f"{src}: entry {i}")
            if o.status == 0:  # blocked or failed in the browser: nothing to replay
                skipped += 1
                continue
            objs.append(o)
        if not objs:
            continue
        objs.sort(key=lambda o: o.start_ms if o.start_ms is not None else float("inf"))
        ext = dict(pm.get("_pltlab") or {})
        ext.pop(CAL_KEY, None)
        if pm.get("_pltlab_calibration") is not None:
            ext[CAL_KEY] = check_calibration(pm["_pltlab_calibration"], f"{src}: page {ref}: _pltlab_calibration")
        url = ext.pop("url", None) or objs[0].url
        if ext.get("source") is None and (log.get("creator") or {}).get("name") != "pltlab":
            ext["source"] = os.path.basename(src)
        if skipped:
            ext["skipped_failed"] = skipped
        onload = (pm.get("pageTimings") or {}).get("onLoad")
        page = Page(url=url, objects=objs, title=str(pm.get("title") or ""),
                    started=_iso(start) if start else _iso(EPOCH),
                    on_load_ms=onload if isinstance(onload, (int, float)) and onload >= 0 else None,
                    extras=ext)
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
