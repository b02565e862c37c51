"""Typer command `icw` (mounted by the lead as `pltlab reproduce icw`)."""

from __future__ import annotations

import json
import sys
from typing import Annotated, Optional

import typer

from pltlab.errors import PltError


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
        from pltlab.experiments.icw.config import percent
        from pltlab.experiments.icw.report import reproduce_icw
        from pltlab.experiments.sweep import check_out_dir

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
