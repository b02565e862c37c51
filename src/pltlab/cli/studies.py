"""`pltlab reproduce STUDY`: the published experiments (pltlab.studies)."""

from __future__ import annotations

import json
import os
import sys
from typing import Annotated, Optional

import typer
from rich.console import Console

from pltlab import units
from pltlab.cli.experiments import _print_seeds_table
from pltlab.errors import PltError


def register(app: typer.Typer) -> None:
    rep = typer.Typer(no_args_is_help=True, help="Reproduce published experiments.")
    app.add_typer(rep, name="reproduce")
    icw_command(rep)  # `pltlab reproduce icw`

    @rep.command("tfo")
    def reproduce_tfo(
        quick: Annotated[bool, typer.Option("--quick", help="Fewer repetitions (the README's main job).")] = False,
        client: Annotated[str, typer.Option(help="builtin or chromium.")] = "builtin",
        corpus: Annotated[Optional[str], typer.Option(help="cs244-2013 folder: real bodies instead of the bundled pages.")] = None,
        pages: Annotated[Optional[str], typer.Option(help="Only these pages (amazon,nytimes,wsj,wikipedia).")] = None,
        reps: Annotated[Optional[int], typer.Option(help="Repetitions (default 5, --quick 2).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        output: Annotated[Optional[str], typer.Option("-o", "--output", help="Output folder (default results/reproduce-tfo-TIME).")] = None,
        resume: Annotated[bool, typer.Option("--resume", help="Continue a killed run in -o DIR.")] = False,
    ):
        """The TFO paper's experiment: RTT 20/100/200 ms, 4 Mbit/s down, 256 kbit/s up, TFO off vs on."""
        import time

        from pltlab.experiments import sweep as sweeper
        from pltlab.report import build
        from pltlab.studies import tfo as reproduce

        if reps is not None:
            units.repetitions(reps, "--reps")
        exp = reproduce.experiment(quick=quick, client=client, corpus=corpus, pages=pages, reps=reps)
        out_dir = output or os.path.join("results", time.strftime("reproduce-tfo-%Y%m%d-%H%M%S"))
        sweeper.prepare(exp, out_dir, resume)
        err = Console(stderr=True)
        err.print(f"reproduce tfo: {', '.join(e.label for e in exp.pages)} x RTT 20/100/200 ms, 4 Mbit/s down, "
                  f"256 kbit/s up, cubic, warm cookies, {exp.repetitions} repetition(s), {client} loader "
                  f"-> {out_dir}", highlight=False)
        res = sweeper.run(exp, out_dir, resume=resume, console=err)
        if sweeper.all_failed(res):
            err.print(f"reproduce tfo: 0 runs in {res['wall_s']:.0f} s: all {res['failed']} failed "
                      f"(results in {out_dir})", highlight=False)
            raise typer.Exit(2)
        built = build(out_dir)
        rows = reproduce.rows(built["analysis"])
        invalid = len(built["analysis"]["invalid"]) + len(built["analysis"]["failed_final"])
        if as_json:
            print(json.dumps({"rows": rows, "invalid_runs": invalid, "output_dir": os.path.abspath(out_dir)}))
            return
        out = Console()
        _print_seeds_table(out, built["seeds"], "pltlab: PLT with and without TFO (means)")
        lo, hi = reproduce.PAPER["improvement_range"]
        out.print(f"Published ({reproduce.PAPER['source']}): improvements from {lo:.0%} to {hi:.0%}, "
                  f"{reproduce.PAPER['trend']}.", highlight=False)
        ci = ", ".join(f"{r['page']}@{r['rtt_ms']:g}: [{r['improvement_ci'][0]:.1%}, {r['improvement_ci'][1]:.1%}]"
                       for r in rows if r["improvement_ci"][0] is not None)
        out.print(f"95 % CIs of the improvement: {ci}", highlight=False)
        diffs = reproduce.differences(rows)
        out.print("Differences from the paper: " + "; ".join(diffs), highlight=False)
        out.print("Why results can differ:", highlight=False)
        for w in reproduce.WHY:
            out.print(f"  - {w}", highlight=False)
        out.print(f"{res['runs']} run(s) this session in {res['wall_s']:.0f} s, {invalid} invalid/failed; "
                  f"report: {built['files']['report.html']}", highlight=False)


def icw_command(app: typer.Typer, name: str = "icw") -> None:
    """Register the `icw` command on ``app`` (a typer app or group)."""

    @app.command(name)
    def icw(
        config_file: Annotated[Optional[str], typer.Option("--config", "-c", help="ICW-study experiment file (TOML, see examples/icw-study.toml); the flags below override it.")] = None,
        quick: Annotated[Optional[bool], typer.Option("--quick/--full", help="Fewer loads, loss points and corpus pages; 60 s fairness (< 15 min). Default: full, or the file's `quick`.", show_default=False)] = None,
        out: Annotated[str, typer.Option("--out", "-o", help="Output directory (results.json, tables.md, figures).")] = "icw-results",
        cc: Annotated[Optional[str], typer.Option(help="Congestion control: cubic (the study's era; default), reno or bbr.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
        reps: Annotated[Optional[int], typer.Option(help="Loads per point (geometric mean); default 5, quick 2.")] = None,
        icw_list: Annotated[Optional[list[int]], typer.Option("--icw", help="ICWs of Fig. 19/20 (repeatable); default 1 3 8 16.")] = None,
        rtt: Annotated[Optional[list[float]], typer.Option("--rtt", help="RTTs in ms of Fig. 19 (repeatable).")] = None,
        loss: Annotated[Optional[list[float]], typer.Option("--loss", help="Loss rates in % of Fig. 20 (repeatable).")] = None,
        fairness_seconds: Annotated[Optional[float], typer.Option("--fairness-seconds", help="Duration of each fairness run; default 300, quick 60.")] = None,
        only: Annotated[Optional[list[str]], typer.Option("--only", help="Run only these parts: rtt, loss, transfer, fairness (repeatable).")] = None,
    ):
        """Initial congestion window study (Yahoo! CDN, IMC 2011): PLT vs RTT and loss, object
        transfer times in RTTs, fairness of a large ICW against a long flow."""
        from pltlab.experiments.sweep import check_out_dir
        from pltlab.studies.icw.config import percent
        from pltlab.studies.icw.report import reproduce_icw

        check_out_dir(out)

        def progress(ev: dict) -> None:
            if not as_json:
                print(json.dumps(ev), file=sys.stderr, flush=True)

        try:
            reproduce_icw(quick=quick, out_dir=out, cc=cc, json_out=as_json, config_file=config_file,
                          reps=reps, icws=icw_list or None, rtts=rtt or None,
                          losses=[percent(x) for x in loss] if loss else None,
                          fairness_seconds=fairness_seconds, parts=only or None,
                          on_event=progress, echo=print)
        except PltError as e:
            print(f"pltlab: error: {e}", file=sys.stderr)
            raise typer.Exit(2)
