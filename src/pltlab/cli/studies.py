"""`pltlab reproduce STUDY`: the published experiments (pltlab.studies.STUDIES), one command per
study made from its declared parameters (its ``PARAMS``, pltlab.studies.engine.Param; then the
shared options it does not list, then --cluster/--slots/--connect-timeout), each run through the
experiment engine (pltlab.studies.engine: sweeps into SQLite, resumable with --resume, the same
progress display) and reported by pltlab.report (report.html). No study has a command of its own.

The studies are imported when `reproduce` is, not before: `pltlab --help` stays fast."""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
from typing import Annotated

import typer
from typer.core import TyperGroup

from pltlab.cli.cluster import CONNECT_TIMEOUT_S, ClusterOpt, ConnectTimeoutOpt, SlotsOpt
from pltlab.errors import PltError

# --cluster, --slots, --connect-timeout: every study's, as `pltlab sweep`'s (cli/cluster.py)
CLUSTER = (
    ("cluster", ClusterOpt, None),
    ("slots", SlotsOpt, 1),
    ("connect_timeout", ConnectTimeoutOpt, CONNECT_TIMEOUT_S),
)


class _Studies(TyperGroup):
    """`reproduce`: its commands (one per row of STUDIES) made when first asked for."""

    _given: dict = {}
    _made: dict | None = None

    @property
    def commands(self) -> dict:
        if self._made is None:
            from pltlab.studies import STUDIES

            app = typer.Typer()
            for name in STUDIES:
                add(app, name)
            self._made = {**self._given, **typer.main.get_group(app).commands}
        return self._made

    @commands.setter
    def commands(self, given: dict) -> None:
        self._given = dict(given)


def register(app: typer.Typer) -> None:
    rep = typer.Typer(cls=_Studies, no_args_is_help=True, help="Reproduce published experiments.")
    app.add_typer(rep, name="reproduce")


def _option(p, study: str) -> inspect.Parameter:
    """A declared parameter (pltlab.studies.engine.Param) as the command's typer option."""
    kind = list[p.type] if p.many else p.type
    info = typer.Option(
        *(p.flags or (f"--{p.name.replace('_', '-')}",)),  # (a bool: a flag, off unless given)
        help=p.help.format(study=study),
        **({} if p.show_default is None else {"show_default": p.show_default}),
    )
    return inspect.Parameter(
        p.name,
        inspect.Parameter.KEYWORD_ONLY,
        default=p.default,
        annotation=Annotated[kind | None if p.default is None else kind, info],
    )


def add(app: typer.Typer, name: str) -> None:
    """Register `reproduce <name>` (a row of pltlab.studies.STUDIES) on ``app``: its options from
    the study's declarations, its run ``reproduce``."""
    from pltlab.studies import STUDIES, engine

    study = STUDIES[name]
    params = [_option(p, name) for p in engine.declared(study.PARAMS)]
    params += [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=d, annotation=a) for n, a, d in CLUSTER]

    def command(**values):
        try:
            reproduce(name, values)
        except PltError as e:
            print(f"pltlab: error: {e}", file=sys.stderr)
            raise typer.Exit(2) from None

    command.__signature__ = inspect.Signature(params)
    command.__annotations__ = {p.name: p.annotation for p in params}
    command.__name__ = f"reproduce_{name}"
    app.command(name, help=study.HELP)(command)


def reproduce(name: str, values: dict) -> dict:
    """Run study ``name`` with its options' ``values`` into its output folder (resumable), write
    its report and print what it found (``json``: one JSON object); returns that object."""
    from rich.console import Console

    from pltlab.cli.cluster import executor, require_root_here
    from pltlab.experiments import lock
    from pltlab.experiments.sweep import check_out_dir
    from pltlab.studies import STUDIES, engine

    t0 = time.monotonic()
    study = STUDIES[name]
    values = dict(values)
    if hasattr(study, "runs"):  # a study of studies: each of its runs is another study's
        return _runs(name, study, values)
    cluster = [values.pop(n, d) for n, _, d in CLUSTER]
    as_json, output, resume = (values.pop(k) for k in engine.RUN_OPTIONS)
    p = study.options(values)  # checked: nothing is written before
    exps = study.experiments(p)
    out_dir = output or os.path.join("results", time.strftime(f"{exps[0][1].name}-%Y%m%d-%H%M%S"))  # (-today)
    check_out_dir(out_dir)
    with lock.held(out_dir, f"reproduce {name}"):  # until its report is written: one writer per folder
        recorded = engine.as_json(p)
        engine.prepare(name, recorded, exps, out_dir, resume)  # everything checked before anything runs
        ex = executor(*cluster, keep_up=True)  # (--cluster: one Ray session, each node checked once)
        require_root_here(cluster[0], [x[1].kind for x in exps])  # (a folder the lock made is removed again)
        err = Console(stderr=True)
        err.print(study.announce(p, exps, out_dir, resume), highlight=False)
        note = study.note(values) if hasattr(study, "note") else None
        try:
            ran = engine.run(name, recorded, exps, out_dir, resume=resume, console=err, note=note, executor=ex)
        finally:
            if ex is not None:
                ex.close()
        if hasattr(study, "results"):  # several experiments: the study's report from their databases
            return _parts(study, out_dir, as_json, time.monotonic() - t0)
        return _one(name, study, exps, ran, out_dir, as_json, err)


def _parts(study, out_dir: str, as_json: bool, wall_s: float) -> dict:
    from pltlab.report import study_report

    res = study_report(out_dir, wall_time_s=round(wall_s, 1))
    slim = study.summary(res, res["quick"])
    if as_json:
        print(json.dumps(slim))
    else:
        with open(os.path.join(out_dir, "tables.md")) as f:
            print(f.read())
        print(f"results, tables, figures and report.html in {res['output_dir']} ({res['wall_time_s']:.0f} s)")
    return slim


def _one(name: str, study, exps: list, ran: dict, out_dir: str, as_json: bool, err) -> dict:
    """One experiment run into the folder itself: the sweep's report with the study's sections."""
    from rich.console import Console

    from pltlab.cli.experiments import _print_seeds_table
    from pltlab.experiments import sweep
    from pltlab.report import build
    from pltlab.report.tables import seed_headers

    ((_, exp),) = exps
    res = ran["sweeps"][exp.name]
    if sweep.all_failed(res):
        err.print(
            f"reproduce {name}: 0 runs in {res['wall_s']:.0f} s: all {res['failed']} failed (results in {out_dir})",
            highlight=False,
        )
        raise typer.Exit(2) from None
    built = build(out_dir, study_sections=study.sections)
    doc = {**study.summary(built["analysis"]), "output_dir": os.path.abspath(out_dir)}
    if as_json:
        print(json.dumps(doc))
        return doc
    out = Console()
    _print_seeds_table(out, built["seeds"], study.TABLE, seed_headers(built["analysis"]))
    for line in study.conclusions(built["analysis"], built.get("checks") or []):
        out.print(line, highlight=False)
    out.print(
        f"{res['runs']} run(s) this session in {res['wall_s']:.0f} s, {doc['invalid_runs']} invalid/failed; "
        f"report: {built['files']['report.html']}",
        highlight=False,
    )
    return doc


def _runs(name: str, study, values: dict) -> dict:
    """A study of studies (``runs``: the ablations): each (folder, study, options) run as
    `reproduce STUDY -o DIR/folder` (a finished one skipped, a started one resumed), then the
    study's ``finish`` over the folders."""
    from rich.console import Console

    from pltlab.experiments import lock
    from pltlab.experiments.sweep import check_out_dir
    from pltlab.studies import engine

    cluster = {n: values.pop(n, d) for n, _, d in CLUSTER}
    as_json, output, resume = (values.pop(k) for k in engine.RUN_OPTIONS)
    p = study.options(values)  # checked, every run's options too: nothing is written before
    out_dir = output or os.path.join("results", time.strftime(f"reproduce-{name}-{p['paper']}-%Y%m%d-%H%M%S"))
    check_out_dir(out_dir)
    err = Console(stderr=True)
    with lock.held(out_dir, f"reproduce {name}"):
        study.begin(p, out_dir, resume)
        err.print(study.announce(p, out_dir), highlight=False)
        for sub, other, vals in study.runs(p):
            d = os.path.join(out_dir, sub)
            if study.finished(d):
                err.print(f"reproduce {name}: {sub}: finished before, not run again", highlight=False)
                continue
            started = os.path.isdir(d) and bool(lock.contents(d))
            err.print(f"reproduce {name}: {sub}{' (resumed)' if started else ''}", highlight=False)
            reproduce(other, {**vals, **cluster, "json": as_json, "output": d, "resume": started})
        doc = study.finish(p, out_dir)
    if as_json:
        print(json.dumps(doc))
    else:
        print(study.text(doc))
    return doc
