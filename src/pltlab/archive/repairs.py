"""What an import changed in a recording so that it replays, counted per kind (never per entry).

A page's counts live in `page.extras["repairs"]` ({kind: count}); each kind reads as a line
after its count: f"{count} entries: {kind}" (`lines()` does that, with "entry" for one).
`page.extras["unreplayable"]` is the number of recorded entries the import dropped because
nothing can replay them (failed, no response, not HTTP): a conformance check expects
"objects recorded minus unreplayable" objects in the replay."""

from __future__ import annotations

import functools
import re
from collections import Counter

# Entries dropped: nothing to replay.
FAILED = "status 0 (failed or blocked in the browser): dropped"
NO_RESPONSE = "no response recorded: dropped"


def not_http(scheme: str) -> str:
    return f"{scheme}: URLs (not fetched over HTTP): dropped"


DROPPED = (FAILED, NO_RESPONSE)

# Headers.
JOINED_HEADERS = "repeated headers joined in one value: split into separate header lines"
PSEUDO_HEADERS = "pseudo-headers (HTTP/2 :status, status lines) dropped from the response headers"

# Bodies: replayed as size-only entries at the recorded size.
BAD_BASE64 = "body not valid base64: replayed at the recorded size"
TRUNCATED = "body truncated by the exporter: replayed at the recorded size"
LONGER = "body longer than the recorded content size: replayed at the recorded size"

# Bodies recorded as on the wire (Mahimahi, Web Page Replay: pltlab.archive.exchanges).
CHUNKS_BROKEN = "chunked body framing broken or cut short: the complete chunks kept"
PAST_LENGTH = "body longer than its Content-Length: cut to it"
SHORT_OF_LENGTH = "body shorter than its Content-Length (recording cut short): replayed as recorded"
UNDECODABLE = "body does not decode with its Content-Encoding: replayed as recorded, decoded size unknown"
UNKNOWN_CODING = (
    "Content-Encoding pltlab does not decode (compress, sdch, ...): replayed as recorded, decoded size unknown"
)
NO_HOST = "no Host header: the recorded server address used as the host"
# Pages of recordings without timings (pltlab.archive.exchanges.split).
OTHER_NAVIGATIONS = (
    "top-level document requests besides the page's (no Referer): kept as objects of the page (--url names another)"
)
UNPLACED = "requests whose Referer leads to no navigation: put in the archive's first page"

# Sizes (pltlab.archive.sizes).
NO_TRANSFER_SIZE = "no transfer size recorded: the content size was used"
NO_CONTENT_SIZE = "no content size recorded: the transfer size was used"
BAD_SIZE = 'size field not a whole number of bytes ("abc", -5, 1.5, true): not recorded, the other sizes used'
HEADERS_IN_TRANSFER = "transfer size recorded with the headers in it (header size unknown): used as is"

# The browser's cache.
FROM_CACHE = "recorded from the browser's cache: replayed as a cold load (a 304 as 200 at the content size)"
CACHE_NO_SIZE = "recorded from the browser's cache with no content size: replayed with an empty body"
REPEAT_VIEW = "recorded in a warm-cache repeat view: what the cache served is not in the recording"

# Requests and protocols.
REQUEST_IN_POSTDATA = "request fields recorded inside postData: read from there"
BAD_REQUEST_BASE64 = "request body not valid base64: matched without it"
PROTOCOL_INFERRED = "protocol not recorded: HTTP/2 inferred from the request's pseudo-headers"


def over(protocol: str) -> str:
    """The line for entries recorded over a protocol the replay does not speak (h3, spdy): they
    are replayed over HTTP/2, as h2 ones (knob protocol "recorded")."""
    if protocol == "h3":
        return "recorded over h3: replayed over HTTP/2 until HTTP/3 exists"
    return f"recorded over {protocol}: replayed over HTTP/2"


def is_drop(kind: str) -> bool:
    """Kinds whose entries were dropped (they count as unreplayable)."""
    return kind in DROPPED or kind.endswith("(not fetched over HTTP): dropped")


class Counts(Counter):
    """Repair counts of one page."""

    def add(self, kind: str | None, n: int = 1) -> None:
        if kind:
            self[kind] += n

    def unreplayable(self) -> int:
        return sum(n for k, n in self.items() if is_drop(k))


def merge(pages) -> dict:
    """Summed counts of several pages, in first-seen order."""
    total: dict = {}
    for p in pages:
        for k, n in (p.extras.get("repairs") or {}).items():
            total[k] = total.get(k, 0) + n
    return total


def lines(page_or_pages) -> list[str]:
    """One line per repair kind: "12 entries: <kind>" (a page, or several pages summed)."""
    pages = page_or_pages if isinstance(page_or_pages, (list, tuple)) else [page_or_pages]
    return [f"{n} {'entry' if n == 1 else 'entries'}: {k}" for k, n in merge(pages).items()]


# ---- headers -------------------------------------------------------------------------------

_TOKEN = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_STATUSISH = re.compile(r"\d{3}(\s|$)")


def clean_headers(headers: list[tuple[str, str]], protocol: str, status: int, counts: Counts) -> list[tuple[str, str]]:
    """Repeated headers joined with newlines (Chrome, chrome-har) as separate lines; drop what is
    no header: HTTP/2 and SPDY pseudo-headers (":status", or "status"/"version" as browsers and
    WebPageTest show them) and status lines (names with spaces, colons, slashes)."""
    out, joined, pseudo = [], False, False
    for name, value in headers:
        name = name.strip()
        if not _is_token(name):
            pseudo = True
            continue
        low = name.lower()
        if low in ("status", "version") and _pseudo(low, value.strip(), protocol, status):
            pseudo = True
            continue
        if "\n" not in value:  # one line, as nearly every header is
            v = value.strip("\r")
            out.append((name, v if v.strip() else ""))
            continue
        parts = [p.strip("\r") for p in value.split("\n")]
        parts = [p for p in parts if p.strip()] or [""]
        joined |= len(parts) > 1
        out += [(name, p) for p in parts]
    counts.add(JOINED_HEADERS if joined else None)
    counts.add(PSEUDO_HEADERS if pseudo else None)
    return out


@functools.lru_cache(maxsize=1024)
def _is_token(name: str) -> bool:
    """A header name (RFC 9110 token); a page has few distinct ones."""
    return _TOKEN.fullmatch(name) is not None


def _pseudo(name: str, value: str, protocol: str, status: int) -> bool:
    """A "status"/"version" header that is a pseudo-header shown without its colon. A real
    "Status: 200 OK" header (sent by some HTTP/1.1 servers) stays."""
    multiplexed = protocol in ("h2", "h3", "spdy")
    if name == "status":
        return bool(_STATUSISH.match(value)) and (multiplexed or (not protocol and value == str(status)))
    return multiplexed and value.upper().startswith("HTTP/")
