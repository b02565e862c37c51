"""The built-in loader's plan: which objects to fetch, from where, after which parent."""

from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urljoin, urlsplit

from pltlab import gcpause, protocols
from pltlab.archive import synth
from pltlab.archive.calibration import KEY, NET_KEYS, check_delay
from pltlab.archive.calibration import stored as calibration_of
from pltlab.archive.model import Obj, Page
from pltlab.archive.resource_kinds import kind
from pltlab.dataplane import ABSENT, document
from pltlab.errors import PltError


def effective_schemes(page: Page, https_hosts, st: synth.Structure | None = None) -> dict[int, str]:
    """The scheme a browser uses for each object (by ``id(obj)``) when it upgrades the hosts in
    ``https_hosts`` to https (HSTS preload) and loads the synthesized page: an upgraded or
    https-recorded object is https; the main document keeps its recorded scheme otherwise; an
    http sub-resource follows the scheme of the document or http stylesheet that references it
    (scheme-relative references, synth.ref), of the document a script runs in (its requests
    resolve against location.protocol), or of the document an https stylesheet applies to (mixed
    content); a redirect target follows its redirect (scheme-relative Location). ``st``: the
    page's synth.Structure."""
    st = st if st is not None else synth.Structure(page)
    https_hosts = {h.lower() for h in https_hosts}
    main = page.objects[0] if page.objects else None
    memo: dict[int, str] = {}

    def step(o: Obj) -> tuple[str, Obj | str]:
        """("is", scheme), or ("as", x) / ("https if", x): follows the scheme of object x."""
        if o.scheme == "http" and o.port != 80:
            return "is", "http"  # an http origin on another port has no https one in the replay
        if o.scheme == "https" or o.host in https_hosts:
            return "is", "https"
        if o is main or o.scheme != "http":
            return "is", o.scheme
        if o.initiator_type == "redirect":
            src = st.find(o.initiator) if o.initiator else None
            return ("as", src) if src is not None else ("is", o.scheme)
        base = st.loader(o)
        k = kind(base.mime, base.url)
        if k == "js" or (k == "css" and base.scheme == "https"):
            base = st.document_of(base)  # location.protocol / mixed content
        return ("https if", base) if base is not o else ("is", "http")

    def scheme(o: Obj) -> str:
        # Down the chain of objects whose scheme each follows (iterative: chains can be long),
        # then back up. An object met again on the way (a cycle) counts as its recorded scheme.
        path, cur = [], o
        while id(cur) not in memo:
            memo[id(cur)] = cur.scheme  # cycle guard
            how, nxt = step(cur)
            if how == "is":
                memo[id(cur)] = nxt
                break
            path.append((cur, how))
            cur = nxt
        s = memo[id(cur)]
        for obj, how in reversed(path):
            s = s if how == "as" else ("https" if s == "https" else "http")
            memo[id(obj)] = s
        return memo[id(o)]

    return {id(o): scheme(o) for o in page.objects}


# The plan's parts, as rust/src/loader/plan.rs reads them (`pltlab-dp schema plan`; docs/loaders.md);
# ABSENT: not written, the loader's default (plans keep the keys they always had: their digests,
# tests/test_scale.py, stay as they were).


@dataclass(kw_only=True)
class PlanObject:
    """One object to fetch: where from, after which parent (an index) and compute delay."""

    url: str
    method: str
    host: str
    ip: str
    port: int
    tls: bool
    parent: int | None
    delay_ms: float
    # the Chromium model's dependencies (chromium_deps) and tight phase (_tight_phases)
    at_first_byte: bool = ABSENT
    after: list[int] = ABSENT
    delayable: bool = ABSENT
    tight_phase: int = ABSENT
    protocol: str = ABSENT  # "h2" or "h3" (QUIC, needs tls; default "http/1.1")
    priority: str = ABSENT  # the RFC 9218 header Chromium sends over h2


@dataclass(kw_only=True)
class TightPhase:
    """A frame's tight mode: until the objects ``until`` arrived and ``delay_ms`` more; ``doc``:
    the frame's document (read back by loaders.compute_model, not by the loader)."""

    until: list[int]
    delay_ms: float
    doc: int


@dataclass(kw_only=True)
class Plan:
    """`pltlab-dp load --plan`."""

    objects: list[PlanObject]
    max_conns_per_host: int
    tfo: bool
    tfo_tls: bool = ABSENT  # false: TFO on plain-http connections only (default true: on all)
    dns_delay_ms: float
    ca: str | None
    timeout_s: float
    tls_mode: str = ABSENT  # "resume", "0rtt" (default "full")
    # the loader's side of QUIC (knobs quic_cc, quic_icw; only where some object goes over h3)
    quic_cc: str = ABSENT
    quic_icw: int = ABSENT
    # the Chromium model's network stack beyond the link (knob network_stack): before each new connection
    conn_setup_delay_ms: float = ABSENT
    # the Chromium model's scheduling of low-priority requests
    delayable_limit: int | None = ABSENT
    tight_limit: int | None = ABSENT
    tight_until: list[int] = ABSENT
    tight_phases: list[TightPhase] = ABSENT
    tight_delay_ms: float = ABSENT


MODELS = ("archive", "chromium")
# knob network_stack: "off", or "calibrated": the Chromium model adds the calibration's measured
# network-stack times (archive.calibration.NET_KEYS): a set-up delay before each new connection and
# a first-byte delay on each request
NETWORK_STACK = ("off", "calibrated")
NETWORK_STACK_CALIBRATED = "calibrated"
# Bytes of data a SYN carries (one MSS on the emulated link): a ClientHello larger than this does not
# fit, so TFO saves no round trip over TLS (docs/loaders.md "TFO in Chromium"; knob client_hello).
SYN_DATA_MAX = 1420


def tfo_over_tls(client_hello: int | None) -> bool:
    """Does TFO save a round trip on a TLS connection whose ClientHello has ``client_hello``
    bytes (None: the built-in loader's own, rustls's ~300 B)?"""
    return client_hello is None or client_hello <= SYN_DATA_MAX


# Chromium's request scheduling (docs/loaders.md, "Built-in vs Chromium"): Blink's tight mode
# lets at most 2 low-priority requests of a frame run until its document's parser reaches <body>
# (ResourceLoadScheduler, kTightLimitForRendererSideResourceScheduler). After that, Chromium 156
# here had up to 19 images on the wire at once (amazon): no further limit (None); the network
# service's old 10-delayable-requests rule is not in effect.
TIGHT_LIMIT = 2
DELAYABLE_LIMIT: int | None = None


class _Heads:
    """The <head> of each synthesized document (synth._html puts its stylesheets and scripts
    there in its children's order), worked out once per document: for a page that does not
    change meanwhile."""

    def __init__(self, st: synth.Structure):
        self.st = st
        self._order: dict[int, tuple[list[Obj], dict[int, int], int]] = {}
        self._js: dict[int, tuple[list[Obj], set[int]]] = {}
        self._equal: dict[tuple[int, int], bool] = {}

    def order(self, doc: Obj) -> tuple[list[Obj], dict[int, int], int]:
        """(head stylesheets and scripts in document order, position by id, last script's
        position or -1)."""
        got = self._order.get(id(doc))
        if got is None:
            order = [c for c in self.st.kids(doc) if self.st.ref_kind(c) in ("css", "js")]
            last = max((i for i, c in enumerate(order) if self.st.ref_kind(c) == "js"), default=-1)
            got = self._order[id(doc)] = (order, {id(c): i for i, c in enumerate(order)}, last)
        return got

    def scripts(self, doc: Obj) -> tuple[list[Obj], set[int]]:
        got = self._js.get(id(doc))
        if got is None:
            js = [c for c in self.st.kids(doc) if self.st.ref_kind(c) == "js"]
            got = self._js[id(doc)] = (js, {id(c) for c in js})
        return got

    def has_script(self, doc: Obj, o: Obj) -> bool:
        """Is ``o`` one of ``doc``'s head scripts (as list membership: this object, or one
        equal to it by value)."""
        js, ids = self.scripts(doc)
        if id(o) in ids:
            return True
        key = (id(doc), id(o))  # not by identity: compare by value once per (doc, object)
        if key not in self._equal:
            self._equal[key] = o in js
        return self._equal[key]

    def blocking(self, doc: Obj, upto: Obj | None) -> list[Obj]:
        """What a parser-blocking script ``upto`` of ``doc`` waits for before it runs (every
        earlier head script, every earlier stylesheet); with ``upto`` None: what the parser
        waits for before it reaches <body> (every head script and the stylesheets before the
        last one)."""
        order, pos, last = self.order(doc)
        if upto is None:
            return order[: last + 1]
        i = pos.get(id(upto))
        if i is None and upto in order:  # an equal object, not this one: the first equal
            i = order.index(upto)
        return order[:i] if i is not None else []


def chromium_deps(page: Page, o: Obj, heads: _Heads | None = None) -> dict:
    """How Chromium reaches object ``o`` of the synthesized page (synth.py): ``parent`` (the
    object whose body references it, synth.loader; for a redirect target the redirect),
    ``at_first_byte`` (a reference in a synthesized document's markup: the preload scanner
    sees it with the first bytes), ``after`` (objects that must have arrived first: a script
    runs after the earlier head scripts and stylesheets; <iframe>, fonts, inline-script
    fetches and stylesheet images wait until the parser reached <body>), ``delayable``
    (low priority: images, and scripts a script inserts, which are async). ``heads``: shared
    by the look-ups of one unchanged page."""
    heads = heads if heads is not None else _Heads(synth.Structure(page))
    st = heads.st
    out = {"parent": None, "at_first_byte": False, "after": [], "delayable": kind(o.mime, o.url) == "image"}
    if o is page.objects[0]:
        return out
    if o.initiator_type == "redirect" and o.initiator and st.find(o.initiator) is not None:
        out["parent"] = st.find(o.initiator)
        return out
    par = st.loader(o)
    out["parent"] = par
    if par.body is not None:  # a recorded body: references anywhere in it
        return out
    pk, rk = kind(par.mime, par.url), st.ref_kind(o)
    if pk == "js" and rk == "js":  # a script-inserted <script> is async: low priority, like images
        out["delayable"] = True
    if pk == "html":
        out["at_first_byte"] = True
        if rk not in ("css", "js", "image"):  # <iframe>, @font-face text, fetch() at the end
            out["after"] = heads.blocking(par, None)
    elif pk == "js":
        doc = st.loader(par)
        if kind(doc.mime, doc.url) == "html" and doc.body is None and heads.has_script(doc, par):
            out["after"] = heads.blocking(doc, par)  # parser-blocking: runs in order
    elif pk == "css" and rk in ("image", "font"):
        doc = st.document_of(par)
        if doc.body is None:
            out["after"] = heads.blocking(doc, None)  # the element it styles is in <body>
    return out


# What Chromium 156 (Debian's) sends as the RFC 9218 `priority` header over h2 (docs/loaders.md,
# "HTTP/2 and priorities"): the urgency of the request's priority (CDP's ResourcePriority; u=3 is
# the default and left out) and "i" for incremental resource types (documents, images, fetch/XHR,
# media); scripts, stylesheets and fonts are not incremental. No header when both are default.
URGENCY = {"VeryHigh": 0, "High": 1, "Medium": 2, "Low": 3, "VeryLow": 4}
_PRIORITY = {"html": "VeryHigh", "css": "VeryHigh", "font": "High", "js": "High", "json": "High", "image": "Low"}
_INCREMENTAL = {"html", "image", "json", "other"}
BOOSTED_IMAGES = 5  # Blink gives the first images of a document Medium priority instead of Low


def priority_header(resource_priority: str, incremental: bool) -> str | None:
    """The `priority` header Chromium sends for a request of this CDP priority, or None."""
    u = URGENCY[resource_priority]
    parts = ([f"u={u}"] if u != 3 else []) + (["i"] if incremental else [])
    return ", ".join(parts) or None


def chromium_priority(page: Page, o: Obj, st: synth.Structure, delayable: bool, images: dict[int, int]) -> str | None:
    """Chromium's `priority` header for object ``o`` of the replayed page (by the kind of its
    reference, synth.ref_kind): documents and frames u=0, i; stylesheets u=0; fonts, parser-
    blocking scripts u=1; fetch()es u=1, i; the first BOOSTED_IMAGES images a document
    references u=2, i, other images i; async (script-inserted) scripts none (Low: u=3).
    ``images``: counts per document, shared by the calls of one plan, in plan order."""
    rk = "html" if o is page.objects[0] else st.ref_kind(o)
    level = _PRIORITY.get(rk, "Low")
    if rk == "js" and delayable:
        level = "Low"
    elif rk == "image":
        par = st.loader(o)
        if kind(par.mime, par.url) == "html":
            n = images[id(par)] = images.get(id(par), 0) + 1
            if n <= BOOSTED_IMAGES:
                level = "Medium"
    return priority_header(level, rk in _INCREMENTAL)


def frame_of(page: Page, o: Obj, st: synth.Structure | None = None) -> Obj:
    """The synthesized document whose frame requests ``o`` (Chromium schedules low-priority
    requests per frame): the document that references it, the one its script runs in or its
    stylesheet applies to; a redirect target's is its redirect's."""
    st = st if st is not None else synth.Structure(page)
    cur, seen = o, set()
    while cur.initiator_type == "redirect" and cur.initiator and id(cur) not in seen:
        seen.add(id(cur))
        src = st.find(cur.initiator)
        if src is None:
            break
        cur = src
    if cur is page.objects[0]:
        return cur
    return st.document_of(st.loader(cur))


def _tight_phases(
    page: Page, objs: list[Obj], out: list[PlanObject], pos: dict, main: Obj, cal: dict | None, heads: _Heads
) -> list[TightPhase]:
    """Tight phases of the frames other than the main document's (whose phase is the plan's
    ``tight_until``): per synthesized document with delayable requests, until its head scripts
    and stylesheets arrived (+ its calibrated delay); sets each delayable object's
    ``tight_phase``."""
    phases, index = [], {}
    delays = (cal or {}).get("frame_tight_delay_ms") or {}
    for o, d in zip(objs, out):
        if not d.delayable:
            continue
        doc = frame_of(page, o, heads.st)
        if doc is main or doc.body is not None or kind(doc.mime, doc.url) != "html" or id(doc) not in pos:
            continue
        if id(doc) not in index:
            until = sorted({pos[id(c)] for c in heads.blocking(doc, None) if id(c) in pos})
            index[id(doc)] = len(phases)
            phases.append(TightPhase(until=until, delay_ms=float(delays.get(doc.url, 0.0)), doc=pos[id(doc)]))
        d.tight_phase = index[id(doc)]
    return phases


def upgrade_hops(page: Page, schemes: dict[int, str]) -> set[int]:
    """``id``s of the http objects that only redirect to their own URL over https (HSTS's
    "307 Internal Redirect" in Chrome's HARs, or a server's upgrade) and that the browser upgrades
    by itself (``schemes``: effective_schemes with its https hosts; empty: none): it asks for the
    https URL at once, so the hop is never on the wire."""
    out = set()
    for o in page.objects:
        if o.scheme != "http" or schemes.get(id(o)) != "https" or not 300 <= o.status < 400 or not o.redirect_url:
            continue
        if _same_url(urljoin(o.url, o.redirect_url), "https" + o.url[4:]):
            out.add(id(o))
    return out


def _same_url(a: str, b: str) -> bool:
    def norm(u: str) -> tuple:
        s = urlsplit(u.split("#", 1)[0])
        port = s.port or {"http": 80, "https": 443}.get(s.scheme)
        if (s.scheme, port) == ("https", 80):  # http://host/ upgraded: https://host/ (443)
            port = 443
        return s.scheme, (s.hostname or "").lower(), port, s.path or "/", s.query

    return norm(a) == norm(b)


def plan_objects(page: Page, host_ips: dict[str, str], https_hosts=None, hops: set[int] | None = None) -> list[Obj]:
    """The page's objects the plan fetches, in plan order (plan index i = element i); with
    ``https_hosts`` (hosts upgraded to https: give those the plan was built with) without the hops
    the upgrade makes internal (upgrade_hops; ``hops``: those ids, when already known)."""
    if hops is None:
        hops = upgrade_hops(page, effective_schemes(page, https_hosts)) if https_hosts is not None else set()
    return [o for o in page.objects if o.scheme in ("http", "https") and o.host in host_ips and id(o) not in hops]


def calibration(page: Page) -> dict | None:
    """The page's stored compute calibration (archive.calibration), checked, or None."""
    return calibration_of(page)


def tail_ms(page: Page, model: str, calibrated: bool = True) -> float | None:
    """The calibrated time from the last response to loadEventEnd that model="chromium" adds to
    the PLT, or None (other model, no calibration, or not wanted)."""
    cal = calibration(page) if model == "chromium" and calibrated else None
    return None if cal is None else float(cal["tail_ms"])


@gcpause.paused()  # a plan of 20,000 objects at once (pltlab.gcpause)
def build(
    page: Page,
    host_ips: dict[str, str],
    tfo: bool,
    ca: str | None = None,
    max_conns_per_host: int = 6,
    compute_delays: bool = False,
    dns_delay_ms: float = 0.0,
    timeout_s: float = 120.0,
    https_hosts=None,
    model: str = "archive",
    calibrated: bool = True,
    offered: Mapping[str, protocols.Protocol] | None = None,
    tls_mode: str = "full",
    quic: Mapping | None = None,
    tfo_tls: bool = True,
    network_stack: bool = False,
) -> dict:
    """``tls_mode``: "full", "resume" or "0rtt" (the loader visits the page once before the load
    for the session tickets; see docs/loaders.md). Only a mode other than full is written into
    the plan, so that earlier plans and their digests stay as they were.

    ``offered``: what each replay address's https offers (address -> pltlab.protocols row;
    absent: HTTP/1.1): objects fetched over https from an address offering a multiplexed protocol
    say it (``protocol`` "h2": the loader offers that ALPN and multiplexes if the server picks
    it) and, with model "chromium", carry Chromium's ``priority`` header (chromium_priority).

    ``https_hosts``: hosts a browser upgrades to https by itself (pltlab.loaders.browser.hsts); the
    objects it would then load over https are fetched over https (port 443 for a recorded 80),
    as Chromium does. None: every object on its recorded scheme.

    ``model``: "archive" = each object requestable at its recorded initiator's last byte, no
    priorities (the TFO paper's loader); "chromium" = the dependencies Chromium sees in the
    replayed page and its scheduling of low-priority requests (chromium_deps, TIGHT_LIMIT,
    DELAYABLE_LIMIT; docs/loaders.md).

    ``calibrated``: with model "chromium" and a page calibrated by loaders.compute_model, each
    object's ``delay_ms`` is its measured compute delay (Obj.extras["compute_ms"]; the load-event
    tail is not part of the plan: tail_ms()).

    ``quic``: QUIC's settings for the loader's side (``cc``, ``icw``: knobs quic_cc, quic_icw),
    written only when some object goes over h3 (so that plans without h3 stay as they were).

    ``tfo_tls``: with ``tfo``, TFO on TLS connections too (False: plain http only, as a client
    whose ClientHello does not fit in a SYN: tfo_over_tls; written only when False).

    ``network_stack``: with model "chromium" and a calibration, also Chromium's network stack
    beyond the link as the calibration measured it (``net_setup_ms`` before each new connection,
    ``net_ttfb_ms`` added to each object's delay: the request goes that much later, as its first
    byte came that much later); a calibration without them is an error naming the page.

    Returns the plan as JSON data (a Plan, dataplane.document)."""
    if model not in MODELS:
        raise ValueError(f"unknown loader model {model!r}: one of {', '.join(MODELS)}")
    cal = calibration(page) if model == "chromium" and calibrated else None
    use_cal = cal is not None
    ttfb = 0.0
    if network_stack:
        if cal is None or any(cal.get(k) is None for k in NET_KEYS):
            why = "no calibration with model chromium" if cal is None else "its calibration has no network-stack times"
            raise PltError(
                f"{page.id or page.url}: network_stack calibrated needs Chromium's measured network stack: "
                f"{why} (pltlab calibrate measures it since 2026-11-28)"
            )
        ttfb = float(cal["net_ttfb_ms"])
    heads = _Heads(synth.Structure(page))  # the page does not change while it is planned
    schemes = effective_schemes(page, https_hosts, heads.st) if https_hosts is not None else {}
    skipped = upgrade_hops(page, schemes)
    objs = plan_objects(page, host_ips, hops=skipped)
    index = {}
    for i, o in enumerate(objs):
        index.setdefault(o.url.split("#", 1)[0], i)
    pos = {id(o): i for i, o in enumerate(objs)}
    # hops not fetched (upgrade_hops): what depended on one depends on what it depended on
    hops = {id(o): o for o in page.objects if id(o) in skipped}
    hop_urls = {o.url.split("#", 1)[0]: o for o in hops.values()}

    def archive_parent(initiator: str | None) -> int | None:
        url, seen = (initiator or "").split("#", 1)[0], set()
        while url in hop_urls and url not in seen:
            seen.add(url)
            url = (hop_urls[url].initiator or "").split("#", 1)[0]
        return index.get(url)

    def chromium_parent(x: Obj | None) -> int | None:
        seen = set()
        while x is not None and id(x) in hops and id(x) not in seen:
            seen.add(id(x))
            x = chromium_deps(page, x, heads)["parent"]
        return pos.get(id(x)) if x is not None else None

    images: dict[int, int] = {}  # images each document referenced so far (Chromium boosts the first 5)
    out = []
    for i, o in enumerate(objs):
        parent = None
        extra = {}
        if model == "chromium" and i > 0:
            d = chromium_deps(page, o, heads)
            p = chromium_parent(d["parent"])
            parent = p if p is not None and p != i else 0
            after = sorted({pos[id(a)] for a in d["after"] if id(a) in pos} - {i, parent})
            extra = dict(at_first_byte=d["at_first_byte"] and p is not None, after=after, delayable=d["delayable"])
        elif model == "chromium":
            extra = dict(at_first_byte=False, after=[], delayable=False)
        elif i > 0:
            p = archive_parent(o.initiator)
            parent = p if p is not None and p != i else 0
        delay = 0.0
        if use_cal:
            if o.extras.get(KEY) is not None:
                delay = check_delay(o.extras[KEY], f"{o.url}: {KEY}")
        elif compute_delays and parent is not None:
            par = objs[parent]
            if o.start_ms is not None and par.end_ms is not None:
                delay = max(0.0, o.start_ms - par.end_ms)
        delay += ttfb
        url, port, sch = o.url.split("#", 1)[0], o.port, schemes.get(id(o), o.scheme)
        if sch != o.scheme:  # upgraded: https://host/... on 443 (or the recorded other port)
            url = "https" + url[len(o.scheme) :]
            port = 443 if o.port == 80 else o.port
        po = PlanObject(
            url=url,
            method=o.method,
            host=o.host,
            ip=host_ips[o.host],
            port=port,
            tls=sch == "https",
            parent=parent,
            delay_ms=round(delay, 3),
            **extra,
        )
        proto = offered.get(po.ip) if offered and sch == "https" else None
        if proto is not None and proto.multiplexed:  # absent: http/1.1 (plans without h2 unchanged)
            po.protocol = proto.alpn
            if model == "chromium":  # Chromium sends the header over h2 only (docs/loaders.md)
                prio = chromium_priority(page, o, heads.st, extra.get("delayable", False), images)
                if prio:
                    po.priority = prio
        out.append(po)
    plan = Plan(
        objects=out,
        max_conns_per_host=max_conns_per_host,
        tfo=tfo,
        dns_delay_ms=dns_delay_ms,
        ca=ca,
        timeout_s=timeout_s,
    )
    if tls_mode != "full":
        plan.tls_mode = tls_mode
    if not tfo_tls:
        plan.tfo_tls = False
    if network_stack and float(cal["net_setup_ms"]) > 0:
        plan.conn_setup_delay_ms = float(cal["net_setup_ms"])
    if quic and any(o.protocol == "h3" for o in out):
        if quic.get("cc") is not None:
            plan.quic_cc = quic["cc"]
        if quic.get("icw") is not None:
            plan.quic_icw = int(quic["icw"])
    if model == "chromium":
        main = heads.st.main_document()
        tight = [pos[id(c)] for c in heads.blocking(main, None) if id(c) in pos] if main.body is None else []
        plan.delayable_limit = DELAYABLE_LIMIT
        plan.tight_limit = TIGHT_LIMIT
        plan.tight_until = tight or [0]
        plan.tight_phases = _tight_phases(page, objs, out, pos, main, cal, heads)
        if cal:  # the renderer's time from the last head object to <body> (loaders.compute_model)
            plan.tight_delay_ms = float(cal.get("tight_delay_ms") or 0.0)
    doc = document(plan)
    _check_acyclic(doc["objects"])
    return doc


def _check_acyclic(objs: list[dict]) -> None:
    """Every object must reach the main document through its parents (and "after" lists
    must not close a cycle either). Depth-first, without recursion (chains can be long)."""
    if not any(o.get("after") for o in objs):
        return _check_parents(objs)
    state: dict[int, int] = {}  # 1: on the current path, 2: done

    def edges(i: int) -> list[int]:
        return ([objs[i]["parent"]] if objs[i]["parent"] is not None else []) + objs[i].get("after", [])

    for root in range(len(objs)):
        if root in state:
            continue
        state[root] = 1
        stack = [(root, iter(edges(root)))]
        while stack:
            i, todo = stack[-1]
            for j in todo:
                if state.get(j) == 1:
                    raise ValueError(f"dependency cycle through {objs[j]['url']}")
                if j not in state:
                    state[j] = 1
                    stack.append((j, iter(edges(j))))
                    break
            else:
                state[i] = 2
                stack.pop()


def _check_parents(objs: list[dict]) -> None:
    """Each object's parent chain ends (at an object without a parent); the first object whose
    chain loops is named. Objects already known to end are not walked again."""
    ends: set[int] = set()
    for i in range(len(objs)):
        path, seen, cur = [], set(), i
        while cur not in ends and objs[cur]["parent"] is not None:
            if cur in seen:
                raise ValueError(f"dependency cycle through {objs[i]['url']}")
            seen.add(cur)
            path.append(cur)
            cur = objs[cur]["parent"]
        ends.update(path)
        ends.add(cur)
