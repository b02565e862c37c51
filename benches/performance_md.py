#!/usr/bin/env python3
"""Write docs/performance.md from the bench result files (benches/results/*.json), the benches'
declared figures (META in each benches/bench_*.py, read without importing them), the notes per
area (benches/notes.md) and the committed results folders (docs/results/). Run at the end of
`make bench`; by hand:

    python3 benches/performance_md.py [--results DIR] [--out FILE] [--check]

--check: write nothing, exit 1 if FILE differs from what would be written. The output depends
only on those files (no time of generation), so it is the same for the same results.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import record
from record import Target, fmt

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
OUT = REPO / "docs" / "performance.md"
DOCS_RESULTS = REPO / "docs" / "results"
NOTES = HERE / "notes.md"
DIARY = "148d16c"  # the last commit whose docs/performance.md was the session diary

AREAS = (
    ("link", "Link emulation"),
    ("replay", "Replay server"),
    ("loaders", "Page loads and loaders"),
    ("tls", "TLS 1.3 and HTTP/2"),
    ("h3", "HTTP/3 over QUIC"),
    ("sweeps", "Sweeps, studies and the cluster"),
    ("predict", "Prediction"),
    ("archive", "Archives and conformance"),
    ("soak", "Soak"),
    ("scale", "Scale"),
)

HEADER = "| figure | measured | target | met? | measured when | quiet? | command |\n|---|---|---|---|---|---|---|"


def cell(text) -> str:
    """Text for a table cell: no pipes, no line breaks."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def code(text: str) -> str:
    return f"`{text}`" if text else ""


def unit_text(v, unit: str) -> str:
    if not unit:
        return fmt(v)
    if unit == "%":
        return f"{fmt(v)} %"
    return f"{fmt(v)} {unit}"


def _short_unit(unit: str) -> str:
    """The unit a target is written in ("pages" for "of 28 pages")."""
    return "" if not unit or " " in unit else unit


def measured_text(f: dict) -> str:
    if f.get("skipped"):
        return f"skipped: {f['skipped']}"
    if f.get("value") is None:
        return "no value (nothing valid was measured)"
    out = unit_text(f["value"], f.get("unit", ""))
    d = f.get("dist") or {}
    parts = []
    if "median" in d and d.get("n", 0) > 1:
        parts.append(f"median of {d['n']}: min {fmt(d['min'])}, max {fmt(d['max'])}")
    elif "p50" in d:
        parts.append(
            ", ".join(f"{k} {fmt(d[k])}" for k in ("p50", "p99", "max") if k in d)
            + (f", n {d['n']}" if "n" in d else "")
        )
    rest = [k for k in d if k not in ("n", "min", "median", "max", "p50", "p90", "p99")]
    parts += [f"{k.replace('_', ' ')} {fmt(d[k])}" for k in rest]
    return out + (f" ({'; '.join(parts)})" if parts else "")


def target_text(t, unit: str) -> str:
    if t is None:
        return "—"
    if isinstance(t, str):
        return t
    if isinstance(t, dict):
        t = Target.from_json(t)
    else:
        t = Target.of(t)
    return t.text(_short_unit(unit))


def met_text(f: dict) -> str:
    if f.get("met") is True:
        return "met"
    if f.get("met") is False:
        return "**missed**"
    return "skipped" if f.get("skipped") else "no target"


def when_text(res: dict) -> str:
    ts = res.get("finished") or res.get("started") or ""
    return ts[:16].replace("T", " ") + " UTC" if ts else "—"


def quiet_text(res: dict) -> str:
    q = res.get("quiet") or {}
    if not q:
        return "—"
    # files measured under the earlier rule have the load average at the start instead of busy_before
    before = (
        f"busy before {q['busy_before'] * 100:.0f} %"
        if q.get("busy_before") is not None
        else f"load {fmt(q.get('load1_start'))}"
    )
    nums = f"{before}, others {(q.get('others_cpu_share') or 0) * 100:.0f} %"
    return f"yes ({nums})" if q.get("quiet") else f"**no** ({nums})"


def figure_name(f: dict) -> str:
    return f"{f['name']} (*{f['on']}*)" if f.get("on") else f["name"]


def bench_rows(meta: dict, res: dict | None) -> list[str]:
    """The table rows of one bench: its last run's figures, or its declared ones, not measured."""
    command = meta.get("command", "")
    rows = []
    if res is None:
        for spec in meta.get("figures", {}).values():
            name = f"{spec['name']} (*{spec['on']}*)" if spec.get("on") else spec["name"]
            rows.append(
                [
                    name,
                    f"not measured yet ({code(command)})",
                    target_text(spec.get("target"), spec.get("unit", "")),
                    "—",
                    "—",
                    "—",
                    code(command),
                ]
            )
        return rows
    when, quiet, cmd = when_text(res), quiet_text(res), code(res.get("command", command))
    if res.get("status") == "unreadable":
        return [["(the result file)", f"unreadable: {res.get('error')}", "—", "—", "—", "—", code(command)]]
    if res.get("skipped"):
        rows.append(["(every figure)", f"skipped: {res['skipped']}", "—", "skipped", when, quiet, cmd])
    if res.get("error"):
        rows.append(["(the run)", f"failed: {res['error']}", "—", "**error**", when, quiet, cmd])
    seen = set()
    for f in res.get("figures", []):
        seen.add(f.get("key"))
        unit = f.get("unit", "")
        rows.append(
            [figure_name(f), measured_text(f), target_text(f.get("target"), unit), met_text(f), when, quiet, cmd]
        )
    if not res.get("skipped") and not res.get("error"):
        for key, spec in meta.get("figures", {}).items():
            if key not in seen:
                rows.append(
                    [
                        spec["name"],
                        f"not in the last run ({code(command)} measures it)",
                        target_text(spec.get("target"), spec.get("unit", "")),
                        "—",
                        when,
                        quiet,
                        cmd,
                    ]
                )
    return rows


def table(rows: list[list[str]]) -> str:
    return "\n".join([HEADER] + ["| " + " | ".join(cell(c) for c in r) + " |" for r in rows])


def notes(path: Path = NOTES) -> dict[str, str]:
    """area -> its notes (markdown) from benches/notes.md's `## area` sections."""
    try:
        text = path.read_text()
    except OSError:
        return {}
    text = re.sub(r"<!--.*?-->", "", text, flags=re.S)
    out, key, buf = {}, None, []
    for line in text.splitlines():
        m = re.match(r"^## (\w+)\s*$", line)
        if m:
            if key:
                out[key] = "\n".join(buf).strip()
            key, buf = m.group(1), []
        elif key:
            buf.append(line)
    if key:
        out[key] = "\n".join(buf).strip()
    return out


def committed(folder: Path = DOCS_RESULTS) -> str:
    """The committed results folders: what each is, and the ICW study's full run from its
    results.json files."""
    if not folder.is_dir():
        return ""
    lines = []
    for md in sorted(folder.glob("*.md")):
        title = (md.read_text().splitlines() or [""])[0].lstrip("# ").strip()
        lines.append(f"- [{title}](results/{md.name}) (`docs/results/{md.stem}/`: experiment.toml, tables, effects)")
    for d in sorted(p for p in folder.iterdir() if p.is_dir() and list(p.glob("*/results.json"))):
        lines.append(
            f"- `docs/results/{d.name}/`: one `pltlab reproduce icw` study per sub-folder (results.json, tables.md, figures):"
        )
        lines.append("")
        lines.append("  | part | loads per point | wall time | every check passed | command |")
        lines.append("  |---|---|---|---|---|")
        for r in sorted(d.glob("*/results.json")):
            try:
                doc = json.loads(r.read_text())
            except (OSError, ValueError):
                continue
            checks = doc.get("checks") or {}
            ok = all(v.get("ok", True) for v in checks.values() if isinstance(v, dict)) if checks else None
            parts = (doc.get("params") or {}).get("parts") or []
            only = "" if len(parts) != 1 else f" --only {parts[0]}"
            wall = doc.get("wall_time_s")
            mins = f"{fmt(float(wall))} s ({float(wall) / 60:.0f} min)" if wall is not None else "—"
            cmd = f"pltlab reproduce icw{' --quick' if doc.get('quick') else ''}{only}"
            lines.append(
                f"  | {r.parent.name} | {doc.get('reps', '—')} | {mins} | {fmt(ok) if ok is not None else '—'} | `{cmd}` |"
            )
        lines.append("")
    return "\n".join(lines).rstrip()


def machines(results: dict[str, dict]) -> str:
    seen: dict[str, list[str]] = {}
    info = {}
    for name, res in sorted(results.items()):
        m = res.get("machine")
        if not m:
            continue
        key = json.dumps(
            {k: m.get(k) for k in ("hostname", "cpu_model", "cpus", "kernel", "pltlab_dp")}, sort_keys=True
        )
        seen.setdefault(key, []).append(name)
        info[key] = m
    if not seen:
        return ""
    rows = [
        "| machine | CPU | CPUs | memory | kernel | pltlab | pltlab-dp | Chromium | source | benches |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, names in seen.items():
        m = info[key]
        chromium = sorted(
            {results[n]["machine"].get("chromium") for n in names if results[n]["machine"].get("chromium")}
        )
        src = f"{m.get('git_commit')}{' + local changes' if m.get('git_dirty') else ''}" if m.get("git_commit") else "—"
        rows.append(
            "| "
            + " | ".join(
                cell(x)
                for x in (
                    m.get("hostname"),
                    m.get("cpu_model"),
                    m.get("cpus"),
                    f"{m.get('memory_gib')} GiB" if m.get("memory_gib") else "—",
                    m.get("kernel"),
                    m.get("pltlab"),
                    m.get("pltlab_dp"),
                    ", ".join(chromium) or "—",
                    src,
                    ", ".join(names),
                )
            )
            + " |"
        )
    return "\n".join(rows)


def how_to_read() -> str:
    return f"""## How to read it

- Every figure below comes from one file of `benches/results/` (one per bench, written by the
  bench through `benches/record.py`) or, for studies, from a committed results folder of
  `docs/results/`. This page is generated from them (`python3 benches/performance_md.py`, also
  the last step of `make bench`): edit the benches or `benches/notes.md`, not this file.
- **measured**: the figure, with what it was measured on in italics (pages, loads, RTTs). Where a
  bench repeats a measurement the figure is the median and the row gives n, min and max (or p50,
  p99 and max of a distribution of samples); a fidelity figure is the median PLT minus the
  analytic PLT. Where a model was calibrated the row says on what: the built-in loader vs
  Chromium rows are calibrated on 3 Chromium loads of the same page on the same machine
  (`pltlab calibrate`); the prediction's CPU terms were set once from the project's 2-core VM
  (notes under Prediction).
- **target** and **met?**: `met` is computed by `benches/record.py` from the value and the target,
  never written by hand; a bench exits non-zero when a target is missed, and so does `make bench`.
  "no target" rows are context for the ones with a target.
- **quiet?**: {record.QUIET_RULE}. The numbers behind the verdict (the busy share before the start,
  both load averages, the others' share and their worst {record.WINDOW_S:g}-s window, the bench's own share, irq and steal
  time) are in the file's `quiet` object; files measured before this rule judged the 1-minute load
  average at the start instead (their `rule` says so; the table shows "load"). Figures from a
  machine that was not quiet are kept, and say so.
- **not measured yet (command)**: no result file yet: the command measures it. A bench whose
  precondition is absent here (not root, no corpus, no Ray, no curl) records "skipped" with the
  reason. `python3 benches/run.py --quick` runs every bench in a small form (a plumbing check; its
  files go to `benches/results/quick/` and never here).
- The session-by-session diary this page replaced is in git history:
  `git show {DIARY}:docs/performance.md`.
"""


def summary(metas: dict[str, dict], results: dict[str, dict]) -> str:
    rows = [
        "| bench | area | last run | status | quiet? | took | estimated run time | command |",
        "|---|---|---|---|---|---|---|---|",
    ]
    titles = dict(AREAS)
    for area, _ in AREAS:
        for name, meta in metas.items():
            if meta.get("area") != area:
                continue
            res = results.get(name)
            status = res.get("status", "?") if res else "not measured yet"
            if status in ("missed", "error"):
                status = f"**{status}**"
            rows.append(
                "| "
                + " | ".join(
                    cell(x)
                    for x in (
                        name,
                        titles.get(area, area),
                        when_text(res) if res else "—",
                        status,
                        quiet_text(res) if res else "—",
                        f"{fmt(res.get('duration_s'))} s" if res and res.get("duration_s") is not None else "—",
                        meta.get("duration", "—"),
                        code(meta.get("command", "")),
                    )
                )
                + " |"
            )
    return "\n".join(rows)


def build(
    results_folder: Path | None = None,
    benches_dir: Path = HERE,
    notes_file: Path = NOTES,
    docs_results: Path = DOCS_RESULTS,
) -> str:
    results = record.load_results(results_folder or record.results_dir())
    metas = {}
    for p in sorted(Path(benches_dir).glob("bench_*.py")):
        m = record.read_meta(p)
        if m:
            metas[m["name"]] = m
    for name, res in results.items():  # a result without its bench file still shows
        metas.setdefault(name, {"name": name, "area": res.get("area"), "title": res.get("title") or name})
    nts = notes(notes_file)
    parts = [
        "# Performance and fidelity figures",
        "",
        "<!-- Generated by benches/performance_md.py from benches/results/*.json, the benches' META,\n"
        "benches/notes.md and docs/results/. Do not edit: run `make bench` or the generator. -->",
        "",
        "Every figure of this page names its command; `make bench` (`python3 benches/run.py`) runs them",
        "all, writes one result file per bench to `benches/results/` and then this page.",
        "",
        how_to_read(),
        "## Benches",
        "",
        summary(metas, results),
        "",
    ]
    mach = machines(results)
    if mach:
        parts += ["Measured on:", "", mach, ""]
    known = {a for a, _ in AREAS}
    areas = list(AREAS) + [(a, a) for a in sorted({m.get("area") or "other" for m in metas.values()} - known)]
    for area, title in areas:
        in_area = [m for m in metas.values() if (m.get("area") or "other") == area]
        extra = committed(docs_results) if area == "sweeps" else ""
        if not in_area and not extra and not nts.get(area):
            continue
        parts += [f"## {title}", ""]
        for meta in in_area:
            res = results.get(meta["name"])
            head = f"### {meta.get('title', meta['name'])} (`{meta['name']}`)"
            sub = []
            if meta.get("command"):
                sub.append(f"`{meta['command']}`")
            if meta.get("duration"):
                sub.append(f"estimated run time {meta['duration']}")
            if meta.get("needs"):
                sub.append(f"needs {meta['needs']}")
            if res:
                sub.append(f"last run: {res.get('status')}, {fmt(res.get('duration_s'))} s")
            parts += [head, "", "; ".join(sub) + ".", "", table(bench_rows(meta, res)), ""]
        if extra:
            parts += ["### Studies and experiments committed with their results", "", extra, ""]
        if nts.get(area):
            parts += ["### Notes", "", nts[area], ""]
    return "\n".join(parts).rstrip() + "\n"


def write(results_folder: Path | None = None, out: Path = OUT) -> Path:
    record.write_text_atomic(Path(out), build(results_folder))
    return Path(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", help="results folder (default benches/results)")
    ap.add_argument("--out", default=str(OUT), help="the page to write (default docs/performance.md)")
    ap.add_argument("--check", action="store_true", help="exit 1 if the page is not what the results give")
    a = ap.parse_args()
    folder = Path(a.results) if a.results else None
    if a.check:
        want = build(folder)
        try:
            have = Path(a.out).read_text()
        except OSError:
            have = ""
        if have != want:
            print(f"{a.out} is not generated from the current results: run python3 benches/performance_md.py")
            return 1
        return 0
    print(f"wrote {write(folder, Path(a.out))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
