"""The bundled corpus: structure-only models (no bodies) of the TFO paper's pages (amazon,
nytimes, wsj, wikipedia) and google, derived from the 2013 fetchlogs of the seed experiment, and
of three pages as browsers served them recently (h2 and TLS; from the shared corpus's
har-conformance HARs): filamentgroup, arcelormittal, linkedin (the set `tfo2013/`). A second
set, `public/`: every other real page of the shared corpus's public HARs and DevTools logs
(`PUBLIC`; a file with several pages gives several). Each object keeps its URL, size on the
wire, type, protocol, server address, timings and dependencies; no body, no header but
Content-Type and Location. benches/pagesets/public.txt names the pages of both sets.

Regenerate both: python3 -m pltlab.archive.bundled [PATH/TO/shared/corpus]"""

from __future__ import annotations

import os
import sys

from pltlab.archive import formats
from pltlab.archive.har import read_page, write_page
from pltlab.archive.model import Page
from pltlab.archive.seed import import_pages_file
from pltlab.errors import PltError

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfo2013")
PUBLIC_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "public")
TFO2013 = {
    "amazon": "http://www.amazon.com/",
    "nytimes": "http://www.nytimes.com/",
    "wsj": "http://www.wsj.com/",
    "wikipedia": "http://en.wikipedia.org/wiki/Transmission_Control_Protocol",
    "google": "http://www.google.com/",
    "filamentgroup": "https://www.filamentgroup.com/",
    "arcelormittal": "http://www.arcelormittal.com/",
    "linkedin": "https://www.linkedin.com/",
}
SEED = ("amazon", "nytimes", "wsj", "wikipedia", "google")  # from cs244-2013
# today's pages, from these HARs of the shared corpus (har-conformance/)
MODERN = {
    "filamentgroup": "browsertime_h2_filamentgroup.com.har",
    "arcelormittal": "arcelormittal.com.har",
    "linkedin": "linkedin.har",
}
PAPER = ("amazon", "nytimes", "wsj", "wikipedia")  # the TFO paper's four pages
RECENT = tuple(MODERN)  # the three recent ones

# The public set: name -> (file under the shared corpus, page number in it (1 = first), page URL).
# Left out: broken.har and missing-page.har (deliberately broken), chrome-small.har's second page
# (a lone image, not a page), the DevTools log video-embed (a test page on localhost), and the
# files already in tfo2013/ (their other pages are here: filamentgroup-2, -3).
PUBLIC = {
    "aftonbladet": ("har/aftonbladet.se.har", 1, "http://aftonbladet.se/"),
    "github": ("har/github.com-home.har", 1, "https://github.com/"),
    "sitespeed-h1": ("har/http1.1-chrome.har", 1, "https://www.sitespeed.io/"),
    "mitmproxy": ("har/safari-with-bodies.har", 1, "https://mitmproxy.org/"),
    "mitmproxy-small": ("har/chrome-small.har", 1, "https://mitmproxy.org/"),
    "sitespeed-run-sizes": ("har-conformance/allSizes.har", 1, "https://run.sitespeed.io/"),
    "sitespeed-run-h2": ("har-conformance/http2-chrome.har", 1, "https://run.sitespeed.io/"),
    "sitespeed-run": ("har-conformance/run.sitespeed.io.har", 1, "https://run.sitespeed.io/"),
    "sitespeed-redirect": (
        "har-conformance/www.sitespeed.io-redirecting-to-https.har",
        1,
        "http://www.sitespeed.io/",
    ),
    "filamentgroup-2": ("har-conformance/browsertime_h2_filamentgroup.com.har", 2, "https://www.filamentgroup.com/"),
    "filamentgroup-3": ("har-conformance/browsertime_h2_filamentgroup.com.har", 3, "https://www.filamentgroup.com/"),
    "enorm-magazin": ("har-conformance/chrome_enorm-magazin.de.har", 1, "http://enorm-magazin.de/"),
    "expressen": ("har-conformance/expressen.har", 1, "https://www.expressen.se/"),
    "expressen-2": ("har-conformance/expressen.har", 2, "https://www.expressen.se/"),
    "expressen-3": ("har-conformance/expressen.har", 3, "https://www.expressen.se/"),
    "wikipedia-org": ("har-conformance/spdy-chrome.har", 1, "https://www.wikipedia.org/"),
    "github-wpt": ("har-conformance/wpt_github.com.har", 1, "https://github.com/"),
    "llentab": ("har-conformance/devtools/lr.devtoolslog.json.gz", 1, "https://www.llentab.cz/"),
    "squoosh": ("har-conformance/devtools/progressive-app.devtoolslog.json", 1, "https://squoosh.app/"),
    "vkontakte": ("har-conformance/devtools/redirect.devtoolslog.json", 1, "http://www.vkontakte.ru/"),
    "vk": ("har-conformance/devtools/redirect.devtoolslog.json", 2, "https://m.vk.com/"),
}
# one distinct site each, the public pages a study uses by default (repeat loads and copies left out)
PUBLIC_SITES = (
    "aftonbladet",
    "github",
    "sitespeed-h1",
    "mitmproxy",
    "sitespeed-run",
    "enorm-magazin",
    "expressen",
    "wikipedia-org",
    "llentab",
    "squoosh",
    "vk",
)
NAMES = {**TFO2013, **{n: url for n, (_, _, url) in PUBLIC.items()}}  # every bundled page: its URL


def names() -> list[str]:
    return list(NAMES)


def path(name: str) -> str:
    if name not in NAMES:
        raise PltError(f"unknown bundled page {name!r}: one of {', '.join(NAMES)}")
    return os.path.join(PUBLIC_DIR if name in PUBLIC else DIR, f"{name}.har")


def load(name: str) -> Page:
    """A bundled page (size-only objects; synth.body() gives replayable bodies)."""
    return read_page(path(name))


def strip(page: Page) -> Page:
    """Keep derived facts only: URLs, sizes, types, times, dependencies; drop every body. An
    encoded body becomes an identity one of its size on the wire (the bytes the network carried)."""
    for o in page.objects:
        o.size = o.size if o.body is None else len(o.body)
        if o.encoding:
            o.size = o.transfer_size if o.transfer_size is not None else o.size
            o.encoding = ""
        o.transfer_size = None
        o.body = None
        o.request_body = None
        o.headers = [(k, v) for k, v in o.headers if k.lower() in ("content-type", "location")]
    return page


def _public_page(shared: str, name: str) -> Page:
    rel, number, url = PUBLIC[name]
    src = os.path.join(shared, rel)
    pages = [p for a, fmt in formats.archives(src, formats.FALLBACK) for p in formats.load(a, fmt).pages]
    if len(pages) < number or pages[number - 1].url != url:
        found = pages[number - 1].url if len(pages) >= number else f"{len(pages)} page(s)"
        raise PltError(f"{rel}: page {number} is {found}, expected {url}")
    page = strip(pages[number - 1])
    page.extras["bundled"] = f"{name}: structure only, derived from {rel} (page {number})"
    return page


def regenerate(shared: str) -> list[str]:
    base = os.path.join(shared, "cs244-2013")
    pages = []
    for f in ("Paper.pages", "Google.pages"):
        pages += import_pages_file(os.path.join(base, f))[0]
    by_url = {p.url: p for p in pages}
    os.makedirs(DIR, exist_ok=True)
    out = []
    for name in SEED:
        page = strip(by_url[NAMES[name]])
        page.extras["bundled"] = f"{name}: structure only, derived from cs244-2013 (March 2013)"
        write_page(page, path(name))
        out.append(path(name))
    for name, har in MODERN.items():
        page = strip(read_page(os.path.join(shared, "har-conformance", har)))
        if page.url != NAMES[name]:
            raise PltError(f"{har}: page URL {page.url}, expected {NAMES[name]}")
        page.extras["bundled"] = f"{name}: structure only, derived from har-conformance/{har}"
        write_page(page, path(name))
        out.append(path(name))
    os.makedirs(PUBLIC_DIR, exist_ok=True)
    for name in PUBLIC:
        write_page(_public_page(shared, name), path(name))
        out.append(path(name))
    return out


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "..", "shared", "corpus")
    for p in regenerate(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default)):
        print(p)
