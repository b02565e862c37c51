"""`pltlab compare DIR_A DIR_B`: two results folders side by side (pltlab.report.compare_dirs)."""

import json
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab import files


def compare(
    dir_a: Annotated[str, typer.Argument(help="Results folder A (the baseline).")],
    dir_b: Annotated[
        str | None, typer.Argument(help="Results folder B (none: one folder's two values of --by).")
    ] = None,
    html: Annotated[
        str | None, typer.Option("--html", help="Also write this self-contained HTML page (e.g. compare.html).")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object instead of the table.")] = False,
    by: Annotated[
        str | None,
        typer.Option(
            "--by",
            metavar="KNOB",
            help="The knob compared (tfo, protocol, tls, ...): the one the two folders differ in; with one folder, "
            "its baseline value (A) against its other value (B).",
        ),
    ] = None,
):
    """Compare the same pages and configurations in two results folders that differ in any knob
    (initcwnd, cc, protocol, loader, ...): each side's mean PLT, B − A with its 95 % bootstrap
    interval (none where a side has fewer than 5 loads) and the relative change."""
    from pltlab.report import compare_dirs as cmp
    from pltlab.report import headline

    res = cmp.compare(dir_a, dir_b, by)
    if html:
        files.write_text(html, cmp.to_html(res))
    if as_json:
        print(json.dumps(cmp.to_json(res)))
        return
    out = Console()
    t = Table(title=escape(cmp.title(res)))
    for i, col in enumerate(cmp.HEADERS):
        t.add_column(col, justify="left" if i == 0 else "right", overflow="fold")
    for r in cmp.table_rows(res):
        t.add_row(*(f"[yellow]{escape(c)}[/]" if c == headline.NO_CI else escape(c) for c in r))
    out.print(t)
    what = f"{res['a']['label']} (A) vs {res['b']['label']} (B)" if res["compared"] else "nothing (same knobs)"
    out.print(f"compared: {what}; B − A < 0: B is faster", highlight=False)
    for n in cmp.notes(res):
        out.print(f"[yellow]{escape(n)}[/]", highlight=False)
    if html:
        out.print(f"html: {html}", highlight=False)


def register(app: typer.Typer) -> None:
    app.command()(compare)
