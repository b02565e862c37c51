"""A load's point: the knob values that change from one load to the next within one runner.

A runner (pltlab.run.kinds) is built for a page and a configuration (RunConfig: every knob that
shapes the network, the servers and the loader); ``load(point, rep)`` then loads under the
point's per-load values. Today one knob is per load: TFO (the runner switches the kernel's
setting between loads). Every other knob, the compared one too (protocol, tls, ...), is the
runner's configuration, so an experiment comparing h1 with h2 opens one runner per side.
"""

from __future__ import annotations

from dataclasses import dataclass

# the knobs a runner takes per load (the rest are its configuration's)
PER_LOAD = ("tfo",)


@dataclass(frozen=True)
class Point:
    tfo: bool = False

    def key(self) -> str:
        """The point's part of a run key: ``tfo=0``/``tfo=1`` (the form every results folder has)."""
        return f"tfo={int(self.tfo)}"

    def to_dict(self) -> dict:
        return {"tfo": self.tfo}

    @classmethod
    def from_dict(cls, d: dict) -> Point:
        return cls(tfo=bool(d.get("tfo", False)))
