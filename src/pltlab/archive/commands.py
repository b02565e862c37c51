"""CLI commands of the archive subsystem (registered by pltlab.cli)."""

from __future__ import annotations

import json
from typing import Annotated

import typer


def register(app: typer.Typer) -> None:
    @app.command("import")
    def import_(
        paths: Annotated[list[str], typer.Argument(help="HAR files, seed .pages files, or directories of them.")],
        out: Annotated[str, typer.Option("-o", "--out", help="Corpus directory to write (one HAR per page).")],
        synthesize: Annotated[bool, typer.Option("--synthesize", help="Store synthesized bodies for objects recorded with a size only.")] = False,
        as_json: Annotated[bool, typer.Option("--json", help="Print the import report as JSON.")] = False,
    ):
        """Import pages into an archive directory: HAR 1.2 (Chrome, Firefox, Safari, WebPageTest,
        sitespeed.io) or the seed fetch format (<Name>.pages + <Name>/ + <Name>.fetchlog/)."""
        from pltlab.archive.importer import import_paths

        rep = import_paths(paths, out, synthesize=synthesize)
        if as_json:
            print(json.dumps(rep))
            return
        for s in rep["pages"]:
            print(f"{s['page']}: {s['objects']} objects ({s['size_only']} size only), "
                  f"{s['origins']} origins, {s['bytes']} bytes")
        if rep["orphans"]:
            print(f"{len(rep['orphans'])} stored files referenced by no page (orphans), e.g. "
                  + ", ".join(rep["orphans"][:3]))
        print(f"wrote {len(rep['files'])} pages to {out}")

    @app.command()
    def pages(
        directory: Annotated[str, typer.Argument(help="Archive directory.")],
        as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
    ):
        """List the pages of an archive: objects, bodies vs sizes only, origins, bytes."""
        from rich.console import Console
        from rich.table import Table

        from pltlab.archive.corpus import read_corpus

        rows = [p.summary() for _, p in read_corpus(directory)]
        if as_json:
            print(json.dumps(rows))
            return
        t = Table(title=f"pages in {directory}")
        for col in ("page", "objects", "with body", "size only", "origins", "bytes"):
            t.add_column(col, justify="left" if col == "page" else "right", overflow="fold")
        for r in rows:
            t.add_row(r["page"], str(r["objects"]), str(r["with_body"]), str(r["size_only"]),
                      str(r["origins"]), f"{r['bytes']:,}")
        Console().print(t)
