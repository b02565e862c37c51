"""Sub-resource references in HTML and CSS bodies (what a browser's parser would fetch)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from urllib.parse import urljoin

# tag -> attributes holding one URL
URL_ATTRS = {
    "script": ("src",),
    "img": ("src",),
    "iframe": ("src",),
    "frame": ("src",),
    "source": ("src",),
    "video": ("src", "poster"),
    "audio": ("src",),
    "embed": ("src",),
    "object": ("data",),
    "input": ("src",),
    "body": ("background",),
    "track": ("src",),
}
LINK_RELS = {"stylesheet", "icon", "shortcut", "preload", "prefetch", "apple-touch-icon", "modulepreload", "manifest"}
CSS_URL = re.compile(r"""url\(\s*(?:"([^"]*)"|'([^']*)'|([^)'"\s]*))\s*\)""", re.I)
CSS_IMPORT = re.compile(r"""@import\s+(?:"([^"]*)"|'([^']*)')""", re.I)


def _usable(url: str) -> bool:
    u = url.strip().lower()
    return bool(u) and not u.startswith(("data:", "javascript:", "about:", "#", "blob:", "mailto:"))


def css_refs(text: str, base: str) -> list[str]:
    out = []
    for m in list(CSS_IMPORT.finditer(text)) + list(CSS_URL.finditer(text)):
        u = next((g for g in m.groups() if g is not None), "")
        if _usable(u):
            out.append(urljoin(base, u.strip()))
    return out


def srcset_urls(value: str) -> list[str]:
    return [c.strip().split()[0] for c in value.split(",") if c.strip()]


class _Parser(HTMLParser):
    def __init__(self, base: str):
        super().__init__(convert_charrefs=True)
        self.base, self.refs, self._style = base, [], False

    def _add(self, url: str | None) -> None:
        if url and _usable(url):
            self.refs.append(urljoin(self.base, url.strip()))

    def handle_starttag(self, tag, attrs):
        a = {k: (v or "") for k, v in attrs}
        if tag == "base" and a.get("href"):
            self.base = urljoin(self.base, a["href"])
        elif tag == "link":
            rels = set(a.get("rel", "").lower().split())
            if rels & LINK_RELS or not rels:
                self._add(a.get("href"))
        for attr in URL_ATTRS.get(tag, ()):
            self._add(a.get(attr))
        if tag in ("img", "source") and a.get("srcset"):
            for u in srcset_urls(a["srcset"]):
                self._add(u)
        if a.get("style"):
            self.refs.extend(css_refs(a["style"], self.base))
        self._style = tag == "style"

    def handle_endtag(self, tag):
        self._style = False

    def handle_data(self, data):
        if self._style:
            self.refs.extend(css_refs(data, self.base))


def html_refs(text: str, base: str) -> list[str]:
    p = _Parser(base)
    try:
        p.feed(text)
        p.close()
    except Exception:  # html.parser is lenient; a pathological body must not stop an import
        pass
    return p.refs


def refs_of(body: bytes, mime: str, base: str) -> tuple[str, list[str]]:
    """(kind, URLs) referenced by a body: kind 'parser' for HTML, 'css' for style sheets."""
    m = mime.lower()
    text = body.decode("utf-8", errors="replace")
    if "html" in m:
        return "parser", html_refs(text, base)
    if "css" in m:
        return "css", css_refs(text, base)
    return "", []
