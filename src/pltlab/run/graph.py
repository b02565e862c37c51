"""The load's graph on its request records, so a results folder alone explains a load
(pltlab.explain): per request its initiator (``parent``: the idx of the request it waited for),
the further requests it waited for (``after``), whether the initiator's first byte sufficed
(``at_first_byte``) and the compute delay before it was ready (``delay_ms``)."""

from urllib.parse import urldefrag

GRAPH_KEYS = ("parent", "after", "at_first_byte", "delay_ms")


def from_plan(requests: list[dict], plan: dict | None) -> None:
    """The built-in loader: each record's edges as its plan object (records carry the plan
    index as ``index``) said."""
    objs = (plan or {}).get("objects") or []
    for r in requests:
        i = r.get("index")
        if not isinstance(i, int) or not 0 <= i < len(objs):
            continue
        o = objs[i]
        r["parent"] = o.get("parent")
        r["after"] = list(o.get("after") or [])
        r["at_first_byte"] = bool(o.get("at_first_byte", False))
        r["delay_ms"] = float(o.get("delay_ms") or 0.0)


def from_initiators(requests: list[dict]) -> None:
    """Chromium: each record's ``parent`` is the latest earlier request of its CDP initiator's URL
    (a redirect's: the hop before); ``at_first_byte`` and ``delay_ms`` stay unknown (None)."""
    seen: dict[str, int] = {}
    for r in requests:
        url = r.get("initiator_url")
        if url:
            p = seen.get(urldefrag(url)[0])
            if p is not None and p != r.get("index"):
                r["parent"] = p
        if r.get("url") and r.get("index") is not None:
            seen[urldefrag(r["url"])[0]] = r["index"]
