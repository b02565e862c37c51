"""CLI: `pltlab explain` — the critical path of a load and, against another, what it saved."""

import json
import os
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab.errors import PltError

PATH_ROWS = (16, 10)  # rows of the path table for one load, and for each of two: one screen


def explain(
    target: Annotated[
        str,
        typer.Argument(
            metavar="RUN|DIR",
            help="A load: its run id as the report shows it (DIR#ID, or ID with --dir); or a results "
            "folder with --page and --rtt (its median loads of TFO on and off).",
        ),
    ],
    vs: Annotated[
        str | None, typer.Option("--vs", help="Compare with this load (DIR#ID or ID): what RUN saved on its path.")
    ] = None,
    results_dir: Annotated[
        str | None,
        typer.Option("--dir", help="Results folder of plain run ids (default: the newest under ./results)."),
    ] = None,
    page: Annotated[str | None, typer.Option("--page", help="With a folder: the page (its label, id or URL).")] = None,
    rtt: Annotated[str | None, typer.Option("--rtt", help="With a folder: the RTT of the loads (e.g. 200ms).")] = None,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="KNOB",
            help="With a folder: the knob whose two values are compared (tfo, protocol, tls, ...; default: the "
            "folder's own, else TFO).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object (saved_ms, saved_rtts, ...).")] = False,
):
    """Where a load's time went: its critical path and PLT split (DNS, TCP and TLS handshakes,
    request round trips, transfer, waits for a connection, compute); with --vs, or a folder with
    --page/--rtt (TFO on vs off), what it saved and which handshakes on the path (docs/explain.md)."""
    from pltlab import explain as ex
    from pltlab.experiments import runref

    if page is not None or rtt is not None:
        if page is None or rtt is None:
            raise PltError("--page and --rtt go together (the median loads of TFO on and off of that page at that RTT)")
        if vs is not None:
            raise PltError("--vs names a second load: not with --page/--rtt (they pick TFO on and off)")
        if not os.path.isdir(target):
            raise PltError(f"{target}: no such results folder (with --page/--rtt, give a folder)")
        res = ex.explain_page(target, page, rtt, by)
    else:
        if by is not None:
            raise PltError("--by picks two loads of a folder: with --page and --rtt")
        if os.path.isdir(target) and "#" not in target:
            raise PltError(f"{target} is a folder: give --page and --rtt, or name a load (DIR#ID)")
        folder, rid = runref.resolve(target, results_dir)
        vfolder = vid = None
        if vs is not None:
            vfolder, vid = runref.resolve(vs, results_dir if "#" in vs or results_dir else folder)
        res = ex.explain(folder, rid, vs=vid, vs_folder=vfolder)
    if as_json:
        print(json.dumps(res))
        return
    _print(res)


def _ms(v: float) -> str:
    return f"{v:.0f}" if abs(v) >= 0.5 else "0"


def _print(res: dict) -> None:
    from pltlab.explain.critical import KINDS, LABELS
    from pltlab.explain.pair import short

    out = Console()
    a, b = res["a"], res.get("b")
    head = f"{a['page']} @ {a['rtt_ms']:g} ms" if a.get("rtt_ms") is not None else a["page"]
    out.print(f"[bold]explain[/] {escape(res['folder'])}: {escape(head)}", highlight=False)
    for s in res["sentences"]:
        out.print(escape(s), highlight=False, soft_wrap=True)
    for n in res.get("notes", []):
        out.print(f"[yellow]note: {escape(n)}[/]", highlight=False, soft_wrap=True)
    t = Table(title="where the time went (critical path, ms)", title_justify="left")
    t.add_column("")
    t.add_column(a["label"], justify="right")
    if b:
        t.add_column(b["label"], justify="right")
        t.add_column("saved", justify="right")
    for k in KINDS:
        va = a["split_ms"][k]
        vb = b["split_ms"][k] if b else 0.0
        if abs(va) < 0.5 and abs(vb) < 0.5:
            continue
        t.add_row(LABELS[k], _ms(va), *((_ms(vb), _ms(vb - va)) if b else ()))
    t.add_row("PLT", _ms(a["plt_ms"]), *((_ms(b["plt_ms"]), _ms(b["plt_ms"] - a["plt_ms"])) if b else ()))
    out.print(t)
    for x in (a, b) if b else (a,):
        _print_path(out, x, short, PATH_ROWS[1] if b else PATH_ROWS[0])


def _print_path(out: Console, x: dict, short, most: int) -> None:
    rows = x["path"]
    # the kinds of work that took time on this path (TCP and round trips always: TFO's columns)
    cols = [
        k
        for k in ("dns", "tcp", "tls", "request", "transfer", "wait", "compute")
        if k in ("tcp", "request") or any(r.get(k, 0) >= 0.5 for r in rows)
    ]
    out.print(
        f"critical path of {escape(x['label'])} (ms): {len(rows)} objects and the set-up of "
        f"{len(x['handshakes_on_path'])} of its {x['new_connections']} new connections",
        highlight=False,
        soft_wrap=True,
    )
    t = Table()
    t.add_column("object")
    for c in cols:
        t.add_column(c, justify="right")
    tfo = {h["idx"] for h in x["handshakes_on_path"] if h.get("tfo")}
    half = most // 2
    shown = rows if len(rows) <= most else rows[:half] + [None] + rows[-half:]
    for r in shown:
        if r is None:
            t.add_row(f"... {len(rows) - 2 * half} more", *[""] * len(cols))
            continue
        name = escape(short(r["url"], 36)) + (" [green]TFO[/]" if r["idx"] in tfo else "")
        t.add_row(name, *(_ms(r[c]) if c in r else "" for c in cols))
    out.print(t)


def register(app: typer.Typer) -> None:
    app.command()(explain)
