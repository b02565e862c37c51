"""Dependency structure: recorded initiators, else references parsed from bodies, else start
times (an object depends on the latest object that finished before it started)."""

from __future__ import annotations

from urllib.parse import urljoin

from pltlab.archive.model import Page, strip_fragment
from pltlab.archive.refs import refs_of


def _ancestors(page: Page, url: str) -> set[str]:
    seen, cur = set(), url
    while cur and cur not in seen:
        seen.add(cur)
        o = page.find(cur)
        cur = o.initiator if o is not None else None
    return seen


def link_redirects(page: Page) -> None:
    """A redirect's target is caused by the redirect response, whatever the recorder said."""
    for o in page.objects:
        if o.redirect_url:
            target = page.find(urljoin(o.url, o.redirect_url))
            if target is not None and target is not o and target.initiator != o.url:
                target.initiator, target.initiator_type = o.url, "redirect"


def complete(page: Page) -> dict:
    """Fill in missing initiators; returns how many came from each source."""
    counts = {"recorded": 0, "parsed": 0, "timing": 0}
    if not page.objects:
        return counts
    link_redirects(page)
    main = page.objects[0]
    known = {strip_fragment(o.url) for o in page.objects}
    for o in page.objects[1:]:
        if o.initiator and strip_fragment(o.initiator) not in known:
            o.initiator = None  # points outside the page (e.g. a filtered request): unusable
        if o.initiator:
            counts["recorded"] += 1
    # Parsed: documents in start order, so the earliest referrer wins.
    docs = sorted((o for o in page.objects if o.body is not None),
                  key=lambda o: (o.start_ms is None, o.start_ms or 0))
    for d in docs:
        kind, urls = refs_of(d.body, d.mime, d.url)
        for u in urls:
            t = page.find(u)
            if t is None or t is main or t.initiator or t is d:
                continue
            if t.url in _ancestors(page, d.url):
                continue  # would close a cycle
            t.initiator, t.initiator_type = d.url, kind
            counts["parsed"] += 1
    # Timing: the latest object that finished before this one started, else the main document.
    done = sorted((o for o in page.objects if o.end_ms is not None), key=lambda o: o.end_ms)
    for o in page.objects[1:]:
        if o.initiator:
            continue
        parent = main
        if o.start_ms is not None:
            cands = [d for d in done if d.end_ms <= o.start_ms and d is not o
                     and o.url not in _ancestors(page, d.url)]
            if cands:
                parent = cands[-1]
        o.initiator, o.initiator_type = parent.url, "timing"
        counts["timing"] += 1
    return counts


def depth(page: Page) -> int:
    """Length of the longest initiator chain (main document alone: 0)."""
    best = 0
    for o in page.objects:
        best = max(best, len(_ancestors(page, o.url)) - 1)
    return best
