"""`pltlab import`: archives of every format (pltlab.archive.formats) -> one archive (HAR) per page."""

from __future__ import annotations

from pltlab import gcpause
from pltlab.archive import formats, repairs
from pltlab.archive.corpus import page_row, write_corpus
from pltlab.archive.model import Page
from pltlab.archive.synth import materialize
from pltlab.errors import PltError


def load_inputs(paths: list[str], url: str | None = None) -> tuple[list[Page], dict]:
    """Read and check every input before anything is written. ``url``: the document of the one
    archive read (a format that finds documents itself: Mahimahi, Web Page Replay)."""
    pages, report = [], {"orphans": [], "inputs": {}, "repairs": []}
    found = [x for given in paths for x in formats.archives(given, url=url)]
    if url is not None:
        if len(found) != 1:
            raise PltError(f"--url names the document of one archive; {len(found)} archives given")
        ((archive, fmt),) = found
        if not fmt.named_document:
            named = " or ".join(f.what for f in formats.FORMATS if f.named_document)
            raise PltError(f"{archive.path}: --url names the document of {named}, not of {fmt.what}")
    for archive, fmt in found:
        got = formats.load(archive, fmt, imported=True)
        path = archive.path
        ps = got.pages
        report["orphans"] += got.orphans
        report["inputs"][path] = len(ps)
        report["repairs"] += [{"file": path, "kind": k, "count": n} for k, n in repairs.merge(ps).items()]
        pages += ps
    return pages, report


@gcpause.paused()  # a page of 20,000 objects: millions of containers (pltlab.gcpause)
def import_paths(paths: list[str], out: str, synthesize: bool = False, url: str | None = None) -> dict:
    pages, report = load_inputs(paths, url)
    if synthesize:
        report["synthesized"] = sum(materialize(p) for p in pages)
    rows = [page_row(p, "") for p in pages]  # every error happens before anything is written
    report["files"] = write_corpus(pages, out)
    report["pages"] = [dict(r, file=f) for r, f in zip(rows, report["files"])]
    return report
