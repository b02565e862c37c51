"""`pltlab shell`: a command in the client namespace behind the emulated link (like mm-delay/mm-link)."""

import os
import signal
import sys

from pltlab import dataplane
from pltlab.net import emulator, names
from pltlab.net.probes import start_server
from pltlab.net.topology import Topology
from pltlab.net.wan import TopologySpec

SHELL_PORT = 80


def run_shell(spec: TopologySpec, cmd: list[str], serve: bool = True, keep_alive: bool = True) -> int:
    """``keep_alive`` False (knob keepalive off): the origin servers' HTTP responses end their
    connections."""
    with Topology(spec) as topo:
        if serve:
            for i in range(spec.origins):
                start_server(topo, origin=i, port=SHELL_PORT, keep_alive=keep_alive)
        env = dict(os.environ)
        env.update(
            {
                "PLTLAB_RUN_ID": topo.run_id,
                "PLTLAB_CLIENT_IP": names.CLIENT_IP,
                "PLTLAB_ORIGINS": " ".join(topo.origin_ips),
                "PLTLAB_BACKEND": topo.backend or "",
                "PLTLAB_DP": dataplane.binary(),
            }
        )
        print(
            f"pltlab shell: run {topo.run_id}, {topo.backend} link, origins {' '.join(topo.origin_ips)}"
            + (f" (server on port {SHELL_PORT})" if serve else ""),
            file=sys.stderr,
        )
        for line in emulator.AidWarnings().new(topo.link_aids_missing):  # a precision aid asked for, refused
            print(line, file=sys.stderr)
        child = topo.popen("client", cmd, env=env)
        # The terminal's Ctrl-C reaches the command itself; we only tear down after it has ended.
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            rc = child.wait()
        finally:
            signal.signal(signal.SIGINT, old)
        if not topo.link_alive():
            print("pltlab shell: warning: the link emulator died during the command", file=sys.stderr)
    return rc if rc >= 0 else 128 - rc
