"""A corpus: a directory of HAR files, one page each. Written all-or-nothing."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
import time
from dataclasses import replace
from urllib.parse import urlsplit

from pltlab.archive.har import har_to_pages, load, write_page
from pltlab.archive.model import Page
from pltlab.errors import PltError

# Page extras a corpus adds: [write time ns, index], the order of its pages; the page's id where
# it was read from ("<file>#<pageref>"), which har_to_pages gives back as Page.id.
ORDER_KEY = "corpus_order"
ID_KEY = "id"


def file_name(url: str, taken: set[str]) -> str:
    s = urlsplit(url)
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", (s.hostname or "page") + s.path).strip("_")[:60]
    base = f"{slug}-{hashlib.sha1(url.encode()).hexdigest()[:8]}"
    name, n = f"{base}.har", 1
    while name in taken:
        n += 1
        name = f"{base}-{n}.har"
    taken.add(name)
    return name


def _make_parents(path: str) -> str | None:
    """Create the missing folders above `path`; returns the topmost one created (None: none)."""
    parent = os.path.dirname(path)
    if os.path.isdir(parent):
        return None
    top = parent
    while not os.path.exists(os.path.dirname(top)):
        top = os.path.dirname(top)
    try:
        os.makedirs(parent)
    except OSError as e:
        raise PltError(f"{path}: cannot create its folder {parent}: {e.strerror or e}") from None
    return top


def write_corpus(pages: list[Page], out: str) -> list[str]:
    """Write every page under `out` (created with its missing parents); nothing is left behind on
    failure. Pages keep their ids and their order (read_corpus lists them in it, after pages
    written earlier)."""
    out = os.path.abspath(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise PltError(f"{out}: exists and is not a directory")
    created = _make_parents(out)
    parent = os.path.dirname(out)
    taken = set(os.listdir(out)) if os.path.isdir(out) else set()
    tmp, done = None, False
    stamp = time.time_ns()
    try:
        tmp = tempfile.mkdtemp(prefix=".pltlab-import-", dir=parent)
        names = []
        for i, p in enumerate(pages):
            name = file_name(p.url, taken)
            keep = {ORDER_KEY: [stamp, i], **({ID_KEY: p.id} if p.id else {})}
            write_page(replace(p, extras={**p.extras, **keep}), os.path.join(tmp, name))
            names.append(name)
        if not os.path.isdir(out):
            os.rename(tmp, out)  # atomic: the corpus appears complete or not at all
            tmp = None
        else:
            for name in names:
                os.replace(os.path.join(tmp, name), os.path.join(out, name))
        done = True
        return [os.path.join(out, n) for n in names]
    except OSError as e:
        raise PltError(f"{out}: cannot write the archive: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        if not done and created is not None:
            shutil.rmtree(created, ignore_errors=True)


def order_key(item: tuple[str, Page]) -> tuple:
    """(file, page) in the order `pltlab import` wrote them, then by file."""
    o = item[1].extras.get(ORDER_KEY)
    if isinstance(o, list) and len(o) == 2 and all(isinstance(x, int) for x in o):
        return (0, o[0], o[1], item[0])
    return (1, 0, 0, item[0])


def read_corpus(d: str) -> list[tuple[str, Page]]:
    """Every page of a corpus directory, in the order they were written (then by file name)."""
    if not os.path.isdir(d):
        raise PltError(f"{d}: not a directory")
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".har"):
            path = os.path.join(d, name)
            out += [(path, p) for p in har_to_pages(load(path), path)]
    return sorted(out, key=order_key)


def page_row(page: Page, file: str) -> dict:
    """A page's row as `pltlab import` reports it and `pltlab pages --json` lists it."""
    return dict(
        page.summary(),
        id=page.id,
        file=file,
        repairs=page.extras.get("repairs") or {},
        unreplayable=int(page.extras.get("unreplayable") or 0),
    )
