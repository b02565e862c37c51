"""A corpus: a directory of HAR files, one page each. Written all-or-nothing."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from urllib.parse import urlsplit

from pltlab.archive.har import load, har_to_pages, write_page
from pltlab.archive.model import Page
from pltlab.errors import PltError


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


def write_corpus(pages: list[Page], out: str) -> list[str]:
    """Write every page under `out` (created if needed); nothing is left behind on failure."""
    out = os.path.abspath(out)
    parent = os.path.dirname(out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise PltError(f"{out}: exists and is not a directory")
    if not os.path.isdir(parent):
        raise PltError(f"{out}: parent directory {parent} does not exist")
    taken = set(os.listdir(out)) if os.path.isdir(out) else set()
    tmp = tempfile.mkdtemp(prefix=".pltlab-import-", dir=parent)
    try:
        names = []
        for p in pages:
            name = file_name(p.url, taken)
            write_page(p, os.path.join(tmp, name))
            names.append(name)
        if not os.path.isdir(out):
            os.rename(tmp, out)  # atomic: the corpus appears complete or not at all
            tmp = None
        else:
            for name in names:
                os.replace(os.path.join(tmp, name), os.path.join(out, name))
        return [os.path.join(out, n) for n in names]
    except OSError as e:
        raise PltError(f"{out}: cannot write the archive: {e.strerror or e}") from None
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def read_corpus(d: str) -> list[tuple[str, Page]]:
    if not os.path.isdir(d):
        raise PltError(f"{d}: not a directory")
    out = []
    for name in sorted(os.listdir(d)):
        if name.endswith(".har"):
            path = os.path.join(d, name)
            out += [(path, p) for p in har_to_pages(load(path), path)]
    return out
