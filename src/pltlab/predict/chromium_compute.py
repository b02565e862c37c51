"""A general model of Chromium's compute (issue 27 item 2): per-object compute delays and the
load-event tail learned from the compute calibrations of *other* pages (loaders.compute_model,
`pltlab calibrate`), so that a page never loaded in Chromium gets a synthetic calibration the
built-in plan with model "chromium" consumes (`pltlab predict --client chromium`, and `pltlab run
--model chromium` on the page it writes).

Per object of the plan (model "chromium"), log(1 + compute delay in ms) is a linear function of
its features: its kind (document, script, stylesheet, image, font, other; the main document on
its own), log(1 + KB) of its decoded body per kind group, its place (render-blocking in the main
document's head, delayable = low priority, seen at its parent's first byte, waiting for earlier
objects and the KB of script among them, inserted by a script (and that script's KB) or
referenced by a stylesheet, its depth in the dependency graph) and the page's totals
(objects, KB of script). The fit is robust least squares in log space (scipy's least_squares with
a soft-L1 loss, a small ridge term so that a kind absent from the fit stays near 0), each page
weighing as much as any other (an object weighs 1/objects of its page). The tail (loadEventEnd -
the last response) and the main frame's tight-mode delay are fitted the same way per page, from
the page's totals (no per-frame tight delays).

What the calibration does not see (Chromium's work before the navigation's request, its network
stack, the main thread's contention at short RTTs) is not here: the predicted PLT combines the
network-bound estimate these delays give with a CPU-bound one (pltlab.predict.chromium_plt, its
parameters under "plt", fitted on other pages' ground-truth loads).

The fit is pltlab.experiments.compute_fit's (it refuses, folds.check, a fit that holds the site
of a page it is to judge); this module applies its parameters. They are a small JSON document that says what they were fitted on (pages, date, machine, browser);
the package ships one fitted on every page of the public set (``shipped``)."""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping
from importlib import resources

from pltlab.archive import calibration as calib
from pltlab.archive.model import Page
from pltlab.archive.resource_kinds import kind
from pltlab.errors import PltError
from pltlab.loaders import plan as plans
from pltlab.net import names
from pltlab.predict import chromium_plt
from pltlab.replay import hosts as hostmap

VERSION = 2  # 2: the rest term gone, the PLT form ("plt") beside the delays
SHIPPED = "chromium_compute.json"  # package data beside this module
KINDS = ("html", "css", "js", "image", "font", "other")  # json and the rest: other
SIZE_GROUPS = {"js": "js", "css": "css", "html": "html"}  # the rest share one size term
OBJECT_FEATURES = (
    *(f"kind_{k}" for k in KINDS),
    "main",
    "log_kb_js",
    "log_kb_css",
    "log_kb_html",
    "log_kb_rest",
    "blocking",
    "delayable",
    "at_first_byte",
    "waits",
    "log_kb_js_waited",
    "from_script",
    "log_kb_parent_js",
    "from_stylesheet",
    "depth",
    "log_page_objects",
    "log_page_kb_js",
)
PAGE_FEATURES = ("one", "log_page_objects", "log_page_kb_js")


def kind_of(o) -> str:
    k = kind(o.mime, o.url)
    return k if k in KINDS else "other"


def _kb(o) -> float:
    return math.log1p(o.size / 1024)


def structure(page: Page) -> tuple[list, list[dict], dict]:
    """The page's plan objects (model "chromium", recorded schemes), their features and the page's
    own (PAGE_FEATURES)."""
    host_ips = {h: names.origin_ip(i) for h, i in hostmap.assign([page]).items()}
    plan = plans.build(page, host_ips, tfo=False, model="chromium", calibrated=False)
    objs = plans.plan_objects(page, host_ips)
    pos = plan["objects"]
    kinds = [kind_of(o) for o in objs]
    js_kb = sum(o.size for o, k in zip(objs, kinds) if k == "js") / 1024
    css_kb = sum(o.size for o, k in zip(objs, kinds) if k == "css") / 1024
    page_f = {
        "one": 1.0,
        "log_page_objects": math.log1p(len(objs)),
        "log_page_kb_js": math.log1p(js_kb),
        "log_page_kb_css": math.log1p(css_kb),
    }
    blocking = set(plan.get("tight_until") or []) - {0}
    depth = [0] * len(pos)
    for i, p in enumerate(pos):  # parents come first in plan order, else walk the chain
        j, d, seen = p.get("parent"), 0, set()
        while j is not None and j not in seen:
            seen.add(j)
            d += 1
            j = pos[j].get("parent")
        depth[i] = d
    rows = []
    for i, (o, p, k) in enumerate(zip(objs, pos, kinds)):
        f = dict.fromkeys(OBJECT_FEATURES, 0.0)
        f[f"kind_{k}"] = 1.0
        if i == 0:
            f = dict.fromkeys(OBJECT_FEATURES, 0.0)
            f["main"] = 1.0  # navigationStart -> its request: the browser's start, nothing else
            rows.append(f)
            continue
        f[f"log_kb_{SIZE_GROUPS.get(k, 'rest')}"] = _kb(o)
        f["blocking"] = float(i in blocking)
        f["delayable"] = float(bool(p.get("delayable")))
        f["at_first_byte"] = float(bool(p.get("at_first_byte")))
        after = p.get("after") or []
        f["waits"] = float(bool(after))
        f["log_kb_js_waited"] = math.log1p(sum(objs[a].size for a in after if kinds[a] == "js") / 1024)
        par = p.get("parent")
        pk = kinds[par] if par is not None else ""
        f["from_script"] = float(pk == "js")  # script-inserted: after the script ran
        f["log_kb_parent_js"] = _kb(objs[par]) if pk == "js" else 0.0
        f["from_stylesheet"] = float(pk == "css")  # an image or font: after style resolution
        f["depth"] = float(min(depth[i], 6))
        f["log_page_objects"] = page_f["log_page_objects"]
        f["log_page_kb_js"] = page_f["log_page_kb_js"]
        rows.append(f)
    return objs, rows, page_f


def check(params, where: str) -> dict:
    """Parameters read from a file: their shape checked (one PltError line naming ``where``)."""
    try:
        ok = params["version"] == VERSION and all(
            isinstance(params[part][k], (int, float))
            for part, keys in (
                ("objects", OBJECT_FEATURES),
                ("tail", PAGE_FEATURES),
                ("tight", PAGE_FEATURES),
            )
            for k in keys
        )
        ok = ok and isinstance(params["fitted_on"], list) and chromium_plt.check(params.get("plt"))
        net = params.get("net")
        ok = ok and (
            net is None or all(isinstance(net.get(k), (int, float)) and 0 <= net[k] < 60_000 for k in calib.NET_KEYS)
        )
    except (KeyError, TypeError, AttributeError):
        ok = False
    if not ok:
        raise PltError(f"{where}: not the parameters of a Chromium compute model (version {VERSION})")
    return params


def load(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as f:
            return check(json.load(f), path)
    except OSError as e:
        raise PltError(f"{path}: {e.strerror}") from None
    except ValueError as e:
        raise PltError(f"{path}: not JSON ({e})") from None


def shipped() -> dict:
    """The parameters shipped with the package (fitted on every calibrated page of the public set)."""
    try:
        text = resources.files(__package__).joinpath(SHIPPED).read_text(encoding="utf-8")
    except OSError:
        raise PltError(
            f"no compute model shipped ({SHIPPED}): fit one (python3 -m pltlab.experiments.compute_fit fit) "
            "and give it with --compute-model"
        ) from None
    return check(json.loads(text), SHIPPED)


def plt_estimate(params: dict, page: Page, result: dict) -> dict:
    """``result`` (simulate.predict's, of ``page`` as apply() calibrated it) with its PLT the
    form's (chromium_plt.estimate): plt_ms, network_bound_ms, cpu_bound_ms."""
    cal = calib.stored(page) or {}
    page_f = cal.get("page_features")
    if page_f is None:
        raise PltError(f"{page.url}: not calibrated by the general compute model (no page features)")
    f = chromium_plt.features(page_f, result["connections"])
    return {**result, **chromium_plt.estimate(params.get("plt"), result["plt_ms"], f)}


def _dot(coef: Mapping[str, float], f: Mapping[str, float]) -> float:
    return sum(coef[k] * f[k] for k in coef)


def delays(params: dict, page: Page) -> tuple[list, list[float], float, float, dict]:
    """The page's plan objects, their predicted compute delays (ms), its tail, its tight-mode
    delay and its page features (structure's)."""
    objs, rows, page_f = structure(page)
    comp = [round(math.expm1(_dot(params["objects"], f)), 3) for f in rows]
    tail = math.expm1(_dot(params["tail"], page_f))
    tight = math.expm1(_dot(params["tight"], page_f))
    return objs, [max(0.0, c) for c in comp], round(max(0.0, tail), 3), round(max(0.0, tight), 3), page_f


def apply(params: dict, page: Page) -> Page:
    """A copy of ``page`` with the model's synthetic calibration (archive.calibration's keys, as
    `pltlab calibrate` stores a measured one; ``source`` says it is the model's)."""
    page = copy.deepcopy(page)
    objs, comp, tail, tight, page_f = delays(params, page)
    derived = {
        "compute_ms": comp,
        "tail_ms": tail,
        "tight_delay_ms": tight,
        "frame_tight_delay_ms": {},
        "loads": 0,
        "matched": len(objs),
        **{k: (params.get("net") or {}).get(k) for k in calib.NET_KEYS},  # (None: not fitted)
    }
    meta = {
        "source": "model",
        "browser": ", ".join(params.get("browser") or []),
        "machine": "; ".join(calib.machine_of(m) for m in params.get("machine") or []),  # (older fits: host dropped)
        "rtt_ms": 0,
        "measured_at": params.get("fitted_at"),
        "fitted_on": list(params["fitted_on"]),
        "page_features": page_f,  # (the PLT form's CPU-bound estimate: chromium_plt.features)
    }
    return calib.attach(page, objs, derived, meta)


def _bare(url: str) -> str:
    return url.split("://", 1)[-1].rstrip("/").lower()


def stance(params: dict, page: Page, name: str | None = None) -> dict:
    """Where ``page`` stands against the model's fit: {"in_sample", "fitted_on" (count),
    "fitted_at", "outside": [reasons]} (a page type or size never seen)."""
    in_sample = (name in params["fitted_on"]) or _bare(page.url) in {_bare(u) for u in params.get("fitted_urls", [])}
    ranges = params.get("ranges") or {}
    outside = []
    n = len(page.objects)
    if "objects" in ranges and n > ranges["objects"][1]:
        outside.append(f"{n:,} objects (fitted pages: up to {ranges['objects'][1]:,})")
    seen_kinds = set()
    for o in page.objects:
        k = kind_of(o)
        if k in seen_kinds:
            continue
        if k not in ranges:
            outside.append(f"a {k} object (none in the fitted pages)")
            seen_kinds.add(k)
        elif o.size > ranges[k][1]:
            outside.append(f"a {k} object of {o.size:,} bytes (fitted: up to {ranges[k][1]:,})")
            seen_kinds.add(k)
    return {
        "in_sample": bool(in_sample),
        "fitted_on": len(params["fitted_on"]),
        "fitted_at": params.get("fitted_at"),
        "outside": outside,
    }
