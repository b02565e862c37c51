#!/usr/bin/env python3
"""Other tools' archives (issue 28): export of a generated 500-object page as a Mahimahi record
folder and as a Web Page Replay archive, and the import of each (pltlab import: read, repairs,
initiators, the corpus written), target <= 2 s each. Median of 3 (1 with --quick).

    python3 benches/bench_formats.py [--quick]
"""

import argparse
import os
import statistics
import sys
import tempfile
import time

import record

from pltlab.archive import importer, mahimahi, synth, wpr
from pltlab.archive.generate import generate

OBJECTS = 500
ON = "archive.generate(500 objects, 10 MB, 20 origins, depth 4, https, seed 1), bodies synthesized, a third gzip"
META = {
    "name": "bench_formats",
    "area": "archive",
    "title": "Mahimahi and Web Page Replay archives in and out",
    "command": "python3 benches/bench_formats.py",
    "quick": "python3 benches/bench_formats.py --quick",
    "duration": "~30 s",
    "needs": "nothing",
    "figures": {
        "export_mahimahi": {
            "name": "export of a 500-object page as a Mahimahi record folder",
            "unit": "s",
            "target": ("<=", 2.0),
            "on": "archive.generate(500 objects, 10 MB, 20 origins, depth 4, https, seed 1), bodies synthesized, a third gzip, median of 3",
        },
        "import_mahimahi": {
            "name": "import of a Mahimahi record folder of 500 objects",
            "unit": "s",
            "target": ("<=", 2.0),
            "on": "archive.generate(500 objects, 10 MB, 20 origins, depth 4, https, seed 1), bodies synthesized, a third gzip, median of 3",
        },
        "export_wpr": {
            "name": "export of a 500-object page as a Web Page Replay archive",
            "unit": "s",
            "target": ("<=", 2.0),
            "on": "archive.generate(500 objects, 10 MB, 20 origins, depth 4, https, seed 1), bodies synthesized, a third gzip, median of 3",
        },
        "import_wpr": {
            "name": "import of a Web Page Replay archive of 500 objects",
            "unit": "s",
            "target": ("<=", 2.0),
            "on": "archive.generate(500 objects, 10 MB, 20 origins, depth 4, https, seed 1), bodies synthesized, a third gzip, median of 3",
        },
    },
}


def page():
    p = generate(objects=OBJECTS, total_bytes=10_000_000, origins=20, depth=4, seed=1, scheme="https")
    synth.materialize(p)
    for o in p.objects[::3]:  # recorded encoded: the export encodes them as the replay sends them
        o.headers.append(("Content-Encoding", "gzip"))
        o.encoding, o.transfer_size = "gzip", None
    return p


def timed(fn, runs):
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as d:
            t = time.monotonic()
            fn(d)
            times.append(time.monotonic() - t)
    return times


def one(b, fmt: str, write, name: str, runs: int) -> None:
    p = page()
    out_name = "rec" if fmt == "mahimahi" else "rec.wprgo"
    times = timed(lambda d: write([p], os.path.join(d, out_name)), runs)
    med = statistics.median(times)
    print(f"export of a {OBJECTS}-object page as {name}: median {med:.3f} s, max {max(times):.3f} s (target <= 2 s)")
    b.figure(f"export_{fmt}", med, samples=times, on=f"{ON}, median of {runs}")
    with tempfile.TemporaryDirectory() as src:
        path = os.path.join(src, out_name)
        write([p], path)
        times = timed(lambda d: importer.import_paths([path], os.path.join(d, "corpus")), runs)
    med = statistics.median(times)
    print(f"import of {name} of {OBJECTS} objects: median {med:.3f} s, max {max(times):.3f} s (target <= 2 s)")
    b.figure(f"import_{fmt}", med, samples=times, on=f"{ON}, median of {runs}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="one run each (plumbing check)")
    a = ap.parse_args()
    runs = 1 if a.quick else 3
    with record.Bench(META, quick=a.quick) as b:
        one(b, "mahimahi", mahimahi.write, "a Mahimahi record folder", runs)
        one(b, "wpr", wpr.write, "a Web Page Replay archive", runs)
    return b.exit_code


if __name__ == "__main__":
    sys.exit(main())
