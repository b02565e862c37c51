"""Dependency structure: recorded initiators, else references parsed from bodies, else start
times (an object depends on the latest object that finished before it started).

Every function here looks URLs up in one Page.url_index() made at its start: they change
initiators only, never the objects or their URLs."""

from __future__ import annotations

from bisect import bisect_right
from urllib.parse import urljoin

from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.archive.refs import refs_of


def _ancestors(index: dict[str, Obj], url: str) -> set[str]:
    seen, cur = set(), url
    while cur and cur not in seen:
        seen.add(cur)
        o = index.get(strip_fragment(cur))
        cur = o.initiator if o is not None else None
    return seen


def link_redirects(page: Page) -> None:
    """A redirect's target is caused by the redirect response, whatever the recorder said."""
    index = None
    for o in page.objects:
        if o.redirect_url:
            if index is None:
                index = page.url_index()
            target = index.get(strip_fragment(urljoin(o.url, o.redirect_url)))
            if target is not None and target is not o and target.initiator != o.url:
                target.initiator, target.initiator_type = o.url, "redirect"


def complete(page: Page) -> dict:
    """Fill in missing initiators; returns how many came from each source."""
    counts = {"recorded": 0, "parsed": 0, "timing": 0}
    if not page.objects:
        return counts
    link_redirects(page)
    index = page.url_index()
    main = page.objects[0]
    for o in page.objects[1:]:
        if o.initiator and strip_fragment(o.initiator) not in index:
            o.initiator = None  # points outside the page (e.g. a filtered request): unusable
        if o.initiator:
            counts["recorded"] += 1
    # Parsed: documents in start order, so the earliest referrer wins.
    docs = sorted((o for o in page.objects if o.body is not None), key=lambda o: (o.start_ms is None, o.start_ms or 0))
    for d in docs:
        kind, urls = refs_of(d.body, d.mime, d.url)
        for u in urls:
            t = index.get(strip_fragment(u))
            if t is None or t is main or t.initiator or t is d:
                continue
            if t.url in _ancestors(index, d.url):
                continue  # would close a cycle
            t.initiator, t.initiator_type = d.url, kind
            counts["parsed"] += 1
    # Timing: the latest object that finished before this one started, else the main document.
    done = sorted((o for o in page.objects if o.end_ms is not None), key=lambda o: o.end_ms)
    ends = [d.end_ms for d in done]
    for o in page.objects[1:]:
        if o.initiator:
            continue
        parent = main
        if o.start_ms is not None:
            # The last finished object that is not o and does not descend from o (a cycle).
            for j in range(bisect_right(ends, o.start_ms) - 1, -1, -1):
                d = done[j]
                if d is not o and o.url not in _ancestors(index, d.url):
                    parent = d
                    break
        o.initiator, o.initiator_type = parent.url, "timing"
        counts["timing"] += 1
    return counts


def depth(page: Page) -> int:
    """Length of the longest initiator chain (main document alone: 0)."""
    index = page.url_index()
    best = 0
    for o in page.objects:
        best = max(best, len(_ancestors(index, o.url)) - 1)
    return best
