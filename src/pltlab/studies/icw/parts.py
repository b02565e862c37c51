"""The study's page and its four parts as experiments of the sweep engine.

- rtt (Fig. 19): the Yahoo-like page, traced loads (PLT from the packet trace), per (RTT, ICW);
- loss (Fig. 20): the same at one RTT, per (loss, ICW); load k uses link seed seed + k - 1;
- transfer (Fig. 18): page loads of bundled corpus pages per (RTT, ICW); the object transfer
  times are the loads' request rows;
- fairness: the "flows" measurement (a long flow vs back-to-back short downloads) per ICW.

Each experiment goes to its own folder (the part's name) of the study's output folder;
``extras["points"][c]`` says what configuration c is in the study's terms (icw, rtt_ms, loss).
"""

from __future__ import annotations

import json

from pltlab.archive import bundled
from pltlab.archive.generate import from_objects
from pltlab.archive.model import Page
from pltlab.experiments.spec import PageEntry
from pltlab.studies import presets
from pltlab.studies.engine import StudyExperiment, config

FIG19_RTTS = (50, 100, 200, 800, 1500)
FIG19_ICWS = (1, 3, 8, 16)
FIG20_LOSSES = (0.0, 0.01, 0.02, 0.05, 0.10, 0.15, 0.20, 0.25)
FIG18_ICWS = (1, 3, 5, 7, 10, 16, 32)
FIG18_RTTS = (50, 200, 800)
FAIR_ICWS = (32, 3)

# The page shaped like the IMC 2011 study's snapshot of the Yahoo! front page: 30 objects over
# two domains (two origin IPs), every sub-resource discovered from the main document (depth 1),
# so that with the browser limit of 6 connections per domain the load opens 12 connections:
# 30 / 12 = 2.5 objects per connection, as the study measured. The sizes are fixed (not drawn)
# and documented in docs/icw-study.md: they straddle the bytes one initial window carries (MSS
# 1448: ICW 1 = 1.4 KB, 3 = 4.3 KB, 8 = 11.6 KB, 16 = 23 KB, 32 = 46 KB), as the study's
# object-size distribution does (most objects a few KB, a tail of tens of KB).
# (kind, domain index, size in bytes, name); index 0 is the main document. Domain 0 = the page's
# own host (the HTML, page scripts, news images); domain 1 = the static CDN host.
YAHOO_OBJECTS: tuple[tuple[str, int, int, str], ...] = (
    ("html", 0, 46_000, "index"),  # front-page HTML (gzipped), the largest single object
    # domain 0: 14 sub-resources
    ("js", 0, 34_000, "page"),
    ("js", 0, 7_200, "ads"),
    ("json", 0, 2_600, "weather"),
    ("image", 0, 14_500, "news-lead"),
    ("image", 0, 9_800, "news-1"),
    ("image", 0, 8_600, "news-2"),
    ("image", 0, 7_400, "news-3"),
    ("image", 0, 6_100, "news-4"),
    ("image", 0, 5_200, "thumb-1"),
    ("image", 0, 4_300, "thumb-2"),
    ("image", 0, 3_500, "thumb-3"),
    ("image", 0, 2_400, "thumb-4"),
    ("image", 0, 1_300, "beacon-logo"),
    ("image", 0, 43, "beacon"),
    # domain 1: 15 sub-resources
    ("css", 1, 28_000, "base"),
    ("css", 1, 9_500, "theme"),
    ("js", 1, 62_000, "framework"),
    ("js", 1, 15_000, "widgets"),
    ("image", 1, 24_000, "sprite-main"),
    ("image", 1, 18_000, "sprite-icons"),
    ("image", 1, 11_200, "promo"),
    ("image", 1, 5_600, "logo"),
    ("image", 1, 3_900, "icon-mail"),
    ("image", 1, 2_900, "icon-news"),
    ("image", 1, 2_200, "icon-sports"),
    ("image", 1, 1_700, "icon-finance"),
    ("image", 1, 1_100, "icon-weather"),
    ("image", 1, 800, "arrow"),
    ("image", 1, 400, "spacer"),
)
PAGE_LABEL = "yahoo-like"
FLOWS_LABEL = "long-vs-short"


def yahoo_page(domain: str = "yahoo-like", scheme: str = "http", scale: float = 1.0) -> Page:
    """The study page: 30 objects, two hosts (www.<domain>.test and static.<domain>.test), every
    sub-resource a child of the main document, cache off; ``scale`` multiplies every size."""
    return from_objects(
        YAHOO_OBJECTS,
        domain=domain,
        hosts=("www", "static"),
        scheme=scheme,
        title="Yahoo-like front page (IMC 2011 ICW study)",
        scale=scale,
        name="icw.yahoo_page",
        headers=(("Cache-Control", "no-cache, no-store"),),
    )  # the loader has no cache


def total_bytes(page: Page | None = None) -> int:
    return sum(o.size for o in (page or yahoo_page()).objects)


def flows_page() -> Page:
    """What names the fairness runs in their results (the flows measurement loads no page)."""
    return Page(url=f"http://{FLOWS_LABEL}.flows.test/", title="a long flow vs back-to-back downloads")


def _toml(v) -> str:
    if isinstance(v, dict):
        return "{" + ", ".join(f"{k} = {_toml(x)}" for k, x in v.items()) + "}"
    return json.dumps(list(v) if isinstance(v, tuple) else v)


def _source(name: str, what: str, pages: list[PageEntry], axes: dict, reps: int, p, kind: str, run: dict) -> str:
    """The part as an experiment file would say it (the report shows it; `pltlab sweep` has no
    measurement kinds, so those lines are comments)."""
    out = [f"# pltlab reproduce icw: {what}", f'name = "{name}"', f"pages = {_toml([e.label for e in pages])}"]
    out += [f"{k} = {_toml(v)}" for k, v in axes.items()]
    out += [
        f'cc = "{p.cc}"',
        'tfo = ["off"]',
        f"repetitions = {reps}",
        f"seed = {p.seed}",
        f"max_conns_per_host = {p.max_conns_per_host}",
        'client_rmem = "kernel"',
        f'# measurement kind "{kind}" (pltlab.run.kinds)'
        + ("; every load in a fresh topology, load k with link seed seed + k - 1" if kind != "page_load" else ""),
    ]
    out += [f"# {k} = {_toml(v)}" for k, v in run.items()]
    return "\n".join(out) + "\n" + presets.toml_lines(p.setup())


def _exp(
    name: str,
    what: str,
    pages: list[PageEntry],
    points: list[tuple[dict, object]],
    reps: int,
    p,
    kind: str,
    run: dict,
    axes: dict,
) -> StudyExperiment:
    point, exp_level = presets.split(p.setup())  # the stack's knobs (none: today's defaults)
    return StudyExperiment(
        name=name,
        pages=pages,
        configs=presets.configure([c for _, c in points], point),
        tfo_modes=(False,),
        repetitions=reps,
        seed=p.seed,
        max_conns_per_host=exp_level.get("max_conns_per_host", p.max_conns_per_host),
        # the 2011 clients: the kernel's 64 KB window, autotuned
        client_rmem=exp_level.get("client_rmem"),
        kind=kind,
        run=run,
        extras={"points": [pt for pt, _ in points]},
        source=_source(name, what, pages, axes, reps, p, kind, run),
    )


def _ms(xs) -> list[str]:
    return [f"{x:g}ms" for x in xs]


def _pct(xs) -> list[str]:
    return [f"{x * 100:g}%" for x in xs]


def experiments(p) -> list[tuple[str, StudyExperiment]]:
    """(folder, experiment) of every part in ``p.parts`` (``p``: study_file.Params), in the order of
    PARTS."""
    out = []
    load = {"load_timeout_s": float(p.load_timeout_s)}
    page = [PageEntry(PAGE_LABEL, yahoo_page())]
    rate = p.rate or "unlimited"
    if "rtt" in p.parts:
        pts = [({"icw": i, "rtt_ms": r}, config(r, i, rate=p.rate, cc=p.cc)) for r in p.rtts for i in p.icws]
        axes = {"rtt": _ms(p.rtts), "initcwnd": p.icws, "rate": rate}
        out.append(
            ("rtt", _exp("icw-rtt", "part rtt (Fig. 19, PLT vs RTT)", page, pts, p.reps, p, "traced_load", load, axes))
        )
    if "loss" in p.parts:
        pts = [
            ({"icw": i, "loss": lo, "rtt_ms": p.loss_rtt_ms}, config(p.loss_rtt_ms, i, loss=lo, rate=p.rate, cc=p.cc))
            for lo in p.losses
            for i in p.icws
        ]
        axes = {"rtt": _ms([p.loss_rtt_ms]), "loss": _pct(p.losses), "initcwnd": p.icws, "rate": rate}
        out.append(
            (
                "loss",
                _exp("icw-loss", "part loss (Fig. 20, PLT vs loss)", page, pts, p.reps, p, "traced_load", load, axes),
            )
        )
    if "transfer" in p.parts:
        pages = [PageEntry(n, bundled.load(n)) for n in p.transfer_pages]
        pts = [
            ({"icw": i, "rtt_ms": r}, config(r, i, rate=p.rate, cc=p.cc))
            for r in p.transfer_rtts
            for i in p.transfer_icws
        ]
        axes = {"rtt": _ms(p.transfer_rtts), "initcwnd": p.transfer_icws, "rate": rate}
        # the emulator the traced parts use (netem would do too, but keep one link model)
        out.append(
            (
                "transfer",
                _exp(
                    "icw-transfer",
                    "part transfer (Fig. 18, object transfer times)",
                    pages,
                    pts,
                    p.transfer_reps,
                    p,
                    "page_load",
                    {**load, "backend": "userspace"},
                    axes,
                ),
            )
        )
    if "fairness" in p.parts:
        pts = [
            (
                {"icw": i, "rtt_ms": p.fairness_rtt_ms, "loss": p.fairness_loss},
                config(p.fairness_rtt_ms, i, loss=p.fairness_loss, rate=p.fairness_rate, cc=p.cc),
            )
            for i in p.fairness_icws
        ]
        extra = {
            "seconds": float(p.fairness_seconds),
            "download_bytes": p.fairness_download_bytes,
            "long_flow": p.fairness_long_flow,
            "loss_up": float(p.fairness_loss_up),
        }
        axes = {
            "rtt": _ms([p.fairness_rtt_ms]),
            "loss": _pct([p.fairness_loss]),
            "initcwnd": p.fairness_icws,
            "rate": p.fairness_rate,
        }
        out.append(
            (
                "fairness",
                _exp(
                    "icw-fairness",
                    "part fairness (a long flow vs short downloads)",
                    [PageEntry(FLOWS_LABEL, flows_page())],
                    pts,
                    1,
                    p,
                    "flows",
                    {"extra": extra},
                    axes,
                ),
            )
        )
    return out
