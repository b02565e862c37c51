"""The built-in loader (`pltlab-dp load`), run in the client namespace."""

import json
import os

from pltlab import dataplane
from pltlab.net.topology import Topology


def load(topo: Topology, plan: dict, workdir: str, name: str = "plan.json", warmed=None) -> dict:
    """One load. With a plan tls_mode other than full the loader first visits the page for its
    session tickets; ``warmed()`` is called when that visit is over, before the measured load
    starts (the runner takes its counts then)."""
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(plan, f)

    def on_line(line: str) -> str | None:
        if not line.startswith('{"event":"warmed"'):
            return None
        if warmed is not None:
            warmed()
        return "go\n"

    timeout = plan.get("timeout_s", 120) * (2 if plan.get("tls_mode", "full") != "full" else 1) + 30
    cp = topo.run("client", [dataplane.binary(), "load", "--plan", path], check=False, timeout=timeout, on_line=on_line)
    return dataplane.result(cp, "page load")
