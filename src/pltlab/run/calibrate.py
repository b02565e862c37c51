"""Measuring Chromium's compute on a page (pltlab calibrate): several Chromium loads over the
emulated network, derived by pltlab.loaders.compute_model, stored by pltlab.archive.calibration."""

from __future__ import annotations

import os
import time

from pltlab import files
from pltlab.archive import bundled, synth
from pltlab.archive import resolve as resolver
from pltlab.archive.calibration import PAGE_KEY, attach, machine
from pltlab.archive.corpus import file_name
from pltlab.archive.har import write_page
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.loaders import plan as plans
from pltlab.loaders import registry
from pltlab.loaders.compute_model import derive
from pltlab.run.config import RunConfig
from pltlab.run.runner import PageRunner


def calibrate(page: Page, loads: int = 3, rtt: str = "0ms", log=None) -> Page:
    """Measure Chromium's compute on ``page`` (``loads`` loads at ``rtt``, median) and store it
    on the page (in place; returned)."""
    if loads < 1:
        raise PltError(f"invalid number of calibration loads {loads}: must be >= 1")
    cfg = RunConfig(rtt=rtt, client="chromium", schemes="chromium", model="chromium", reps=loads, tfo="off")
    results, browser = [], ""
    loader = registry.get(cfg.client)
    with PageRunner(page, cfg) as pr:
        plan = plans.build(
            page,
            pr.host_ips,
            tfo=False,
            ca=pr.replay.ca,
            https_hosts=pr.https_hosts,
            model="chromium",
            calibrated=False,
        )
        for k in range(loads):
            try:
                res = loader.load(pr.job(), None, tfo=False)
            except PltError as e:
                raise PltError(f"calibrating {page.url}: load {k + 1} failed: {e}") from None
            if res.get("document_problem"):
                raise PltError(f"calibrating {page.url}: load {k + 1} failed: {res['document_problem']}")
            browser = res.get("browser") or browser
            results.append(res)
            if log:
                log(f"{page.url}: calibration load {k + 1}/{loads}: Chromium PLT {res['plt_ms']:.1f} ms")
        objs = plans.plan_objects(page, pr.host_ips, pr.https_hosts)  # as the plan was built
    main = synth.main_document(page)
    doc = next((i for i, o in enumerate(objs) if o is main), 0)
    try:
        derived = derive(plan, results, doc, rtt_ms=cfg.rtt_us / 1000)
    except PltError as e:
        raise PltError(f"calibrating {page.url}: {e}") from None
    meta = {
        "browser": f"chromium {browser}".strip(),
        "machine": machine(),
        "rtt_ms": cfg.rtt_us / 1000,
        "measured_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_plt_ms": [round(r["plt_ms"], 1) for r in results],
    }
    return attach(page, objs, derived, meta)


def calibrate_pages(
    pages: list[str],
    out_dir: str,
    loads: int = 3,
    rtt: str = "0ms",
    corpus: str | None = None,
    log=None,
    on_page=None,
    on_todo=None,
) -> list[dict]:
    """Calibrate every page ``pages`` name (HAR files, corpus directories, bundled names) and write
    each, calibrated, into ``out_dir`` (NAME.har: a bundled page's or a single-page file's name,
    else one made from its URL). Returns one entry per page: its URL, file and calibration."""
    todo = [(what, p) for what in pages for p in resolver.resolve(what, corpus)]
    if on_todo:
        on_todo(len(todo))
    os.makedirs(out_dir, exist_ok=True)
    taken: set[str] = set()
    done = []
    for what, p in todo:
        if what in bundled.NAMES:
            name = f"{what}.har"
        elif os.path.isfile(what) and what.endswith(".har") and len(resolver.resolve(what, corpus)) == 1:
            name = os.path.basename(what)
        else:
            name = file_name(p.url, taken)
        calibrate(p, loads=loads, rtt=rtt, log=log)
        path = os.path.join(out_dir, name)
        with files.replaced(path) as tmp:
            write_page(p, tmp)
        cal = p.extras[PAGE_KEY]
        done.append(
            {
                "page": p.url,
                "file": path,
                **cal,
                "compute_ms_sum": round(sum(o.extras.get("compute_ms", 0.0) for o in p.objects), 1),
            }
        )
        if on_page:
            on_page(done[-1])
    return done
