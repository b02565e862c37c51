#!/usr/bin/env python3
"""Run the benches (benches/bench_*.py), each in its own process with its default arguments; print
a summary; write docs/performance.md from the result files (benches/performance_md.py). `make
bench`. Exit code 1 when a bench missed a target, failed or wrote no result file.

    python3 benches/run.py [--quick] [--list] [--results DIR] [--no-docs] [BENCH ...]

BENCH: a name or part of one (wan, bench_run, ...); default: every bench. --quick: each bench's
small form (a plumbing check, minutes in all); its files go to DIR/quick/ and never into
docs/performance.md. --results: another results folder (docs/performance.md is then not
rewritten unless --docs). A bench whose precondition is absent (not root, no corpus, no Ray)
records "skipped" and does not fail the run.
"""

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import record

HERE = Path(__file__).resolve().parent


def benches() -> list[Path]:
    return sorted(HERE.glob("bench_*.py"))


def select(names: list[str]) -> list[Path]:
    all_ = benches()
    if not names:
        return all_
    # a name that is a bench's whole name picks that bench only (bench_predict, not bench_predict_chromium)
    exact = {p.stem for p in all_}
    out = [p for p in all_ if any(n == p.stem or (n not in exact and n in p.stem) for n in names)]
    unknown = [n for n in names if not any(n == p.stem or n in p.stem for p in all_)]
    if unknown:
        sys.exit(f"run.py: no bench matches {', '.join(unknown)} (benches: {', '.join(p.stem for p in all_)})")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="BENCH")
    ap.add_argument("--quick", action="store_true", help="each bench's small form (plumbing check)")
    ap.add_argument("--list", action="store_true", help="list the benches, their commands and durations")
    ap.add_argument("--results", help="results folder (default benches/results, or $PLTLAB_BENCH_RESULTS)")
    ap.add_argument("--no-docs", action="store_true", help="do not rewrite docs/performance.md")
    ap.add_argument("--docs", action="store_true", help="rewrite docs/performance.md even with --results")
    a = ap.parse_args()
    chosen = select(a.names)
    if a.list:
        for p in chosen:
            m = record.read_meta(p) or {}
            print(f"{p.stem:22} {m.get('area', '?'):8} {m.get('duration', '?'):>16}  {m.get('command', '')}")
        return 0
    env = dict(os.environ)
    if a.results:
        env[record.RESULTS_ENV] = str(Path(a.results).resolve())
    folder = record.results_dir(a.quick, env.get(record.RESULTS_ENV))
    rows = []
    t_all = time.monotonic()
    for p in chosen:
        argv = [sys.executable, str(p)] + (["--quick"] if a.quick else [])
        print(f"== {p.stem}: {' '.join(['python3', os.path.relpath(p, HERE.parent)] + argv[2:])}", flush=True)
        before = _mtime(folder / f"{p.stem}.json")
        t = time.monotonic()
        rc = subprocess.run(argv, env=env, cwd=HERE.parent).returncode
        took = time.monotonic() - t
        res = _read(folder / f"{p.stem}.json") if _mtime(folder / f"{p.stem}.json") != before else None
        rows.append((p.stem, rc, took, res))
    print(f"\n== summary ({time.monotonic() - t_all:.0f} s; results in {folder})")
    failed = 0
    for name, rc, took, res in rows:
        if res is None and rc == 0:  # (record.py: a run that measured nothing keeps the earlier file)
            status, detail = "skipped", "nothing measured here: the earlier result file kept"
        elif res is None:
            status, detail = "NO RESULT", f"exit code {rc}: the bench ended before recording"
        else:
            status = res["status"]
            q = res.get("quiet") or {}
            detail = (
                f"{'quiet' if q.get('quiet') else 'not quiet'} (load {q.get('load1_start')}, others "
                f"{(q.get('others_cpu_share') or 0):.0%})"
            )
            if res.get("missed"):
                detail += "; missed: " + "; ".join(res["missed"])
            if res.get("skipped"):
                detail += f"; skipped: {res['skipped']}"
            if res.get("error"):
                detail += f"; {res['error']}"
        bad = rc != 0 or (res is None and status != "skipped") or status in ("missed", "error")
        failed += bad
        print(f"{name:22} {status.upper() if bad else status:10} {took:7.0f} s  {detail}")
    if not a.quick and not a.no_docs and (a.docs or not a.results):
        import performance_md

        out = performance_md.write(folder)
        print(f"wrote {os.path.relpath(out, HERE.parent)}")
    print(f"{failed} of {len(rows)} bench(es) failed or missed a target" if failed else "every bench met its targets")
    return 1 if failed else 0


def _mtime(p: Path) -> float | None:
    try:
        return p.stat().st_mtime_ns
    except OSError:
        return None


def _read(p: Path) -> dict | None:
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
