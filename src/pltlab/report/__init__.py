"""`pltlab report DIR`: statistics, the seeds' table (Markdown/CSV), figures and an HTML report;
and a study's report (build_study): its tables, checks and figures with every experiment's
validity notes, experiment file and environment, in the same report.html."""

import json
import os

from pltlab import files
from pltlab.errors import PltError
from pltlab.experiments import lock, stats
from pltlab.experiments.results import DB_NAME
from pltlab.net import lateness
from pltlab.report import effects, figures, headline, html, nodes, tables, waterfalls, why
from pltlab.report import statistics as an
from pltlab.run import knobs
from pltlab.studies import STUDIES, engine

FIG_DIR = "output-figures"


def _write(path: str, text: str) -> None:
    files.write_text(path, text)


def counts(runs: list[dict]) -> dict:
    """The run counts validity_notes reads, for results of any measurement kind."""
    ok = [r for r in runs if r["status"] == "ok" and r["valid"]]
    failed = [r for r in runs if r["status"] == "failed"]
    keys_ok = {r["run_key"] for r in runs if r["status"] == "ok"}
    return {
        "n_ok": len(ok),
        "failed": failed,
        "invalid": [r for r in runs if r["status"] == "ok" and not r["valid"]],
        "failed_final": [r for r in failed if r["run_key"] not in keys_ok],
    }


def validity_notes(a: dict, runs: list[dict], tfo: bool = True) -> list[tuple[str, bool]]:
    notes = [
        (
            f"{a['n_ok']} valid run(s) {'averaged' if tfo else 'kept'}; {len(a['invalid'])} invalid, "
            f"{len(a['failed'])} failed attempt(s), {len(a['failed_final'])} run(s) failed twice.",
            bool(a["invalid"] or a["failed_final"]),
        )
    ]
    if tfo:
        notes.append(
            (
                "Validity is proven per run from the kernel's TFO counters: a TFO run must raise the "
                "client's TCPFastOpenActive, a run without TFO must not; invalid runs are never "
                "averaged in.",
                False,
            )
        )
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
        notes.append(
            (
                f"Link emulator lateness (p99 per load): worst {worst / 1000:.2f} ms"
                + (" — the machine was loaded; timing noise is likely" if bad else ""),
                bad,
            )
        )
    elif any(r.get("plt_ms") is not None for r in runs):  # (flows measure no load: none to record)
        notes.append(("Link emulator lateness: not recorded (sweep killed before its runners closed)", False))
    return notes


def late_rerun_notes(runs: list[dict]) -> list[tuple[str, bool]]:
    """How many loads were re-run because the link emulator was late during them."""
    rerun = [r for r in runs if r.get("status") == "ok" and (r.get("late_reruns") or 0) > 0]
    if not rerun:
        return []
    total = sum(r["late_reruns"] for r in rerun)
    still = sum(1 for r in rerun if not r.get("valid") and "link emulator late" in (r.get("invalid_reason") or ""))
    return [
        (
            f"{len(rerun)} load(s) re-run because the link emulator was late during them "
            f"(p99 > {lateness.LATE_P99_US / 1000:g} ms or max > {lateness.LATE_MAX_US / 1000:g} ms): "
            f"{total} re-run(s) in all, {still} still late after them (invalid, not averaged in).",
            True,
        )
    ]


def build(out_dir: str, study_sections=None, by: str | None = None) -> dict:
    """Write every report artefact into out_dir; returns the analysis and the paths.
    ``study_sections(analysis)``: a study's sections (pltlab.studies.engine.table/lines, e.g. its
    comparison with the published results), shown after the tables. ``by``: the knob compared
    (any of its names: "protocol", "tls", ...; default: the folder's own, its sweep's ``compare``,
    else TFO); a knob of more than two values pairs each other value with its baseline
    (statistics.baseline). Holds the folder's lock."""
    if not os.path.isfile(os.path.join(out_dir, DB_NAME)):
        an.load_runs(out_dir)  # (its one line: no database here)
    col = None if by is None else an.by_column(by)  # (a bad name: one line, before anything is read)
    with lock.held(out_dir, "report", create=False):
        return _build(out_dir, study_sections, col)


def by_of(out_dir: str, runs: list[dict], meta: dict, col: str | None) -> str:
    """The results column to compare by: ``col`` (checked: the folder's valid loads take two
    values of it or more), else the folder's own axis."""
    if col is None:
        return an.by_column(an.default_by(meta))
    got = {json.dumps(an.value(r, col)) for r in runs if r["status"] == "ok" and r["valid"] and r["plt_ms"] is not None}
    if len(got) < 2:
        k = knobs.by_column(col)
        name = "tfo" if col == "tfo" else (k.name if k else col)
        seen = ", ".join(an.show(col, json.loads(v)) for v in sorted(got)) or "no valid load"
        raise PltError(f"{out_dir}: --by {name}: its valid loads have one value of it ({seen}): nothing to compare")
    return col


def _build(out_dir: str, study_sections=None, col: str | None = None) -> dict:
    runs, meta = an.load_runs(out_dir)
    if not runs:
        raise PltError(f"{out_dir}: the results database holds no run yet")
    by = by_of(out_dir, runs, meta, col)
    study = engine.read_study(out_dir)
    if (
        study_sections is None
        and study
        and study.get("study") in STUDIES
        and set((study.get("experiments") or {"": ""}).values()) == {""}
    ):
        study_sections = STUDIES[study["study"]].sections  # a study run into this very folder (tfo)
    a = an.analyse(runs, by)
    seeds, st = tables.seeds_rows(a), tables.stats_rows(a)
    eff = effects.effects(runs)
    eff_rows = effects.table_rows(eff)
    written = {}
    outputs = [("table", tables.seed_headers(a), seeds), ("stats", tables.stats_headers(a), st)]
    if eff:  # what each feature saves (knobs varied besides the RTT), paired
        outputs.append(("effects", effects.HEADERS, eff_rows))
    if nodes.on_cluster(runs):  # statistics split by node (pltlab.cluster)
        outputs.append(("nodes", nodes.HEADERS, nodes.rows(runs)))
    for name, headers, rows in outputs:
        for ext, fmt in (("md", tables.markdown), ("csv", tables.to_csv)):
            p = os.path.join(out_dir, f"{name}.{ext}")
            _write(p, fmt(headers, rows))
            written[f"{name}.{ext}"] = p
    picks = [r["id"] for g in a["rows"] for side in (False, True) for r in [figures.median_run(g["runs"][side])] if r]
    reqs = an.load_requests(out_dir, picks) if picks else {}
    figs = figures.all_figures(a, reqs, os.path.join(out_dir, FIG_DIR))
    figs = figures.effects_vs_rtt(eff, os.path.join(out_dir, FIG_DIR)) + figs
    notes = validity_notes(a, runs) + nodes.notes(runs)  # (cluster sweeps: machines that differ)
    warning = headline.warning(a)
    if warning:
        notes.append((warning, True))
    extra = list(study_sections(a)) if study_sections else []
    checks = why.checks(out_dir, a)  # savings beyond what the handshakes account for, uplink queueing
    if checks:
        extra.append(why.section(checks))
    if eff:
        extra.append(
            {
                "title": f"What each feature saves (paired by page, RTT, other knobs and repetition; {stats.INTERVAL}s)",
                "headers": effects.HEADERS,
                "rows": eff_rows,
            }
        )
    if nodes.on_cluster(runs):
        extra.append(nodes.section(runs))
    wf_html, n_wf = waterfalls.section(out_dir, a["rows"])
    page = html.render(
        f"pltlab report: {meta.get('name', os.path.basename(out_dir))}",
        html.sections(
            a,
            meta,
            (headline.sentences(a, why.sentence_hook(out_dir)), headline.headers(a), headline.rows(a)),
            tables.compact_stats(a),
            figs,
            notes,
            extra,
            waterfalls=wf_html if n_wf else "",
            warning=warning,
        ),
        css=waterfalls.css() if n_wf else "",
    )
    written["report.html"] = os.path.join(out_dir, "report.html")
    _write(written["report.html"], page)
    return {
        "analysis": a,
        "seeds": seeds,
        "stats": st,
        "effects": eff,
        "figures": figs,
        "files": written,
        "notes": notes,
        "checks": checks,
        "meta": meta,
    }


# ---- a study's report --------------------------------------------------------------------
def section_markdown(sec: dict) -> str:
    out = [f"## {sec['title']}", ""]
    if sec.get("note"):
        out += [sec["note"], ""]
    if "rows" in sec:
        out.append(tables.markdown(sec["headers"], sec["rows"]))
    else:
        out += [f"- {x}" for x in sec["lines"]] + [""]
    return "\n".join(out)


def study_report(out_dir: str, wall_time_s: float | None = None) -> dict:
    """A study's results from its experiments' databases (the study and its parameters from
    study.json), with its figures, results.json, tables.md and report.html written into
    ``out_dir``; returns the study's results (``output_dir``, ``wall_time_s``, ``quick`` added)."""
    doc = engine.read_study(out_dir)
    study = STUDIES.get((doc or {}).get("study"))
    if study is None or not hasattr(study, "results"):  # (tfo: one sweep in the folder, build())
        raise PltError(f"{out_dir}: no {engine.STUDY_FILE} of a study with parts here")
    with lock.held(out_dir, "report", create=False):
        return _study_report(out_dir, study, doc, wall_time_s)


def _study_report(out_dir: str, study, doc: dict, wall_time_s: float | None) -> dict:
    p = study.params(doc["params"])
    res = study.results(p, out_dir, why.StudyExplainer())
    res.update(output_dir=os.path.abspath(out_dir), wall_time_s=wall_time_s, quick=p.quick)
    res["figures"] = study.figures(res, out_dir)
    build_study(
        out_dir,
        study.title(p, res),
        study.sections(res),
        res["figures"],
        study.document(p, res, doc.get("config_file")),
        {e.name: os.path.join(out_dir, sub) for sub, e in study.experiments(p)},
    )
    return res


def build_study(
    out_dir: str, title: str, sections: list[dict], figure_paths: list[str], results: dict, folders: dict[str, str]
) -> dict:
    """Write a study's results.json, tables.md and report.html into ``out_dir``: the study's
    ``sections`` (pltlab.studies.engine.table/lines) and figures, then per experiment (name ->
    its folder) its validity notes and experiment file, and the environment."""
    written = {
        "results.json": os.path.join(out_dir, "results.json"),
        "tables.md": os.path.join(out_dir, "tables.md"),
        "report.html": os.path.join(out_dir, "report.html"),
    }
    _write(written["results.json"], json.dumps(results, indent=1))
    _write(written["tables.md"], f"# {title}\n\n" + "\n".join(section_markdown(s) for s in sections))
    parts, notes, env = [], {}, {}
    for name, folder in folders.items():
        if not os.path.isfile(os.path.join(folder, DB_NAME)):
            continue  # not run (yet); a damaged database is refused by load_runs
        runs, meta = an.load_runs(folder)
        tfo = any(r.get("tfo") for r in runs)
        notes[name] = validity_notes(counts(runs), runs, tfo=tfo)
        env = meta.get("last_environment") or meta.get("environment") or env
        parts.append((f"{name}: validity", html.notes(notes[name])))
        parts.append((f"{name}: experiment", html.pre(meta.get("experiment") or "(built in)")))
    body = [(s["title"], html.section(s)) for s in sections]
    pngs = [p for p in figure_paths if p.endswith(".png")]
    if pngs:
        body.append(("Figures", html.images(pngs)))
    body += parts
    body.append(("Environment", html.env_table(env)))
    _write(written["report.html"], html.render(title, body))
    return {"files": written, "notes": notes}
