"""Request URLs an archive may hold, checked once when it is read: whatever comes later (origins
and their ports, host names in the replay's name mapping, request lines) never meets one it
cannot handle. Limits: pltlab.units."""

from __future__ import annotations

import functools
import ipaddress
import re
from urllib.parse import SplitResult, urlsplit

from pltlab.errors import PltError
from pltlab.units import show

MAX_URL_CHARS = 64 * 1024
HTTP = ("http", "https")
_NAME = re.compile(r"[a-z0-9_-]+(\.[a-z0-9_-]+)*\.?")
_SPACE_OR_CONTROL = re.compile(r"[\x00-\x20\x7f]")
# A scheme (urllib.parse.scheme_chars, from a letter to the first ":") and the netloc after "//".
_SCHEME_NETLOC = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*):(?://([^/?#]*))?")
_last_split: tuple = (None, None)  # (url, split(url)) of the last URL split, replaced whole


def split(url: str) -> tuple[str, str]:
    """(scheme in lower case, netloc) of the URL as urlsplit gives them, and its ValueError.

    urlsplit is pure Python and keeps only its last 128 results: an import of 20,000 URLs split
    each once, at that cost. A plain URL (ASCII, no space or control character: nothing urlsplit
    strips; no "[" of an IPv6 host in its netloc, which urlsplit checks) is split here by its
    rules; any other goes to urlsplit. The last URL split is kept: reading an entry splits its
    URL for its scheme, its check and its Obj's parts in turn."""
    global _last_split
    last = _last_split
    if last[0] is url:
        return last[1]
    got = None
    if url.isascii() and not _SPACE_OR_CONTROL.search(url):
        m = _SCHEME_NETLOC.match(url)
        if m is not None:
            netloc = m.group(2) or ""
            if "[" not in netloc and "]" not in netloc:
                got = (m.group(1).lower(), netloc)
    if got is None:
        s = urlsplit(url)
        got = (s.scheme, s.netloc)
    _last_split = (url, got)
    return got


@functools.lru_cache(maxsize=4096)
def host_port(netloc: str) -> tuple[str, int | None]:
    """(host in lower case, explicit port or None) of a netloc, as SplitResult's hostname and
    port have them; port -1 when it is invalid (.port raises ValueError). A page has few."""
    s = SplitResult("", netloc, "", "", "")
    try:
        port = s.port
    except ValueError:
        port = -1
    return (s.hostname or "").lower(), port


def scheme(url: str) -> str:
    """The URL's scheme in lower case; "" when it has none or cannot be split."""
    try:
        return split(url)[0]
    except ValueError:
        return ""


@functools.lru_cache(maxsize=4096)
def _netloc_problem(netloc: str) -> str | None:
    """What is wrong with a URL's host and port (None: nothing); a page has few, so cached."""
    s = SplitResult("http", netloc, "", "", "")
    try:
        port, host = s.port, s.hostname or ""
    except ValueError as e:
        return str(e)
    if not host:
        return "has no host"
    if ":" in host:
        try:
            ipaddress.IPv6Address(host)
        except ValueError:
            return "invalid IPv6 address"
    elif len(host) > 253 or not _NAME.fullmatch(host):
        return f"invalid host name {show(host)}"
    if port == 0:
        return "port 0"
    return None


def check(url, where: str, what: str = "request URL") -> str:
    """`url` when it is an http(s) URL with a valid host and port; else one PltError naming it."""
    if not isinstance(url, str) or not url:
        raise PltError(f"{where}: {what} {show(url)} is not a URL")
    if len(url) > MAX_URL_CHARS:
        raise PltError(f"{where}: {what} of {len(url)} characters (at most {MAX_URL_CHARS})")
    if _SPACE_OR_CONTROL.search(url):
        raise PltError(f"{where}: {what} {show(url)} has spaces or control characters")
    try:
        scheme, netloc = split(url)
    except ValueError as e:
        raise PltError(f"{where}: {what} {show(url)}: {e}") from None
    if scheme not in HTTP:
        raise PltError(f"{where}: {what} {show(url)} is not http(s)")
    problem = _netloc_problem(netloc)
    if problem:
        raise PltError(f"{where}: {what} {show(url)}: {problem}")
    return url
