"""The bundled corpus: structure-only models (no bodies) of the TFO paper's pages (amazon,
nytimes, wsj, wikipedia) and google, derived from the 2013 fetchlogs of the seed experiment, and
of three pages as browsers served them recently (h2 and TLS; from the shared corpus's
har-conformance HARs): filamentgroup, arcelormittal, linkedin. Each object keeps its URL, size
on the wire, type, protocol, server address, timings and dependencies; no body, no header but
Content-Type and Location.

Regenerate: python3 -m pltlab.archive.bundled [PATH/TO/shared/corpus]"""

from __future__ import annotations

import os
import sys

from pltlab.archive.har import read_page, write_page
from pltlab.archive.model import Page
from pltlab.archive.seed import import_pages_file
from pltlab.errors import PltError

DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tfo2013")
NAMES = {
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


def names() -> list[str]:
    return list(NAMES)


def path(name: str) -> str:
    if name not in NAMES:
        raise PltError(f"unknown bundled page {name!r}: one of {', '.join(NAMES)}")
    return os.path.join(DIR, f"{name}.har")


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
    return out


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "..", "shared", "corpus")
    for p in regenerate(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default)):
        print(p)
