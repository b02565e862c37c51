"""Resolving what the user names (a HAR file, a corpus directory, a bundled page, a URL) to pages."""

import os

from pltlab.archive import bundled, devtools
from pltlab.archive.corpus import read_corpus
from pltlab.archive.har import har_to_pages
from pltlab.archive.har import load as load_har
from pltlab.archive.model import Page
from pltlab.errors import PltError


def _norm(url: str) -> str:
    return url.rstrip("/").split("://", 1)[-1].lower()


def resolve(what: str, corpus: str | None = None) -> list[Page]:
    """``what``: a .har file, a directory of them, a DevTools log (pltlab.archive.devtools), a
    bundled page name (nytimes, ...), or a page URL found in ``corpus`` (a directory) or in the
    bundled corpus."""
    if os.path.isfile(what):
        if devtools.claims(what):
            return devtools.load_pages(what)
        return har_to_pages(load_har(what), what)
    if os.path.isdir(what):
        pages = [p for _, p in read_corpus(what)]
        if not pages:
            raise PltError(f"{what}: no .har pages in this directory")
        return pages
    if what in bundled.NAMES:
        return [bundled.load(what)]
    candidates = [p for _, p in read_corpus(corpus)] if corpus else []
    candidates += [bundled.load(n) for n in bundled.NAMES]
    for p in candidates:
        if _norm(p.url) == _norm(what):
            return [p]
    raise PltError(
        f"{what}: not a HAR file, a DevTools log, a corpus directory, a bundled page "
        f"({', '.join(bundled.NAMES)}) or a page URL of the corpus"
    )
