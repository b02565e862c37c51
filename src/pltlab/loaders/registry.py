"""The page loaders by name (the `client` knob): one `Loader` each (loaders.loader: its facts, its
plan and load, its own validity rules), defined in its module. Code outside this table asks a
row (``get(cfg.client).planned``, ``get(cfg.client).load(...)``), never compares loader names nor
imports a loader's module.
"""

from __future__ import annotations

from pltlab.errors import PltError
from pltlab.loaders import builtin, chromium
from pltlab.loaders.loader import Job, Loader

LOADERS: dict[str, Loader] = {x.name: x for x in (builtin.LOADER, chromium.LOADER)}
DEFAULT = "builtin"


def get(name: str) -> Loader:
    if name not in LOADERS:
        raise PltError(f"unknown loader {name!r} (choose from {', '.join(LOADERS)})")
    return LOADERS[name]


def warm_tfo(job: Job) -> None:
    """The prior visit that caches a TFO cookie for every origin (the built-in loader's, whatever
    the client: one TFO request per origin address)."""
    builtin.warm_tfo(job)
