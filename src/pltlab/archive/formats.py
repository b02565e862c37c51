"""Archive formats: the one registry of what `pltlab import` reads and what page arguments (of
`pltlab run`, sweeps, experiment files) name (`FORMATS`), and of what `pltlab export` writes a
page as (`EXPORTS`). Reading goes through `archive_of` and `archives`, so a file imports and
resolves alike; nothing else looks at a file's name or content to pick a reader or a writer.

A format claims an `Archive` (a file, or a folder that is one archive: a Mahimahi record folder)
and loads every page of it. A folder no format claims is a folder of archives: the files (and
record folders) of it that some format lists."""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field

from pltlab.archive import deps, devtools, mahimahi, seed, wpr
from pltlab.archive.har import checked as checked_har
from pltlab.archive.har import har_to_pages, write_page
from pltlab.archive.har import load as load_har
from pltlab.archive.model import Page
from pltlab.errors import PltError


@dataclass(frozen=True)
class Loaded:
    """The pages of one archive and what its import reports besides its repairs."""

    pages: list[Page]
    orphans: list[str] = field(default_factory=list)  # stored files no page references (seed folders)


def _never(name: str) -> bool:
    return False


_UNREAD = object()


class Archive:
    """A path some format may read, with what claiming it learnt: a `.json` parsed to see whether
    it is a DevTools log is parsed once, for whichever format then loads it (a HAR of 20,000
    entries named .json: one parse, not two). Handed from `claims` to `load`, nothing kept
    elsewhere."""

    __slots__ = ("path", "url", "_doc")

    def __init__(self, path: str, url: str | None = None):
        self.path = path
        self.url = url  # the page's document as the user named it (`pltlab import --url`)
        self._doc = _UNREAD

    def json(self):
        """The file's JSON document (gzip or not), parsed at the first call; PltError if it is none."""
        if self._doc is _UNREAD:
            self._doc = devtools.read_json(self.path)
        return self._doc

    def parsed(self):
        """The document if a claim parsed it, else None (the reader parses, and reports, itself)."""
        return None if self._doc is _UNREAD else self._doc

    def forget(self) -> None:
        self._doc = _UNREAD


@dataclass(frozen=True)
class ArchiveFormat:
    name: str
    what: str  # how messages name it: "a HAR file"
    claims: Callable[[Archive], bool]  # an archive (file or folder) it reads
    load: Callable[[Archive], Loaded]  # every page of it; anything wrong is one PltError line
    listed: Callable[[str], bool] = _never  # a file name it picks up in a folder of archives
    # What `pltlab import` adds to each loaded page (a run reads the file as it is).
    on_import: Callable[[Page], object] | None = None
    # It finds each page's document itself (no timings recorded): `archive.url` names it instead.
    named_document: bool = False


def _named(*ends: str) -> Callable[[str], bool]:
    return lambda path: path.endswith(ends) and not os.path.isdir(path)


def _suffix(*ends: str) -> Callable[[Archive], bool]:
    named = _named(*ends)
    return lambda a: named(a.path)


def _devtools(a: Archive) -> Loaded:
    return Loaded(devtools.load_pages(a.path, a.parsed()))


def _har(a: Archive) -> Loaded:
    doc = a.parsed()  # a .json that the DevTools claim parsed and did not claim
    return Loaded(har_to_pages(load_har(a.path) if doc is None else checked_har(doc, a.path), a.path))


def _seed(a: Archive) -> Loaded:
    pages, report = seed.import_pages_file(a.path)
    return Loaded(pages, report["orphans"])


def _listed_elsewhere(path: str) -> bool:
    """A file some other format picks up in a folder of archives (not a record folder, then)."""
    return any(f.listed(path) for f in FORMATS if f.name != "mahimahi")


def _mahimahi_claims(a: Archive) -> bool:
    return os.path.isdir(a.path) and mahimahi.claims(a.path, _listed_elsewhere)


# In claiming order: a DevTools log named .json before the HAR that claims any other .json.
FORMATS: tuple[ArchiveFormat, ...] = (
    ArchiveFormat(
        "devtools",
        "a DevTools log (*.devtoolslog.json, *_devtools.json[.gz], .json.gz, a .json of CDP events)",
        lambda a: not os.path.isdir(a.path) and devtools.claims(a.path, a.json),
        _devtools,
        listed=devtools.is_log_name,
    ),
    # A HAR named for a run replays its initiators as recorded; import completes missing ones.
    ArchiveFormat("har", "a HAR file (.har, .json)", _suffix(".har", ".json"), _har, _named(".har"), deps.complete),
    # The seed fetch format (cs244-2013): <Name>.pages + <Name>/ + <Name>.fetchlog/.
    ArchiveFormat("seed", "a seed .pages list", _suffix(".pages"), _seed, _named(".pages")),
    # A folder of protobuf RequestResponse files (mm-webrecord); one page, initiators completed.
    ArchiveFormat(
        "mahimahi",
        "a Mahimahi record folder (save.XXXXXX files of RequestResponse messages)",
        _mahimahi_claims,
        lambda a: Loaded(mahimahi.load(a.path, a.url)),
        lambda p: os.path.isdir(p) and _mahimahi_claims(Archive(p)),
        deps.complete,
        named_document=True,
    ),
    # Web Page Replay (wpr record): gzipped JSON; a page per navigation, initiators completed.
    ArchiveFormat(
        "wpr",
        "a Web Page Replay archive (.wprgo)",
        _suffix(".wprgo"),
        lambda a: Loaded(wpr.load(a.path, a.url)),
        _named(".wprgo"),
        deps.complete,
        named_document=True,
    ),
)
BY_NAME = {f.name: f for f in FORMATS}
# Page arguments read a file no format claims as HAR, as they always have (its errors say why).
FALLBACK = BY_NAME["har"]


def described(only_listed: bool = False) -> str:
    """The formats as messages name them: "a DevTools log (...), a HAR file (...) or ..."."""
    whats = [f.what for f in FORMATS if not only_listed or f.listed is not _never]
    return " or ".join(whats) if len(whats) < 3 else ", ".join(whats[:-1]) + " or " + whats[-1]


def archive_of(path: str | Archive, fallback: ArchiveFormat | None = None) -> ArchiveFormat | None:
    """The format that claims ``path``; else ``fallback`` for a file; None for a folder of archives."""
    a = path if isinstance(path, Archive) else Archive(path)
    for f in FORMATS:
        if f.claims(a):
            return f
    if os.path.isdir(a.path):
        return None
    if fallback is None:
        raise PltError(f"{a.path}: unknown input (expected {described()})")
    return fallback


def listed(folder: str) -> list[str]:
    """The archives of a folder no format claims, sorted; at least one."""
    paths = (os.path.join(folder, n) for n in os.listdir(folder))
    found = sorted(p for p in paths if any(f.listed(p) for f in FORMATS))
    if not found:
        raise PltError(f"{folder}: no archive in this folder (expected {described(only_listed=True)})")
    return found


def archives(
    path: str, fallback: ArchiveFormat | None = None, url: str | None = None
) -> list[tuple[Archive, ArchiveFormat]]:
    """(archive, its format) for every archive ``path`` names: itself, or a folder's archives.
    ``url``: the document of the page (`pltlab import --url`)."""
    if not os.path.exists(path):
        raise PltError(f"{path}: no such file")
    a = Archive(path, url)
    fmt = archive_of(a, fallback)
    if fmt is not None:
        return [(a, fmt)]
    out = []
    for p in listed(path):
        a = Archive(p, url)
        out.append((a, archive_of(a, fallback)))
        a.forget()  # a folder's documents are not held until each is loaded: parsed again then
    return out


def load(archive: str | Archive, fmt: ArchiveFormat, imported: bool = False) -> Loaded:
    """One archive's pages; ``imported``: with what `pltlab import` adds (``on_import``)."""
    got = fmt.load(archive if isinstance(archive, Archive) else Archive(archive))
    if imported and fmt.on_import is not None:
        for p in got.pages:
            fmt.on_import(p)
    return got


@dataclass(frozen=True)
class ExportFormat:
    """A format `pltlab export --format NAME` writes pages as."""

    name: str
    what: str  # how messages and help name it
    write: Callable[..., dict]  # (pages, out, user_agent=None) -> {"page", "files", "out", "notes"}
    user_agent: bool = True  # it writes request headers (`--user-agent` sets theirs)


def _har_page(pages: list[Page], out: str, user_agent: str | None = None) -> dict:
    if len(pages) != 1:
        raise PltError(f"a HAR written by pltlab holds one page; {len(pages)} given (name one page)")
    try:
        write_page(pages[0], out)
    except OSError as e:
        raise PltError(f"{out}: cannot write: {e.strerror or e}") from None
    return {"page": pages[0].url, "files": 1, "out": os.path.abspath(out), "notes": []}


EXPORTS: tuple[ExportFormat, ...] = (
    ExportFormat("mahimahi", "a Mahimahi record folder (mm-webreplay DIR serves it)", mahimahi.write),
    ExportFormat("wpr", "a Web Page Replay archive (wpr replay serves it)", wpr.write),
    ExportFormat("har", "the page's HAR 1.2 as pltlab stores it", _har_page, user_agent=False),
)
EXPORT_BY_NAME = {f.name: f for f in EXPORTS}
