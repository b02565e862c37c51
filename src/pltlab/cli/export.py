"""CLI: `pltlab export` — the HAR of one measured load (pltlab.run.loadhar), as stored with its
run (`--format har-load`, the default), or a page as another tool's archive (`--format mahimahi`,
`wpr`, `har`: pltlab.archive.formats.EXPORTS)."""

import json
import os
import sys
from typing import Annotated

import typer

from pltlab import files
from pltlab.errors import PltError

LOAD_HAR = "har-load"  # the one format of a run reference; every other is a page format (EXPORTS)


def _page_formats() -> str:
    """ "mahimahi, wpr or har": the page formats as a sentence names them."""
    from pltlab.archive.formats import EXPORTS

    names = [f.name for f in EXPORTS]
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else names[0]


def _looks_like_run(ref: str, results_dir: str | None) -> bool:
    """DIR#ID with a results database in DIR, or a plain number (an id with --dir)."""
    from pltlab.experiments.results import DB_NAME

    if ref.strip().isdigit():
        return True
    folder, sep, rid = ref.rpartition("#")
    return bool(sep) and rid.strip().isdigit() and os.path.isfile(os.path.join(folder, DB_NAME))


def _looks_like_page(ref: str) -> bool:
    from pltlab.archive import bundled

    return "#" not in ref and (os.path.exists(ref) or ref in bundled.NAMES or "://" in ref)


def export(
    ref: Annotated[
        str,
        typer.Argument(
            metavar="RUN|PAGE",
            help="--format har-load: a load, its run id as the report shows it (DIR#ID, or ID with --dir). "
            "Other formats: a page (an archive, a bundled page name, or a page URL of --corpus).",
        ),
    ],
    fmt: Annotated[
        str,
        typer.Option(
            "--format",
            "-f",
            help="har-load: the HAR of one measured load (default); mahimahi: the page as a Mahimahi record "
            "folder (mm-webreplay serves it); wpr: as a Web Page Replay archive (.wprgo, wpr replay serves "
            "it); har: the page's HAR as pltlab stores it.",
        ),
    ] = LOAD_HAR,
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="Where to write (har-load: default standard output; mahimahi: a new or empty folder; "
            "wpr, har: a file).",
        ),
    ] = None,
    results_dir: Annotated[
        str | None,
        typer.Option("--dir", help="Results folder of a plain run id (default: the newest under ./results)."),
    ] = None,
    corpus: Annotated[
        str | None, typer.Option("--corpus", help="Archive directory to find a page URL in (page formats).")
    ] = None,
    user_agent: Annotated[
        str | None,
        typer.Option(
            "--user-agent",
            help="Page formats: the User-Agent every request carries (Mahimahi's replay answers only a client "
            "sending the recorded one; default: as recorded).",
        ),
    ] = None,
):
    """Write the HAR 1.2 of one load (--format har-load, the default): request and response
    headers, protocol, timings split blocked/dns/connect/ssl/send/wait/receive, connections with
    their TFO and TLS facts, the server's address; no bodies (docs/loaders.md "The HAR of a
    load"). Or write a page for another tool (--format mahimahi, wpr, har): every object with
    the bytes pltlab's replay sends (docs/formats.md)."""
    if fmt == LOAD_HAR:
        if corpus is not None or user_agent is not None:
            raise PltError("--corpus and --user-agent are for page formats (" + _page_formats() + "), not har-load")
        if _looks_like_page(ref):
            raise PltError(
                f"{ref}: a page, not a run: --format {_page_formats()} exports a page "
                "(the default, har-load, writes the HAR of one measured load: DIR#ID)"
            )
        return _load_har(ref, output, results_dir)
    from pltlab.archive.formats import EXPORT_BY_NAME

    ex = EXPORT_BY_NAME.get(fmt)
    if ex is None:
        raise PltError(f"--format {fmt}: unknown (a run: {LOAD_HAR}; a page: {_page_formats()})")
    if results_dir is not None:
        raise PltError(f"--dir names a run's results folder (--format {LOAD_HAR}), not a page's")
    if user_agent is not None and not ex.user_agent:
        raise PltError(f"--user-agent: --format {fmt} writes no request headers")
    if _looks_like_run(ref, results_dir) and not os.path.exists(ref):
        raise PltError(
            f"{ref}: a run, not a page: --format {fmt} exports a page (an archive, a bundled page or a page "
            f"URL); a run's HAR is --format {LOAD_HAR}"
        )
    if output is None:
        raise PltError(f"--format {fmt} writes {ex.what}: give where with -o")
    from pltlab.archive.resolve import resolve

    rep = ex.write(resolve(ref, corpus), output, user_agent=user_agent)
    pages = f"{rep['pages']} pages, " if rep.get("pages", 1) != 1 else ""
    print(f"{rep['out']}: {pages}{rep['files']} requests of {rep['page']}, {ex.what}", file=sys.stderr)
    for note in rep["notes"]:
        print(f"{rep['out']}: {note}", file=sys.stderr)


def _load_har(run: str, output: str | None, results_dir: str | None) -> None:
    from pltlab.experiments import runref
    from pltlab.experiments.results import Results

    folder, rid = runref.resolve(run, results_dir)
    res = Results(folder)
    try:
        har = res.load_har(rid)
    finally:
        res.close()
    if har is None:
        raise PltError(
            f"{folder}: run {rid} has no HAR stored (a folder from before pltlab stored one per load, "
            "or a measurement kind without page requests)"
        )
    text = json.dumps(har, ensure_ascii=False, separators=(",", ":"))
    if output is None:
        sys.stdout.write(text + "\n")
        return
    try:
        files.write_text(output, text, encoding="utf-8")
    except OSError as e:  # (the temporary file is gone with the error)
        raise PltError(f"{output}: cannot write: {e.strerror}") from None
    n = len(har["log"]["entries"])
    print(f"{output}: {n} requests of run {rid} ({folder})", file=sys.stderr)


def register(app: typer.Typer) -> None:
    app.command()(export)
