"""The built-in loader (`pltlab-dp load`), run in the client namespace."""

import json
import os

from pltlab import dataplane
from pltlab.net.topology import Topology


def load(topo: Topology, plan: dict, workdir: str, name: str = "plan.json") -> dict:
    path = os.path.join(workdir, name)
    with open(path, "w") as f:
        json.dump(plan, f)
    cp = topo.run(
        "client", [dataplane.binary(), "load", "--plan", path], check=False, timeout=plan.get("timeout_s", 120) + 30
    )
    return dataplane.result(cp, "page load")
