#!/usr/bin/env python3
"""A Ray cluster of several nodes on this machine, on loopback, for a command that takes
`--cluster ADDRESS`; everything stopped afterwards.

    python3 benches/local_cluster.py [--nodes 2] [--slots 1] -- pltlab reproduce tfo --quick -o DIR

`ray start` cannot make it (docs/cluster.md: a node joining a loopback head must keep loopback,
and Ray refuses to start a joining node with the switch that keeps it), so this uses Ray's own
test utility (ray.cluster_utils.Cluster, as tests/test_cluster.py does): a head without slots and
``--nodes`` nodes offering ``--slots`` loads each, every one a raylet of its own (own ports,
object store and worker processes; one session folder), all on 127.0.0.1, no token (the command
is told: RAY_AUTH_MODE=disabled). The command runs with `--cluster ADDRESS` appended; then the
cluster is shut down, and the exit status says whether Ray processes or pltlab's namespaces were
left behind (`pltlab clean` must find nothing new).

Two nodes on one machine share its CPUs: the loads they run at once disturb each other (what
docs/cluster.md's two-node figures measure); the timing of a real cluster's nodes does not.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import subprocess
import sys
import time

MB = 1024**2
NODE = {"num_cpus": 1, "object_store_memory": 80 * MB}


@contextlib.contextmanager
def cluster(nodes: int = 2, slots: int = 1):
    """A head without slots and ``nodes`` nodes with ``slots`` each, on 127.0.0.1; yields Ray's
    Cluster (``.address``). Shut down afterwards; raises if Ray processes of it are left."""
    from ray._private import ray_constants
    from ray.cluster_utils import Cluster

    from pltlab.cluster.driver import OBJECT_STORE_BYTES, SLOT
    from pltlab.cluster.local import ray_processes

    before = ray_processes()
    os.environ["RAY_AUTH_MODE"] = "disabled"  # Ray's test clusters ask for no token
    with contextlib.suppress(ImportError):  # (a Ray without token authentication)
        from ray._private.authentication_test_utils import reset_auth_token_state

        reset_auth_token_state()
    keep = ray_constants.ENABLE_RAY_CLUSTER
    ray_constants.ENABLE_RAY_CLUSTER = False  # every node keeps 127.0.0.1 (else: the node's address)
    c = Cluster(initialize_head=True, head_node_args={**NODE, "object_store_memory": OBJECT_STORE_BYTES})
    try:
        for _ in range(nodes):
            c.add_node(resources={SLOT: slots}, **NODE)
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()
        ray_constants.ENABLE_RAY_CLUSTER = keep
        deadline = time.time() + 30
        while (left := ray_processes() - before) and time.time() < deadline:
            time.sleep(0.2)
        if left:
            raise RuntimeError(f"Ray processes left after shutdown: {sorted(left)}")


def leftovers() -> set[str]:
    """What `pltlab clean` would remove now (namespaces, links, work folders of dead runs)."""
    from pltlab.net import clean

    return {f"{kind} {x}" for kind, items in clean.leftovers(None, False).items() if kind != "live" for x in items}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=2)
    ap.add_argument("--slots", type=int, default=1, help="loads at once per node")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND ... (gets --cluster ADDRESS)")
    a = ap.parse_args()
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not cmd:
        ap.error("a command is needed: -- pltlab ...")
    if cmd[0] == "pltlab":  # this interpreter's pltlab
        cmd = [sys.executable, "-m", "pltlab"] + cmd[1:]
    before = leftovers()  # (another session's dead runs are not this command's)
    with cluster(a.nodes, a.slots) as c:
        print(f"local cluster: {a.nodes} node(s) x {a.slots} slot(s) at {c.address}", file=sys.stderr, flush=True)
        rc = subprocess.call(cmd + ["--cluster", c.address])
    left = leftovers() - before
    if left:
        print("local cluster: left behind (pltlab clean):\n" + "\n".join(sorted(left)), file=sys.stderr)
        return rc or 1
    print("local cluster: stopped, no Ray process and nothing for pltlab clean left", file=sys.stderr)
    return rc


if __name__ == "__main__":
    sys.exit(main())
