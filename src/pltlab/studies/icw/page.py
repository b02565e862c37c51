"""A page shaped like the IMC 2011 study's snapshot of the Yahoo! front page.

30 objects over two domains (two origin IPs), every sub-resource discovered from the main
document (depth 1), so that with the browser limit of 6 connections per domain the load opens
12 connections: 30 / 12 = 2.5 objects per connection, as the study measured. The object sizes
are fixed (not drawn) and documented in docs/icw-study.md: they straddle the bytes one
initial window carries (MSS 1448: ICW 1 = 1.4 KB, 3 = 4.3 KB, 8 = 11.6 KB, 16 = 23 KB,
32 = 46 KB), as the study's object-size distribution does (most objects a few KB, a tail of
scripts, style sheets and sprites of tens of KB).
"""

from __future__ import annotations

from pltlab.archive.kinds import MIME_BY_KIND
from pltlab.archive.model import Obj, Page

# (kind, domain index, size in bytes, name); index 0 is the main document.
# Domain 0 = the page's own host (the HTML, page-specific scripts and news images);
# domain 1 = the static CDN host (shared CSS/JS, sprites, icons).
YAHOO_OBJECTS: tuple[tuple[str, int, int, str], ...] = (
    ("html", 0, 46_000, "index"),          # front-page HTML (gzipped), the largest single object
    # domain 0: 14 sub-resources
    ("js", 0, 34_000, "page"),
    ("js", 0, 7_200, "ads"),
    ("json", 0, 2_600, "weather"),
    ("image", 0, 14_500, "news-lead"),
    ("image", 0, 9_800, "news-1"),
    ("image", 0, 8_600, "news-2"),
    ("image", 0, 7_400, "news-3"),
    ("image", 0, 6_100, "news-4"),
    ("image", 0, 5_200, "thumb-1"),
    ("image", 0, 4_300, "thumb-2"),
    ("image", 0, 3_500, "thumb-3"),
    ("image", 0, 2_400, "thumb-4"),
    ("image", 0, 1_300, "beacon-logo"),
    ("image", 0, 43, "beacon"),
    # domain 1: 15 sub-resources
    ("css", 1, 28_000, "base"),
    ("css", 1, 9_500, "theme"),
    ("js", 1, 62_000, "framework"),
    ("js", 1, 15_000, "widgets"),
    ("image", 1, 24_000, "sprite-main"),
    ("image", 1, 18_000, "sprite-icons"),
    ("image", 1, 11_200, "promo"),
    ("image", 1, 5_600, "logo"),
    ("image", 1, 3_900, "icon-mail"),
    ("image", 1, 2_900, "icon-news"),
    ("image", 1, 2_200, "icon-sports"),
    ("image", 1, 1_700, "icon-finance"),
    ("image", 1, 1_100, "icon-weather"),
    ("image", 1, 800, "arrow"),
    ("image", 1, 400, "spacer"),
)
EXT = {"html": ".html", "js": ".js", "css": ".css", "json": ".json", "image": ".png"}


def yahoo_page(domain: str = "yahoo-like", scheme: str = "http", scale: float = 1.0) -> Page:
    """The study page: 30 objects, two hosts (www.<domain>.test and static.<domain>.test), every
    sub-resource a child of the main document; ``scale`` multiplies every size (tests)."""
    hosts = (f"www.{domain}.test", f"static.{domain}.test")
    page = Page(url=f"{scheme}://{hosts[0]}/", title="Yahoo-like front page (IMC 2011 ICW study)",
                extras={"source": "generated", "generator": {"name": "icw.yahoo_page",
                                                             "objects": len(YAHOO_OBJECTS),
                                                             "origins": 2, "depth": 1,
                                                             "scale": scale}})
    for i, (kind, dom, size, name) in enumerate(YAHOO_OBJECTS):
        url = page.url if i == 0 else f"{scheme}://{hosts[dom]}/{kind}/{name}{EXT[kind]}"
        mime = "text/html; charset=utf-8" if kind == "html" else MIME_BY_KIND[kind]
        o = Obj(url=url, mime=mime, size=max(1, round(size * scale)), status_text="OK")
        o.headers = [("Content-Type", mime), ("Cache-Control", "no-cache, no-store")]  # cache off
        if i:
            o.initiator, o.initiator_type = page.url, "parser"
        page.objects.append(o)
    return page


def total_bytes(page: Page | None = None) -> int:
    return sum(o.size for o in (page or yahoo_page()).objects)
