"""CLI: `pltlab run` (one configuration, repeated loads, TFO on/off/both), `pltlab calibrate`,
`pltlab sweep` (an experiment file's cross product) and `pltlab report`. Each parses its
arguments, calls one function of the layers below and prints what it returns; the options of
`run` are the knobs of scope "run" (pltlab.run.knobs)."""

import json
import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab import units
from pltlab.cli.cluster import CONNECT_TIMEOUT_S, ClusterOpt, ConnectTimeoutOpt, SlotsOpt
from pltlab.cli.options import CorpusOpt, knob_options
from pltlab.cli.progress import LoadProgress, Steps, working
from pltlab.errors import PltError


def _print_plt_table(out: Console, summary: list[dict], title: str) -> None:
    t = Table(title=f"page load time: {escape(title)}")
    for col in ("page", "RTT (ms)", "TFO", "n", "mean (ms)", "median (ms)", "CV"):
        t.add_column(col)
    for s in summary:
        t.add_row(
            escape(s["page"]),
            f"{s['rtt_ms']:g}",
            "on" if s["tfo"] else "off",
            str(s["n"]),
            f"{s['mean_ms']:.1f}",
            f"{s['median_ms']:.1f}",
            f"{s['cv']:.2%}",
        )
    out.print(t)


@knob_options("run")
def run(
    page: Annotated[str, typer.Argument(help="HAR file, corpus directory, bundled page (nytimes, ...) or page URL.")],
    knobs: dict,
    corpus: CorpusOpt = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object at the end: every load of every page that ran, and which pages failed.",
        ),
    ] = False,
    har: Annotated[
        str | None,
        typer.Option(
            "--har",
            metavar="DIR",
            help="Write each load's HAR 1.2 into DIR (made if missing; one file per load, named like --pcap's).",
        ),
    ] = None,
):
    """Load a page over an emulated WAN with replay servers: PLT per load, TFO on/off.
    A directory or multi-page HAR runs page by page; a page that fails is reported at the end
    (one line each, exit code 2) and the others still run."""
    from pltlab.net.emulator import AidWarnings
    from pltlab.run.batch import run_pages
    from pltlab.run.config import RunConfig
    from pltlab.run.runner import summarize

    cfg = RunConfig.from_knobs(knobs)  # every knob checked before anything is built
    bar = LoadProgress(cfg.reps * len(cfg.tfo_modes), Console(stderr=as_json), json_mode=as_json)
    out = bar.lines
    aids = AidWarnings()  # the link's refused precision aids: one line on stderr each, once

    def on_run(r):
        bar.load_done(r["page_id"])
        for line in aids.new(r.get("link_aids_missing")):
            bar.err.print(line, markup=False, highlight=False, soft_wrap=True)
        out.print(
            f"Experiment {r['rep']} {escape(r['page_id'])} @ {r['rtt_ms']:g}ms delay"
            f" ({'TFO' if r['tfo'] else 'no TFO'})",
            highlight=False,
        )
        mark = "" if r["valid"] else f"  [red]INVALID: {escape(r['invalid_reason'])}[/]"
        out.print(f"Fetching {escape(r['page'])} took {r['plt_ms'] / 1000:.3f}s.{mark}", highlight=False)
        for note in ("tfo_note", "tls_note"):
            if r.get(note):
                out.print(f"  [yellow]note: {escape(r[note])}[/]", highlight=False)

    def on_page(p, runs):
        bar.page_done()
        if as_json:
            return  # (stderr gets one line per failed page at the end)
        if p["status"] == "failed":
            out.print(f"[red]{escape(p['page_id'])}: FAILED: {escape(p['error'])}[/]", highlight=False)
        if runs:
            _print_plt_table(out, summarize(runs), p["page_id"])

    with bar:
        res = run_pages(
            page,
            cfg,
            corpus,
            har_dir=har,
            on_run=on_run,
            on_page=on_page,
            on_note=lambda n: out.print(f"[yellow]note: {escape(n)}[/]", highlight=False),
        )
    runs, failed = res["runs"], [p for p in res["pages"] if p["status"] == "failed"]
    invalid = [r for r in runs if not r["valid"]]
    if as_json:  # one object at the end, with every page that finished (and every failure)
        print(
            json.dumps(
                {
                    "runs": runs,
                    "summary": summarize(runs),
                    "invalid_runs": len(invalid),
                    "pages": res["pages"],
                    "failed_pages": len(failed),
                }
            )
        )
    elif invalid:
        out.print(f"[red]{len(invalid)} invalid run(s), not averaged in[/]")
    hars = [r["har"] for r in runs if r.get("har")]
    if hars and not as_json:
        out.print(f"HAR of each load: {len(hars)} file(s) in {escape(os.path.dirname(hars[0]))}", highlight=False)
    if failed:
        err_out = Console(stderr=True)
        for p in failed:
            err_out.print(f"pltlab: error: {p['page_id']}: {p['error']}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(2)


def calibrate(
    pages: Annotated[
        list[str], typer.Argument(help="Pages: HAR files, corpus directories, bundled names (amazon, ...).")
    ],
    output: Annotated[
        str, typer.Option("-o", "--output", help="Directory for the calibrated archives (NAME.har; created if needed).")
    ],
    loads: Annotated[int, typer.Option(help="Chromium loads per page (the median is stored).")] = 3,
    rtt: Annotated[str, typer.Option(help="RTT of the calibration loads.")] = "0ms",
    corpus: CorpusOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
):
    """Measure Chromium's compute on pages (loads at RTT 0) and write them with the calibration,
    for the built-in loader's --model chromium (docs/loaders.md "Compute calibration")."""
    from pltlab.experiments.sweep import check_out_dir
    from pltlab.run.calibrate import calibrate_pages

    if not 1 <= loads <= 100:
        raise PltError(f"invalid --loads {loads}: must be 1..100")
    units.duration_us(rtt, "--rtt")  # before anything is made
    out_dir = os.path.abspath(output)
    check_out_dir(out_dir)
    bar = Steps("calibration loads")
    log = bar.lines

    def on_page(d):
        if not as_json:
            log.print(
                f"{d['page']}: {d['matched']}/{d['objects']} objects matched, compute "
                f"{d['compute_ms_sum']:.0f} ms summed over objects, tail {d['tail_ms']:.0f} ms "
                f"({d['browser']}) -> {d['file']}",
                highlight=False,
            )

    def on_load(msg: str) -> None:
        log.print(msg, highlight=False)
        bar.advance()

    with bar:
        done = calibrate_pages(
            pages,
            out_dir,
            loads=loads,
            rtt=rtt,
            corpus=corpus,
            log=on_load,
            on_page=on_page,
            on_todo=lambda n: bar.total(n * loads),
        )
    if as_json:
        print(json.dumps({"pages": done}))


def sweep(
    file: Annotated[str, typer.Argument(help="Experiment file (TOML; its keys: `pltlab knobs`).")],
    resume: Annotated[bool, typer.Option("--resume", help="Continue a killed sweep in its output folder.")] = False,
    output: Annotated[str | None, typer.Option("-o", "--output", help="Output folder (default results/NAME).")] = None,
    report: Annotated[bool, typer.Option(help="Build the report (tables, figures, HTML) at the end.")] = True,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON object at the end: runs done/failed/invalid, output paths, the report's data.",
        ),
    ] = False,
    cluster: ClusterOpt = None,
    slots: SlotsOpt = 1,
    connect_timeout: ConnectTimeoutOpt = CONNECT_TIMEOUT_S,
):
    """Run an experiment file's full cross product into an SQLite results database."""
    from pltlab.cli.cluster import executor, require_root_here
    from pltlab.experiments import lock, spec
    from pltlab.experiments import sweep as sweeper
    from pltlab.report import summary

    exp = spec.load(file)
    out_dir = output or sweeper.default_out(exp)
    with lock.held(out_dir, "sweep"):  # from the checks to the report: one writer per folder
        sweeper.prepare(exp, out_dir, resume)  # refuse before printing anything
        ex = executor(cluster, slots, connect_timeout)  # (its options checked first)
        require_root_here(cluster, [exp.kind])  # (a folder the lock made is removed again)
        out = Console(stderr=True)
        out.print(
            f"{exp.name}: {len(exp.pages)} page(s) x {len(exp.configs)} configuration(s) x "
            f"{len(exp.tfo_modes)} TFO mode(s) x {exp.repetitions} repetition(s) = {exp.n_runs} runs "
            f"-> {out_dir}",
            highlight=False,
        )
        res = sweeper.run(exp, out_dir, resume=resume, console=out, executor=ex)
        if sweeper.all_failed(res):  # nothing measured: no report, a non-zero exit
            out.print(
                f"0 runs in {res['wall_s']:.1f} s: all {res['failed']} failed (results in {out_dir})", highlight=False
            )
            if as_json:
                print(json.dumps(summary.sweep(out_dir, res, None)))
            raise typer.Exit(2)
        out.print(
            f"{res['runs']} run(s) in {res['wall_s']:.1f} s ({res['failed']} failed, {res['invalid']} invalid); "
            f"sum of PLTs / wall time = {res['efficiency']:.2f}",
            highlight=False,
        )
        rep = _report(out_dir, None if as_json else Console()) if report else None
        if as_json:
            print(json.dumps(summary.sweep(out_dir, res, rep)))


def report(
    out_dir: Annotated[str, typer.Argument(help="An experiment's output folder.")],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object: the tables as data, the notes, the files written.")
    ] = False,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="KNOB",
            help="The knob compared (tfo, protocol, tls, initcwnd, ...): its baseline against each other value it "
            "took, paired by page and configuration; default: the experiment's own (compare key, else TFO).",
        ),
    ] = None,
):
    """Statistics, the PLT table (Markdown/CSV), figures (output-figures/) and report.html."""
    rep = _report(out_dir, None if as_json else Console(), by)
    if as_json:
        print(json.dumps(rep))


def salvage(
    folder: Annotated[str, typer.Argument(help="A results folder whose database is damaged (it is only read).")],
    output: Annotated[str, typer.Option("-o", "--output", help="New results folder for what is readable.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
):
    """Copy what is readable of a damaged results database into a new folder (runs keep their
    ids; runs that lost request rows are left out, so --resume measures them again)."""
    from pltlab.experiments.salvage import salvage as run_salvage

    res = run_salvage(folder, output)
    if as_json:
        print(json.dumps(res))
        return
    for table, t in res["tables"].items():
        lost = ", ".join(f"{lo}-{hi}" if lo != hi else str(lo) for lo, hi in t["lost_ranges"])
        print(f"{table}: {t['kept']} row(s) kept" + (f"; unreadable ids: {lost}" if lost else ""))
    if res["dropped_runs"]:
        print(f"left out: {len(res['dropped_runs'])} run(s) whose request rows were damaged")
    print(
        f"salvaged into {output}: pltlab report {output}"
        + (
            " (pltlab sweep FILE -o ... --resume measures the missing runs)"
            if "experiment.toml" in res["files"]
            else ""
        )
    )


def _print_seeds_table(out: Console, rows: list[list[str]], title: str, headers: list[str]) -> None:
    t = Table(title=title)
    for i, col in enumerate(headers):
        t.add_column(col, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    out.print(t)


def _report(out_dir: str, out: Console | None, by: str | None = None) -> dict:
    """Build the report; print its table and paths on ``out`` (None: print nothing); returns it
    as data (pltlab.report.summary)."""
    from pltlab.report import build, study_report, summary
    from pltlab.studies.engine import STUDY_FILE

    if not os.path.exists(os.path.join(out_dir, "results.sqlite")) and os.path.exists(
        os.path.join(out_dir, STUDY_FILE)
    ):
        if by is not None:
            raise PltError(f"{out_dir}: a study's folder: its report compares what the study compares (no --by)")
        with working(f"report: {out_dir}: the study's tables, figures and report.html"):
            res = study_report(out_dir)  # a study's folder (pltlab reproduce icw): its experiments' databases
        if out is not None:
            out.print(f"report: {os.path.join(out_dir, 'report.html')}", highlight=False)
        return summary.study(out_dir, res)
    with working(f"report: {out_dir}: statistics, tables, figures and report.html"):
        built = build(out_dir, by=by)
    if out is None:
        return summary.report(out_dir, built)
    from pltlab.report.tables import seed_headers

    _print_seeds_table(out, built["seeds"], f"PLT table ({out_dir})", seed_headers(built["analysis"]))
    for note, bad in built["notes"]:
        if bad:
            out.print(f"[yellow]{note}[/]", highlight=False)
    out.print(
        f"report: {built['files']['report.html']}  figures: {len(built['figures'])} files in "
        f"{os.path.join(out_dir, 'output-figures')}",
        highlight=False,
    )
    return summary.report(out_dir, built)


def register(app: typer.Typer) -> None:
    app.command()(run)
    app.command()(calibrate)
    app.command()(sweep)
    app.command("report")(report)
    app.command("salvage")(salvage)
