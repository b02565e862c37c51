"""The built-in loader's plan: which objects to fetch, from where, after which parent."""

from pltlab.archive import synth
from pltlab.archive.kinds import kind
from pltlab.archive.model import Obj, Page


def effective_schemes(page: Page, https_hosts) -> dict[int, str]:
    """The scheme a browser uses for each object (by ``id(obj)``) when it upgrades the hosts in
    ``https_hosts`` to https (HSTS preload) and loads the synthesized page: an upgraded or
    https-recorded object is https; the main document keeps its recorded scheme otherwise; an
    http sub-resource follows the scheme of the http document or stylesheet that references it
    (scheme-relative references, synth.ref), of the document a script runs in (its requests
    resolve against location.protocol), of the document an https stylesheet applies to (mixed
    content), or of the https document referencing it (upgrade-insecure-requests); a redirect
    target follows its redirect (scheme-relative Location)."""
    https_hosts = {h.lower() for h in https_hosts}
    main = page.objects[0] if page.objects else None
    memo: dict[int, str] = {}

    def scheme(o: Obj) -> str:
        if id(o) in memo:
            return memo[id(o)]
        memo[id(o)] = o.scheme  # cycle guard
        if o.scheme == "https" or o.host in https_hosts:
            s = "https"
        elif o is main or o.scheme != "http":
            s = o.scheme
        elif o.initiator_type == "redirect":
            src = page.find(o.initiator) if o.initiator else None
            s = scheme(src) if src is not None else o.scheme
        else:
            base = synth.loader(page, o)
            k = kind(base.mime, base.url)
            if k == "js" or (k == "css" and base.scheme == "https"):
                base = synth.document_of(page, base)  # location.protocol / mixed content
            s = "https" if base is not o and scheme(base) == "https" else "http"
        memo[id(o)] = s
        return s

    return {id(o): scheme(o) for o in page.objects}


def build(page: Page, host_ips: dict[str, str], tfo: bool, ca: str | None = None,
          max_conns_per_host: int = 6, compute_delays: bool = False, dns_delay_ms: float = 0.0,
          timeout_s: float = 120.0, https_hosts=None) -> dict:
    """``https_hosts``: hosts a browser upgrades to https by itself (pltlab.chromium.hsts); the
    objects it would then load over https are fetched over https (port 443 for a recorded 80),
    as Chromium does. None: every object on its recorded scheme."""
    objs = [o for o in page.objects if o.scheme in ("http", "https") and o.host in host_ips]
    schemes = effective_schemes(page, https_hosts) if https_hosts is not None else {}
    index = {}
    for i, o in enumerate(objs):
        index.setdefault(o.url.split("#", 1)[0], i)
    out = []
    for i, o in enumerate(objs):
        parent = None
        if i > 0:
            p = index.get((o.initiator or "").split("#", 1)[0])
            parent = p if p is not None and p != i else 0
        delay = 0.0
        if compute_delays and parent is not None:
            par = objs[parent]
            if o.start_ms is not None and par.end_ms is not None:
                delay = max(0.0, o.start_ms - par.end_ms)
        url, port, sch = o.url.split("#", 1)[0], o.port, schemes.get(id(o), o.scheme)
        if sch != o.scheme:  # upgraded: https://host/... on 443 (or the recorded other port)
            url = "https" + url[len(o.scheme):]
            port = 443 if o.port == 80 else o.port
        out.append({"url": url, "method": o.method, "host": o.host,
                    "ip": host_ips[o.host], "port": port, "tls": sch == "https",
                    "parent": parent, "delay_ms": round(delay, 3)})
    _check_acyclic(out)
    return {"objects": out, "max_conns_per_host": max_conns_per_host, "tfo": tfo,
            "dns_delay_ms": dns_delay_ms, "ca": ca, "timeout_s": timeout_s}


def _check_acyclic(objs: list[dict]) -> None:
    """Every object must reach the main document through its parents."""
    for i in range(len(objs)):
        seen, cur = set(), i
        while objs[cur]["parent"] is not None:
            if cur in seen:
                raise ValueError(f"dependency cycle through {objs[i]['url']}")
            seen.add(cur)
            cur = objs[cur]["parent"]
