"""What `pltlab predict`'s CPU constants (simulate.py: TLS_CPU_MS, OPEN_MS, TFO_SEND_MS,
SERVE_CPU_MS, SERVE_TLS_CPU_MS) were set from, and where a prediction stands against it: the
per-request records of a first run of benches/bench_predict.py (benches/notes.md "predict"): the
bundled pages below and two synthetic ones (a chain of 10, a fan of 30), at RTT 20, 100 and 200 ms,
unshaped, TFO off and on, over HTTP/1.1 (the 2013 pages, over http) and HTTP/2 over TLS 1.3 (the
recent pages), full handshakes.

``stance`` says of a page and configuration: in sample (a page of the fit: its figure says little
of other pages), or what lies outside what was fitted (more objects, bytes or origins than any
page of the fit, an RTT outside 20-200 ms, a protocol or TLS mode never fitted, a rate limit) —
the prediction may still be right there, but nothing measured says so."""

from __future__ import annotations

from pltlab.archive import bundled
from pltlab.archive.model import Page
from pltlab.run.config import RunConfig

PAGES = ("amazon", "nytimes", "wsj", "wikipedia", "filamentgroup", "arcelormittal", "linkedin")
RTT_MS = (20, 200)
PROTOCOLS = ("h1", "h2", "recorded")  # (recorded: the fitted pages' own, h1 and h2)
TLS = ("full",)

_ranges: dict | None = None


def _measure(page: Page) -> tuple[int, int, int]:
    return len(page.objects), sum(o.size for o in page.objects), len({o.host for o in page.objects})


def ranges() -> dict[str, tuple[int, int]]:
    """The fitted pages' (min, max) objects, bytes and origins, measured from the bundled pages."""
    global _ranges
    if _ranges is None:
        m = [_measure(bundled.load(n)) for n in PAGES]
        _ranges = {
            k: (min(x[i] for x in m), max(x[i] for x in m)) for i, k in enumerate(("objects", "bytes", "origins"))
        }
    return _ranges


def _bare(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/").lower()


def stance(page: Page, cfg: RunConfig) -> dict:
    """{"in_sample": bool, "outside": [reasons]} of a prediction of ``page`` under ``cfg``."""
    in_sample = _bare(page.url) in {_bare(bundled.NAMES[n]) for n in PAGES}  # (however it was imported)
    outside = []
    for (k, (_lo, hi)), v in zip(ranges().items(), _measure(page)):
        if v > hi:
            outside.append(f"{v:,} {k} (fitted pages: up to {hi:,})")
    rtt = cfg.rtt_us / 1000
    if not RTT_MS[0] <= rtt <= RTT_MS[1]:
        outside.append(f"RTT {rtt:g} ms (fitted: {RTT_MS[0]}-{RTT_MS[1]} ms)")
    if cfg.protocol not in PROTOCOLS:
        outside.append(f"protocol {cfg.protocol} (fitted: h1, h2)")
    if cfg.tls not in TLS:
        outside.append(f"TLS {cfg.tls} (fitted: full handshakes)")
    if cfg.rate_bps:
        outside.append("a rate limit (fitted: unshaped)")
    return {"in_sample": in_sample, "outside": outside}
