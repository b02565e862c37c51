#!/usr/bin/env python3
"""Page-archive figures (issue 3): import of the five cs244-2013 pages (target <= 2 s total),
import of a 250-entry HAR with bodies (target <= 1 s).

    python3 benches/bench_archive.py
"""

import json
import os
import statistics
import tempfile
import time

from pltlab.archive import har, importer, synth
from pltlab.archive.generate import generate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CS244 = os.path.join(os.path.dirname(ROOT), "shared", "corpus", "cs244-2013")


def timed(fn, runs=3):
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            t = time.monotonic()
            fn(os.path.join(d, "arc"))
            times.append(time.monotonic() - t)
    return statistics.median(times), max(times)


def cs244():
    if not os.path.isdir(CS244):
        print(f"cs244-2013 import: skipped ({CS244} absent)")
        return
    paths = [os.path.join(CS244, f) for f in ("Paper.pages", "Google.pages")]
    med, mx = timed(lambda out: importer.import_paths(paths, out))
    print(f"import of the five cs244-2013 pages: median {med:.3f} s, max {mx:.3f} s (target <= 2 s)")


def har250():
    page = generate(objects=250, total_bytes=5_000_000, origins=20, depth=4, seed=1)
    synth.materialize(page)
    doc = har.page_to_har(page)
    for e in doc["log"]["entries"]:  # as a browser would export it: no pltlab fields
        e.pop("_pltlab")
    with tempfile.TemporaryDirectory() as d:
        src = os.path.join(d, "page.har")
        with open(src, "w") as f:
            json.dump(doc, f)
        mb = os.path.getsize(src) / 1e6
        med, mx = timed(lambda out: importer.import_paths([src], out))
    print(
        f"import of a 250-entry HAR ({mb:.1f} MB, bodies included): median {med:.3f} s, max {mx:.3f} s (target <= 1 s)"
    )


if __name__ == "__main__":
    cs244()
    har250()
