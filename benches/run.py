#!/usr/bin/env python3
"""Run every benchmark in benches/ (bench_*.py) and print their figures. `make bench`."""

import runpy
import sys
from pathlib import Path

here = Path(__file__).parent
only = sys.argv[1:]
for path in sorted(here.glob("bench_*.py")):
    if only and not any(o in path.stem for o in only):
        continue
    print(f"== {path.stem}", flush=True)
    sys.argv = [str(path)]  # each bench with its default arguments, not run.py's filters
    runpy.run_path(str(path), run_name="__main__")
