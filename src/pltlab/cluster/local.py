"""`pltlab cluster up|status|down`: a Ray node on this machine offering pltlab's slots (the head
of a small cluster, or a node joining one), and what each node of a cluster looks like."""

import json
import os
import subprocess
import sys

import ray

from pltlab.cluster.driver import OBJECT_STORE_BYTES, SLOT, connect, slot_nodes
from pltlab.errors import PltError
from pltlab.experiments.results import DB_NAME, Results

DEFAULT_PORT = 6379


def _ray_cli() -> list[str]:
    """Ray's command line through this interpreter (its `ray` script's first line may name a
    Python this user cannot run)."""
    return [sys.executable, "-m", "ray.scripts.scripts"]


def up(slots: int = 1, address: str | None = None, port: int = DEFAULT_PORT) -> str:
    """Start Ray on this machine: the head (``address`` None) or a node joining ``address``; it
    offers ``slots`` loads at once. Returns the address for `--cluster`."""
    if slots < 1:
        raise PltError(f"invalid --slots {slots}: must be at least 1")
    cmd = _ray_cli() + [
        "start",
        "--resources",
        json.dumps({SLOT: slots}),
        "--num-cpus",
        "1",
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--disable-usage-stats",
    ]
    cmd += ["--address", address] if address else ["--head", "--port", str(port), "--include-dashboard", "false"]
    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if cp.returncode != 0:
        last = (cp.stderr.strip() or cp.stdout.strip()).splitlines()[-1:] or ["no output"]
        raise PltError(f"ray start failed: {last[0]}")
    return address or f"127.0.0.1:{port}"


def down() -> None:
    """Stop the Ray processes `pltlab cluster up` started on this machine."""
    cp = subprocess.run(_ray_cli() + ["stop"], capture_output=True, text=True, timeout=120)
    if cp.returncode != 0:
        raise PltError(f"ray stop failed: {cp.stderr.strip().splitlines()[-1:]}")


def status(address: str, results: str | None = None) -> list[dict]:
    """Each node offering slots: host, id, slots (free/total) and, from a results folder of a
    cluster sweep, its runs done, check verdict and whether it was left out (and why)."""
    if results is not None and not os.path.exists(os.path.join(results, DB_NAME)):
        raise PltError(f"{results}: no {DB_NAME} here (a sweep's output folder is needed)")
    if address == "local":
        raise PltError("cluster status: give the cluster's address (HOST:PORT), or auto for this machine's")
    started = connect(address)
    try:
        nodes = [
            {
                "node_id": n["NodeID"],
                "host": n.get("NodeManagerHostname"),
                "address": n.get("NodeManagerAddress"),
                "slots": int(n["Resources"][SLOT]),
                "alive": True,
            }
            for n in slot_nodes()
        ]
    finally:
        if started:
            ray.shutdown()
    if results is not None:
        res = Results(results)
        try:
            known = res.meta().get("cluster", {}).get("nodes", {})
        finally:
            res.close()
        seen = {n["node_id"] for n in nodes}
        for nid, v in known.items():
            if nid not in seen:  # a node of the sweep no longer in the cluster
                nodes.append(
                    {
                        "node_id": nid,
                        "host": v["node"].get("host"),
                        "address": None,
                        "slots": v["slots"],
                        "alive": False,
                    }
                )
        for n in nodes:
            v = known.get(n["node_id"])
            if v is not None:
                n.update(
                    runs=v.get("runs_total", 0),
                    admitted=v.get("admitted"),
                    reason=v.get("reason"),
                    check=v.get("check"),
                )
    return nodes
