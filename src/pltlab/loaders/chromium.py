"""Headless Chromium as a page loader in the client namespace (`pltlab run --client chromium`).

TFO: Chromium never asks for it by itself; an LD_PRELOAD shim (built into pltlab-dp, written out
with `pltlab-dp shim`) sets TCP_FASTOPEN_CONNECT before each TCP connect()."""

import os
import subprocess

from pltlab import dataplane
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net import Topology


def shim_path(workdir: str) -> str:
    path = os.path.join(workdir, "tfo_shim.so")
    if not os.path.exists(path):
        cp = subprocess.run([dataplane.binary(), "shim", "--out", path], capture_output=True, text=True)
        if cp.returncode != 0:
            raise PltError(f"cannot write the TFO shim: {(cp.stderr.strip().splitlines() or ['?'])[-1]}")
    return path


TIMES = (("connect_start_ms", "connectStart"), ("connect_end_ms", "connectEnd"),
         ("tls_start_ms", "sslStart"), ("request_ms", "sendStart"), ("first_byte_ms", "receiveHeadersEnd"))


def wire_times(r) -> dict:
    """The CDP ResourceTiming of a request on the load's clock (ms since its first request), named
    like the built-in loader's fields: connect_* only on the request that opened the connection
    (-1 in CDP = not this request's), request_ms = request sent, first_byte_ms = response head
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


def load(topo: Topology, page: Page, host_ips: dict[str, str], spki: str | None, tfo: bool) -> dict:
    from pltlab.chromium import Chromium, hsts

    env = {"LD_PRELOAD": shim_path(topo.workdir)} if tfo else {}
    with Chromium(netns=topo.client_ns, host_rules=host_ips, spki=[spki] if spki else [], env=env,
                  bodies=False) as c:
        res = c.load(page.url)
    if res.plt_ms is None:
        raise PltError(f"{page.url}: Chromium reported no load event")
    requests, upgraded = [], []
    for i, r in enumerate(res.requests):
        if r.blocked or not r.url.startswith(("http:", "https:")):  # data: URLs, error pages
            continue
        if hsts.is_hsts_redirect(r.status, r.headers):  # internal, never on the wire
            upgraded.append(r.url)
            continue
        requests.append({
            "index": i, "url": r.url, "host": r.url.split("/")[2] if "//" in r.url else "",
            "conn_id": r.connection_id, "new_conn": r.connection_reused is False,
            "start_ms": r.start_ms, "last_byte_ms": r.end_ms, "bytes": r.data_bytes,
            "wire_bytes": r.encoded_bytes, "status": r.status, "error": r.error or None,
            "resource_type": r.resource_type, "initiator_type": r.initiator_type,
            "initiator_url": r.initiator_url, **wire_times(r),
        })
    return {"plt_ms": res.plt_ms, "requests": requests, "browser": res.browser_version,
            "nav_timing": res.nav_timing,
            "unfinished": res.unfinished, "hsts_upgraded": upgraded}
