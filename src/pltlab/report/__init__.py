"""`pltlab report DIR`: statistics, the seeds' table (Markdown/CSV), figures and an HTML report."""

import os

from pltlab.errors import PltError
from pltlab.net import lateness
from pltlab.report import analysis as an
from pltlab.report import figures, html, tables

FIG_DIR = "output-figures"


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def validity_notes(a: dict, runs: list[dict]) -> list[tuple[str, bool]]:
    notes = [(f"{a['n_ok']} valid run(s) averaged; {len(a['invalid'])} invalid, "
              f"{len(a['failed'])} failed attempt(s), {len(a['failed_final'])} run(s) failed twice.",
              bool(a["invalid"] or a["failed_final"]))]
    notes.append(("Validity is proven per run from the kernel's TFO counters: a TFO run must raise the "
                  "client's TCPFastOpenActive, a run without TFO must not; invalid runs are never "
                  "averaged in.", False))
    reasons: dict[str, int] = {}
    for r in a["invalid"]:
        reasons[r["invalid_reason"]] = reasons.get(r["invalid_reason"], 0) + 1
    for r in a["failed"]:
        k = f"failed: {r['failure_reason']}"
        reasons[k] = reasons.get(k, 0) + 1
    notes += [(f"{n} x {why}", True) for why, n in sorted(reasons.items())]
    notes += late_rerun_notes(runs)
    lat = [r["lateness_p99_us"] for r in runs if r.get("lateness_p99_us") is not None]
    if lat:
        worst = max(lat)
        bad = worst > lateness.LATE_P99_US
        notes.append((f"Link emulator lateness (p99 per load): worst {worst / 1000:.2f} ms"
                      + (" — the machine was loaded; timing noise is likely" if bad else ""), bad))
    else:
        notes.append(("Link emulator lateness: not recorded (sweep killed before its runners closed)", False))
    return notes


def late_rerun_notes(runs: list[dict]) -> list[tuple[str, bool]]:
    """How many loads were re-run because the link emulator was late during them."""
    rerun = [r for r in runs if r.get("status") == "ok" and (r.get("late_reruns") or 0) > 0]
    if not rerun:
        return []
    total = sum(r["late_reruns"] for r in rerun)
    still = sum(1 for r in rerun if not r.get("valid") and "link emulator late" in (r.get("invalid_reason") or ""))
    return [(f"{len(rerun)} load(s) re-run because the link emulator was late during them "
             f"(p99 > {lateness.LATE_P99_US / 1000:g} ms or max > {lateness.LATE_MAX_US / 1000:g} ms): "
             f"{total} re-run(s) in all, {still} still late after them (invalid, not averaged in).", True)]


def build(out_dir: str) -> dict:
    """Write every report artefact into out_dir; returns the analysis and the paths."""
    runs, meta = an.load_runs(out_dir)
    if not runs:
        raise PltError(f"{out_dir}: the results database holds no run yet")
    a = an.analyse(runs)
    seeds, st = tables.seeds_rows(a), tables.stats_rows(a)
    written = {}
    for name, headers, rows in (("table", tables.SEED_HEADERS, seeds), ("stats", tables.STATS_HEADERS, st)):
        for ext, fmt in (("md", tables.markdown), ("csv", tables.to_csv)):
            p = os.path.join(out_dir, f"{name}.{ext}")
            _write(p, fmt(headers, rows))
            written[f"{name}.{ext}"] = p
    picks = [r["id"] for g in a["rows"] for side in (False, True)
             for r in [figures.median_run(g["runs"][side])] if r]
    reqs = an.load_requests(out_dir, picks) if picks else {}
    figs = figures.all_figures(a, reqs, os.path.join(out_dir, FIG_DIR))
    notes = validity_notes(a, runs)
    page = html.render(f"pltlab report: {meta.get('name', os.path.basename(out_dir))}",
                       html.sections(a, meta, seeds, st, figs, notes))
    written["report.html"] = os.path.join(out_dir, "report.html")
    _write(written["report.html"], page)
    return {"analysis": a, "seeds": seeds, "stats": st, "figures": figs, "files": written,
            "notes": notes, "meta": meta}
