#!/usr/bin/env python3
"""Page-archive figures (issue 3): import of the five cs244-2013 pages (target <= 2 s total),
import of a 250-entry HAR with bodies (target <= 1 s). Median of 3 imports each (1 with --quick).

    python3 benches/bench_archive.py [--quick]
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import record

from pltlab.archive import har, importer, synth
from pltlab.archive.generate import generate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CS244 = os.path.join(os.path.dirname(ROOT), "shared", "corpus", "cs244-2013")

META = {
    "name": "bench_archive",
    "area": "archive",
    "title": "Archive imports",
    "command": "python3 benches/bench_archive.py",
    "quick": "python3 benches/bench_archive.py --quick",
    "duration": "~15 s",
    "needs": "../shared/corpus/cs244-2013 for the first figure",
    "figures": {
        "import_cs244": {
            "name": "import of the five cs244-2013 pages (Paper.pages + Google.pages)",
            "unit": "s",
            "target": ("<=", 2.0),
            "on": "../shared/corpus/cs244-2013, median of 3 imports",
        },
        "import_har250": {
            "name": "import of a 250-entry HAR with bodies",
            "unit": "s",
            "target": ("<=", 1.0),
            "on": "archive.generate(250 objects, 5 MB, 20 origins, seed 1) exported as a browser HAR, median of 3 imports",
        },
    },
}


def timed(fn, runs=3):
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            t = time.monotonic()
            fn(os.path.join(d, "arc"))
            times.append(time.monotonic() - t)
    return times


def cs244(b, runs):
    if not os.path.isdir(CS244):
        print(f"cs244-2013 import: skipped ({CS244} absent)")
        b.skip(f"{CS244} absent", key="import_cs244")
        return
    paths = [os.path.join(CS244, f) for f in ("Paper.pages", "Google.pages")]
    times = timed(lambda out: importer.import_paths(paths, out), runs)
    med = statistics.median(times)
    print(f"import of the five cs244-2013 pages: median {med:.3f} s, max {max(times):.3f} s (target <= 2 s)")
    b.figure("import_cs244", med, samples=times, on=f"../shared/corpus/cs244-2013, median of {runs}")


def har250(b, runs):
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
        times = timed(lambda out: importer.import_paths([src], out), runs)
    med = statistics.median(times)
    print(
        f"import of a 250-entry HAR ({mb:.1f} MB, bodies included): median {med:.3f} s, max {max(times):.3f} s (target <= 1 s)"
    )
    b.figure(
        "import_har250",
        med,
        samples=times,
        on=f"a generated 250-entry HAR of {mb:.1f} MB with bodies, median of {runs}",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one import each (plumbing check)")
    a = ap.parse_args()
    runs = 1 if a.quick else 3
    with record.Bench(META, quick=a.quick) as b:
        cs244(b, runs)
        har250(b, runs)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
