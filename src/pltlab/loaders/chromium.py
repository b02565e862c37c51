"""Headless Chromium as a page loader in the client namespace (`pltlab run --client chromium`).

TFO: Chromium never asks for it by itself; an LD_PRELOAD shim (built into pltlab-dp, written out
with `pltlab-dp shim`) sets TCP_FASTOPEN_CONNECT before each TCP connect().

Validity: Chromium judges its own document (document_problem: the navigation's final response a
2xx, the load event fired) and decides itself how many TLS connections resume (ChromiumLoader's
tls_problem and tls_note)."""

from __future__ import annotations

import os
import subprocess
from typing import TYPE_CHECKING

from pltlab import dataplane
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.loaders import validity
from pltlab.loaders.browser import Chromium, collect, flags, hsts
from pltlab.loaders.loader import Job, Loader

if TYPE_CHECKING:  # (pyroute2 is slow to import: the loaders table is read by `pltlab --help`)
    from pltlab.net.topology import Topology


def shim_path(workdir: str) -> str:
    path = os.path.join(workdir, "tfo_shim.so")
    if not os.path.exists(path):
        cp = subprocess.run([dataplane.binary(), "shim", "--out", path], capture_output=True, text=True)
        if cp.returncode != 0:
            raise PltError(f"cannot write the TFO shim: {(cp.stderr.strip().splitlines() or ['?'])[-1]}")
    return path


TIMES = (
    ("dns_start_ms", "dnsStart"),
    ("dns_end_ms", "dnsEnd"),
    ("connect_start_ms", "connectStart"),
    ("connect_end_ms", "connectEnd"),
    ("tls_start_ms", "sslStart"),
    ("tls_end_ms", "sslEnd"),
    ("request_ms", "sendStart"),
    ("send_end_ms", "sendEnd"),
    ("first_byte_ms", "receiveHeadersEnd"),
)


def wire_times(r) -> dict:
    """The CDP ResourceTiming of a request on the load's clock (ms since its first request), named
    like the built-in loader's fields: dns_*, connect_* and tls_* only on the request that opened
    the connection (-1 in CDP = not this request's; Chromium's connect_end_ms includes its TLS
    handshake), request_ms/send_end_ms = request being sent, first_byte_ms = response head
    received; released_ms = ResourceTiming's requestTime, when the network stack started the
    request (after Chromium's scheduler held a low-priority one back). None where Chromium gave
    no timing (redirects, failures)."""
    out = {k: None for k, _ in TIMES}
    t, base = r.timing, r.timing_base_ms
    out["released_ms"] = None if base is None else round(base, 3)
    if not t or base is None:
        return out
    for k, cdp in TIMES:
        v = t.get(cdp)
        if v is not None and v >= 0:
            out[k] = round(base + v, 3)
    return out


def document_problem(res) -> str | None:
    """Why Chromium's load did not get the page's document, or None: the navigation (the first
    Document request; its redirect hops share its request id) must end in a 2xx response, and
    the load event must have fired."""
    nav = next((r for r in res.requests if r.resource_type == "Document"), None)
    if nav is None:
        return "document never arrived: Chromium made no navigation request"
    last = [r for r in res.requests if r.request_id == nav.request_id][-1]
    if last.error or not last.status:
        return f"document {last.url} never arrived: {last.error or 'no response'}"
    if not 200 <= last.status < 300:
        why = "no recorded response matched" if last.status == 404 else "replay served the wrong response"
        return f"document {last.url} answered {last.status}: {why}"
    if res.plt_ms is None:
        return "Chromium's load event never fired"
    return None


def tls_args(tls: str) -> list[str]:
    """Chromium's switches for the ``tls`` knob: resume and 0rtt visit the page first in the same
    browser (net benchmarking closes its connections and empties its caches after it); 0rtt also
    turns on TLS 1.3 early data (a feature off by default in Chromium)."""
    if tls == "full":
        return []
    return ["--enable-net-benchmarking"] + (["--enable-features=EnableTLS13EarlyData"] if tls == "0rtt" else [])


def load(
    topo: Topology,
    page: Page,
    host_ips: dict[str, str],
    spki: str | None,
    tfo: bool,
    check: bool = True,
    tls: str = "full",
    warmed=None,
    quic: list[str] | tuple = (),
) -> dict:
    """One Chromium load. ``check``: raise PltError when the document did not arrive or the load
    event never fired; False: say why in the result's ``document_problem`` (an invalid load).
    ``tls`` resume/0rtt: a warm visit first, then ``warmed()``, then the measured load.
    ``quic``: the switches for HTTP/3 origins (flags.quic_args; empty: QUIC off)."""
    env = {"LD_PRELOAD": shim_path(topo.workdir)} if tfo else {}
    spkis = [spki] if spki else []
    with Chromium(
        netns=topo.client_ns,
        host_rules=host_ips,
        spki=spkis,
        env=env,
        bodies=False,
        extra_args=tls_args(tls) + list(quic),
    ) as c:
        res = c.load(page.url, warm=(warmed or (lambda: None)) if tls != "full" else None)
    problem = document_problem(res)
    first = page.objects[0] if page.objects else None
    if problem and first is not None and first.method != "GET":
        problem += f" (the recording has {first.url} as a {first.method} only; a browser navigates with GET)"
    if check and problem:
        raise PltError(f"{page.url}: {problem}")
    requests, upgraded = [], []
    for i, r in enumerate(res.requests):
        if r.blocked or not r.url.startswith(("http:", "https:")):  # data: URLs, error pages
            continue
        if hsts.is_hsts_redirect(r.status, r.headers):  # internal, never on the wire
            upgraded.append(r.url)
            continue
        ip, _, port = r.remote.rpartition(":")
        requests.append(
            {
                "index": i,
                "url": r.url,
                "method": r.method,
                "host": r.url.split("/")[2] if "//" in r.url else "",
                "conn_id": r.connection_id,
                "new_conn": r.connection_reused is False,
                "start_ms": r.start_ms,
                "last_byte_ms": r.end_ms,
                "bytes": r.data_bytes,
                "wire_bytes": r.encoded_bytes,
                "transfer_bytes": collect.transfer_bytes(r),
                "header_bytes": r.head_bytes,
                "body_bytes": r.data_bytes if r.finished and not r.redirect_url else None,
                "encoding": collect.content_encoding(r),
                "protocol": r.protocol.lower() or None,
                "status": r.status,
                "status_text": r.status_text,
                "error": r.error or None,
                # for the load's HAR (pltlab.run.loadhar): the fields as sent and received, the server
                "request_headers": r.request_headers,
                "response_headers": r.headers,
                "remote_ip": ip.strip("[]") or None,
                "resource_type": r.resource_type,
                "initiator_type": r.initiator_type,
                "initiator_url": r.initiator_url,
                **wire_times(r),
            }
        )
    # No load event: the load is invalid (document_problem); its PLT is then the last network
    # activity, reported but never averaged in.
    plt = (
        res.plt_ms
        if res.plt_ms is not None
        else max((r.end_ms for r in res.requests if r.end_ms is not None), default=0.0)
    )
    return {
        "plt_ms": plt,
        "document_problem": problem,
        "requests": requests,
        "browser": res.browser_version,
        "nav_timing": res.nav_timing,
        "unfinished": res.unfinished,
        "hsts_upgraded": upgraded,
        "load_started_at": res.started,  # epoch seconds of the first request
    }


def h3_hosts(host_ips: dict[str, str], offered: dict) -> list[str]:
    """The hosts whose replay address serves HTTP/3 (QUIC on UDP 443; ``offered``: address ->
    Protocol, ReplayServer.offered)."""
    return sorted(h for h, ip in host_ips.items() if getattr(offered.get(ip), "transport", "tcp") == "udp")


class ChromiumLoader(Loader):
    def load(self, job: Job, plan: dict | None, tfo: bool, warmed=None) -> dict:
        discovery = getattr(job.cfg, "h3_discovery", "forced")
        quic = flags.quic_args(h3_hosts(job.host_ips, job.replay.offered), discovery)
        with job.topo.guard("client"):  # a dead emulator/replay kills the browser at once
            return load(
                job.topo,
                job.page,
                job.host_ips,
                job.replay.spki,
                tfo=tfo,
                check=False,
                tls=job.cfg.tls,
                warmed=warmed,
                quic=quic,
            )

    def tls_problem(self, mode: str, server: dict | None, requests: list[dict]) -> str | None:
        """Chromium decides itself how many connections it can resume (tls_note): its load needs
        one resumed (0rtt: with early data), the proof that the warm visit left tickets it used.
        Over QUIC Chromium sends 0-RTT whenever it resumes (no switch turns it off; measured:
        docs/loaders.md "Chromium over h3"), so a "resume" load whose QUIC connections sent early
        data is a 0-RTT load and invalid."""
        used = validity.tls_used(mode, server)
        if used is None or isinstance(used, str):
            return used
        full, resumed = used
        if resumed == 0:
            return f"TLS {mode} asked but Chromium resumed none of the {full} TLS connections that carried requests"
        if mode == "0rtt" and validity.early_used(server) == 0:
            return f"TLS 0rtt asked but Chromium sent early data on none of its {resumed} resumed connections"
        quic_early = server.get("quic_early_used", 0)
        if mode == "resume" and quic_early:
            return (
                f"TLS resume asked but Chromium sent QUIC 0-RTT on {quic_early} of its resumed QUIC connections "
                "(it always does with a ticket: over h3 ask for tls 0rtt)"
            )
        return None

    def quic_problem(self, discovery: str, server: dict | None, requests: list[dict]) -> str | None:
        """As every loader's, saying why in the Alt-Svc mode: Chromium takes a certificate of a
        root it does not know publicly over QUIC only for the origins forced onto QUIC
        (``--origin-to-force-quic-on``; the SPKI pin does not lift it), so it refuses the
        replay's certificate on every QUIC connection an Alt-Svc header makes it open
        (measured: docs/loaders.md "Chromium over h3") and stays on TCP."""
        problem = validity.quic_problem(server, requests)
        if problem and discovery == "alt-svc" and not any(r.get("protocol") == "h3" for r in requests):
            return (
                f"h3_discovery alt-svc: Chromium refused the replay's certificate over QUIC ({problem}): it accepts "
                "a private root over QUIC only on forced origins (use h3_discovery forced)"
            )
        return problem

    def tls_note(self, mode: str, server: dict | None) -> str | None:
        """On a warm visit: how many of its connections resumed (and sent early data) when not
        all did. It keeps the last 2 session tickets per host (net's SSLClientSessionCache), so
        over HTTP/1.1 a host's third parallel connection is a full handshake, as after a real
        visit."""
        if mode == "full" or not server:
            return None
        full, resumed, early = (
            server.get(f"tls_{k}_used", 0) + server.get(f"quic_{k}_used", 0) for k in ("full", "resumed", "early")
        )
        if not full and (mode != "0rtt" or early == resumed):
            return None
        zero = f", {early} with early data" if mode == "0rtt" else ""
        if server.get("quic_connections"):  # (QUIC's session cache is its own: no ticket count known)
            return (
                f"Chromium resumed {resumed} of the {resumed + full} TLS and QUIC connections that carried "
                f"requests{zero}; the others were full handshakes"
            )
        return (
            f"Chromium resumed {resumed} of the {resumed + full} TLS connections that carried requests{zero}; "
            "the others were full handshakes (it keeps 2 session tickets per host)"
        )


LOADER = ChromiumLoader(
    "chromium",
    browser="chromium",
    planned=False,
    upgrades_itself=True,
    timings="cdp",
    connections=False,
    default_protocol=None,
    title="Chromium",
    protocols=("h1", "h2", "h3"),  # QUIC on only for loads with h3 addresses (flags.quic_args)
    predicted_as="chromium",  # the built-in loader's Chromium model + the general compute model
    # its TLS 1.3 ClientHello with the post-quantum key share: ~2 KB, more than a SYN carries
    # (docs/loaders.md "TFO in Chromium"; the replay's tfo_tls_hello_max per load)
    client_hello_bytes=2000,
)
