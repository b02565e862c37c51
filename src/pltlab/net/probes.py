"""Running `pltlab-dp probe ...` measurements across a topology."""

import select
import subprocess
import time

from pltlab import dataplane
from pltlab.errors import PltError
from pltlab.net.topology import Topology

PROBE_PORT = 9000


def start_server(
    topo: Topology,
    origin: int = 0,
    port: int = PROBE_PORT,
    tfo_queue: int = 256,
    timeout: float = 5.0,
    keep_alive: bool = True,
) -> subprocess.Popen:
    """Start the probe server on origin ``origin``'s address; returns once it listens.
    ``keep_alive`` False: its HTTP responses say Connection: close and end their connection."""
    addr = f"{topo.origin_ips[origin]}:{port}"
    p = topo.popen(
        origin,
        [dataplane.binary(), "probe", "serve", "--listen", addr, "--tfo-queue", str(tfo_queue)]
        + ([] if keep_alive else ["--no-keep-alive"]),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    ready, _, _ = select.select([p.stdout], [], [], timeout)
    line = p.stdout.readline() if ready else ""
    if '"ready"' not in line:
        p.kill()
        err = p.stderr.read().strip().splitlines()
        raise PltError(f"probe server on {addr} did not start: {err[-1] if err else 'no answer'}")
    topo.watch("probe server", p)  # a probe client ends at once if it dies
    return p


def client(topo: Topology, args: list[str], timeout: float = 120.0) -> dict:
    """Run one probe client in the client namespace; returns its JSON result."""
    cp = topo.run("client", [dataplane.binary(), "probe", *args], check=False, timeout=timeout)
    return dataplane.result(cp, f"probe {args[0]}")


def target(topo: Topology, origin: int = 0, port: int = PROBE_PORT) -> str:
    return f"{topo.origin_ips[origin]}:{port}"


def settle(seconds: float = 0.05) -> None:
    time.sleep(seconds)
