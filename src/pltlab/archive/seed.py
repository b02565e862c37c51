"""Importer for the seed experiment's fetch output: `<Name>.pages` (URL list), `<Name>/<host>/<path>`
(bodies, long or query-bearing paths renamed to a hash) and `<Name>.fetchlog/<page>`."""

from __future__ import annotations

import os
import re
from urllib.parse import urljoin, urlsplit, urlunsplit

from pltlab.archive import deps, fetchlog, urls
from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.archive.refs import refs_of
from pltlab.archive.resource_kinds import guess_mime, kind
from pltlab.errors import PltError
from pltlab.units import MAX_OBJECT_BYTES, MAX_PAGE_BYTES

# Size guesses for logged objects without a stored body (marked size_source=estimate).
DEFAULT_SIZE = {"html": 4096, "css": 8192, "js": 16384, "json": 2048, "image": 43, "font": 32768, "other": 2048}


def normalize(url: str) -> str:
    s = urlsplit(url.strip())
    return urlunsplit((s.scheme, s.netloc, s.path or "/", s.query, s.fragment))


def log_name(url: str) -> str:
    """The seed's fetchlog file name for a page URL (':' and '/' dropped)."""
    return re.sub(r"[:/]", "", url.strip())


class Store:
    """The body folder `<Name>/`: lookups that never leave it."""

    def __init__(self, root: str):
        self.root = os.path.realpath(root)
        self.used: set[str] = set()
        self._hashes: dict[str, list[str]] | None = None

    def _inside(self, rel: str, what: str) -> str:
        full = os.path.normpath(os.path.join(self.root, rel))
        if not full.startswith(self.root + os.sep):
            raise PltError(f"{what}: path {rel!r} escapes the folder {self.root}")
        if os.path.islink(full) or os.path.realpath(full) != full:
            real = os.path.realpath(full)
            if not real.startswith(self.root + os.sep):
                raise PltError(f"{what}: {full} points outside the folder {self.root}")
        return full

    def locate(self, url: str, renames: dict[str, str], what: str) -> str | None:
        s = urlsplit(strip_fragment(url))
        host = s.hostname or ""
        pq = s.path + (f"?{s.query}" if s.query else "")
        path = s.path + ("index.html" if s.path.endswith("/") or not s.path else "")
        frag = urlsplit(url).fragment  # the recorder's rename keys keep the fragment
        cands = [renames[k] for k in (pq + (f"#{frag}" if frag else ""), pq) if k in renames]
        cands += [path + (f"?{s.query}" if s.query else ""), path]
        for c in cands:
            full = self._inside(host + "/" + c.lstrip("/"), what)
            if os.path.isfile(full):
                return full
        return None

    def by_hash(self, h: str) -> list[str]:
        """Stored files named /<hash> (rename targets), in any host folder."""
        if self._hashes is None:
            self._hashes = {}
            for host in sorted(os.listdir(self.root)):
                d = os.path.join(self.root, host)
                if os.path.isdir(d):
                    for f in os.listdir(d):
                        self._hashes.setdefault(f, []).append(os.path.join(d, f))
        return self._hashes.get(h.lstrip("/"), [])

    def files(self) -> list[str]:
        out = []
        for d, dirs, files in os.walk(self.root):
            dirs.sort()
            out += [self._inside(os.path.relpath(os.path.join(d, f), self.root), self.root) for f in sorted(files)]
        return out

    def url_of(self, path: str) -> str:
        rel = os.path.relpath(path, self.root)
        host, _, rest = rel.partition(os.sep)
        rest = "/" + rest.replace(os.sep, "/")
        base, q, query = rest.partition("?")
        if base.endswith("/index.html"):
            base = base[: -len("index.html")]
        return f"http://{host}{base}" + (f"?{query}" if q else "")


def _read(path: str) -> bytes:
    """A stored body (at most the object limit, 1 GiB: pltlab.units)."""
    try:
        with open(path, "rb") as f:
            n = os.fstat(f.fileno()).st_size
            if n > MAX_OBJECT_BYTES:
                raise PltError(f"{path}: a body of {n} bytes: an object is at most {MAX_OBJECT_BYTES} bytes (1 GiB)")
            return f.read(MAX_OBJECT_BYTES + 1)
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None


def _object(url: str, log: fetchlog.FetchLog, store: Store, times: dict, resps: dict) -> Obj:
    r = resps.get(url)
    path = store.locate(url, log.renames, f"{log.path}: {url[:100]}")
    body = None
    ext: dict = {}
    if path is not None:
        store.used.add(path)
        body = _read(path)
        ext["seed_file"] = os.path.relpath(path, os.path.dirname(store.root))
    status = r.status if r else 200
    if status == 304:  # the recorder revalidated a cached copy; a cold load gets the object
        ext["recorded_status"], status = 304, 200
    mime = (r.mime if r else "") or guess_mime(url, body)
    headers = [("Content-Type", mime + (f"; charset={r.charset}" if r and r.charset else ""))]
    redirect = ""
    if r and r.redirect and 300 <= status < 400:
        redirect = urljoin(url, r.redirect)
        headers.append(("Location", redirect))
        body = b"" if body is None else body
    start, end = times.get(url, (None, None))
    o = Obj(
        url=url,
        status=status,
        status_text=r.status_text if r else "OK",
        headers=headers,
        mime=mime,
        body=body,
        start_ms=start,
        end_ms=end,
        redirect_url=redirect,
        extras=ext,
    )
    if body is None:
        o.size = 0 if status == 204 else DEFAULT_SIZE[kind(mime, url)]
        ext["size_source"] = "estimate"
    return o


def _page(url: str, log: fetchlog.FetchLog, store: Store, name: str) -> Page:
    times = {t.url: (t.start_ms, t.end_ms) for t in log.transactions}
    resps = {r.url: r for r in log.responses}
    objs = [_object(u, log, store, times, resps) for u in log.urls()]
    page = Page(
        url=normalize(url),
        objects=objs,
        title=url,
        extras={"source": f"seed:{name}.pages", "fetchlog": os.path.basename(log.path), "log_stats": dict(log.stats)},
    )
    main = page.find(page.url)
    if main is None:
        raise PltError(f"{log.path}: the page {url} itself is not in the log")
    objs.remove(main)
    objs.insert(0, main)
    _bodies_to_chain_ends(page, resps)
    # Files renamed by this log but fetched from the recorder's cache (no transaction line).
    logged = {strip_fragment(o.url) for o in objs}
    for pq, h in log.renames.items():
        for path in store.by_hash(h):
            if path in store.used:
                continue
            host = os.path.basename(os.path.dirname(path))
            u = f"http://{host}{pq}"
            if strip_fragment(u) not in logged:
                store.used.add(path)
                objs.append(_cached(u, path, store, "renamed"))
                logged.add(strip_fragment(u))
    return page


def _bodies_to_chain_ends(page: Page, resps: dict) -> None:
    """The recorder stored what it finally got under the URL it asked for: a redirect's file is
    the body of the last URL of its redirect chain. A redirect (3xx with a target) gets no body;
    its file goes to that URL's object unless it has a file of its own (an object is added for a
    target the log does not name). Files of a chain that loops are dropped."""
    for o in list(page.objects):
        if not o.redirect_url or "seed_file" not in o.extras:
            continue
        body, rel = o.body, o.extras.pop("seed_file")
        o.body, o.size = b"", 0
        end, seen = o, {strip_fragment(o.url)}
        while end.redirect_url:
            target = strip_fragment(end.redirect_url)
            if target in seen:
                end = None  # a loop: no final URL
                break
            seen.add(target)
            nxt = page.find(target)
            if nxt is None:
                nxt = Obj(
                    url=target,
                    initiator=end.url,
                    initiator_type="redirect",
                    status_text="OK",
                    extras={"attached": "redirect target"},
                )
                page.objects.append(nxt)
            end = nxt
        if end is None or end.body is not None or end.status == 204:
            continue  # a loop, the URL has a file of its own, or it has no body
        if not (resps.get(end.url) and resps[end.url].mime):  # typed by its URL alone so far
            end.mime = guess_mime(end.url, body)
            end.headers = [(k, v) for k, v in end.headers if k.lower() != "content-type"] + [("Content-Type", end.mime)]
        end.extras.pop("size_source", None)
        end.body, end.size = body, len(body)
        end.extras["seed_file"] = rel


def _cached(url: str, path: str, store: Store, how: str) -> Obj:
    body = _read(path)
    mime = guess_mime(url, body)
    return Obj(
        url=url,
        mime=mime,
        headers=[("Content-Type", mime)],
        body=body,
        status_text="OK",
        extras={"seed_file": os.path.relpath(path, os.path.dirname(store.root)), "attached": how},
    )


def _attach_orphans(pages: list[Page], store: Store) -> list[str]:
    """Stored files no log names go to the page whose HTML or CSS references them."""
    left = {store.url_of(p): p for p in store.files() if p not in store.used}
    changed = True
    while changed and left:  # an attached style sheet can reference further files
        changed = False
        for page in pages:
            refs = set()
            for o in page.objects:
                if o.body is not None and kind(o.mime, o.url) in ("html", "css"):
                    refs.update(strip_fragment(u) for u in refs_of(o.body, o.mime, o.url)[1])
            for u in sorted(refs & left.keys()):
                if page.find(u) is None:
                    path = left.pop(u)
                    store.used.add(path)
                    page.objects.append(_cached(u, path, store, "referenced"))
                    changed = True
    return sorted(os.path.relpath(p, os.path.dirname(store.root)) for p in left.values())


def import_pages_file(pages_file: str) -> tuple[list[Page], dict]:
    """All pages of one `<Name>.pages`; the report lists orphans and synthesized counts."""
    root = os.path.dirname(os.path.abspath(pages_file))
    name = os.path.basename(pages_file)[: -len(".pages")]
    bodies, logs = os.path.join(root, name), os.path.join(root, name + ".fetchlog")
    for d in (bodies, logs):
        if not os.path.isdir(d):
            raise PltError(f"{pages_file}: missing folder {d}")
    try:
        with open(pages_file, encoding="utf-8") as f:
            page_urls = [ln.strip() for ln in f if ln.strip() and not ln.startswith("#")]
    except (OSError, UnicodeDecodeError) as e:
        raise PltError(f"{pages_file}: cannot read: {e}") from None
    if not page_urls:
        raise PltError(f"{pages_file}: no page URL")
    for u in page_urls:
        urls.check(u, pages_file, "page URL")
    store = Store(bodies)
    pages = []
    for u in page_urls:
        lp = os.path.join(logs, log_name(u))
        if not os.path.isfile(lp):
            raise PltError(f"{pages_file}: no fetchlog for {u} (expected {lp})")
        pages.append(_page(u, fetchlog.parse(lp), store, name))
    orphans = _attach_orphans(pages, store)
    for p in pages:
        total = sum(o.size for o in p.objects)
        if total > MAX_PAGE_BYTES:
            raise PltError(
                f"{pages_file}: {p.url}: {total} bytes in its objects: a page is at most {MAX_PAGE_BYTES} bytes (4 GiB)"
            )
    report = {"orphans": orphans, "pages": {}}
    for p in pages:
        src = deps.complete(p)
        report["pages"][p.url] = {"estimated_size": sum(1 for o in p.objects if o.body is None), "initiators": src}
    return pages, report
