"""`pltlab reproduce STUDY`: the published experiments (pltlab.studies), each run through the
experiment engine (pltlab.studies.engine: sweeps into SQLite, resumable with --resume, the same
progress display) and reported by pltlab.report (report.html)."""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Annotated

import typer
from rich.console import Console

from pltlab import units
from pltlab.cli.cluster import CONNECT_TIMEOUT_S, ClusterOpt, ConnectTimeoutOpt, SlotsOpt
from pltlab.cli.experiments import _print_seeds_table
from pltlab.errors import PltError
from pltlab.experiments import lock


def register(app: typer.Typer) -> None:
    rep = typer.Typer(no_args_is_help=True, help="Reproduce published experiments.")
    app.add_typer(rep, name="reproduce")
    for make in COMMANDS.values():  # one command per study of pltlab.studies.STUDIES
        make(rep)


def tfo_command(app: typer.Typer, name: str = "tfo") -> None:
    @app.command(name)
    def reproduce_tfo(
        quick: Annotated[bool, typer.Option("--quick", help="Fewer repetitions (the README's main job).")] = False,
        client: Annotated[str, typer.Option(help="builtin or chromium.")] = "builtin",
        corpus: Annotated[
            str | None, typer.Option(help="cs244-2013 folder: real bodies instead of the bundled pages.")
        ] = None,
        pages: Annotated[str | None, typer.Option(help="Only these pages (amazon,nytimes,wsj,wikipedia).")] = None,
        reps: Annotated[int | None, typer.Option(help="Repetitions (default 5, --quick 2).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        output: Annotated[
            str | None, typer.Option("-o", "--output", help="Output folder (default results/reproduce-tfo-TIME).")
        ] = None,
        resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run in -o DIR.")] = False,
        protocol: Annotated[
            str,
            typer.Option(help="recorded (http, as in 2013), or today's web: h1 or h2, every origin over https."),
        ] = "recorded",
        tls: Annotated[str, typer.Option(help="With --protocol h1/h2: TLS 1.3 full, resume or 0rtt.")] = "full",
        schemes: Annotated[
            str,
            typer.Option(
                help="recorded (the paper's: http, Chromium with the names renamed out of its HSTS preload "
                "list) or https (today's: the HSTS preload list's upgrades, Chromium's own)."
            ),
        ] = "recorded",
        cluster: ClusterOpt = None,
        slots: SlotsOpt = 1,
        connect_timeout: ConnectTimeoutOpt = CONNECT_TIMEOUT_S,
    ):
        """The TFO paper's experiment: RTT 20/100/200 ms, 4 Mbit/s down, 256 kbit/s up, TFO off vs on."""
        from pltlab.cli.cluster import executor
        from pltlab.experiments import sweep as sweeper
        from pltlab.report import build
        from pltlab.report.tables import seed_headers
        from pltlab.studies import engine
        from pltlab.studies import tfo as study

        if reps is not None:
            units.repetitions(reps, "--reps")
        params = {"quick": quick, "client": client, "corpus": corpus, "pages": pages, "reps": reps}
        if protocol != "recorded" or tls != "full":  # (earlier studies' parameters stay as they were)
            params.update(protocol=protocol, tls=tls)
        if schemes != "recorded":
            params.update(schemes=schemes)
        exps = study.experiments(params)
        ((_, exp),) = exps
        out_dir = output or os.path.join("results", time.strftime(f"{exp.name}-%Y%m%d-%H%M%S"))  # (-today)
        with lock.held(out_dir, "reproduce tfo"):  # until its report is written: one writer per folder
            engine.prepare(study.NAME, params, exps, out_dir, resume)
            ex = executor(cluster, slots, connect_timeout)
            err = Console(stderr=True)
            err.print(
                f"reproduce tfo: {', '.join(e.label for e in exp.pages)} x RTT 20/100/200 ms, 4 Mbit/s down, "
                f"256 kbit/s up, cubic, warm cookies, {exp.repetitions} repetition(s), {client} loader"
                f"{f', https + {protocol}, TLS {tls}' if protocol != 'recorded' else ''}"
                f"{', today: https by the HSTS preload list' if schemes != 'recorded' else ''} -> {out_dir}",
                highlight=False,
            )
            res = engine.run(study.NAME, params, exps, out_dir, resume=resume, console=err, executor=ex)
            res = res["sweeps"][exp.name]
            if sweeper.all_failed(res):
                err.print(
                    f"reproduce tfo: 0 runs in {res['wall_s']:.0f} s: all {res['failed']} failed (results in {out_dir})",
                    highlight=False,
                )
                raise typer.Exit(2) from None
            built = build(out_dir, study_sections=study.sections)
            rows = study.rows(built["analysis"])
            invalid = len(built["analysis"]["invalid"]) + len(built["analysis"]["failed_final"])
            if as_json:
                print(json.dumps({"rows": rows, "invalid_runs": invalid, "output_dir": os.path.abspath(out_dir)}))
                return
            out = Console()
            _print_seeds_table(
                out, built["seeds"], "pltlab: PLT with and without TFO (means)", seed_headers(built["analysis"])
            )
            lo, hi = study.PAPER["improvement_range"]
            out.print(
                f"Published ({study.PAPER['source']}): improvements from {lo:.0%} to {hi:.0%}, {study.PAPER['trend']}.",
                highlight=False,
            )
            ci = ", ".join(
                f"{r['page']}@{r['rtt_ms']:g}: [{r['improvement_ci'][0]:.1%}, {r['improvement_ci'][1]:.1%}]"
                for r in rows
                if r["improvement_ci"][0] is not None
            )
            out.print(f"95 % CIs of the improvement: {ci}", highlight=False)
            diffs = study.differences(rows)
            out.print("Differences from the paper: " + "; ".join(diffs), highlight=False)
            for c in built.get("checks") or []:  # savings the handshakes cannot account for, uplink queueing
                out.print(f"Check: {c}", highlight=False)
            out.print("Why results can differ:", highlight=False)
            for w in study.WHY:
                out.print(f"  - {w}", highlight=False)
            out.print(
                f"{res['runs']} run(s) this session in {res['wall_s']:.0f} s, {invalid} invalid/failed; "
                f"report: {built['files']['report.html']}",
                highlight=False,
            )


def icw_command(app: typer.Typer, name: str = "icw") -> None:
    """Register the `icw` command on ``app`` (a typer app or group)."""

    @app.command(name)
    def icw(
        config_file: Annotated[
            str | None,
            typer.Option(
                "--config",
                "-c",
                help="ICW-study experiment file (TOML, see examples/icw-study.toml); the flags below override it.",
            ),
        ] = None,
        quick: Annotated[
            bool | None,
            typer.Option(
                "--quick/--full",
                help="Fewer loads, loss points and corpus pages; 60 s fairness (< 15 min). Default: full, or the file's `quick`.",
                show_default=False,
            ),
        ] = None,
        out: Annotated[
            str,
            typer.Option(
                "--out",
                "-o",
                help="Output directory (one results database per part, results.json, tables.md, figures, report.html).",
            ),
        ] = "icw-results",
        cc: Annotated[
            str | None, typer.Option(help="Congestion control: cubic (the study's era; default), reno or bbr.")
        ] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        reps: Annotated[int | None, typer.Option(help="Loads per point (geometric mean); default 5, quick 2.")] = None,
        icw_list: Annotated[
            list[int] | None, typer.Option("--icw", help="ICWs of Fig. 19/20 (repeatable); default 1 3 8 16.")
        ] = None,
        rtt: Annotated[list[float] | None, typer.Option("--rtt", help="RTTs in ms of Fig. 19 (repeatable).")] = None,
        loss: Annotated[
            list[float] | None, typer.Option("--loss", help="Loss rates in % of Fig. 20 (repeatable).")
        ] = None,
        fairness_seconds: Annotated[
            float | None,
            typer.Option("--fairness-seconds", help="Duration of each fairness run; default 300, quick 60."),
        ] = None,
        only: Annotated[
            list[str] | None,
            typer.Option("--only", help="Run only these parts: rtt, loss, transfer, fairness (repeatable)."),
        ] = None,
        resume: Annotated[
            bool, typer.Option("--resume", help="Continue a killed study in --out DIR: no finished load is repeated.")
        ] = False,
        cluster: ClusterOpt = None,
        slots: SlotsOpt = 1,
        connect_timeout: ConnectTimeoutOpt = CONNECT_TIMEOUT_S,
    ):
        """Initial congestion window study (Yahoo! CDN, IMC 2011): PLT vs RTT and loss, object
        transfer times in RTTs, fairness of a large ICW against a long flow."""
        from pltlab.experiments.sweep import check_out_dir
        from pltlab.studies.icw.config import percent

        t0 = time.monotonic()
        try:
            check_out_dir(out)
            with lock.held(out, "reproduce icw"):  # until its report is written: one writer per folder
                reproduce_icw(
                    t0,
                    out,
                    resume,
                    as_json,
                    config_file,
                    quick=quick,
                    cc=cc,
                    reps=reps,
                    icws=icw_list or None,
                    rtts=rtt or None,
                    losses=[percent(x) for x in loss] if loss else None,
                    fairness_seconds=fairness_seconds,
                    parts=only or None,
                    cluster=(cluster, slots, connect_timeout),
                )
        except PltError as e:
            print(f"pltlab: error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None


def reproduce_icw(
    t0: float,
    out: str,
    resume: bool,
    as_json: bool,
    config_file: str | None,
    cluster: tuple[str | None, int, float] = (None, 1, CONNECT_TIMEOUT_S),
    **given,
) -> dict:
    """Run the ICW study's parts into ``out`` (resumable), then write its results.json, tables.md,
    figures and report.html; print the JSON object (``as_json``) or the tables."""
    from pltlab.report import study_report
    from pltlab.studies import engine, icw
    from pltlab.studies.icw import config

    p = icw.params(config.load(config_file) if config_file else {}, **given)
    exps = icw.experiments(p)
    engine.prepare(icw.NAME, p.as_json(), exps, out, resume)  # everything checked before anything runs
    from pltlab.cli.cluster import executor

    ex = executor(*cluster, keep_up=True)  # (--cluster: one Ray session, each node checked once)
    err = Console(stderr=True)
    n = sum(e.n_runs for _, e in exps)
    err.print(
        f"reproduce icw: {', '.join(p.parts)}: {n} run(s) ({'quick' if p.quick else 'full'}, cc {p.cc})"
        f"{' (resumed)' if resume else ''} -> {out}",
        highlight=False,
    )
    try:
        engine.run(
            icw.NAME,
            p.as_json(),
            exps,
            out,
            resume=resume,
            console=err,
            note={"config_file": os.path.abspath(config_file) if config_file else None},
            executor=ex,
        )
    finally:
        if ex is not None:
            ex.close()
    res = study_report(out, wall_time_s=round(time.monotonic() - t0, 1))
    slim = icw.summary(res, p.quick)
    if as_json:
        print(json.dumps(slim))
    else:
        with open(os.path.join(out, "tables.md")) as f:
            print(f.read())
        print(f"results, tables, figures and report.html in {res['output_dir']} ({res['wall_time_s']:.0f} s)")
    return slim


# study name (pltlab.studies.STUDIES) -> the function registering its command; the studies'
# options differ, so each has its own (imported lazily: `pltlab --help` stays fast)
COMMANDS = {"tfo": tfo_command, "icw": icw_command}
