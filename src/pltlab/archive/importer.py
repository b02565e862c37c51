"""`pltlab import`: archives of every format (pltlab.archive.formats) -> one archive (HAR) per page."""

from __future__ import annotations

from pltlab import gcpause
from pltlab.archive import formats, repairs
from pltlab.archive.corpus import page_row, write_corpus
from pltlab.archive.model import Page
from pltlab.archive.synth import materialize


def load_inputs(paths: list[str]) -> tuple[list[Page], dict]:
    """Read and check every input before anything is written."""
    pages, report = [], {"orphans": [], "inputs": {}, "repairs": []}
    for given in paths:
        for archive, fmt in formats.archives(given):
            got = formats.load(archive, fmt, imported=True)
            path = archive.path
            ps = got.pages
            report["orphans"] += got.orphans
            report["inputs"][path] = len(ps)
            report["repairs"] += [{"file": path, "kind": k, "count": n} for k, n in repairs.merge(ps).items()]
            pages += ps
    return pages, report


@gcpause.paused()  # a page of 20,000 objects: millions of containers (pltlab.gcpause)
def import_paths(paths: list[str], out: str, synthesize: bool = False) -> dict:
    pages, report = load_inputs(paths)
    if synthesize:
        report["synthesized"] = sum(materialize(p) for p in pages)
    rows = [page_row(p, "") for p in pages]  # every error happens before anything is written
    report["files"] = write_corpus(pages, out)
    report["pages"] = [dict(r, file=f) for r, f in zip(rows, report["files"])]
    return report
