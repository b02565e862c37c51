"""Which origin address serves which host of a page: one address per host, main host first, except
that hosts a page's recording reached at one server address (HAR ``serverIPAddress``) share one, so
that a browser coalesces their HTTP/2 connections as it did live."""

from pltlab.archive.model import Page


def assign(pages: list[Page]) -> dict[str, int]:
    """Host -> origin index, in order of first appearance (each page's main host first); hosts of
    one page recorded at the same server address get the index of the first of them."""
    order: dict[str, int] = {}
    n = 0
    for page in pages:
        by_ip: dict[str, int] = {}
        for o in page.objects:
            if o.scheme not in ("http", "https") or not o.host or o.host in order:
                continue
            if o.server_ip and o.server_ip in by_ip:
                order[o.host] = by_ip[o.server_ip]
                continue
            order[o.host] = n
            if o.server_ip:
                by_ip[o.server_ip] = n
            n += 1
    return order
