"""`pltlab import`: HAR files and seed `.pages` inputs -> one archive (HAR) per page."""

from __future__ import annotations

import os

from pltlab.archive import deps, devtools, repairs, seed
from pltlab.archive.corpus import page_row, write_corpus
from pltlab.archive.har import har_to_pages, load
from pltlab.archive.model import Page
from pltlab.archive.synth import materialize
from pltlab.errors import PltError


def _inputs(path: str) -> list[str]:
    if os.path.isdir(path):
        found = sorted(
            os.path.join(path, f) for f in os.listdir(path) if f.endswith((".har", ".pages")) or devtools.is_log_name(f)
        )
        if not found:
            raise PltError(f"{path}: no .har, .pages or DevTools log file in this directory")
        return found
    if not os.path.exists(path):
        raise PltError(f"{path}: no such file")
    return [path]


def load_inputs(paths: list[str]) -> tuple[list[Page], dict]:
    """Read and check every input before anything is written."""
    pages, report = [], {"orphans": [], "inputs": {}, "repairs": []}
    for given in paths:
        for path in _inputs(given):
            if path.endswith(".pages"):
                ps, rep = seed.import_pages_file(path)
                report["orphans"] += rep["orphans"]
            elif devtools.claims(path):  # *.devtoolslog.json, *.json.gz, a .json of CDP events
                ps = devtools.load_pages(path)
            elif path.endswith((".har", ".json")):
                ps = har_to_pages(load(path), path)
                for p in ps:
                    deps.complete(p)
            else:
                raise PltError(f"{path}: unknown input (expected .har, .pages or a DevTools log)")
            report["inputs"][path] = len(ps)
            report["repairs"] += [{"file": path, "kind": k, "count": n} for k, n in repairs.merge(ps).items()]
            pages += ps
    return pages, report


def import_paths(paths: list[str], out: str, synthesize: bool = False) -> dict:
    pages, report = load_inputs(paths)
    if synthesize:
        report["synthesized"] = sum(materialize(p) for p in pages)
    rows = [page_row(p, "") for p in pages]  # every error happens before anything is written
    report["files"] = write_corpus(pages, out)
    report["pages"] = [dict(r, file=f) for r, f in zip(rows, report["files"])]
    return report
