"""The page loaders by name (the `client` knob): one row each, saying what the rest of pltlab may
assume of a loader's records. Code outside this table asks a row (``get(cfg.client).planned``),
never compares loader names.

- planned: it executes a plan built by pltlab (loaders.plan): the load's graph and document check
  come from the plan; else the loader reports initiators and judges its document itself.
- resumes_itself: it decides how many TLS connections resume (a load needs one resumed, with
  early data for 0rtt); else every connection that carried a request must.
- upgrades_itself: it applies its own HSTS upgrades (pltlab leaves its http URLs alone unless the
  names were renamed out of the preload list).
- timings: the shape of its request timings ("plan": ready/connect/tls/request ms; "cdp": CDP's
  ResourceTiming spans, byte counts decoded).
- connections: it reports per-connection facts (the HAR's `_connections`).
- default_protocol: what a request record without a protocol went over (None: not said).
"""

from __future__ import annotations

from dataclasses import dataclass

from pltlab import protocols
from pltlab.errors import PltError


@dataclass(frozen=True)
class Loader:
    name: str
    browser: str  # the HAR's browser name
    planned: bool
    resumes_itself: bool
    upgrades_itself: bool
    timings: str  # "plan" or "cdp"
    connections: bool
    default_protocol: str | None


LOADERS = {
    x.name: x
    for x in (
        Loader("builtin", "pltlab-loader", True, False, False, "plan", True, protocols.FALLBACK_ALPN),
        Loader("chromium", "chromium", False, True, True, "cdp", False, None),
    )
}
DEFAULT = "builtin"


def get(name: str) -> Loader:
    if name not in LOADERS:
        raise PltError(f"unknown loader {name!r} (choose from {', '.join(LOADERS)})")
    return LOADERS[name]
