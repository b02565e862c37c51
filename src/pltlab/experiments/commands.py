"""CLI: `pltlab run` (one configuration, repeated loads, TFO on/off/both)."""

import json
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.table import Table

from pltlab.errors import PltError


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
        as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    ):
        """Load a page over an emulated WAN with replay servers: PLT per load, TFO on/off."""
        from pltlab.experiments import pages as resolver
        from pltlab.experiments.runner import RunConfig, run_page, summarize

        modes = {"on": (True,), "off": (False,), "both": (False, True)}
        if tfo not in modes:
            raise PltError(f"invalid --tfo {tfo!r}: on, off or both")
        if client not in ("builtin", "chromium"):
            raise PltError(f"invalid --client {client!r}: builtin or chromium")
        if not 1 <= reps <= 10_000:
            raise PltError(f"invalid --reps {reps}: must be 1..10000")
        cfg = RunConfig(rtt=rtt, rate=rate, rate_up=rate_up, loss=loss, queue=queue, icw=icw, cc=cc,
                        client=client, warm=not cold, reps=reps, tfo_modes=modes[tfo])
        cfg.link()  # validate before anything is built
        from pltlab.net import TcpKnobs

        TcpKnobs(initcwnd=icw, cc=cc)
        out = Console(stderr=as_json)
        runs = []

        def seed_style(r):
            out.print(f"Experiment {r['rep']} {r['page']} @ {r['rtt_ms']:g}ms delay"
                      f" ({'TFO' if r['tfo'] else 'no TFO'})", highlight=False)
            mark = "" if r["valid"] else f"  [red]INVALID: {r['invalid_reason']}[/]"
            out.print(f"Fetching {r['page']} took {r['plt_ms'] / 1000:.3f}s.{mark}", highlight=False)

        for p in resolver.resolve(page, corpus):
            runs += run_page(p, cfg, on_run=seed_style)
        summary = summarize(runs)
        invalid = [r for r in runs if not r["valid"]]
        if as_json:
            print(json.dumps({"runs": runs, "summary": summary, "invalid_runs": len(invalid)}))
            return
        t = Table(title="page load time")
        for col in ("page", "RTT (ms)", "TFO", "n", "mean (ms)", "median (ms)", "CV"):
            t.add_column(col)
        for s in summary:
            t.add_row(s["page"], f"{s['rtt_ms']:g}", "on" if s["tfo"] else "off", str(s["n"]),
                      f"{s['mean_ms']:.1f}", f"{s['median_ms']:.1f}", f"{s['cv']:.2%}")
        out.print(t)
        if invalid:
            out.print(f"[red]{len(invalid)} invalid run(s), not averaged in[/]")
