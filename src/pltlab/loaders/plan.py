"""The built-in loader's plan: which objects to fetch, from where, after which parent."""

from pltlab.archive import synth
from pltlab.archive.kinds import kind
from pltlab.archive.model import Obj, Page


def effective_schemes(page: Page, https_hosts) -> dict[int, str]:
    """The scheme a browser uses for each object (by ``id(obj)``) when it upgrades the hosts in
    ``https_hosts`` to https (HSTS preload) and loads the synthesized page: an upgraded or
    https-recorded object is https; the main document keeps its recorded scheme otherwise; an
    http sub-resource follows the scheme of the http document or stylesheet that references it
    (scheme-relative references, synth.ref), of the document a script runs in (its requests
    resolve against location.protocol), of the document an https stylesheet applies to (mixed
    content), or of the https document referencing it (upgrade-insecure-requests); a redirect
    target follows its redirect (scheme-relative Location)."""
    https_hosts = {h.lower() for h in https_hosts}
    main = page.objects[0] if page.objects else None
    memo: dict[int, str] = {}

    def scheme(o: Obj) -> str:
        if id(o) in memo:
            return memo[id(o)]
        memo[id(o)] = o.scheme  # cycle guard
        if o.scheme == "https" or o.host in https_hosts:
            s = "https"
        elif o is main or o.scheme != "http":
            s = o.scheme
        elif o.initiator_type == "redirect":
            src = page.find(o.initiator) if o.initiator else None
            s = scheme(src) if src is not None else o.scheme
        else:
            base = synth.loader(page, o)
            k = kind(base.mime, base.url)
            if k == "js" or (k == "css" and base.scheme == "https"):
                base = synth.document_of(page, base)  # location.protocol / mixed content
            s = "https" if base is not o and scheme(base) == "https" else "http"
        memo[id(o)] = s
        return s

    return {id(o): scheme(o) for o in page.objects}


MODELS = ("archive", "chromium")
# Chromium's request scheduling (docs/loaders.md, "Built-in vs Chromium"): Blink's tight mode
# lets at most 2 low-priority requests of a frame run until its document's parser reaches <body>
# (ResourceLoadScheduler, kTightLimitForRendererSideResourceScheduler). After that, Chromium 156
# here had up to 19 images on the wire at once (amazon): no further limit (None); the network
# service's old 10-delayable-requests rule is not in effect.
TIGHT_LIMIT = 2
DELAYABLE_LIMIT: int | None = None


def _head(page: Page, doc: Obj) -> tuple[list[Obj], list[Obj]]:
    """(stylesheets, scripts) of a synthesized document's <head>, in document order
    (synth._html puts them there in its children's order)."""
    css, js = [], []
    for c in synth.children(page, doc):
        k = synth.ref_kind(page, c)
        (css if k == "css" else js if k == "js" else []).append(c)
    return css, js


def _blocking(page: Page, doc: Obj, upto: Obj | None) -> list[Obj]:
    """What a parser-blocking script ``upto`` of ``doc`` waits for before it runs (every earlier
    head script, every earlier stylesheet); with ``upto`` None: what the parser waits for before
    it reaches <body> (every head script and the stylesheets before the last one)."""
    order = [c for c in synth.children(page, doc) if synth.ref_kind(page, c) in ("css", "js")]
    if upto is None:
        last = max((i for i, c in enumerate(order) if synth.ref_kind(page, c) == "js"), default=-1)
        return order[:last + 1]
    return order[:order.index(upto)] if upto in order else []


def chromium_deps(page: Page, o: Obj) -> dict:
    """How Chromium reaches object ``o`` of the synthesized page (synth.py): ``parent`` (the
    object whose body references it, synth.loader; for a redirect target the redirect),
    ``at_first_byte`` (a reference in a synthesized document's markup: the preload scanner
    sees it with the first bytes), ``after`` (objects that must have arrived first: a script
    runs after the earlier head scripts and stylesheets; <iframe>, fonts, inline-script
    fetches and stylesheet images wait until the parser reached <body>), ``delayable``
    (low priority: images, and scripts a script inserts, which are async)."""
    out = {"parent": None, "at_first_byte": False, "after": [],
           "delayable": kind(o.mime, o.url) == "image"}
    if o is page.objects[0]:
        return out
    if o.initiator_type == "redirect" and o.initiator and page.find(o.initiator) is not None:
        out["parent"] = page.find(o.initiator)
        return out
    par = synth.loader(page, o)
    out["parent"] = par
    if par.body is not None:  # a recorded body: references anywhere in it
        return out
    pk, rk = kind(par.mime, par.url), synth.ref_kind(page, o)
    if pk == "js" and rk == "js":  # a script-inserted <script> is async: low priority, like images
        out["delayable"] = True
    if pk == "html":
        out["at_first_byte"] = True
        if rk not in ("css", "js", "image"):  # <iframe>, @font-face text, fetch() at the end
            out["after"] = _blocking(page, par, None)
    elif pk == "js":
        doc = synth.loader(page, par)
        if kind(doc.mime, doc.url) == "html" and doc.body is None and par in _head(page, doc)[1]:
            out["after"] = _blocking(page, doc, par)  # parser-blocking: runs in order
    elif pk == "css" and rk in ("image", "font"):
        doc = synth.document_of(page, par)
        if doc.body is None:
            out["after"] = _blocking(page, doc, None)  # the element it styles is in <body>
    return out


def frame_of(page: Page, o: Obj) -> Obj:
    """The synthesized document whose frame requests ``o`` (Chromium schedules low-priority
    requests per frame): the document that references it, the one its script runs in or its
    stylesheet applies to; a redirect target's is its redirect's."""
    cur, seen = o, set()
    while cur.initiator_type == "redirect" and cur.initiator and id(cur) not in seen:
        seen.add(id(cur))
        src = page.find(cur.initiator)
        if src is None:
            break
        cur = src
    if cur is page.objects[0]:
        return cur
    return synth.document_of(page, synth.loader(page, cur))


def _tight_phases(page: Page, objs: list[Obj], out: list[dict], pos: dict, main: Obj,
                  cal: dict | None) -> list[dict]:
    """Tight phases of the frames other than the main document's (whose phase is the plan's
    ``tight_until``): per synthesized document with delayable requests, until its head scripts
    and stylesheets arrived (+ its calibrated delay); sets each delayable object's
    ``tight_phase``."""
    phases, index = [], {}
    delays = (cal or {}).get("frame_tight_delay_ms") or {}
    for o, d in zip(objs, out):
        if not d.get("delayable"):
            continue
        doc = frame_of(page, o)
        if doc is main or doc.body is not None or kind(doc.mime, doc.url) != "html" or id(doc) not in pos:
            continue
        if id(doc) not in index:
            until = sorted({pos[id(c)] for c in _blocking(page, doc, None) if id(c) in pos})
            index[id(doc)] = len(phases)
            phases.append({"until": until, "delay_ms": float(delays.get(doc.url, 0.0)), "doc": pos[id(doc)]})
        d["tight_phase"] = index[id(doc)]
    return phases


def plan_objects(page: Page, host_ips: dict[str, str]) -> list[Obj]:
    """The page's objects the plan fetches, in plan order (plan index i = element i)."""
    return [o for o in page.objects if o.scheme in ("http", "https") and o.host in host_ips]


def calibration(page: Page) -> dict | None:
    """The page's stored compute calibration (loaders.calibrate), checked, or None."""
    from pltlab.loaders.calibrate import PAGE_KEY, check_calibration

    cal = page.extras.get(PAGE_KEY)
    return None if cal is None else check_calibration(cal, page.url)


def tail_ms(page: Page, model: str, calibrated: bool = True) -> float | None:
    """The calibrated time from the last response to loadEventEnd that model="chromium" adds to
    the PLT, or None (other model, no calibration, or not wanted)."""
    cal = calibration(page) if model == "chromium" and calibrated else None
    return None if cal is None else float(cal["tail_ms"])


def build(page: Page, host_ips: dict[str, str], tfo: bool, ca: str | None = None,
          max_conns_per_host: int = 6, compute_delays: bool = False, dns_delay_ms: float = 0.0,
          timeout_s: float = 120.0, https_hosts=None, model: str = "archive",
          calibrated: bool = True) -> dict:
    """``https_hosts``: hosts a browser upgrades to https by itself (pltlab.chromium.hsts); the
    objects it would then load over https are fetched over https (port 443 for a recorded 80),
    as Chromium does. None: every object on its recorded scheme.

    ``model``: "archive" = each object requestable at its recorded initiator's last byte, no
    priorities (the TFO paper's loader); "chromium" = the dependencies Chromium sees in the
    replayed page and its scheduling of low-priority requests (chromium_deps, TIGHT_LIMIT,
    DELAYABLE_LIMIT; docs/loaders.md).

    ``calibrated``: with model "chromium" and a page calibrated by loaders.calibrate, each
    object's ``delay_ms`` is its measured compute delay (Obj.extras["compute_ms"]; the load-event
    tail is not part of the plan: tail_ms())."""
    if model not in MODELS:
        raise ValueError(f"unknown loader model {model!r}: one of {', '.join(MODELS)}")
    from pltlab.loaders.calibrate import KEY, check_delay

    cal = calibration(page) if model == "chromium" and calibrated else None
    use_cal = cal is not None
    objs = plan_objects(page, host_ips)
    schemes = effective_schemes(page, https_hosts) if https_hosts is not None else {}
    index = {}
    for i, o in enumerate(objs):
        index.setdefault(o.url.split("#", 1)[0], i)
    pos = {id(o): i for i, o in enumerate(objs)}
    out = []
    for i, o in enumerate(objs):
        parent = None
        extra = {}
        if model == "chromium" and i > 0:
            d = chromium_deps(page, o)
            p = pos.get(id(d["parent"])) if d["parent"] is not None else None
            parent = p if p is not None and p != i else 0
            after = sorted({pos[id(a)] for a in d["after"] if id(a) in pos} - {i, parent})
            extra = {"at_first_byte": d["at_first_byte"] and p is not None, "after": after,
                     "delayable": d["delayable"]}
        elif model == "chromium":
            extra = {"at_first_byte": False, "after": [], "delayable": False}
        elif i > 0:
            p = index.get((o.initiator or "").split("#", 1)[0])
            parent = p if p is not None and p != i else 0
        delay = 0.0
        if use_cal:
            if o.extras.get(KEY) is not None:
                delay = check_delay(o.extras[KEY], f"{o.url}: {KEY}")
        elif compute_delays and parent is not None:
            par = objs[parent]
            if o.start_ms is not None and par.end_ms is not None:
                delay = max(0.0, o.start_ms - par.end_ms)
        url, port, sch = o.url.split("#", 1)[0], o.port, schemes.get(id(o), o.scheme)
        if sch != o.scheme:  # upgraded: https://host/... on 443 (or the recorded other port)
            url = "https" + url[len(o.scheme):]
            port = 443 if o.port == 80 else o.port
        out.append({"url": url, "method": o.method, "host": o.host,
                    "ip": host_ips[o.host], "port": port, "tls": sch == "https",
                    "parent": parent, "delay_ms": round(delay, 3), **extra})
    _check_acyclic(out)
    plan = {"objects": out, "max_conns_per_host": max_conns_per_host, "tfo": tfo,
            "dns_delay_ms": dns_delay_ms, "ca": ca, "timeout_s": timeout_s}
    if model == "chromium":
        main = synth.main_document(page)
        tight = [pos[id(c)] for c in _blocking(page, main, None) if id(c) in pos] \
            if main.body is None else []
        plan.update(delayable_limit=DELAYABLE_LIMIT, tight_limit=TIGHT_LIMIT,
                    tight_until=tight or [0],
                    tight_phases=_tight_phases(page, objs, out, pos, main, cal))
        if cal:  # the renderer's time from the last head object to <body> (loaders.calibrate)
            plan["tight_delay_ms"] = float(cal.get("tight_delay_ms") or 0.0)
    return plan


def _check_acyclic(objs: list[dict]) -> None:
    """Every object must reach the main document through its parents (and "after" lists
    must not close a cycle either)."""
    if not any(o.get("after") for o in objs):
        return _check_parents(objs)
    state: dict[int, int] = {}

    def visit(i: int) -> None:
        state[i] = 1
        for j in ([objs[i]["parent"]] if objs[i]["parent"] is not None else []) + objs[i].get("after", []):
            if state.get(j) == 1:
                raise ValueError(f"dependency cycle through {objs[j]['url']}")
            if j not in state:
                visit(j)
        state[i] = 2

    for i in range(len(objs)):
        if i not in state:
            visit(i)


def _check_parents(objs: list[dict]) -> None:
    for i in range(len(objs)):
        seen, cur = set(), i
        while objs[cur]["parent"] is not None:
            if cur in seen:
                raise ValueError(f"dependency cycle through {objs[i]['url']}")
            seen.add(cur)
            cur = objs[cur]["parent"]
