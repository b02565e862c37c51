"""Starting and stopping `pltlab-dp replay` for a set of pages inside a topology."""

import json
import os
import select
import signal
import subprocess

from pltlab import dataplane
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net.topology import Topology
from pltlab.replay import manifest


def make_ca(workdir: str, hosts: list[str]) -> dict:
    """Per-corpus CA and one leaf certificate for every https host; returns paths and the SPKI."""
    cp = subprocess.run(
        [dataplane.binary(), "ca", "--out", workdir, *sum((["--host", h] for h in hosts), [])],
        capture_output=True,
        text=True,
    )
    if cp.returncode != 0:
        raise PltError(f"certificate generation failed: {(cp.stderr.strip().splitlines() or ['?'])[-1]}")
    info = json.loads(cp.stdout.strip().splitlines()[-1])
    return info


class ReplayServer:
    def __init__(
        self,
        topo: Topology,
        pages: list[Page],
        host_ips: dict[str, str],
        workdir: str,
        think_time: bool = False,
        protocol: str = "recorded",
        h2_priority: str = "rfc9218",
        request_timeout_s: int = 120,
        keep_alive: bool = True,
        quic: dict | None = None,
        spoken=None,
    ):
        self.topo, self.workdir = topo, workdir
        # Every host gets a certificate: a browser may upgrade any host to https (HSTS preload).
        self.tls = make_ca(workdir, sorted(host_ips))
        tls_cfg = manifest.TlsFiles(cert=self.tls["cert"], key=self.tls["key"]) if self.tls else None
        self.manifest = manifest.build(
            pages,
            host_ips,
            workdir,
            tls_cfg,
            think_time=think_time,
            protocol=protocol,
            h2_priority=h2_priority,
            request_timeout_s=request_timeout_s,
            keep_alive=keep_alive,
            spoken=spoken,  # (the loader's protocols: "recorded" replays others as it can load them)
            **(quic or {}),  # quic_cc, quic_icw, h3_discovery
        )
        # what each address's https offers (ALPN), for the plans and the loads' protocol checks
        self.offered = manifest.offered(self.manifest)
        self.proc = None
        self.stats: dict | None = None

    @property
    def ca(self) -> str | None:
        return self.tls["ca"] if self.tls else None

    @property
    def spki(self) -> str | None:
        return self.tls["spki"] if self.tls else None

    def start(self, timeout: float = 10.0) -> None:
        path = os.path.join(self.workdir, "replay.json")
        with open(path, "w") as f:
            json.dump(self.manifest, f)
        self._err = open(os.path.join(self.workdir, "replay.stderr"), "w+")
        self.proc = self.topo.popen(
            "server",
            [dataplane.binary(), "replay", "--manifest", path],
            stdout=subprocess.PIPE,
            stderr=self._err,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        line = self.proc.stdout.readline() if ready else ""
        if '"ready"' not in line:
            self.proc.kill()
            self.proc.wait()
            raise PltError(f"replay server did not start: {self._stderr_tail()}")

    def snapshot(self, timeout: float = 5.0) -> dict | None:
        """The server's statistics so far (SIGUSR1 → one JSON line), or None if it does not answer."""
        return dataplane.snapshot(self.proc, timeout)

    def new_session(self) -> None:
        """A new page load begins: SIGUSR2 makes the server answer repeated URLs from their first
        recording again (their recorded order restarts)."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGUSR2)

    def rotate_tickets(self) -> None:
        """SIGHUP: the server forgets every TLS session, as a ticket key rotation does (the tickets
        clients hold then resume nothing: full handshakes, early data refused)."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGHUP)

    def _stderr_tail(self) -> str:
        return dataplane.stderr_tail(self._err, "no output")

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def error(self) -> str:
        return self._stderr_tail()

    def stop(self) -> dict | None:
        if self.proc is None:
            return self.stats
        p, self.proc = self.proc, None
        dataplane.terminate(p)
        try:
            with open(self.manifest["stats"]) as f:
                self.stats = json.load(f)
        except (OSError, ValueError):
            self.stats = None
        self._err.close()
        return self.stats
