"""`pltlab record`: load pages in headless Chromium and archive every response (one HAR per URL)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

from pltlab.archive import deps
from pltlab.archive.corpus import write_corpus
from pltlab.archive.devtools import TIMING_KEYS
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.loaders.browser import Chromium


def read_targets(args: list[str]) -> list[str]:
    """URLs given directly or in `.pages` files (one URL a line; blank lines and # comments skipped)."""
    urls = []
    for a in args:
        if a.endswith(".pages") or os.path.isfile(a):
            try:
                with open(a, encoding="utf-8") as f:
                    lines = [ln.strip() for ln in f]
            except OSError as e:
                raise PltError(f"{a}: cannot read: {e.strerror}") from None
            found = [ln for ln in lines if ln and not ln.startswith("#")]
            if not found:
                raise PltError(f"{a}: no page URL")
            urls += [_check_url(u, a) for u in found]
        else:
            urls.append(_check_url(a, "argument"))
    if not urls:
        raise PltError("nothing to record: give URLs or .pages files")
    return urls


def _check_url(u: str, where: str) -> str:
    if not u.lower().startswith(("http://", "https://")):
        raise PltError(f"{where}: not an http(s) URL: {u!r}")
    return u


def _obj(r) -> Obj:
    t = r.timing or {}
    ext = {
        "resource_type": r.resource_type,
        "protocol": r.protocol,
        "remote": r.remote,
        "connection_id": r.connection_id,
        "connection_reused": r.connection_reused,
        "transfer_bytes": r.encoded_bytes,
    }
    if t:  # CDP ResourceTiming, ms relative to its requestTime (-1: phase did not happen)
        ext["timing"] = {k: round(t[k], 3) for k in TIMING_KEYS if k in t}
    return Obj(
        url=r.url,
        method=r.method,
        status=r.status,
        status_text=r.status_text,
        headers=r.headers,
        mime=r.mime,
        body=r.body,
        size=r.data_bytes,
        initiator=r.initiator_url,
        initiator_type=r.initiator_type,
        start_ms=round(r.start_ms, 3),
        end_ms=round(r.end_ms, 3) if r.end_ms is not None else None,
        redirect_url=r.redirect_url,
        extras=ext,
    )


def to_page(res) -> Page:
    """A Chromium LoadResult as an archive page: every http(s) request that got a response."""
    reqs = [r for r in res.requests if r.url.startswith(("http:", "https:")) and not r.blocked]
    objs = [_obj(r) for r in reqs if r.status]
    sheets = {r.url for r in reqs if r.resource_type == "Stylesheet"}
    for o in objs:  # the archive's kind for what a style sheet loads (fonts, images, @import)
        if o.initiator in sheets and o.initiator_type == "parser":
            o.initiator_type = "css"
    if not objs:
        raise PltError(f"{res.url}: no response recorded")
    started = datetime.fromtimestamp(res.started or 0, UTC)
    extras = {
        "source": "record",
        "recorder": f"chromium {res.browser_version}".strip(),
        "final_url": res.final_url,
        "nav_timing": res.nav_timing,
    }
    failed = [f"{r.url} ({r.error})" for r in reqs if not r.status and r.error]
    if failed:
        extras["failed"] = failed
    if res.unfinished:
        extras["unfinished"] = res.unfinished
    if res.missing_bodies:
        extras["missing_bodies"] = res.missing_bodies
    page = Page(
        url=res.url,
        objects=objs,
        title=res.title,
        started=started.strftime("%Y-%m-%dT%H:%M:%S.") + f"{started.microsecond // 1000:03d}Z",
        on_load_ms=res.plt_ms,
        extras=extras,
    )
    # Chromium names no initiator for a few requests (e.g. some script-made images): infer those.
    counts = deps.complete(page)
    if counts["parsed"] or counts["timing"]:
        extras["inferred_initiators"] = {"parsed": counts["parsed"], "timing": counts["timing"]}
    return page


def record(targets: list[str], out: str, progress=None, **chromium_opts) -> dict:
    """Record every target, then write the archive at once (nothing is written if a load fails)."""
    urls = read_targets(targets)
    pages = []
    with Chromium(**chromium_opts) as c:
        for u in urls:
            page = to_page(c.load(u))
            pages.append(page)
            if progress:
                progress(page)
    files = write_corpus(pages, out)
    return {
        "files": files,
        "pages": [dict(p.summary(), plt_ms=p.on_load_ms, failed=len(p.extras.get("failed", []))) for p in pages],
    }
