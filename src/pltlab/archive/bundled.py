"""The bundled corpus: structure-only models (no bodies) of the TFO paper's pages (amazon,
nytimes, wsj, wikipedia) and google, derived from the 2013 fetchlogs of the seed experiment.

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
    """Keep derived facts only: URLs, sizes, types, times, dependencies; drop every body."""
    for o in page.objects:
        o.size = o.size if o.body is None else len(o.body)
        o.body = None
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
    for name, url in NAMES.items():
        page = strip(by_url[url])
        page.extras["bundled"] = f"{name}: structure only, derived from cs244-2013 (March 2013)"
        write_page(page, path(name))
        out.append(path(name))
    return out


if __name__ == "__main__":
    here = os.path.dirname(os.path.abspath(__file__))
    default = os.path.join(here, "..", "..", "..", "..", "shared", "corpus")
    for p in regenerate(os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else default)):
        print(p)
