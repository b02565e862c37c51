"""Folds of a page set, fixed before anything is fitted (issue 27: every accuracy figure on pages
that were not used to fit what it uses).

Pages are grouped by site, not by page: two pages of one site share servers, templates and
libraries, and two pages of one recording (a redirect chain's, a multi-page HAR's) share even the
connections, so a page judged out of sample must not have its site in the fit. A group is the
union of pages sharing a registrable domain (``tldextract``'s bundled public suffix list, read
offline) or a recording (``source``: the file it was derived from). Groups are dealt into ``k``
folds, largest first to the smallest fold, in a seeded order: balanced and reproducible.

``check`` is the guard every fit-then-judge figure calls: one PltError line when a judged page's
group is in its fit."""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

import tldextract

from pltlab.errors import PltError

_EXTRACT = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)  # the bundled snapshot: no fetch


@dataclass(frozen=True)
class Entry:
    """A page of a page set: its name (`pltlab run NAME`), URL and the recording it came from
    (None: a recording of its own)."""

    name: str
    url: str
    source: str | None = None


def site(url: str) -> str:
    """The registrable domain of ``url``'s host ("en.wikipedia.org" -> "wikipedia.org")."""
    host = (urlsplit(url).hostname or "").lower()
    r = _EXTRACT(host)
    return r.top_domain_under_public_suffix or host


def groups(entries: Iterable[Entry]) -> dict[str, str]:
    """Each page's group (named by the first of its sites in sorted order): pages sharing a site
    or a recording, transitively."""
    entries = list(entries)
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def union(a: str, b: str) -> None:
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for e in entries:
        union("page:" + e.name, "site:" + site(e.url))
        if e.source:
            union("page:" + e.name, "rec:" + e.source)
    label: dict[str, str] = {}
    for e in sorted(entries, key=lambda e: site(e.url)):
        label.setdefault(find("page:" + e.name), site(e.url))
    return {e.name: label[find("page:" + e.name)] for e in entries}


@dataclass(frozen=True)
class Folds:
    k: int
    seed: int
    group: dict[str, str]  # page -> its group
    fold: dict[str, int]  # page -> its fold (0..k-1)

    def test(self, i: int) -> list[str]:
        """The pages judged in fold ``i``."""
        return sorted(p for p, f in self.fold.items() if f == i)

    def train(self, i: int) -> list[str]:
        """The pages a fit for fold ``i`` may use: those of every other fold."""
        return sorted(p for p, f in self.fold.items() if f != i)

    def to_json(self) -> str:
        return json.dumps(
            {"k": self.k, "seed": self.seed, "group": self.group, "fold": self.fold}, indent=1, sort_keys=True
        )

    @classmethod
    def from_json(cls, text: str, where: str = "folds") -> Folds:
        try:
            d = json.loads(text)
            f = cls(int(d["k"]), int(d["seed"]), dict(d["group"]), {p: int(i) for p, i in d["fold"].items()})
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise PltError(f"{where}: not a folds file ({e})") from None
        if set(f.group) != set(f.fold) or any(not 0 <= i < f.k for i in f.fold.values()):
            raise PltError(f"{where}: not a folds file (pages without a group or fold out of 0..{f.k - 1})")
        return f


def read(path: str) -> list[Entry]:
    """A page-set list (benches/pagesets/*.txt): a line per page, its name, URL and where it was
    derived from ("dir/file.har (page 2)": that recording; anything else: a recording of its
    own); "#" comments and blank lines skipped."""
    out = []
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PltError(f"{path}: {e.strerror}") from None
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split(None, 2)
        if len(parts) < 2 or "://" not in parts[1]:
            raise PltError(f"{path}:{n}: not 'NAME URL [SOURCE]'")
        src = parts[2].split(" (", 1)[0].strip() if len(parts) > 2 else ""
        out.append(Entry(parts[0], parts[1], src if "/" in src else None))
    names = [e.name for e in out]
    dup = next((x for x in names if names.count(x) > 1), None)
    if dup:
        raise PltError(f"{path}: page {dup} listed twice")
    return out


def make(entries: Iterable[Entry], k: int, seed: int = 1) -> Folds:
    """``k`` folds of the pages, no group split between two folds."""
    entries = list(entries)
    g = groups(entries)
    members: dict[str, list[str]] = {}
    for name, grp in sorted(g.items()):
        members.setdefault(grp, []).append(name)
    if not 2 <= k <= len(members):
        raise PltError(f"folds: k = {k} for {len(members)} sites (need 2 <= k <= the number of sites)")
    order = sorted(members)
    random.Random(seed).shuffle(order)
    order.sort(key=lambda grp: -len(members[grp]))  # (stable: the shuffle breaks ties)
    size = [0] * k
    fold: dict[str, int] = {}
    for grp in order:
        i = min(range(k), key=lambda j: (size[j], j))
        size[i] += len(members[grp])
        for p in members[grp]:
            fold[p] = i
    return Folds(k, seed, g, fold)


def check(fit: Iterable[str], judged: Iterable[str], folds: Folds, what: str = "figure") -> None:
    """Refuse (one line) a ``what`` fitted or judged on a page outside the folds, or judged on a
    page whose site was in its fit."""
    fit, judged = list(fit), list(judged)
    unknown = [p for p in [*fit, *judged] if p not in folds.group]
    if unknown:
        raise PltError(f"{what}: page {unknown[0]} is not in the page set's folds")
    fit_groups = {folds.group[p] for p in fit}
    leaked = sorted(p for p in judged if folds.group[p] in fit_groups)
    if leaked:
        more = f" (and {len(leaked) - 1} more)" if len(leaked) > 1 else ""
        raise PltError(
            f"{what}: page {leaked[0]} is judged out of sample but its site ({folds.group[leaked[0]]}) "
            f"was in the fit{more}"
        )
