"""Resolving what the user names (an archive of any format, a folder of them, a bundled page, a
URL) to pages: archives through pltlab.archive.formats, as `pltlab import` reads them."""

import difflib
import os

from pltlab.archive import bundled, formats
from pltlab.archive.corpus import order_key, read_corpus
from pltlab.archive.model import Page
from pltlab.errors import PltError


def _norm(url: str) -> str:
    return url.rstrip("/").split("://", 1)[-1].lower()


def archive_pages(path: str) -> list[Page]:
    """Every page of an archive or a folder of archives (in the order `pltlab import` wrote them,
    then by file); a file no format claims is read as HAR."""
    found = [(a.path, p) for a, fmt in formats.archives(path, formats.FALLBACK) for p in formats.load(a, fmt).pages]
    if os.path.isdir(path):
        found.sort(key=order_key)
    return [p for _, p in found]


def resolve(what: str, corpus: str | None = None) -> list[Page]:
    """``what``: an archive (pltlab.archive.formats: a HAR, a DevTools log, a seed .pages list),
    a folder of them, a bundled page name (nytimes, ...), or a page URL found in ``corpus`` (a
    directory) or in the bundled corpus."""
    if os.path.isfile(what) or os.path.isdir(what):
        return archive_pages(what)
    if what in bundled.NAMES:
        return [bundled.load(what)]
    candidates = [p for _, p in read_corpus(corpus)] if corpus else []
    candidates += [bundled.load(n) for n in bundled.NAMES]
    for p in candidates:
        if _norm(p.url) == _norm(what):
            return [p]
    names = list(bundled.NAMES)
    close = difflib.get_close_matches(what, names, n=3, cutoff=0.6)
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise PltError(
        f"{what}: no such file, bundled page or page URL of the corpus ({hint}bundled pages: "
        f"{len(names)}, e.g. {', '.join(names[:4])}: docs/formats.md lists them; archives: {formats.described()})"
    )
