"""`pltlab run`: every page an argument names (an archive, a folder of them, a bundled page or URL),
loaded under one RunConfig, page by page. A page that fails (a file that cannot be read, a page
refused, a topology, replay or load error) is reported and the others still run."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator

from pltlab import files
from pltlab.archive import formats, netinfer
from pltlab.archive import resolve as resolver
from pltlab.archive.calibration import machine, machine_of
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.loaders import plan
from pltlab.loaders.registry import get as loader_of
from pltlab.run import loadhar, loadpcaps
from pltlab.run.config import RunConfig
from pltlab.run.knobs import RECORDED_NETWORK
from pltlab.run.runner import page_label, run_page


def calibration_note(page: Page, cfg: RunConfig) -> str | None:
    """Why the built-in loader's model of Chromium lacks Chromium's measured compute, or was
    measured elsewhere (docs/loaders.md "Compute calibration"); None when all is well."""
    if not loader_of(cfg.client).planned or cfg.model != "chromium" or not cfg.calibrated:
        return None
    cal = plan.calibration(page)
    if cal is None:
        return (
            f"{page.url} has no calibration: Chromium's compute is not modelled (`pltlab calibrate`, docs/loaders.md)"
        )
    if cal.get("machine") and machine_of(str(cal["machine"])) != machine():
        return f"{page.url} was calibrated on another machine ({cal['machine']}): recalibrate here"
    return None


def network_note(page: Page, cfg: RunConfig) -> str | None:
    """With network "recorded": what was inferred of the page's recorded network and what could
    not be used (once per kind), in one line; a page without timings is one PltError line."""
    if cfg.network != RECORDED_NETWORK:
        return None
    inf = netinfer.infer(page)
    rate = "not inferred" if inf.rate_bps is None else f"{inf.rate_bps / 1e6:.3g} Mbit/s"
    dns = "" if inf.dns_ms is None else f", DNS {inf.dns_ms:.0f} ms"
    conns = sum(h.connections for h in inf.hosts.values())
    think = sum(t for t in inf.think_ms if t)
    return (
        f"{page.url}: recorded network: RTT {inf.rtt_ms:.0f} ms ({len(inf.hosts)} hosts, {conns} new connections), "
        f"rate {rate}{dns}, think time {think:.0f} ms in all" + "".join(f"; {n}" for n in inf.notes)
    )


def named_pages(what: str, corpus: str | None = None) -> Iterator[tuple[str, Page | None, str | None]]:
    """(page id, page, None) for every page ``what`` names, or (file, None, why) for a file of a
    folder of archives that cannot be read: a folder's archives are read one by one."""
    if not os.path.isdir(what) or formats.archive_of(what) is not None:
        for p in resolver.resolve(what, corpus):
            yield page_label(p), p, None
        return
    for path in formats.listed(what):
        try:
            found = resolver.resolve(path)
        except PltError as e:
            yield path, None, str(e)
            continue
        for p in found:
            yield page_label(p), p, None


def har_folder(path: str | None) -> str | None:
    """The folder `pltlab run --har` writes each load's HAR into, made if missing; None: no HARs."""
    if not path:
        return None
    path = os.path.abspath(path)
    if os.path.exists(path) and not os.path.isdir(path):
        raise PltError(f"--har {path}: a file is there, not a folder")
    if not os.path.isdir(os.path.dirname(path)):
        raise PltError(f"--har {path}: its parent folder does not exist")
    os.makedirs(path, exist_ok=True)
    return path


def write_har(folder: str, page: Page, cfg: RunConfig, record: dict) -> str:
    """One load's HAR 1.2 (pltlab.run.loadhar) into ``folder``, named like its per-load pcap;
    written whole or not at all. Returns its path."""
    name = loadpcaps.file_name(page_label(page), cfg, record["tfo"], record["rep"], ext="har")
    path = os.path.join(folder, name)
    with files.replaced(path, ".part") as tmp, open(tmp, "w") as f:
        json.dump(loadhar.build(page, record), f, indent=1)
    return path


def run_pages(
    what: str,
    cfg: RunConfig,
    corpus: str | None = None,
    on_run: Callable[[dict], None] | None = None,
    on_note: Callable[[str], None] | None = None,
    on_page: Callable[[dict, list[dict]], None] | None = None,
    har_dir: str | None = None,
) -> dict:
    """Load every page ``what`` names under ``cfg`` (run.runner.run_page each). Returns
    {"runs": every load's record, "pages": [{page_id, page, status "ok"|"failed", error, loads}]};
    ``on_run(record)`` after each load, ``on_note(text)`` for a page's calibration note,
    ``on_page(page entry, its records)`` after each page. ``har_dir``: each load's HAR is
    written there too (the record's ``har`` names the file)."""
    runs: list[dict] = []
    pages: list[dict] = []
    folder = har_folder(har_dir)
    for label, p, err in named_pages(what, corpus):
        n0 = len(runs)
        if err is None:

            def done(r: dict, p=p) -> None:
                if folder and r.get("requests"):
                    r["har"] = write_har(folder, p, cfg, r)
                runs.append(r)
                if on_run:
                    on_run(r)

            try:
                for note in (network_note(p, cfg), calibration_note(p, cfg)):
                    if note and on_note:
                        on_note(note)
                run_page(p, cfg, on_run=done)
            except PltError as e:
                err = str(e)
            except Exception as e:  # noqa: BLE001 - one page's bug must not end the others
                err = f"{type(e).__name__}: {e}"
        if err is not None and err.startswith(label + ": "):
            err = err[len(label) + 2 :]
        pages.append(
            {
                "page_id": label,
                "page": p.url if p else None,
                "status": "failed" if err is not None else "ok",
                "error": err,
                "loads": len(runs) - n0,
            }
        )
        if on_page:
            on_page(pages[-1], runs[n0:])
    return {"runs": runs, "pages": pages}
