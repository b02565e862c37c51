"""Synthetic pages: given object count, total size, origins and dependency depth; deterministic
for a seed. Bodies are left to synth (size-only objects), so the page replays like a real one."""

from __future__ import annotations

import math
import random

from pltlab.archive.kinds import MIME_BY_KIND
from pltlab.archive.model import Obj, Page

# Share of requests and relative median size per kind (roughly HTTP Archive's desktop medians).
MIX = {"image": (0.42, 1.0), "js": (0.32, 1.6), "css": (0.10, 0.8), "font": (0.05, 1.3),
       "html": (0.03, 0.8), "json": (0.08, 0.2)}
EXT = {"image": ".png", "js": ".js", "css": ".css", "font": ".woff2", "html": ".html", "json": ".json"}
# Which kinds a parent of each kind can load (the main document loads anything).
LOADS = {"js": set(MIX), "css": {"css", "image", "font"}}


def _kinds(rng: random.Random, n: int) -> list[str]:
    out = []
    for k, (share, _) in MIX.items():
        out += [k] * round(share * n)
    while len(out) < n:
        out.append("image")
    rng.shuffle(out)
    return out[:n]


def _sizes(rng: random.Random, kinds: list[str], total: int) -> list[int]:
    w = [MIX[k][1] * math.exp(rng.gauss(0, 0.8)) for k in kinds]
    s = sum(w)
    sizes = [max(64, int(total * x / s)) for x in w]
    sizes[-1] = max(64, sizes[-1] + total - sum(sizes))  # exact total where possible
    return sizes


def generate(objects: int = 70, total_bytes: int = 2_300_000, origins: int = 6, depth: int = 3,
             seed: int = 1, scheme: str = "http", domain: str = "example") -> Page:
    """A page of `objects` objects (main document included) totalling about `total_bytes`,
    spread over `origins` hosts, whose longest initiator chain has `depth` links."""
    if objects < 1 or origins < 1 or depth < 0 or total_bytes < objects * 64:
        raise ValueError("need objects >= 1, origins >= 1, depth >= 0, total_bytes >= 64 per object")
    depth = min(depth, objects - 1)
    rng = random.Random(seed)
    hosts = [f"www.{domain}.test"] + [f"o{i}.{domain}.test" for i in range(1, origins)]
    kinds = ["html"] + _kinds(rng, objects - 1)
    # The deepest chain is made of scripts (a script can load anything): main -> js -> ... -> x.
    for i in range(1, depth):
        kinds[i] = "js"
    sizes = _sizes(rng, kinds, total_bytes)
    page = Page(url=f"{scheme}://{hosts[0]}/", title=f"synthetic page {seed}",
                extras={"source": "generated", "generator": {
                    "objects": objects, "total_bytes": total_bytes, "origins": origins,
                    "depth": depth, "seed": seed}})
    level = {}
    for i, (k, size) in enumerate(zip(kinds, sizes)):
        host = hosts[0] if i == 0 else hosts[i % origins if i < origins else rng.randrange(origins)]
        url = page.url if i == 0 else f"{scheme}://{host}/{k}/{i}{EXT[k]}"
        o = Obj(url=url, mime=MIME_BY_KIND[k] if k != "html" else "text/html; charset=utf-8",
                size=size, status_text="OK")
        o.headers = [("Content-Type", o.mime)]
        if i == 0:
            level[url] = 0
        elif i <= depth:  # the spine of the deepest chain
            parent = page.objects[i - 1]
            o.initiator, o.initiator_type = parent.url, "parser" if i == 1 else "script"
            level[url] = i
        else:
            cands = [p for p in page.objects if (p is page.objects[0] or
                     k in LOADS.get(_kind(p), set())) and level[p.url] < depth]
            parent = rng.choice(cands)
            o.initiator = parent.url
            o.initiator_type = {"html": "parser", "js": "script", "css": "css"}[_kind(parent)]
            level[url] = level[parent.url] + 1
        page.objects.append(o)
    return page


def _kind(o: Obj) -> str:
    from pltlab.archive.kinds import kind
    return kind(o.mime, o.url)
