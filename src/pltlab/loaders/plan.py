"""The built-in loader's plan: which objects to fetch, from where, after which parent."""

from pltlab.archive.model import Page


def build(page: Page, host_ips: dict[str, str], tfo: bool, ca: str | None = None,
          max_conns_per_host: int = 6, compute_delays: bool = False, dns_delay_ms: float = 0.0,
          timeout_s: float = 120.0) -> dict:
    objs = [o for o in page.objects if o.scheme in ("http", "https") and o.host in host_ips]
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
        out.append({"url": o.url.split("#", 1)[0], "method": o.method, "host": o.host,
                    "ip": host_ips[o.host], "port": o.port, "tls": o.scheme == "https",
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
