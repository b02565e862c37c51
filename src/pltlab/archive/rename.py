"""Renaming a page's hosts out of a browser's HSTS preload list, consistently and at the same length.

A stock Chromium upgrades every host of its HSTS preload list to https by itself (wikipedia.org,
www.amazon.com, nytimes.com, ...; pltlab.loaders.browser.hsts) and cannot be told not to. To load
such a page over http as it was recorded, the preloaded names are renamed in the whole page:

- **What is renamed: the preload entry.** For each host the browser upgrades, the entry that
  upgrades it is its shortest upgraded suffix (``wikipedia.org`` for ``en.wikipedia.org``;
  ``www.amazon.com`` itself, the entry being exact). That entry (``domains``) is renamed in
  every name under it, so hosts that were one site stay one site and the registrable domains
  and top-level domains keep their public-suffix meaning (cookies, same-site, connection
  partitioning decide as before); hosts outside the entries keep their names.
- **How: one character.** The first character of the entry's first label is replaced
  (``xikipedia.org``, ``xww.amazon.com``; an IDN label ``xn--`` gets its last one replaced),
  trying the letters of ``LETTERS`` in turn until the new name is not itself upgraded, is not a
  name of the page or under one, and is no other entry's new name. Every length stays the same,
  so every URL, header and body keeps its size and byte counts stay exact.
- **Where: everywhere as text.** Every URL (the page's, each object's, its initiator and
  redirect target), every header value (Location, Set-Cookie domains, ...), request bodies, the
  recorded bodies of text kinds (HTML, CSS, scripts, JSON, XML, text; binary bodies are left as
  they are: a PNG's text chunk would break its checksum) and every string of the page's and
  objects' extras (a calibration's iframe URLs). A name is replaced where it stands as a name:
  not inside a longer label (``images-amazon.com`` is not ``amazon.com``) nor before a further
  label. Synthesized bodies are made from the renamed URLs and reference the renamed names.
  Recorded bodies are kept decoded (pltlab.archive.wire encodes them at the recorded transfer
  size), so an encoded body is renamed in its decoded text and re-encoded as before.

Pure: the choice (``choose``) asks an ``upgraded(hosts) -> set`` function, which the caller
backs with the browser's own answer (pltlab.loaders.browser.hsts.unpreloaded)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from pltlab.archive.model import Obj, Page
from pltlab.archive.resource_kinds import kind
from pltlab.errors import PltError

LETTERS = "xqzjvkwy" + "abcdefghilmnoprstu" + "0123456789"  # new first characters, in this order
_NAME_CHAR = "A-Za-z0-9_-"  # characters a name's label continues with
TEXT_KINDS = ("html", "css", "js", "json")

Upgraded = Callable[[set[str]], set[str]]


def suffixes(host: str) -> list[str]:
    """``a.b.c`` -> ["c", "b.c", "a.b.c"]: the names a preload entry for the host can be."""
    labels = host.lower().rstrip(".").split(".")
    return [".".join(labels[i:]) for i in range(len(labels) - 1, -1, -1)]


def under(name: str, domain: str) -> bool:
    """``name`` is ``domain`` or a name under it."""
    return name == domain or name.endswith("." + domain)


def entries(hosts: Iterable[str], upgraded: Upgraded) -> set[str]:
    """The preload entries that upgrade ``hosts`` (those ``upgraded`` says are): per host its
    shortest upgraded suffix, without entries under another one."""
    up = sorted(upgraded({h.lower() for h in hosts}))
    if not up:
        return set()
    said = upgraded({s for h in up for s in suffixes(h)})
    found = {next(s for s in suffixes(h) if s in said or s == h) for h in up}
    return {d for d in found if not any(d != e and under(d, e) for e in found)}


def candidates(domain: str) -> list[str]:
    """Same-length new names for ``domain``: the first character of its first label replaced by
    each of LETTERS in turn (the last character for an IDN label ``xn--``)."""
    first, _, rest = domain.partition(".")
    tail = f".{rest}" if rest else ""
    at = len(first) - 1 if first.startswith("xn--") else 0
    return [first[:at] + c + first[at + 1 :] + tail for c in LETTERS if c != first[at].lower()]


def choose(hosts: Iterable[str], upgraded: Upgraded, rounds: int = len(LETTERS)) -> Renaming:
    """The renaming of the entries that upgrade some of ``hosts`` (a page's names) to names that
    ``upgraded`` does not upgrade, that are no name of the page or under one, and differ from
    each other. PltError when a name has no such candidate within ``rounds``."""
    hosts = {h.lower().rstrip(".") for h in hosts if h}
    domains = sorted(entries(hosts, upgraded))
    if not domains:
        return Renaming()
    tries = {d: [c for c in candidates(d) if not any(under(h, c) for h in hosts)] for d in domains}
    pick = {d: 0 for d in domains}
    for _ in range(rounds):
        names: dict[str, str] = {}
        for d in domains:
            while pick[d] < len(tries[d]) and any(_nested(tries[d][pick[d]], n) for n in names.values()):
                pick[d] += 1
            if pick[d] >= len(tries[d]):
                raise PltError(f"host {d}: no new name of the same length outside the HSTS preload list")
            names[d] = tries[d][pick[d]]
        r = Renaming(tuple(sorted(names.items())))
        renamed = {r.host(h): h for h in hosts if r.host(h) != h}
        still = upgraded(set(renamed))
        if not still:
            return r
        for d in {d for new in still for d in domains if under(renamed[new], d)}:
            pick[d] += 1  # that entry's next candidate
    raise PltError(f"hosts {', '.join(domains)}: no new names outside the HSTS preload list in {rounds} tries")


def _nested(a: str, b: str) -> bool:
    return under(a, b) or under(b, a)


@dataclass(frozen=True)
class Renaming:
    """(recorded name, new name) pairs, each of the same length; applied as text (see the module)."""

    domains: tuple[tuple[str, str], ...] = ()

    def __post_init__(self):
        for old, new in self.domains:
            if len(old) != len(new):
                raise ValueError(f"{old} -> {new}: a new name must have the old one's length")

    def __bool__(self) -> bool:
        return bool(self.domains)

    def mapping(self) -> dict[str, str]:
        return dict(self.domains)

    def inverse(self) -> Renaming:
        return Renaming(tuple((new, old) for old, new in self.domains))

    @property
    def _pattern(self) -> re.Pattern | None:
        if not self.domains:
            return None
        got = self.__dict__.get("_re")
        if got is None:
            object.__setattr__(self, "_map", self.mapping())
            names = sorted((old for old, _ in self.domains), key=len, reverse=True)
            alts = "|".join(re.escape(n) for n in names)
            got = re.compile(rf"(?<![{_NAME_CHAR}])(?:{alts})(?![{_NAME_CHAR}]|\.[A-Za-z0-9])", re.IGNORECASE)
            object.__setattr__(self, "_re", got)
        return got

    def _new(self, m: re.Match) -> str:
        old = m.group(0)
        new = self._map[old.lower()]
        return "".join(n.upper() if o.isupper() else n for o, n in zip(old, new, strict=True))

    def text(self, s: str) -> str:
        p = self._pattern
        return s if p is None or not s else p.sub(self._new, s)

    def data(self, b: bytes) -> bytes:
        """Bytes as text (Latin-1: every byte kept; a name is ASCII in UTF-8 too)."""
        return b if not self.domains or not b else self.text(b.decode("latin-1")).encode("latin-1")

    def host(self, h: str) -> str:
        return self.text(h.lower())

    def value(self, v):
        """Every string in a JSON-like value (dict keys too) renamed."""
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, dict):
            return {self.value(k): self.value(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return type(v)(self.value(x) for x in v)
        return v

    def obj(self, o: Obj) -> Obj:
        text_body = o.body is not None and (
            kind(o.mime, o.url) in TEXT_KINDS or o.mime.lower().startswith("text/") or "xml" in o.mime.lower()
        )
        body = self.data(o.body) if text_body else o.body
        return dataclasses.replace(
            o,
            url=self.text(o.url),
            initiator=None if o.initiator is None else self.text(o.initiator),
            redirect_url=self.text(o.redirect_url),
            headers=[(k, self.text(v)) for k, v in o.headers],
            body=body,
            wire_body=o.wire_body if body == o.body else None,  # a renamed body is encoded again
            request_body=None if o.request_body is None else self.data(o.request_body),
            extras=self.value(o.extras),
        )

    def page(self, page: Page) -> Page:
        """A renamed copy of ``page`` (the page itself is not changed)."""
        if not self.domains:
            return page
        return dataclasses.replace(
            page,
            url=self.text(page.url),
            objects=[self.obj(o) for o in page.objects],
            extras=self.value(page.extras),
        )
