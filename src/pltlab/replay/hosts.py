"""Which origin address serves which host of a page (one address per host, main host first)."""

from pltlab.archive.model import Page


def assign(pages: list[Page]) -> dict[str, int]:
    """Host -> origin index, in order of first appearance (each page's main host first)."""
    order: dict[str, int] = {}
    for page in pages:
        for o in page.objects:
            if o.scheme in ("http", "https") and o.host and o.host not in order:
                order[o.host] = len(order)
    return order
