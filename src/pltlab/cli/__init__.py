"""The `pltlab` command line."""

import json
import re
import signal
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from pltlab import __version__
from pltlab.cli.options import knob_options
from pltlab.errors import PltError

app = typer.Typer(
    add_completion=True,  # typer's --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="pltlab: page-load-time lab for the latency features of the web's transports over emulated WANs.",
    context_settings={"help_option_names": ["-h", "--help"]},  # inherited by every subcommand
)
err = Console(stderr=True)


def _versions() -> list[str]:
    """pltlab's version and the data plane's (`pltlab-dp --version`), one line each."""
    import subprocess

    from pltlab import dataplane

    try:
        cp = subprocess.run([dataplane.binary(), "--version"], capture_output=True, text=True)
        dp = cp.stdout.strip() or f"data plane: no version (exit code {cp.returncode})"
    except (PltError, OSError) as e:
        dp = f"data plane: {e}"
    return [f"pltlab {__version__}", dp]


def _print_version(value: bool) -> None:
    if value:
        print("\n".join(_versions()))
        raise typer.Exit(0)


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", is_eager=True, callback=_print_version, help="Print pltlab's and the data plane's version."
        ),
    ] = False,
):
    pass


# `pltlab check`'s own options (its link is fixed: the self-test's)
Backend = Annotated[str, typer.Option("--backend", help="auto, userspace (TUN emulator) or netem.")]
FifoOn = Annotated[
    bool,
    typer.Option(
        "--sched-fifo/--no-sched-fifo",
        help="Emulator under SCHED_FIFO (default on: precision under CPU load, benches/bench_precision.py).",
    ),
]


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
@knob_options("shell")
def shell(
    ctx: typer.Context,
    knobs: dict,
    origins: Annotated[int, typer.Option("--origins", help="Number of origin addresses on the server side.")] = 1,
    serve: Annotated[
        bool, typer.Option(help="Run a simple origin server (HTTP and probe protocol) on port 80 of every origin.")
    ] = True,
):
    """Run a command in the client namespace behind the emulated link:
    pltlab shell --rtt 100ms --rate 4mbit --loss 1% -- CMD...  (exit code of CMD is returned;
    for an interactive shell: -- bash). The origin addresses are in $PLTLAB_ORIGINS."""
    from pltlab.net.shell import run_shell
    from pltlab.run.config import RunConfig

    if not ctx.args:
        raise PltError("pltlab shell needs a command to run: pltlab shell [OPTIONS] -- CMD [ARGS]...")
    cfg = RunConfig.from_knobs(knobs)
    raise typer.Exit(run_shell(cfg.topology(origins), list(ctx.args), serve=serve, keep_alive=cfg.keepalive == "on"))


@app.command("knobs")
def knobs_cmd(
    markdown: Annotated[bool, typer.Option("--markdown", help="Print a Markdown table (as in docs/api.md).")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print a JSON list.")] = False,
):
    """List the knobs: every setting of a run, with its CLI option (run, shell), experiment-file
    key (sweep; \\[list]: a list multiplies), default, unit and results column."""
    from pltlab.run import knobs as registry

    if as_json:
        print(json.dumps(registry.rows()))
    elif markdown:
        print(registry.markdown(), end="")
    else:
        t = Table(title="knobs (pltlab.run.knobs)")
        for h in registry.HEADERS.values():
            t.add_column(h, overflow="fold")
        for r in registry.rows():
            t.add_row(*(Text(r[c]) for c in registry.HEADERS))
        Console().print(t)


@app.command()
def check(
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    quick: Annotated[bool, typer.Option(help="Fewer samples and shorter transfers.")] = False,
    backend: Backend = "auto",
    sched_fifo: FifoOn = True,
    strict: Annotated[bool, typer.Option(help="Exit with 1 when the verdict is 'degraded'.")] = False,
):
    """Report the environment and self-test the emulated link's fidelity."""
    from pltlab.net.check import run_check

    progress = None if as_json else (lambda msg: err.print(f"[dim]check:[/] {msg}"))
    res = run_check(quick=quick, backend=backend, sched_fifo=sched_fifo, progress=progress)
    if as_json:
        print(json.dumps(res))
    else:
        _print_check(res)
    raise typer.Exit(1 if strict and res["verdict"] != "ok" else 0)


def _print_check(res: dict) -> None:
    out = Console()
    env = Table(title="environment", show_header=False)
    for k, v in res["env"].items():
        env.add_row(k, str(v))
    out.print(env)
    t = Table(title="link fidelity")
    for col in ("test", "configured", "measured", "target"):
        t.add_column(col)
    for r in res["rtt"]:
        t.add_row(
            "RTT error (link)",
            f"{r['configured_ms']} ms",
            f"p50 {r['p50_err_ms']:+.3f}  p99 {r['p99_err_ms']:+.3f}  max {r['max_err_ms']:+.3f} ms",
            "p99 <= 0.3 ms",
        )
        t.add_row(
            "  (application)", "", f"p50 {r['app_p50_err_ms']:+.3f}  p99 {r['app_p99_err_ms']:+.3f} ms", "(+ wake-ups)"
        )
    b = res["rtt_baseline"]
    t.add_row(
        "RTT floor",
        "0 ms",
        f"p50 {b['p50_ms']:.3f}  p99 {b['p99_ms']:.3f}  max {b['max_ms']:.3f} ms",
        "(machine's own)",
    )
    r = res["rate"]
    t.add_row(
        "goodput",
        f"{r['configured_mbit']} Mbit/s",
        f"{r['achieved_mbit']:.3f} Mbit/s ({r['error']:+.2%} vs {r['expected_goodput_mbit']:.3f})",
        "within 1 %",
    )
    t.add_row(
        "loss",
        f"{res['loss']['configured']:.0%}",
        f"{res['loss']['measured']:.2%} of {res['loss']['packets']}",
        "within 0.5 pp",
    )
    t.add_row("throughput", "unshaped", f"{res['throughput_gbit']:.2f} Gbit/s", ">= 2 Gbit/s")
    out.print(t)
    for p in res["problems"]:
        out.print(f"[yellow]degraded:[/] {p}")
    out.print(f"verdict: [bold]{res['verdict']}[/]")


@app.command()
def clean(
    run_id: Annotated[str | None, typer.Argument(metavar="RUN_ID", help="Only this run id (6 hex digits).")] = None,
    run: Annotated[str | None, typer.Option("--run", help="Same as RUN_ID.")] = None,
    force: Annotated[bool, typer.Option("--force", help="Remove run RUN_ID even though its owner still runs.")] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="List what would be removed.")] = False,
):
    """Remove namespaces, links, TUNs, processes and work directories left by killed runs
    (only names with the project's prefix 'plt-<id>-'). Runs whose owning process is alive are
    left alone; with PLTLAB_RUN_ID_PREFIX set, only runs of that session tag are considered."""
    from pltlab.net import clean as cleaner
    from pltlab.net import names

    if run_id is not None and run is not None and run_id != run:
        raise PltError(f"two run ids given: {run_id} and --run {run}")
    rid = run_id if run_id is not None else run
    if rid is not None and not names.valid_run_id(rid):
        raise PltError(f"invalid run id {rid!r}: 6 lowercase hex digits")
    if rid is not None and not force and cleaner.alive(rid):
        pid = names.owner_alive(rid)
        owner = f"owner pid {pid}" if pid else "being created"
        raise PltError(f"run {rid} is live ({owner}): not removed (--force removes it anyway)")
    if force and rid is None:
        raise PltError("--force needs a RUN_ID: live runs are never removed all at once")
    if dry_run:
        found = cleaner.leftovers(rid, force)
        for kind, items in found.items():
            if kind != "live":
                for item in items:
                    print(f"{kind[:-1]} {item}")
        for r in found["live"]:
            print(f"live run {r} (kept)")
        return
    counts = cleaner.clean(rid, force)
    print(
        "removed "
        + ", ".join(f"{v} {k}" for k, v in counts.items() if k != "live runs kept")
        + (f"; {counts['live runs kept']} live run(s) kept" if counts["live runs kept"] else "")
    )


@app.command()
def version():
    """Print the versions of pltlab and its data plane (also: pltlab --version)."""
    print("\n".join(_versions()))


# Commands that live with their subsystem.
from pltlab.cli import archive as _archive_commands  # noqa: E402
from pltlab.cli import cluster as _cluster_commands  # noqa: E402
from pltlab.cli import compare as _compare_commands  # noqa: E402
from pltlab.cli import experiments as _experiment_commands  # noqa: E402
from pltlab.cli import explain as _explain_commands  # noqa: E402
from pltlab.cli import export as _export_commands  # noqa: E402
from pltlab.cli import predict as _predict_commands  # noqa: E402
from pltlab.cli import studies as _studies_commands  # noqa: E402

_archive_commands.register(app)
_experiment_commands.register(app)
_studies_commands.register(app)
_cluster_commands.register(app)
_explain_commands.register(app)
_predict_commands.register(app)
_compare_commands.register(app)
_export_commands.register(app)

# `pltlab --help` by task: each command's panel, declared once here (a command missing from it
# fails tests/test_cli_help.py). Its line there is the first sentence of its help.
PANELS = {
    "Pages": ("import", "record", "pages", "calibrate"),
    "Network": ("shell", "check", "knobs"),
    "Experiments": ("run", "sweep", "reproduce", "cluster"),
    "Results": ("report", "explain", "predict", "compare", "export", "salvage"),
    "Maintenance": ("clean", "version"),
}


def _first_sentence(text: str, most: int = 120) -> str:
    """A command's line in `pltlab --help`: its help's first sentence; when that is long, what
    comes before its first colon."""
    flat = " ".join((text or "").split())
    m = re.match(r"(.+?[.!?])(?=\s+[A-Z(]|$)", flat)
    first = m.group(1) if m else flat
    if len(first) > most and ": " in first:
        first = first.split(": ", 1)[0]
    return first


def _group_commands() -> None:
    order = {name: i for i, name in enumerate(n for names in PANELS.values() for n in names)}
    panel_of = {name: panel for panel, names in PANELS.items() for name in names}

    def name_of(c) -> str:
        return c.name or c.callback.__name__.replace("_", "-")

    for c in app.registered_commands:
        c.rich_help_panel = panel_of.get(name_of(c))
        if c.short_help is None:
            c.short_help = _first_sentence(c.help or c.callback.__doc__ or "")
    for g in app.registered_groups:
        g.rich_help_panel = panel_of.get(g.name)
    # panels appear in the order of their first command
    app.registered_commands.sort(key=lambda c: order.get(name_of(c), len(order)))


_group_commands()


def main() -> None:
    try:
        app(prog_name="pltlab")  # (as `python -m pltlab` too: help and completion name the command)
    except PltError as e:
        err.print(f"pltlab: error: {e}", highlight=False, markup=False, soft_wrap=True)
        sys.exit(2)
    except OSError as e:  # a full disk where no layer said it in its own words (a figure, a log)
        from pltlab import files

        if not files.no_space(e):
            raise
        err.print(f"pltlab: error: {files.no_space_error(e.filename or '(a file)')}", highlight=False, markup=False)
        sys.exit(2)
    except KeyboardInterrupt:
        err.print("pltlab: interrupted", highlight=False)
        sys.exit(128 + signal.SIGINT)
    except SystemExit as e:  # typer turns Ctrl-C into a silent exit 130: say it
        if _caused_by_interrupt(e):
            err.print("pltlab: interrupted", highlight=False)
        raise


def _caused_by_interrupt(e: BaseException) -> bool:
    seen = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        if isinstance(x, KeyboardInterrupt):
            return True
        seen.add(id(x))
        x = x.__cause__ or x.__context__
    return False


if __name__ == "__main__":
    main()
