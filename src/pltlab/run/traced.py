"""The "traced_load" measurement kind: page loads whose PLT is read from the link emulator's packet
trace (pltlab.run.pcaptrace), as the ICW study defined it, next to the loader's own PLT.

Every load runs in a fresh topology (a cold TCP state, the loss RNG restarted, a pcap holding that
load alone), and load ``rep`` uses link seed ``cfg.seed + rep - 1``: every configuration sees the
same drop pattern (by packet index) in the same repetition. The fresh topologies all take the
runner's one run id, which the sweep records before the first, so a resume after a kill removes
what the kill left (namespaces, the trace folder)."""

from __future__ import annotations

import dataclasses
import os
import shutil
from types import SimpleNamespace

from pltlab import units
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net import lateness, names
from pltlab.net.topology import Topology
from pltlab.run.config import RunConfig
from pltlab.run.pcaptrace import plt_from_pcap
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner


def check_icw(v) -> int:
    """An initial congestion window in segments (units.MIN_ICW .. MAX_ICW, as the icw knob; the
    study used 1..32), or a one-line PltError."""
    if not units.is_window(v):
        raise PltError(f"invalid ICW {v!r}: must be an integer from {units.MIN_ICW} to {units.MAX_ICW} segments")
    return v


class FreshTopologies:
    """Base of the kinds whose every load builds its own topology under the runner's run id
    (``topo.run_id``, as the sweep reads it); ``cfg.seed + rep - 1`` is load ``rep``'s link seed."""

    needs_root = True  # each load builds an emulated WAN (pltlab.run.kinds.needs_root)

    def __init__(self, cfg: RunConfig):
        self.cfg = cfg
        self.topo = SimpleNamespace(run_id=names.new_run_id(), link_stats=None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def link_seed(self, rep: int) -> int:
        return self.cfg.seed + rep - 1

    def topology(self, spec) -> Topology:
        return Topology(spec, run_id=self.topo.run_id)


class _OneLoad(PageRunner):
    """A PageRunner for one load under a given run id (its topology made with that id)."""

    per_load_pcap = False  # cfg.pcap is this load's own trace file

    def __init__(self, page: Page, cfg: RunConfig, run_id: str):
        super().__init__(page, cfg)
        self.topo = Topology(self.topo.spec, run_id=run_id)


class TracedRunner(FreshTopologies):
    """One configuration of one page, each load traced in its own topology (userspace emulator:
    netem writes no pcap). A load during which the emulator was late is re-run in a fresh
    topology (at most ``cfg.late_reruns`` times; a trace must hold one load only)."""

    def __init__(self, page: Page, cfg: RunConfig):
        if cfg.icw is not None:
            check_icw(cfg.icw)
        super().__init__(cfg)
        self.page = page
        self.trace_dir = os.path.join(
            os.path.dirname(names.workdir(self.topo.run_id)), names.run_prefix(self.topo.run_id) + "trace"
        )

    def __exit__(self, *exc):
        shutil.rmtree(self.trace_dir, ignore_errors=True)
        return False

    def _once(self, point: Point, rep: int) -> tuple[dict, dict]:
        os.makedirs(self.trace_dir, exist_ok=True)  # per load: `pltlab clean` may take it between loads
        pcap = os.path.join(self.trace_dir, "load.pcap")
        cfg = dataclasses.replace(self.cfg, seed=self.link_seed(rep), pcap=pcap, backend="userspace", late_reruns=0)
        try:
            with _OneLoad(self.page, cfg, self.topo.run_id) as pr:
                rec = pr.load(point, rep)
            return rec, plt_from_pcap(pcap)
        finally:
            shutil.rmtree(self.trace_dir, ignore_errors=True)

    def load(self, point: Point, rep: int) -> dict:
        """The page runner's record with plt_ms = the trace's PLT, ``metrics`` (trace and loader
        PLT, the trace's connections and unacknowledged ends, the link seed) and ``seed``."""
        late: list[str] = []
        while True:
            rec, tr = self._once(point, rep)
            why = lateness.late_reason(rec["emulator_lateness_us"])
            if why is None or len(late) >= self.cfg.late_reruns:
                break
            late.append(why)
        rec["late_reruns"], rec["late_rerun_reasons"] = len(late), late
        if why is not None and late:  # the page runner counted none of our re-runs
            rec["invalid_reason"] = f"{why} (still, after {len(late)} re-run(s))"
        rec["metrics"] = {
            "trace_plt_ms": tr["plt_ms"],
            "loader_plt_ms": rec["plt_ms"],
            "connections": tr["connections"],
            "unacked": tr["unacked"],
            "link_seed": self.link_seed(rep),
        }
        rec["plt_ms"] = tr["plt_ms"]
        rec["seed"] = self.link_seed(rep)
        return rec


def traced_load(page: Page, cfg: RunConfig, rep: int = 1) -> dict:
    """One traced load (no TFO) in a fresh topology, outside any sweep: the record of
    TracedRunner.load; raises PltError if it is invalid."""
    with TracedRunner(page, cfg) as r:
        rec = r.load(Point(), rep)
    if not rec["valid"]:
        raise PltError(f"invalid load: {rec['invalid_reason']}")
    return rec
