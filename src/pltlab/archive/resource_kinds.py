"""Resource kinds from MIME type (or URL extension when the type is missing)."""

from __future__ import annotations

import functools
import posixpath
from urllib.parse import urlsplit

EXT = {
    ".html": "html",
    ".htm": "html",
    ".php": "html",
    ".asp": "html",
    ".aspx": "html",
    ".css": "css",
    ".js": "js",
    ".json": "json",
    ".png": "image",
    ".gif": "image",
    ".jpg": "image",
    ".jpeg": "image",
    ".webp": "image",
    ".svg": "image",
    ".ico": "image",
    ".woff": "font",
    ".woff2": "font",
    ".ttf": "font",
    ".otf": "font",
    ".eot": "font",
    ".swf": "other",
}
MIME_BY_KIND = {
    "html": "text/html",
    "css": "text/css",
    "js": "application/javascript",
    "json": "application/json",
    "image": "image/png",
    "font": "font/woff2",
    "other": "application/octet-stream",
}
MIME_BY_EXT = {
    ".gif": "image/gif",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".svg": "image/svg+xml",
    ".ico": "image/x-icon",
    ".woff": "font/woff",
    ".ttf": "font/ttf",
    ".otf": "font/otf",
    ".swf": "application/x-shockwave-flash",
}


def kind(mime: str, url: str = "") -> str:
    got = _mime_kind(mime) if mime else ""  # a plan or manifest asks ~5 times per object
    if got:
        return got
    ext = posixpath.splitext(urlsplit(url).path)[1].lower()
    return EXT.get(ext, "other")


@functools.lru_cache(maxsize=1024)
def _mime_kind(mime: str) -> str:
    """The kind a MIME type names; "" when it names none (an empty or blank type: the URL's
    extension decides). A page has few distinct types, so cached."""
    m = mime.split(";")[0].strip().lower()
    if "html" in m:
        return "html"
    if m == "text/css":
        return "css"
    if "javascript" in m or "ecmascript" in m:
        return "js"
    if "json" in m:
        return "json"
    if m.startswith("image/"):
        return "image"
    if m.startswith("font/") or "font" in m:
        return "font"
    if m:
        return "other"
    return ""


def guess_mime(url: str, body: bytes | None = None) -> str:
    """A MIME type for an object whose log names none (sniff the body, then the extension)."""
    if body is not None:
        head = body[:512].lstrip().lower()
        for magic, mime in ((b"\x89png", "image/png"), (b"gif8", "image/gif"), (b"\xff\xd8\xff", "image/jpeg")):
            if body[:4].lower().startswith(magic):
                return mime
        if head.startswith((b"<!doctype html", b"<html")):
            return "text/html"
    ext = posixpath.splitext(urlsplit(url).path)[1].lower()
    return MIME_BY_EXT.get(ext) or MIME_BY_KIND.get(
        EXT.get(ext, ""), "text/html" if not ext else "application/octet-stream"
    )
