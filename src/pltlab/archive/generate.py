"""Synthetic pages, the one generator: generate() draws a page from an object count, total size,
origins and dependency depth (deterministic for a seed); from_objects() builds one from a fixed
list of objects (a study's page, e.g. the ICW study's Yahoo-like front page). Bodies are left to
synth (size-only objects), so the page replays like a real one. browser_har() exports one as a
browser would (no pltlab fields), for import benchmarks."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from pltlab.archive.har import page_to_har
from pltlab.archive.model import Obj, Page
from pltlab.archive.resource_kinds import MIME_BY_KIND, kind

# Share of requests and relative median size per kind (roughly HTTP Archive's desktop medians).
MIX = {
    "image": (0.42, 1.0),
    "js": (0.32, 1.6),
    "css": (0.10, 0.8),
    "font": (0.05, 1.3),
    "html": (0.03, 0.8),
    "json": (0.08, 0.2),
}
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


def generate(
    objects: int = 70,
    total_bytes: int = 2_300_000,
    origins: int = 6,
    depth: int = 3,
    seed: int = 1,
    scheme: str = "http",
    domain: str = "example",
    redirects: int = 0,
) -> Page:
    """A page of `objects` objects (main document included) totalling about `total_bytes`,
    spread over `origins` hosts, whose longest initiator chain has `depth` links. With
    `redirects`, that many of the objects are 302 responses, each right before its target (which
    has the redirect's initiator, as browsers record it; a redirected parent's children name the
    target)."""
    if objects < 1 or origins < 1 or depth < 0 or total_bytes < objects * 64:
        raise ValueError("need objects >= 1, origins >= 1, depth >= 0, total_bytes >= 64 per object")
    if not 0 <= redirects <= (objects - 1) // 2:
        raise ValueError("need 0 <= redirects <= (objects - 1) / 2")
    objects -= redirects
    depth = min(depth, objects - 1)
    rng = random.Random(seed)
    hosts = [f"www.{domain}.test"] + [f"o{i}.{domain}.test" for i in range(1, origins)]
    kinds = ["html"] + _kinds(rng, objects - 1)
    # The deepest chain is made of scripts (a script can load anything): main -> js -> ... -> x.
    for i in range(1, depth):
        kinds[i] = "js"
    sizes = _sizes(rng, kinds, total_bytes)
    page = Page(
        url=f"{scheme}://{hosts[0]}/",
        title=f"synthetic page {seed}",
        extras={
            "source": "generated",
            "generator": {
                "objects": objects + redirects,
                "total_bytes": total_bytes,
                "origins": origins,
                "depth": depth,
                "seed": seed,
            },
        },
    )
    if redirects:
        page.extras["generator"]["redirects"] = redirects
    level = {}
    # Per child kind: the objects that can load it and are not at the deepest level, in page
    # order (the main document loads anything).
    cands: dict[str, list[Obj]] = {k: [] for k in MIX}
    for i, (k, size) in enumerate(zip(kinds, sizes)):
        host = hosts[0] if i == 0 else hosts[i % origins if i < origins else rng.randrange(origins)]
        url = page.url if i == 0 else f"{scheme}://{host}/{k}/{i}{EXT[k]}"
        o = Obj(
            url=url, mime=MIME_BY_KIND[k] if k != "html" else "text/html; charset=utf-8", size=size, status_text="OK"
        )
        o.headers = [("Content-Type", o.mime)]
        if i == 0:
            level[url] = 0
        elif i <= depth:  # the spine of the deepest chain
            parent = page.objects[i - 1]
            o.initiator, o.initiator_type = parent.url, "parser" if i == 1 else "script"
            level[url] = i
        else:
            parent = rng.choice(cands[k])
            o.initiator = parent.url
            o.initiator_type = {"html": "parser", "js": "script", "css": "css"}[_kind(parent)]
            level[url] = level[parent.url] + 1
        page.objects.append(o)
        if level[url] < depth:
            loads = set(MIX) if i == 0 else LOADS.get(_kind(o), set())
            for c in loads:
                cands[c].append(o)
    if redirects:
        _add_redirects(page, redirects, random.Random(f"{seed}-redirects"))
    return page


def from_objects(
    objects,
    domain: str = "example",
    hosts: tuple[str, ...] = ("www",),
    scheme: str = "http",
    title: str = "",
    scale: float = 1.0,
    name: str = "objects",
    headers: tuple[tuple[str, str], ...] = (),
) -> Page:
    """A page of exactly ``objects``: (kind, host index, size in bytes, name) each, the first the
    main document (an html object at the page URL), every other a child of it (depth 1), at
    ``scheme://HOST/KIND/NAME.EXT`` with HOST = ``hosts[i].domain.test``. ``scale`` multiplies
    every size (tests); ``headers`` go on every response besides Content-Type."""
    objects = list(objects)
    if not objects or objects[0][0] != "html":
        raise ValueError("the first object must be the html document")
    names = [f"{h}.{domain}.test" for h in hosts]
    for k, host, size, _ in objects:
        if k not in EXT or not 0 <= host < len(names) or size < 0:
            raise ValueError(
                f"bad object {(k, host, size)!r}: a kind of {', '.join(EXT)}, a host "
                f"index below {len(names)}, a size >= 0"
            )
    page = Page(
        url=f"{scheme}://{names[objects[0][1]]}/",
        title=title,
        extras={
            "source": "generated",
            "generator": {
                "name": name,
                "objects": len(objects),
                "origins": len({o[1] for o in objects}),
                "depth": 1 if len(objects) > 1 else 0,
                "scale": scale,
            },
        },
    )
    for i, (k, host, size, oname) in enumerate(objects):
        url = page.url if i == 0 else f"{scheme}://{names[host]}/{k}/{oname}{EXT[k]}"
        mime = "text/html; charset=utf-8" if k == "html" else MIME_BY_KIND[k]
        o = Obj(url=url, mime=mime, size=max(1, round(size * scale)), status_text="OK")
        o.headers = [("Content-Type", mime), *headers]
        if i:
            o.initiator, o.initiator_type = page.url, "parser"
        page.objects.append(o)
    return page


def _add_redirects(page: Page, n: int, rng: random.Random) -> None:
    """Make ``n`` objects (not the main document) redirect: each becomes a 302 to a new URL,
    whose response is the object's own, recorded right after it."""
    chosen = set(rng.sample(range(1, len(page.objects)), n))
    moved, out = {}, []
    for i, o in enumerate(page.objects):
        if i not in chosen:
            out.append(o)
            continue
        target = Obj(
            url=o.url + "?r=1",
            mime=o.mime,
            size=o.size,
            status_text="OK",
            headers=list(o.headers),
            initiator=o.initiator,
            initiator_type=o.initiator_type,
        )
        o.status, o.status_text, o.size, o.mime = 302, "Found", 0, ""
        o.redirect_url, o.headers = target.url, [("Location", target.url)]
        moved[o.url] = target.url
        out += [o, target]
    for o in out:  # what a redirected object loads names where it ended
        if o.initiator in moved:
            o.initiator = moved[o.initiator]
    page.objects[:] = out


def browser_har(page: Page, step_ms: float = 0.5) -> dict:
    """The page as a browser exports it: no pltlab fields (`_pltlab`, pltlab creator), each entry
    started ``step_ms`` after the previous one, initiators as `_initiator`."""
    doc = page_to_har(page)
    doc["log"]["creator"] = {"name": "WebInspector", "version": "537.36"}
    meta = doc["log"]["pages"][0]
    meta.pop("_pltlab", None)
    base = meta["startedDateTime"]
    for i, e in enumerate(doc["log"]["entries"]):
        e.pop("_pltlab", None)
        e["startedDateTime"] = _shift(base, i * step_ms)
        e["time"] = e["timings"]["wait"] = 5.0
    return doc


def _shift(iso: str, ms: float) -> str:
    t = datetime.strptime(iso, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
    t += timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{t.microsecond // 1000:03d}Z"


def _kind(o: Obj) -> str:
    return kind(o.mime, o.url)
