"""CLI commands of the archive subsystem: `pltlab import`, `record` and `pages` (registered by
pltlab.cli). Each parses, calls one function of pltlab.archive or pltlab.loaders, prints."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer


def import_(
    paths: Annotated[
        list[str],
        typer.Argument(
            help="HAR files, DevTools logs, seed .pages files, Mahimahi record folders, .wprgo archives, "
            "or directories of them."
        ),
    ],
    out: Annotated[
        str,
        typer.Option(
            "-o", "--out", help="Corpus directory to write (one HAR per page; missing parent folders are made)."
        ),
    ],
    synthesize: Annotated[
        bool, typer.Option("--synthesize", help="Store synthesized bodies for objects recorded with a size only.")
    ] = False,
    url: Annotated[
        str | None,
        typer.Option(
            "--url",
            help="The page's document, for one Mahimahi folder or .wprgo archive (default: found by its "
            "requests' Referers; the archive is then one page).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the import report as JSON.")] = False,
):
    """Import pages into an archive directory: HAR 1.2 (Chrome, Firefox, Safari, WebPageTest,
    sitespeed.io), DevTools logs, the seed fetch format (<Name>.pages + <Name>/ +
    <Name>.fetchlog/), Mahimahi record folders (mm-webrecord) and Web Page Replay archives
    (.wprgo; docs/formats.md). What cannot replay as recorded is repaired and reported: one line
    per kind and input file, with its count."""
    from pltlab.archive.importer import import_paths

    rep = import_paths(paths, out, synthesize=synthesize, url=url)
    if as_json:
        print(json.dumps(rep))
        return
    for s in rep["pages"]:
        print(
            f"{s['page']}: {s['objects']} objects ({s['size_only']} size only), "
            f"{s['origins']} origins, {s['bytes']} bytes  [{s['id']}]"
        )
    for r in rep["repairs"]:  # one line per kind and input file
        n = r["count"]
        print(f"{r['file']}: {n} {'entry' if n == 1 else 'entries'}: {r['kind']}")
    if rep["orphans"]:
        print(
            f"{len(rep['orphans'])} stored files referenced by no page (orphans), e.g. " + ", ".join(rep["orphans"][:3])
        )
    print(f"wrote {len(rep['files'])} pages to {out}")


def record(
    targets: Annotated[list[str], typer.Argument(help="Page URLs and/or .pages files (one URL a line).")],
    out: Annotated[str, typer.Option("-o", "--out", help="Archive directory to write (one HAR per URL).")],
    netns: Annotated[
        str | None, typer.Option("--netns", help="Run Chromium inside this network namespace (tests, experiments).")
    ] = None,
    host_rule: Annotated[
        list[str] | None,
        typer.Option("--host-rule", help="HOST=IP: resolve HOST to IP; then every other name fails (repeatable)."),
    ] = None,
    spki: Annotated[
        list[str] | None,
        typer.Option("--spki", help="Trust certificates with this base64 SHA-256 SPKI hash (repeatable)."),
    ] = None,
    quiet_ms: Annotated[
        float, typer.Option("--quiet-ms", help="After the load event, wait until the network was idle this long.")
    ] = 500,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds per page, load and quiet period included.")] = 60,
    chromium: Annotated[
        str | None,
        typer.Option("--chromium", help="Chromium binary (default: Debian's chromium, or $PLTLAB_CHROMIUM)."),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
):
    """Record pages with headless Chromium (fresh profile, cache off): every response with
    headers, body and initiator, HTTP and HTTPS. Writes the archive only if every page loads."""
    from pltlab.cli.progress import Steps
    from pltlab.loaders.browser import parse_host_rules
    from pltlab.loaders.record import read_targets
    from pltlab.loaders.record import record as record_pages

    bar = Steps("pages recorded", total=len(read_targets(targets)))

    def progress(p):
        bar.advance()
        if not as_json:
            s = p.summary()
            plt = f"{p.on_load_ms:.0f} ms" if p.on_load_ms else "no load event"
            line = f"{p.url}: {s['objects']} objects, {s['origins']} origins, {s['bytes']} bytes, load {plt}" + (
                f", {len(p.extras['failed'])} failed" if p.extras.get("failed") else ""
            )
            if sys.stdout.isatty():  # the bar's terminal: printed above it
                bar.lines.print(line, highlight=False, markup=False)
            else:
                print(line, flush=True)

    with bar:
        rep = record_pages(
            targets,
            out,
            progress=progress,
            netns=netns,
            host_rules=parse_host_rules(host_rule or []),
            spki=spki or [],
            quiet_ms=quiet_ms,
            timeout_s=timeout,
            executable=chromium,
        )
    if as_json:
        print(json.dumps(rep))
        return
    print(f"wrote {len(rep['files'])} pages to {out}")


def pages(
    directory: Annotated[str, typer.Argument(help="Archive directory.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
):
    """List the pages of an archive (in the order they were imported): objects, bodies vs
    sizes only, origins, bytes, objects per recorded protocol; --json adds each page's file, id and import repairs."""
    from rich.console import Console
    from rich.table import Table

    from pltlab.archive.corpus import page_row, read_corpus

    rows = [page_row(p, f) for f, p in read_corpus(directory)]
    if as_json:
        print(json.dumps(rows))
        return
    t = Table(title=f"pages in {directory}")
    for col in ("page", "objects", "with body", "size only", "origins", "bytes", "protocols"):
        t.add_column(col, justify="left" if col in ("page", "protocols") else "right", overflow="fold")
    for r in rows:
        protocols = ", ".join(f"{k} {v}" for k, v in r["protocols"].items())
        t.add_row(
            r["page"],
            str(r["objects"]),
            str(r["with_body"]),
            str(r["size_only"]),
            str(r["origins"]),
            f"{r['bytes']:,}",
            protocols,
        )
    c = Console()
    Console(width=max(c.width, 140) if not c.is_terminal else None).print(t)  # a pipe: do not fold URLs


def register(app: typer.Typer) -> None:
    app.command("import")(import_)
    app.command()(record)
    app.command()(pages)
