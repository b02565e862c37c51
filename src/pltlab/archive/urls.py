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


def scheme(url: str) -> str:
    """The URL's scheme in lower case; "" when it has none or cannot be split."""
    try:
        return urlsplit(url).scheme.lower()
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
        s = urlsplit(url)
    except ValueError as e:
        raise PltError(f"{where}: {what} {show(url)}: {e}") from None
    if s.scheme.lower() not in HTTP:
        raise PltError(f"{where}: {what} {show(url)} is not http(s)")
    problem = _netloc_problem(s.netloc)
    if problem:
        raise PltError(f"{where}: {what} {show(url)}: {problem}")
    return url
