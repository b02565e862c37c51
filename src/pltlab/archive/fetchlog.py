"""The seed experiment's fetch log (`<Name>.fetchlog/<page>`): renames, stats, transactions,
responses. The rest of the file (browser noise, resolves, histograms) is ignored."""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from urllib.parse import urljoin

from pltlab.archive import urls
from pltlab.errors import PltError
from pltlab.units import show

RENAMED = re.compile(r"^\*\*\* Renamed (.+) to (/[0-9A-Za-z]+) \*\*\*$")
STAT = re.compile(r"^([ct]):(\S+):\s+(-?\d+)$")
# Status phrases seen in the logs -> code; anything else with a body is treated as 200.
STATUS = {
    "ok": 200,
    "not modified": 304,
    "moved temporarily": 302,
    "found": 302,
    "object moved": 302,
    "moved permanently": 301,
    "no content": 204,
    "see other": 303,
    "temporary redirect": 307,
    "not found": 404,
    "forbidden": 403,
    "internal server error": 500,
    "partial content": 206,
}


MAX_MS = 1e9  # a logged time (ms from the start of the fetch: about 11 days)


@dataclass
class Transaction:
    url: str
    start_ms: float
    end_ms: float


@dataclass
class Response:
    url: str
    status: int
    status_text: str
    mime: str
    charset: str
    redirect: str


@dataclass
class FetchLog:
    path: str
    renames: dict[str, str] = field(default_factory=dict)  # logged path?query -> /hash
    stats: dict[str, int] = field(default_factory=dict)
    transactions: list[Transaction] = field(default_factory=list)
    responses: list[Response] = field(default_factory=list)

    def urls(self) -> list[str]:
        """Every URL of the log, transactions first (in start order), then responses-only ones."""
        seen, out = set(), []
        for u in [t.url for t in sorted(self.transactions, key=lambda t: t.start_ms)] + [r.url for r in self.responses]:
            if u not in seen:
                seen.add(u)
                out.append(u)
        return out


def _section(lines: list[str], name: str, path: str, required: bool) -> list[tuple[int, str]] | None:
    try:
        start = lines.index(f"<{name}>")
    except ValueError:
        if required:
            raise PltError(f"{path}: incomplete fetchlog: no <{name}> section") from None
        return None
    try:
        end = lines.index(f"</{name}>", start)
    except ValueError:
        raise PltError(f"{path}: truncated fetchlog: <{name}> section is not closed") from None
    return [(i + 1, lines[i]) for i in range(start + 2, end) if lines[i].strip()]  # skip header


def parse(path: str) -> FetchLog:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    log = FetchLog(path)
    for ln in lines:
        if ln.startswith("*** Renamed "):
            m = RENAMED.match(ln)
            if m:
                log.renames[m.group(1)] = m.group(2)
        elif ln.startswith(("c:", "t:")):
            m = STAT.match(ln)
            if m:
                log.stats[m.group(2)] = int(m.group(3))
    for no, ln in _section(lines, "transactions", path, required=True):
        parts = ln.split("|", 3)
        try:
            t = Transaction(parts[3].strip(), float(parts[0]), float(parts[1]))
        except (IndexError, ValueError):
            raise PltError(f"{path}:{no}: malformed transaction line") from None
        for v in (t.start_ms, t.end_ms):
            if not math.isfinite(v) or abs(v) > MAX_MS:
                raise PltError(f"{path}:{no}: transaction time {show(v)} ms: at most {MAX_MS:g}")
        urls.check(t.url, f"{path}:{no}")
        log.transactions.append(t)
    for no, ln in _section(lines, "responses", path, required=False) or []:
        parts = ln.split("|", 3)
        if len(parts) != 4 or " -> " not in parts[3]:
            raise PltError(f"{path}:{no}: malformed response line")
        url, redirect = parts[3].rsplit(" -> ", 1)
        url, redirect = url.strip(), redirect.strip()
        urls.check(url, f"{path}:{no}")
        if redirect == "nil":
            redirect = ""
        elif redirect:
            try:
                target = urljoin(url, redirect)
            except ValueError:
                target = redirect
            urls.check(target, f"{path}:{no}", "redirect target")
        text = parts[0].strip()
        status = STATUS.get(text.lower(), 200)
        log.responses.append(Response(url, status, text, parts[1].strip(), parts[2].strip(), redirect))
    if not log.transactions and not log.responses:
        raise PltError(f"{path}: incomplete fetchlog: no request logged")
    return log
