"""The schemes a load's condition says, and the check that its requests went over them.

Every request record carries the URL as loaded (scheme and host). Where the condition keeps
the recorded schemes and upgrades nothing itself — the built-in loader on schemes "recorded", or
Chromium on a page renamed out of its HSTS preload list (knob hosts "unpreloaded",
pltlab.archive.rename) — a request over https for an object the page, as loaded, fetches over
http (pltlab.loaders.plan.effective_schemes: its recorded scheme, or its document's) means the
load fell back to https: it is invalid, naming the URL and why (Chromium's own HSTS upgrade, an
internal 307, when it made one). With Chromium on the recorded names (Chromium's own upgrades,
as today) nothing is asked of the schemes."""

from urllib.parse import urlsplit

from pltlab import protocols
from pltlab.archive.model import Page, strip_fragment
from pltlab.errors import PltError
from pltlab.loaders import plan as plans


def _bare(url: str) -> str:
    """A URL without its scheme ("//host/path?query"), as its http and https forms share it."""
    s = urlsplit(strip_fragment(url))
    return f"//{(s.hostname or '').lower()}{s.path or '/'}{'?' + s.query if s.query else ''}"


def http_urls(page: Page, https_hosts=()) -> set[str]:
    """The objects (scheme-less URLs) a browser fetches over http when it upgrades ``https_hosts``
    (none: the recorded schemes); an URL also fetched over https elsewhere in the page is left out."""
    schemes = plans.effective_schemes(page, set(https_hosts))
    by: dict[str, set[str]] = {}
    for o in page.objects:
        if o.scheme in ("http", "https"):
            by.setdefault(_bare(o.url), set()).add(schemes.get(id(o), o.scheme))
    return {u for u, s in by.items() if s == {"http"}}


def fetches_https(page: Page, https_hosts=()) -> bool:
    """Whether some object of ``page`` goes over https when ``https_hosts`` are upgraded."""
    eff = plans.effective_schemes(page, set(https_hosts))
    return any(eff.get(id(o), o.scheme) == "https" for o in page.objects)


def check_protocol(page: Page, https_hosts, protocol: str, where: str) -> None:
    """Refuse in one line a protocol knob that no request of the load can go over: HTTP/2 and
    HTTP/3 are https-only, so a page whose every object goes over http (its recorded schemes, none
    upgraded) would run over HTTP/1.1 under another protocol's name."""
    if protocol == protocols.RECORDED or protocols.get(protocol) is protocols.FALLBACK:
        return
    if fetches_https(page, https_hosts):
        return
    raise PltError(
        f"{where}: protocol {protocol} is https-only and this load fetches every object over http "
        "(with the built-in loader, --schemes https loads every origin over https)"
    )


def problem(requests: list[dict], http: set[str], upgraded: list[str] | tuple = ()) -> str | None:
    """Why a load fell back to https, or None: ``upgraded`` (Chromium's internal HSTS 307s) first,
    else the first request over https for an URL of ``http``."""
    if upgraded:
        more = f" (and {len(upgraded) - 1} more)" if len(upgraded) > 1 else ""
        return f"fell back to https: Chromium upgraded {upgraded[0]} to https itself (HSTS){more}"
    bad = [r["url"] for r in requests if str(r.get("url", "")).startswith("https://") and _bare(r["url"]) in http]
    if not bad:
        return None
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"fell back to https: {bad[0]} went over https where the page is loaded over http{more}"
