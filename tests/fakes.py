"""Stand-ins for a measurement kind's runner (pltlab.run.kinds) that build no namespaces: tests of
the engine and the studies give them a ``load(point, rep)`` returning a plausible record."""

from types import SimpleNamespace

from pltlab.net import names


class FakeRunner:
    def __init__(self, page, cfg):
        self.page, self.cfg = page, cfg
        self.topo = SimpleNamespace(run_id=names.new_run_id(), link_stats=None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
