"""What a page loader is to the rest of pltlab: a `Loader` (its facts, its load, its validity
rules) and the `Job` its loads are of. Each loader module (`builtin`, `chromium`) defines one;
`registry` lists them by name (the `client` knob).

Facts (what the rest of pltlab may assume of a loader's records):

- planned: it executes a plan built by pltlab (loaders.plan): the load's graph and document check
  come from the plan; else the loader reports initiators and judges its document itself.
- upgrades_itself: it applies its own HSTS upgrades (pltlab leaves its http URLs alone unless the
  names were renamed out of the preload list).
- timings: the shape of its request timings ("plan": ready/connect/tls/request ms; "cdp": CDP's
  ResourceTiming spans, byte counts decoded).
- connections: it reports per-connection facts (the HAR's `_connections`).
- default_protocol: what a request record without a protocol went over (None: not said).
- protocols: the rows of pltlab.protocols it speaks (knob ``protocol``); a run asking for another
  is refused (``protocol_problem``, naming ``protocols_later``: when it will), and "recorded"
  replays a recording of another as the latest row before it that the loader speaks
  (protocols.speakable).

Behaviour: `plan(job, tfo)` (None unless planned), `load(job, plan, tfo, warmed)`, and the rules
that are the loader's own: `document_problem`, `tls_problem`, `tls_note`; the rules every loader
shares are in `validity`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pltlab import protocols as rows
from pltlab.archive.model import Page
from pltlab.loaders import validity

# the byte fields every request record has (None: not reported)
REQUEST_BYTES = ("transfer_bytes", "body_bytes", "encoding", "protocol", "tls_handshake", "early_data")


@dataclass(frozen=True)
class Job:
    """What one runner's loads are of and over (pltlab.run.runner.PageRunner makes it)."""

    topo: Any  # the emulated WAN (pltlab.net.topology.Topology): the client namespace, its work folder
    page: Page  # the page as loaded (names renamed: knob hosts)
    host_ips: dict[str, str]
    replay: Any  # the replay server (pltlab.replay.server.ReplayServer): its ca, spki, offered
    https_hosts: set[str] | None  # hosts upgraded to https (knob schemes), None: as recorded
    cfg: Any  # the run's settings (pltlab.run.config.RunConfig): tls, model, calibrated, ...


@dataclass(frozen=True)
class Loader:
    name: str
    browser: str  # the HAR's browser name
    planned: bool
    upgrades_itself: bool
    timings: str  # "plan" or "cdp"
    connections: bool
    default_protocol: str | None
    title: str = ""  # in sentences ("the built-in loader")
    protocols: tuple[str, ...] = ("h1", "h2")
    protocols_later: str = ""  # where the protocols it does not speak yet are planned
    # `pltlab predict --client NAME` of a loader that is not planned: the built-in loader's model
    # that stands for it, with a compute model learned from this loader's calibrations
    # (predict.chromium_compute); None: predict refuses the loader
    predicted_as: str | None = None
    client_hello_bytes: int | None = None  # its TLS ClientHello (predict; None: the built-in loader's)
    # its TLS warm-up visit (tls resume/0rtt) keeps nothing that depends on the network's
    # conditions (session tickets only): the link passes it unimpaired, which saves that visit's
    # round trips (Chromium keeps RTT estimates from it, for QUIC too: as configured)
    warm_visit_unimpaired: bool = False

    def protocol_problem(self, protocol: str) -> str | None:
        """Why this loader cannot load over the protocol knob's value ``protocol`` (one line), or
        None."""
        if protocol == rows.RECORDED or protocol in self.protocols:
            return None
        later = f" ({self.protocols_later})" if self.protocols_later else ""
        return f"protocol {protocol}: {self.title or self.name} does not speak {rows.get(protocol).title} yet{later}"

    def plan(self, job: Job, tfo: bool) -> dict | None:
        """The plan a load at ``tfo`` executes (the runner keeps it per TFO mode); None: none."""
        return None

    def load(self, job: Job, plan: dict | None, tfo: bool, warmed=None) -> dict:
        """One load: ``plt_ms``, ``requests`` and what else the loader measured. With a TLS mode
        other than full the loader first visits the page and calls ``warmed()`` when that visit
        is over, before the measured load starts."""
        raise NotImplementedError

    def tfo_expected(self, plan: dict | None, tfo: bool) -> bool:
        """Must a load at ``tfo`` under ``plan`` open some connection with TFO (the client's
        TCPFastOpenActive rise)? As asked, unless the loader uses TFO on fewer connections."""
        return tfo

    def document_problem(self, res: dict, requests: list[dict], chain, plan: dict | None) -> str | None:
        """Why the load ``res`` (its ``requests`` as recorded) did not get the page's document,
        or None; ``chain``: the recording's hops to it (validity.document_chain)."""
        return res.get("document_problem")

    def tls_problem(self, mode: str, server: dict | None, requests: list[dict]) -> str | None:
        """Why a load did not get the TLS handshakes its ``mode`` asked for, or None (``server``:
        the replay's handshake counts during the load). By default every connection that carried
        a request must have resumed (validity.tls_problem)."""
        return validity.tls_problem(mode, server, requests)

    def quic_problem(self, discovery: str, server: dict | None, requests: list[dict]) -> str | None:
        """Why a load's QUIC handshakes went wrong, or None (``discovery``: the h3_discovery knob;
        ``server``: the replay's counts during the load, QUIC's among them where some address
        serves it). By default any failed handshake (validity.quic_problem)."""
        return validity.quic_problem(server, requests)

    def tls_note(self, mode: str, server: dict | None) -> str | None:
        """What a valid load's handshakes are worth knowing, or None."""
        return None

    def request_record(self, r: dict) -> dict:
        """A request record with the byte fields every record has (None: not reported); a
        protocol not said is the loader's default."""
        out = dict(r)
        for k in REQUEST_BYTES:
            out.setdefault(k, None)
        if not out["protocol"]:
            out["protocol"] = self.default_protocol
        return out
