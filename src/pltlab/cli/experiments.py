"""CLI: `pltlab run` (one configuration, repeated loads, TFO on/off/both), `pltlab sweep` (an
experiment file's cross product), `pltlab report` and `pltlab reproduce tfo`."""

import json
import os
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab import units
from pltlab.errors import PltError


def _calibration_note(page, cfg) -> str | None:
    """Why the built-in loader's model of Chromium lacks Chromium's measured compute, or was
    measured elsewhere (docs/loaders.md "Compute calibration"); None when all is well."""
    from pltlab.archive.calibration import machine
    from pltlab.loaders import plan

    if cfg.client != "builtin" or cfg.model != "chromium" or not cfg.calibrated:
        return None
    cal = plan.calibration(page)
    if cal is None:
        return (f"{page.url} has no calibration: Chromium's compute is not modelled "
                "(`pltlab calibrate`, docs/loaders.md)")
    here = machine()
    if cal.get("machine") and cal["machine"] != here:
        return f"{page.url} was calibrated on another machine ({cal['machine']}): recalibrate here"
    return None


def _rmem(v: str | None) -> int | None:
    """--client-rmem: a size, "kernel" (None: the kernel's), or not given (pltlab's default)."""
    from pltlab.net.spec import DEFAULT_CLIENT_RMEM

    if v is None:
        return DEFAULT_CLIENT_RMEM
    return None if v.strip().lower() == "kernel" else units.size_bytes(v, "--client-rmem")


def _pages(what: str, corpus: str | None):
    """(page id, page, None) for every page ``what`` names, or (file, None, why) for a file of a
    corpus directory that cannot be read: a directory's files are read one by one."""
    from pltlab.archive import pages as resolver
    from pltlab.run.runner import page_label

    if not os.path.isdir(what):
        for p in resolver.resolve(what, corpus):
            yield page_label(p), p, None
        return
    files = sorted(os.path.join(what, n) for n in os.listdir(what) if n.endswith(".har"))
    if not files:
        raise PltError(f"{what}: no .har pages in this directory")
    for path in files:
        try:
            pages = resolver.resolve(path)
        except PltError as e:
            yield path, None, str(e)
            continue
        for p in pages:
            yield page_label(p), p, None


def _print_plt_table(out: Console, summary: list[dict], title: str) -> None:
    t = Table(title=f"page load time: {escape(title)}")
    for col in ("page", "RTT (ms)", "TFO", "n", "mean (ms)", "median (ms)", "CV"):
        t.add_column(col)
    for s in summary:
        t.add_row(escape(s["page"]), f"{s['rtt_ms']:g}", "on" if s["tfo"] else "off", str(s["n"]),
                  f"{s['mean_ms']:.1f}", f"{s['median_ms']:.1f}", f"{s['cv']:.2%}")
    out.print(t)


def register(app: typer.Typer) -> None:
    @app.command()
    def run(
        page: Annotated[str, typer.Argument(help="HAR file, corpus directory, bundled page (nytimes, ...) or page URL.")],
        rtt: Annotated[str, typer.Option(help="Round-trip time (e.g. 100ms).")] = "100ms",
        rate: Annotated[Optional[str], typer.Option(help="Downlink rate (e.g. 4mbit); default unlimited.")] = None,
        rate_up: Annotated[Optional[str], typer.Option("--rate-up", help="Uplink rate if different.")] = None,
        loss: Annotated[Optional[str], typer.Option(help="Random loss per direction (1% or 0.01).")] = None,
        queue: Annotated[Optional[str], typer.Option(help="Drop-tail queue (packets or bytes).")] = None,
        tfo: Annotated[str, typer.Option(help="on, off or both.")] = "both",
        cold: Annotated[bool, typer.Option("--cold", help="No TFO cookie before each load (keys reset): TFO costs a cookie request.")] = False,
        icw: Annotated[Optional[int], typer.Option(help="Server initial congestion window (segments).")] = None,
        cc: Annotated[str, typer.Option(help="Congestion control: cubic, reno or bbr.")] = "cubic",
        client: Annotated[str, typer.Option(help="builtin or chromium.")] = "builtin",
        reps: Annotated[int, typer.Option(help="Repetitions per configuration.")] = 3,
        corpus: Annotated[Optional[str], typer.Option(help="Corpus directory to look page URLs up in.")] = None,
        schemes: Annotated[str, typer.Option(help="Built-in loader: 'recorded' schemes, or 'chromium' (also Chromium's own HSTS upgrades to https).")] = "recorded",
        model: Annotated[str, typer.Option(help="Built-in loader: 'archive' (recorded initiators, no priorities) or 'chromium' (Chromium's dependencies and request scheduling, docs/loaders.md).")] = "archive",
        calibration: Annotated[bool, typer.Option("--calibration/--no-calibration", help="With --model chromium on a page calibrated by `pltlab calibrate`: Chromium's measured compute delays and load-event tail (default on).")] = True,
        pcap: Annotated[Optional[str], typer.Option(help="Write the emulator's client-side packet trace here.")] = None,
        client_rmem: Annotated[Optional[str], typer.Option("--client-rmem", help="Client's initial TCP receive buffer (default 1mb; 'kernel': the kernel's 128 KB, whose autotuned window makes some loads one RTT slower).")] = None,
        sched_fifo: Annotated[Optional[bool], typer.Option("--sched-fifo/--no-sched-fifo", help="Emulator under SCHED_FIFO (default: on with --client chromium).")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object at the end: every load of every page that ran, and which pages failed.")] = False,
    ):
        """Load a page over an emulated WAN with replay servers: PLT per load, TFO on/off.
        A directory or multi-page HAR runs page by page; a page that fails is reported at the end
        (one line each, exit code 2) and the others still run."""
        from pltlab.loaders.plan import MODELS
        from pltlab.run.config import RunConfig
        from pltlab.run.runner import run_page, summarize

        modes = {"on": (True,), "off": (False,), "both": (False, True)}
        if tfo not in modes:
            raise PltError(f"invalid --tfo {tfo!r}: on, off or both")
        if client not in ("builtin", "chromium"):
            raise PltError(f"invalid --client {client!r}: builtin or chromium")
        units.repetitions(reps, "--reps")
        if schemes not in ("recorded", "chromium"):
            raise PltError(f"invalid --schemes {schemes!r}: recorded or chromium")
        if model not in MODELS:
            raise PltError(f"invalid --model {model!r}: {' or '.join(MODELS)}")
        if pcap and not os.path.isdir(os.path.dirname(os.path.abspath(pcap))):
            raise PltError(f"--pcap {pcap}: its directory does not exist")
        cfg = RunConfig(rtt=rtt, rate=rate, rate_up=rate_up, loss=loss, queue=queue, icw=icw, cc=cc,
                        client=client, warm=not cold, reps=reps, tfo_modes=modes[tfo], schemes=schemes, model=model,
                        calibrated=calibration,
                        pcap=os.path.abspath(pcap) if pcap else None, sched_fifo=sched_fifo,
                        client_rmem=_rmem(client_rmem))
        cfg.link()  # validate before anything is built
        from pltlab.net import TcpKnobs

        TcpKnobs(initcwnd=icw, cc=cc, client_rmem=cfg.client_rmem)
        out = Console(stderr=as_json)
        runs: list[dict] = []
        done: list[dict] = []  # per page: its id, URL, status ("ok" or "failed"), error, loads
        failed: list[tuple[str, str]] = []

        def seed_style(r):
            runs.append(r)  # kept even if the page fails later on
            out.print(f"Experiment {r['rep']} {escape(r['page_id'])} @ {r['rtt_ms']:g}ms delay"
                      f" ({'TFO' if r['tfo'] else 'no TFO'})", highlight=False)
            mark = "" if r["valid"] else f"  [red]INVALID: {escape(r['invalid_reason'])}[/]"
            out.print(f"Fetching {escape(r['page'])} took {r['plt_ms'] / 1000:.3f}s.{mark}", highlight=False)
            if r.get("tfo_note"):
                out.print(f"  [yellow]note: {escape(r['tfo_note'])}[/]", highlight=False)

        # Every page is its own unit: one that fails (bad file, refused, topology/replay/load
        # error) is reported at the end and the others go on.
        for label, p, err in _pages(page, corpus):
            n0 = len(runs)
            if err is None:
                try:
                    note = _calibration_note(p, cfg)
                    if note:
                        out.print(f"[yellow]note: {escape(note)}[/]", highlight=False)
                    run_page(p, cfg, on_run=seed_style)
                except PltError as e:
                    err = str(e)
                except Exception as e:  # noqa: BLE001 - one page's bug must not end the others
                    err = f"{type(e).__name__}: {e}"
            if err is not None:
                err = err[len(label) + 2:] if err.startswith(label + ": ") else err
                failed.append((label, err))
                if not as_json:  # (stderr gets one line per failed page at the end)
                    out.print(f"[red]{escape(label)}: FAILED: {escape(err)}[/]", highlight=False)
            done.append({"page_id": label, "page": p.url if p else None,
                         "status": "failed" if err is not None else "ok", "error": err,
                         "loads": len(runs) - n0})
            if not as_json and len(runs) > n0:
                _print_plt_table(out, summarize(runs[n0:]), label)
        invalid = [r for r in runs if not r["valid"]]
        if as_json:  # one object at the end, with every page that finished (and every failure)
            print(json.dumps({"runs": runs, "summary": summarize(runs), "invalid_runs": len(invalid),
                              "pages": done, "failed_pages": len(failed)}))
        elif invalid:
            out.print(f"[red]{len(invalid)} invalid run(s), not averaged in[/]")
        if failed:
            err_out = Console(stderr=True)
            for label, why in failed:
                err_out.print(f"pltlab: error: {label}: {why}", highlight=False, markup=False,
                              soft_wrap=True)
            raise typer.Exit(2)

    @app.command()
    def calibrate(
        pages: Annotated[list[str], typer.Argument(help="Pages: HAR files, corpus directories, bundled names (amazon, ...).")],
        output: Annotated[str, typer.Option("-o", "--output", help="Directory for the calibrated archives (NAME.har; created if needed).")],
        loads: Annotated[int, typer.Option(help="Chromium loads per page (the median is stored).")] = 3,
        rtt: Annotated[str, typer.Option(help="RTT of the calibration loads.")] = "0ms",
        corpus: Annotated[Optional[str], typer.Option(help="Corpus directory to look page URLs up in.")] = None,
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ):
        """Measure Chromium's compute on pages (loads at RTT 0) and write them with the calibration,
        for the built-in loader's --model chromium (docs/loaders.md "Compute calibration")."""
        from pltlab.archive import bundled
        from pltlab.archive import pages as resolver
        from pltlab.archive.calibration import PAGE_KEY
        from pltlab.archive.corpus import file_name
        from pltlab.archive.har import write_page
        from pltlab.experiments.sweep import check_out_dir
        from pltlab.run.calibrate import calibrate as measure

        if not 1 <= loads <= 100:
            raise PltError(f"invalid --loads {loads}: must be 1..100")
        units.duration_us(rtt, "--rtt")  # before anything is made
        out_dir = os.path.abspath(output)
        check_out_dir(out_dir)
        todo = []
        for what in pages:
            for p in resolver.resolve(what, corpus):
                todo.append((what, p))
        os.makedirs(out_dir, exist_ok=True)
        log = Console(stderr=True)
        taken: set[str] = set()
        done = []
        for what, p in todo:
            if what in bundled.NAMES:
                name = f"{what}.har"
            elif os.path.isfile(what) and what.endswith(".har") and len(resolver.resolve(what, corpus)) == 1:
                name = os.path.basename(what)
            else:
                name = file_name(p.url, taken)
            measure(p, loads=loads, rtt=rtt, log=lambda m: log.print(m, highlight=False))
            path = os.path.join(out_dir, name)
            write_page(p, path + ".tmp")
            os.replace(path + ".tmp", path)
            cal = p.extras[PAGE_KEY]
            done.append({"page": p.url, "file": path, **cal,
                         "compute_ms_sum": round(sum(o.extras.get("compute_ms", 0.0) for o in p.objects), 1)})
            if not as_json:
                log.print(f"{p.url}: {cal['matched']}/{cal['objects']} objects matched, compute "
                          f"{done[-1]['compute_ms_sum']:.0f} ms summed over objects, tail {cal['tail_ms']:.0f} ms "
                          f"({cal['browser']}) -> {path}", highlight=False)
        if as_json:
            print(json.dumps({"pages": done}))

    register_experiments(app)


def _print_seeds_table(out: Console, rows: list[list[str]], title: str) -> None:
    from pltlab.report.tables import SEED_HEADERS

    t = Table(title=title)
    for i, col in enumerate(SEED_HEADERS):
        t.add_column(col, justify="left" if i == 0 else "right")
    for r in rows:
        t.add_row(*r)
    out.print(t)


def register_experiments(app: typer.Typer) -> None:
    @app.command()
    def sweep(
        file: Annotated[str, typer.Argument(help="Experiment file (TOML).")],
        resume: Annotated[bool, typer.Option("--resume", help="Continue a killed sweep in its output folder.")] = False,
        output: Annotated[Optional[str], typer.Option("-o", "--output", help="Output folder (default results/NAME).")] = None,
        report: Annotated[bool, typer.Option(help="Build the report (tables, figures, HTML) at the end.")] = True,
    ):
        """Run an experiment file's full cross product into an SQLite results database."""
        from pltlab.experiments import spec
        from pltlab.experiments import sweep as sweeper

        exp = spec.load(file)
        out_dir = output or sweeper.default_out(exp)
        sweeper.prepare(exp, out_dir, resume)  # refuse before printing anything
        out = Console(stderr=True)
        out.print(f"{exp.name}: {len(exp.pages)} page(s) x {len(exp.configs)} configuration(s) x "
                  f"{len(exp.tfo_modes)} TFO mode(s) x {exp.repetitions} repetition(s) = {exp.n_runs} runs "
                  f"-> {out_dir}", highlight=False)
        res = sweeper.run(exp, out_dir, resume=resume, console=out)
        if sweeper.all_failed(res):  # nothing measured: no report, a non-zero exit
            out.print(f"0 runs in {res['wall_s']:.1f} s: all {res['failed']} failed (results in {out_dir})",
                      highlight=False)
            raise typer.Exit(2)
        out.print(f"{res['runs']} run(s) in {res['wall_s']:.1f} s ({res['failed']} failed, {res['invalid']} invalid); "
                  f"sum of PLTs / wall time = {res['efficiency']:.2f}", highlight=False)
        if report:
            _report(out_dir, Console())

    @app.command("report")
    def report_cmd(out_dir: Annotated[str, typer.Argument(help="An experiment's output folder.")]):
        """Statistics, the PLT table (Markdown/CSV), figures (output-figures/) and report.html."""
        _report(out_dir, Console())


def _report(out_dir: str, out: Console) -> None:
    from pltlab.report import build

    built = build(out_dir)
    _print_seeds_table(out, built["seeds"], f"PLT table ({out_dir})")
    for note, bad in built["notes"]:
        if bad:
            out.print(f"[yellow]{note}[/]", highlight=False)
    out.print(f"report: {built['files']['report.html']}  figures: {len(built['figures'])} files in "
              f"{os.path.join(out_dir, 'output-figures')}", highlight=False)
