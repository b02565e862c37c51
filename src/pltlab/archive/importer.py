"""`pltlab import`: HAR files and seed `.pages` inputs -> one archive (HAR) per page."""

from __future__ import annotations

import os

from pltlab.archive import deps, seed
from pltlab.archive.corpus import write_corpus
from pltlab.archive.har import har_to_pages, load
from pltlab.archive.model import Page
from pltlab.archive.synth import materialize
from pltlab.errors import PltError


def _inputs(path: str) -> list[str]:
    if os.path.isdir(path):
        found = sorted(os.path.join(path, f) for f in os.listdir(path)
                       if f.endswith((".har", ".pages")))
        if not found:
            raise PltError(f"{path}: no .har or .pages file in this directory")
        return found
    if not os.path.exists(path):
        raise PltError(f"{path}: no such file")
    return [path]


def load_inputs(paths: list[str]) -> tuple[list[Page], dict]:
    """Read and check every input before anything is written."""
    pages, report = [], {"orphans": [], "inputs": {}}
    for given in paths:
        for path in _inputs(given):
            if path.endswith(".pages"):
                ps, rep = seed.import_pages_file(path)
                report["orphans"] += rep["orphans"]
            elif path.endswith((".har", ".json")):
                ps = har_to_pages(load(path), path)
                for p in ps:
                    deps.complete(p)
            else:
                raise PltError(f"{path}: unknown input (expected .har or .pages)")
            report["inputs"][path] = len(ps)
            pages += ps
    return pages, report


def import_paths(paths: list[str], out: str, synthesize: bool = False) -> dict:
    pages, report = load_inputs(paths)
    if synthesize:
        report["synthesized"] = sum(materialize(p) for p in pages)
    report["files"] = write_corpus(pages, out)
    report["pages"] = [p.summary() for p in pages]
    return report
