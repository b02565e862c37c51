"""Which hosts Chromium upgrades from http to https by itself (its built-in HSTS preload list).

A stock Chromium cannot be told to skip its preload list (the HSTSPolicyBypassList policy only
takes single-label names), so `http://en.wikipedia.org/` is always loaded over https, with the
TLS round trips that implies. To compare the built-in loader with Chromium on the same protocol,
the built-in loader's plan can apply the same upgrades (pltlab.loaders.plan.build(https_hosts=)).

The probe asks Chromium itself: a page fetches `http://<host>/` for every host while every name
resolves to nothing (`MAP * ~NOTFOUND`, no packet leaves the browser); the hosts whose request
gets Chromium's internal `307` with `Non-Authoritative-Reason: HSTS` are the upgraded ones.
Results are cached per Chromium version in $XDG_CACHE_HOME/pltlab/hsts-<version>.json."""

from __future__ import annotations

import json
import os
import subprocess
from urllib.parse import quote, urlsplit

from pltlab import files
from pltlab.archive import rename
from pltlab.loaders.browser import flags
from pltlab.loaders.browser.headless import Chromium

PROBE_BATCH = 400  # hosts per probe page


def is_hsts_redirect(status: int, headers) -> bool:
    """Chromium's internal HSTS redirect (never sent on the wire)."""
    return status == 307 and any(
        k.lower() == "non-authoritative-reason" and v.strip().upper() == "HSTS" for k, v in headers
    )


def _version(executable: str) -> str:
    try:
        out = subprocess.run([executable, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    return (out.strip().split() or ["unknown"])[-1]


def _cache_path(version: str) -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "pltlab", f"hsts-{version}.json")


def upgraded_hosts(hosts, netns: str | None = None, executable: str | None = None, cache: bool = True) -> set[str]:
    """The subset of ``hosts`` that Chromium upgrades to https. ``netns``: namespace to run the
    probe browser in (no traffic is sent either way)."""
    hosts = sorted({h.lower().rstrip(".") for h in hosts if h})
    exe = flags.find_executable(executable)
    path = _cache_path(_version(exe))
    known: dict[str, bool] = {}
    if cache:
        try:
            with open(path) as f:
                known = {str(k): bool(v) for k, v in json.load(f).items()}
        except (OSError, ValueError, AttributeError):
            known = {}
    todo = [h for h in hosts if h not in known]
    for i in range(0, len(todo), PROBE_BATCH):
        known.update(_probe(todo[i : i + PROBE_BATCH], netns, exe))
    if cache and todo:
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with files.replaced(path, f".{os.getpid()}.tmp") as tmp, open(tmp, "w") as f:
                json.dump(known, f, indent=0, sort_keys=True)
        except OSError:
            pass
    return {h for h in hosts if known.get(h)}


def unpreloaded(hosts, netns: str | None = None, executable: str | None = None) -> rename.Renaming:
    """The renaming (pltlab.archive.rename) that takes ``hosts`` (a page's names) out of this
    Chromium's HSTS preload list: its entries renamed to names this Chromium does not upgrade."""
    return rename.choose(hosts, lambda hs: upgraded_hosts(hs, netns=netns, executable=executable))


def _probe(hosts: list[str], netns: str | None, exe: str) -> dict[str, bool]:
    # (a one-line probe page as a data: URL, by hand: nothing in it comes from outside but host names, JSON-quoted)
    script = (
        f"<script>for(const h of {json.dumps(hosts)})fetch('http://'+h+'/',{{mode:'no-cors'}}).catch(()=>0)</script>"
    )
    url = "data:text/html," + quote("<!DOCTYPE html><title>hsts probe</title>" + script)
    with Chromium(
        netns=netns,
        executable=exe,
        extra_args=["--host-resolver-rules=MAP * ~NOTFOUND"],
        bodies=False,
        quiet_ms=300,
        timeout_s=60,
    ) as c:
        res = c.load(url)
    out = {h: False for h in hosts}
    for r in res.requests:
        if is_hsts_redirect(r.status, r.headers):
            h = (urlsplit(r.url).hostname or "").lower()
            if h in out:
                out[h] = True
    return out
