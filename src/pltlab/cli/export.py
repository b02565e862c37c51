"""CLI: `pltlab export` — the HAR of one measured load (pltlab.run.loadhar), as stored with its run."""

import json
import sys
from typing import Annotated

import typer

from pltlab import files
from pltlab.errors import PltError


def export(
    run: Annotated[
        str,
        typer.Argument(metavar="RUN", help="A load: its run id as the report shows it (DIR#ID, or ID with --dir)."),
    ],
    output: Annotated[
        str | None, typer.Option("-o", "--output", help="Write the HAR here (default: standard output).")
    ] = None,
    results_dir: Annotated[
        str | None,
        typer.Option("--dir", help="Results folder of a plain run id (default: the newest under ./results)."),
    ] = None,
):
    """Write the HAR 1.2 of one load: request and response headers, protocol, timings split
    blocked/dns/connect/ssl/send/wait/receive, connections with their TFO and TLS facts, the
    server's address; no bodies (docs/loaders.md "The HAR of a load")."""
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
