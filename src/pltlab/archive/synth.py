"""Deterministic bodies of a given size and type for objects recorded without one.

HTML, CSS and JS bodies really reference the page's sub-resources (a browser loading the
synthesized page fetches the same objects, in the same dependency structure); images are
decodable PNG/GIF (JPEG: markers only); every body is padded to the recorded size.

Scheme: objects recorded over http are referenced scheme-relatively (``//host/path`` in HTML and
CSS; in scripts the literal ``http://`` URL takes the document's scheme at run time). On a page
loaded over http that is exactly the recorded URL; on a page a browser upgraded to https (HSTS
preload: wikipedia.org, amazon.com, ... whatever the archive says) the sub-resources follow to
https instead of being blocked as mixed content, so the browser still fetches every object
(the replay answers https on 443 for every host). Objects recorded over https keep their
absolute URL. `pltlab.loaders.plan.effective_schemes` models the same rule for the built-in
loader."""

from __future__ import annotations

import base64
import hashlib
import json
import random
import struct
import zlib
from html import escape
from urllib.parse import urljoin

from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.archive.resource_kinds import kind

# What each kind of document can cause to load; anything else is loaded by an ancestor.
CAN_LOAD = {"html": None, "js": None, "css": {"css", "image", "font"}}


class _Noise(random.Random):
    """A generator whose random bytes run out after ``left``: the rest of every filler is zeros
    (base64 "AAAA" in text), which compresses to almost nothing. archive.wire solves for ``left``
    so that a synthesized body encodes to its recorded transfer size."""

    left = 0

    def randbytes(self, n):
        k = max(0, min(n, self.left))
        self.left -= k
        return super().randbytes(k) + bytes(n - k)


def _rng(obj: Obj, noise: int | None = None) -> random.Random:
    seed = hashlib.sha256(obj.url.encode()).digest()
    if noise is None:
        return random.Random(seed)  # every filler byte random: bodies as they always were
    r = _Noise(seed)
    r.left = noise
    return r


def filler_text(rng: random.Random, n: int) -> str:
    return base64.b64encode(rng.randbytes(n * 3 // 4 + 3)).decode()[: max(0, n)]


class Structure:
    """Who references whom in a page's synthesized bodies (loader, children, document_of,
    ref_kind, main_document), each worked out once. For a page that does not change while it is
    used: build one for a batch of look-ups (a plan, a manifest), not across edits of the page."""

    def __init__(self, page: Page):
        self.page = page
        self._index: dict[str, Obj] | None = None
        self._main_doc: Obj | None = None
        self._loader: dict[int, Obj] = {}
        self._doc: dict[int, Obj] = {}
        self._ref_kind: dict[int, str] = {}
        self._kids: dict[int, list[Obj]] | None = None
        self._styles: dict[int, list[Obj]] | None = None

    def find(self, url: str) -> Obj | None:
        if self._index is None:
            self._index = self.page.url_index()
        return self._index.get(strip_fragment(url))

    def loader(self, o: Obj) -> Obj:
        """The object whose body must reference `o`: its initiator, or the nearest ancestor
        whose kind can load `o`'s kind (an image cannot load anything), else the main document."""
        got = self._loader.get(id(o))
        if got is None:
            got = self._loader[id(o)] = self._find_loader(o)
        return got

    def _find_loader(self, o: Obj) -> Obj:
        k = kind(o.mime, o.url)
        cur, seen = o, {o.url}
        while cur.initiator and cur.initiator not in seen:
            seen.add(cur.initiator)
            parent = self.find(cur.initiator)
            if parent is None:
                break
            allowed = CAN_LOAD.get(kind(parent.mime, parent.url), set())
            if 200 <= parent.status < 300 and parent.status != 204 and parent.size > 0:
                if allowed is None or k in allowed:
                    return parent
            cur = parent
        return self.main_document()

    def main_document(self) -> Obj:
        """The page's document at the end of the main URL's redirect chain."""
        if self._main_doc is None:
            cur, seen = self.page.objects[0], set()
            while cur.redirect_url and cur.url not in seen:
                seen.add(cur.url)
                nxt = self.find(urljoin(cur.url, cur.redirect_url))
                if nxt is None:
                    break
                cur = nxt
            self._main_doc = cur
        return self._main_doc

    def document_of(self, o: Obj) -> Obj:
        """The HTML document a script runs in, or a stylesheet applies to (through the loaders)."""
        got = self._doc.get(id(o))
        if got is None:
            cur, seen = o, set()
            while kind(cur.mime, cur.url) in ("js", "css") and cur.url not in seen:
                seen.add(cur.url)
                nxt = self.loader(cur)
                if nxt is cur:
                    break
                cur = nxt
            got = self._doc[id(o)] = cur
        return got

    def ref_kind(self, o: Obj) -> str:
        """The kind a reference to ``o`` must have: that of what its redirects end at (a script
        answered by a 302 to a .js is a <script>, not an <iframe>)."""
        got = self._ref_kind.get(id(o))
        if got is None:
            cur, seen = o, set()
            while cur.redirect_url and 300 <= cur.status < 400 and cur.url not in seen:
                seen.add(cur.url)
                nxt = self.find(urljoin(cur.url, cur.redirect_url))
                if nxt is None:
                    break
                cur = nxt
            got = self._ref_kind[id(o)] = kind(cur.mime, cur.url)
        return got

    def kids(self, parent: Obj) -> list[Obj]:
        """children() without the copy (callers must not change the list)."""
        if self._kids is None:  # one pass: every object goes to its loader's list
            self._kids, seen = {}, {}
            objs = self.page.objects
            for o in objs:
                if o is objs[0] or o.initiator_type == "redirect":
                    continue
                par = self.loader(o)
                if par is o:
                    continue
                urls = seen.setdefault(id(par), set())
                if o.url not in urls:
                    urls.add(o.url)
                    self._kids.setdefault(id(par), []).append(o)
        return self._kids.get(id(parent), [])

    def children(self, parent: Obj) -> list[Obj]:
        """Objects the synthesized `parent` must reference (redirect targets come via the
        redirect), in page order."""
        return list(self.kids(parent))

    def styled_by(self, doc: Obj) -> list[Obj]:
        """Size-only stylesheets applied to ``doc`` (document_of) that load images or fonts, in
        page order: the document carries an element for each."""
        if self._styles is None:
            self._styles = {}
            for c in self.page.objects:
                if (
                    kind(c.mime, c.url) == "css"
                    and c.body is None
                    and any(self.ref_kind(k) in ("image", "font") for k in self.kids(c))
                ):
                    self._styles.setdefault(id(self.document_of(c)), []).append(c)
        return [c for c in self._styles.get(id(doc), []) if c is not doc]


def loader(page: Page, o: Obj) -> Obj:
    """The object whose body must reference `o`: its initiator, or the nearest ancestor whose
    kind can load `o`'s kind (an image cannot load anything), else the main document."""
    return Structure(page).loader(o)


def main_document(page: Page) -> Obj:
    """The page's document at the end of the main URL's redirect chain."""
    return Structure(page).main_document()


def document_of(page: Page, o: Obj) -> Obj:
    """The HTML document a script runs in, or a stylesheet applies to (through the loaders)."""
    return Structure(page).document_of(o)


def ref_kind(page: Page, o: Obj) -> str:
    """The kind a reference to ``o`` must have: that of what its redirects end at."""
    return Structure(page).ref_kind(o)


def hook(css: Obj) -> str:
    """Class of the element a synthesized stylesheet's rules apply to (one per stylesheet, so
    that the rules of several stylesheets do not override each other)."""
    return "p" + hashlib.sha256(css.url.encode()).hexdigest()[:10]


def children(page: Page, parent: Obj) -> list[Obj]:
    """Objects the synthesized `parent` must reference (redirect targets come via the redirect)."""
    return Structure(page).children(parent)


def ref(url: str, base: str, upgrade: bool = False) -> str:
    """How a synthesized HTML or CSS body at ``base`` references ``url``: an http URL
    scheme-relative if ``base`` was recorded over http (the same URL on an http page) or with
    ``upgrade`` (it loads over https from an https document); else as recorded (an https
    stylesheet on an http page: the recorded http URL). Upgrading by scheme-relative references,
    not by a CSP <meta> upgrade-insecure-requests: Chromium's preload scanner drops what it finds
    after such a <meta>, which serializes the page's loads."""
    http = url[:7].lower() == "http://"
    return url[5:] if http and (upgrade or base[:7].lower() == "http://") else url


def js_url(url: str) -> str:
    """A JS expression for ``url``: the literal URL, on the document's scheme if recorded http."""
    lit = json.dumps(url)
    return lit + ".replace(/^http:/,location.protocol)" if url[:7].lower() == "http://" else lit


# ---- text documents --------------------------------------------------------------------------


def _html(st: Structure, o: Obj, kids: list[Obj], rng) -> bytes:
    # by hand, not a template engine: a body's bytes are sized to the recorded size, tag by tag
    head, body, later = [], [], []
    fonts = 0
    for c in kids:
        u = escape(ref(c.url, o.url, upgrade=True), quote=True)
        k = st.ref_kind(c)
        if k == "css":
            head.append(f'<link rel="stylesheet" href="{u}">')
        elif k == "js":
            head.append(f'<script src="{u}"></script>')
        elif k == "image":
            body.append(f'<img src="{u}" alt="">')
        elif k == "html":
            body.append(f'<iframe src="{u}"></iframe>')
        elif k == "font":
            fonts += 1
            css_u = ref(c.url, o.url, upgrade=True).replace('"', "%22")  # <style> is raw text: no entity escaping
            head.append(
                f'<style>@font-face{{font-family:"plt{fonts}";src:url("{css_u}")}}'
                f'.plt{fonts}{{font-family:"plt{fonts}"}}</style>'
            )
            body.append(f'<p class="plt{fonts}">pltlab</p>')
        else:  # JSON, XHR beacons, plug-ins: fetched by script
            later.append(c.url)
    # Elements the stylesheets applied to this document style (their images and fonts load).
    for c in st.styled_by(o):
        nfonts = sum(st.ref_kind(k) == "font" for k in st.kids(c))
        body.append(f'<div class="{hook(c)}">pltlab{"<b>pltlab</b>" * nfonts}</div>')
    if later:
        body.append(
            "<script>"
            + "".join(f"fetch({js_url(u)},{{mode:'no-cors'}}).catch(function(){{}});" for u in later)
            + "</script>"
        )
    doc = (
        '<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>'
        + escape(st.page.title or o.url)
        + "</title>\n"
        + "\n".join(head)
        + "\n</head><body>\n"
        + "\n".join(body)
        + "\n"
    )
    return _pad_text(doc, "<!-- ", " -->", "</body></html>\n", o.size, rng)


def _css(st: Structure, o: Obj, kids: list[Obj], rng) -> bytes:
    up = st.document_of(o).url[:8].lower() == "https://"  # applied to an https document

    def ref_(c: Obj) -> str:
        return ref(c.url, o.url, upgrade=up)

    imports = [f'@import url("{ref_(c)}");' for c in kids if st.ref_kind(c) == "css"]
    imgs = [f'url("{ref_(c)}")' for c in kids if st.ref_kind(c) == "image"]
    fonts = [c for c in kids if st.ref_kind(c) == "font"]
    rules, h = imports[:], hook(o)
    if imgs:  # every layer of a multi-background is fetched
        rules.append(f".{h}{{background-image:" + ",".join(imgs) + "}")
    for i, c in enumerate(fonts, 1):  # one element per font: a fallback font may never load
        rules.append(
            f'@font-face{{font-family:"{h}f{i}";src:url("{ref_(c)}")}}.{h}>b:nth-of-type({i}){{font-family:"{h}f{i}"}}'
        )
    return _pad_text("\n".join(rules) + "\n", "/* ", " */", "", o.size, rng)


def _js(st: Structure, o: Obj, kids: list[Obj], rng) -> bytes:
    calls = []
    for c in kids:
        u, k = js_url(c.url), st.ref_kind(c)
        if k == "js":
            calls.append(f"var s=document.createElement('script');s.src={u};document.head.appendChild(s);")
        elif k == "css":
            calls.append(
                f"var l=document.createElement('link');l.rel='stylesheet';l.href={u};document.head.appendChild(l);"
            )
        elif k == "image":
            calls.append(f"new Image().src={u};")
        elif k == "html":
            calls.append(
                f"var f=document.createElement('iframe');f.src={u};"
                "(document.body||document.documentElement).appendChild(f);"
            )
        else:
            calls.append(f"fetch({u},{{mode:'no-cors'}}).catch(function(){{}});")
    code = "".join("(function(){" + c + "})();\n" for c in calls)
    return _pad_text(code, "/* ", " */", "", o.size, rng)


def _pad_text(doc: str, open_: str, close: str, tail: str, size: int, rng) -> bytes:
    raw = doc.encode()
    n = size - len(raw) - len(tail.encode())
    if n >= len(open_) + len(close):
        raw += (open_ + filler_text(rng, n - len(open_) - len(close)) + close).encode()
    elif n > 0:
        raw += b"\n" * n
    return raw + tail.encode()


# ---- binary ----------------------------------------------------------------------------------


def _png_chunk(kind_: bytes, data: bytes) -> bytes:
    # by hand: a 1x1 image padded to a recorded size; an image library adds a dependency for 20 lines
    return struct.pack(">I", len(data)) + kind_ + data + struct.pack(">I", zlib.crc32(kind_ + data))


def _png(size: int, rng) -> bytes:
    head = b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0))
    idat = _png_chunk(b"IDAT", zlib.compress(b"\x00\x00\x00\x00\x00"))
    end = _png_chunk(b"IEND", b"")
    n = size - len(head) - len(idat) - len(end) - 12  # a private ancillary chunk carries the rest
    pad = _png_chunk(b"plTb", rng.randbytes(n)) if n >= 0 else b""
    return head + pad + idat + end


def _gif(size: int, rng) -> bytes:
    head = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff"
    img = b"\x2c\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02\x44\x01\x00"
    r = size - len(head) - len(img) - 1 - 3  # bytes for comment sub-blocks (1 length byte + data)
    if r < 0:
        return head + img + b"\x3b"
    r = max(r, 2) if r == 1 else r  # a sub-block has at least 2 bytes: one byte over size
    blocks = b""
    while r > 0:
        k = 254 if r == 257 else min(255, r - 1)
        blocks += bytes([k]) + rng.randbytes(k)
        r -= k + 1
    return head + b"\x21\xfe" + blocks + b"\x00" + img + b"\x3b"


def _jpeg(size: int, rng) -> bytes:
    out, n = b"\xff\xd8", size - 4
    while n >= 4:  # COM segments (length includes itself, max 65535)
        k = min(65533, n - 4)
        out += b"\xff\xfe" + struct.pack(">H", k + 2) + rng.randbytes(k)
        n -= k + 4
    return out + b"\x00" * max(n, 0) + b"\xff\xd9"


def body(page: Page, o: Obj, noise: int | None = None, structure: Structure | None = None) -> bytes:
    """The object's body: the recorded one, else a synthesized one of its size and type whose
    filler has ``noise`` random bytes (None: all of it), the rest compressible. ``structure``:
    the page's Structure, shared by the bodies of one unchanged page (else one is made)."""
    if o.body is not None:
        return o.body
    if o.size <= 0 or 300 <= o.status < 400 or o.status == 204:
        return b""
    rng = _rng(o, noise)
    k = kind(o.mime, o.url)
    if k in ("html", "css", "js"):
        st = structure if structure is not None else Structure(page)
        return {"html": _html, "css": _css, "js": _js}[k](st, o, st.kids(o), rng)
    if k == "json":
        if o.size < 13:  # too small for the filler: still exactly the recorded size
            return (b"{}" + b" " * (o.size - 2)) if o.size >= 2 else b" " * o.size
        return _pad_text('{"pltlab":"', "", "", '"}', o.size, rng)
    m = o.mime.lower()
    if k == "image" and "gif" in m:
        return _gif(o.size, rng)
    if k == "image" and ("jpeg" in m or "jpg" in m):
        return _jpeg(o.size, rng)
    if k == "image" and "svg" in m:
        return _pad_text(
            '<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1">', "<!-- ", " -->", "</svg>", o.size, rng
        )
    if k == "image":
        return _png(o.size, rng)
    return rng.randbytes(o.size)


def materialize(page: Page) -> int:
    """Give every size-only object its synthesized body (marked in extras); returns how many."""
    made, st = [], Structure(page)
    for o in page.objects:
        if o.body is None:
            made.append((o, body(page, o, structure=st)))
    for o, b in made:  # after all are computed: children() must see the page unchanged
        o.body, o.size = b, len(b)
        o.extras["synthesized"] = True
    return len(made)
