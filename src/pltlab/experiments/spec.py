"""Experiment files (TOML): what to sweep. Every list multiplies; every error names its key.

    name = "tfo"                     # names results/NAME: 1-100 of A-Z a-z 0-9 . _ - (no leading dot)
    pages = ["amazon", "corpus/", "site.har", "Paper.pages"]  # bundled name, dir, HAR, .pages list
    rtt = ["20ms", "100ms"]          # any key may also be a single value
    rate = ["4mbit"]                 # "unlimited" = no rate limit
    rate_up = ["256kbit"]            # default: the downlink rate
    loss = ["0%"]
    queue = [1000]                   # packets, or bytes ("64KB")
    tfo = ["off", "on"]
    initcwnd = ["default", 10]
    cc = ["cubic"]
    client = ["builtin"]             # or chromium
    model = "archive"                # built-in loader: "archive" (recorded initiators) or "chromium"
    schemes = "recorded"             # or "chromium" (Chromium's HSTS https upgrades, both loaders)
    calibrated = true                # model "chromium": use a page's calibration (pltlab calibrate)
    warmup = ["warm"]                # warm: TFO cookies cached by a prior visit; cold: keys reset
    origin_rtt = [{}, {"cdn.example.com" = "10ms"}]   # per-origin RTT[/LOSS] by host or index
    repetitions = 5
    seed = 1

Every value is checked against the limits of pltlab.units when the file is read, before anything
is built or written.
"""

import hashlib
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pltlab import units
from pltlab.archive import bundled
from pltlab.archive import pages as resolver
from pltlab.archive.model import Page
from pltlab.archive.seed import import_pages_file
from pltlab.errors import PltError
from pltlab.loaders.plan import MODELS
from pltlab.net.spec import CC_CHOICES, DEFAULT_CLIENT_RMEM, TcpKnobs
from pltlab.run.config import RunConfig

LIST_KEYS = ("rtt", "rate", "rate_up", "loss", "queue", "tfo", "initcwnd", "cc", "client", "warmup",
             "origin_rtt")
SCALAR_KEYS = ("name", "pages", "corpus", "repetitions", "seed", "max_conns_per_host", "client_rmem",
               "model", "schemes", "calibrated")
# loader settings a sweep passes on to every run (RunConfig); the defaults keep older digests
LOADER_DEFAULTS = {"model": "archive", "schemes": "recorded", "calibrated": True}
# An experiment's name names its output folder (results/NAME): a name, never a path.
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")
DEFAULTS = {"rtt": ["100ms"], "rate": ["unlimited"], "rate_up": [None], "loss": ["0%"],
            "queue": [1000], "tfo": ["off", "on"], "initcwnd": ["default"], "cc": ["cubic"],
            "client": ["builtin"], "warmup": ["warm"], "origin_rtt": [{}]}


class SpecError(PltError):
    pass


@dataclass(frozen=True)
class Config:
    """One point of the cross product without the TFO mode (= one PageRunner)."""

    rtt: str
    rate: str | None
    rate_up: str | None
    loss: str
    queue: str
    icw: int | None
    cc: str
    client: str
    warm: bool
    overrides: tuple  # ((host or index, rtt_us, loss or None), ...), sorted

    def key(self) -> str:
        """Canonical, stable text (part of every run key)."""
        return json.dumps([self.rtt, self.rate, self.rate_up, self.loss, self.queue, self.icw,
                           self.cc, self.client, self.warm, [list(o) for o in self.overrides]],
                          separators=(",", ":"))


@dataclass
class PageEntry:
    label: str  # short name used in tables and keys
    page: Page


@dataclass
class Experiment:
    name: str
    pages: list[PageEntry]
    configs: list[Config]
    tfo_modes: tuple[bool, ...]
    repetitions: int
    seed: int = 1
    max_conns_per_host: int = 6
    client_rmem: int | None = DEFAULT_CLIENT_RMEM  # client's initial TCP receive buffer; None = the kernel's
    loader: dict = field(default_factory=dict)  # model/schemes/calibrated where not the default
    source: str = ""  # the experiment file's text
    path: str = ""
    extras: dict = field(default_factory=dict)
    # the measurement kind of its runs (pltlab.run.kinds): "page_load" unless a study says otherwise
    kind: str = "page_load"

    def digest(self) -> str:
        """Identity of what is swept (resume refuses a different experiment)."""
        h = hashlib.sha256()
        h.update(json.dumps([[p.label, p.page.url, len(p.page.objects)] for p in self.pages]).encode())
        h.update(json.dumps([c.key() for c in self.configs]).encode())
        h.update(json.dumps([list(self.tfo_modes), self.repetitions, self.seed,
                             self.max_conns_per_host]).encode())
        # sweeps from before the 1 MiB default ran with the kernel's buffer and no entry here:
        # they keep their digest with client_rmem = "kernel" (a resume with the new default is
        # refused: a different experiment)
        if self.client_rmem is not None:
            h.update(json.dumps({"client_rmem": self.client_rmem}).encode())
        if self.loader:
            h.update(json.dumps(self.loader, sort_keys=True).encode())
        if self.kind != "page_load":
            h.update(json.dumps({"kind": self.kind}).encode())
        return h.hexdigest()[:16]

    def run_config(self, c: int) -> RunConfig:
        """The settings of every run of configuration ``c``."""
        k = self.configs[c]
        return RunConfig(rtt=k.rtt, rate=k.rate, rate_up=k.rate_up, loss=k.loss, queue=k.queue,
                         icw=k.icw, cc=k.cc, client=k.client, warm=k.warm, seed=self.seed,
                         max_conns_per_host=self.max_conns_per_host, overrides=k.overrides,
                         client_rmem=self.client_rmem, **self.loader)

    @property
    def n_runs(self) -> int:
        return len(self.pages) * len(self.configs) * len(self.tfo_modes) * self.repetitions


def read_toml(path: str) -> tuple[dict, str]:
    """An experiment file's document and text; any problem is one PltError naming the file."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        return tomllib.loads(text), text
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise PltError(f"{path}: not valid TOML: {e}") from None
    except RecursionError:
        raise PltError(f"{path}: not valid TOML: nested too deeply") from None


def load(path: str) -> Experiment:
    doc, text = read_toml(path)
    base = os.path.dirname(os.path.abspath(path))
    exp = from_dict(doc, path, base)
    exp.source = text
    exp.path = os.path.abspath(path)
    return exp


def from_dict(doc: dict, where: str = "experiment", base: str = ".") -> Experiment:
    def bad(key, msg):
        return PltError(f"{where}: key '{key}': {msg}")

    if not isinstance(doc, dict):
        raise PltError(f"{where}: an experiment file is a table of keys")
    if isinstance(doc.get("icw"), dict):  # the ICW study's own file kind
        raise bad("icw", "an ICW-study file: run it with `pltlab reproduce icw --config FILE`")
    for k in doc:
        if k not in LIST_KEYS and k not in SCALAR_KEYS:
            raise bad(k, f"unknown key (known: {', '.join(SCALAR_KEYS + LIST_KEYS)})")
    if "pages" not in doc:
        raise bad("pages", "missing (a list of pages: bundled names, HAR files, directories, .pages lists)")
    lists = {}
    for k in LIST_KEYS:
        v = doc.get(k, DEFAULTS[k])
        v = v if isinstance(v, list) else [v]
        if not v:
            raise bad(k, "empty list")
        lists[k] = v
    try:
        parsed = {k: [_parse(k, x) for x in lists[k]] for k in LIST_KEYS if k != "origin_rtt"}
        parsed["origin_rtt"] = [_overrides(x) for x in lists["origin_rtt"]]
    except _KeyErr as e:
        raise bad(e.key, e.msg) from None
    for k, v in parsed.items():
        if len(set(map(repr, v))) != len(v):
            raise bad(k, "duplicate values")
    try:
        reps = units.repetitions(doc.get("repetitions", 3))
    except PltError as e:
        raise bad("repetitions", str(e)) from None
    try:
        seed = units.seed(doc.get("seed", 1))
    except PltError as e:
        raise bad("seed", str(e)) from None
    mc = doc.get("max_conns_per_host", 6)
    if not isinstance(mc, int) or isinstance(mc, bool) or not 1 <= mc <= 64:
        raise bad("max_conns_per_host", f"{units.show(mc)}: must be an integer from 1 to 64")
    rmem = doc.get("client_rmem", "default")
    if rmem == "default":
        rmem = DEFAULT_CLIENT_RMEM
    elif rmem == "kernel":
        rmem = None
    else:
        try:
            rmem = TcpKnobs(client_rmem=units.size_bytes(rmem, "client_rmem")).client_rmem
        except PltError as e:
            raise bad("client_rmem", f"{e} (or \"default\" = 1MiB, or \"kernel\")") from None
    loader = {}
    for k, choices in (("model", MODELS), ("schemes", ("recorded", "chromium")), ("calibrated", (True, False))):
        v = doc.get(k, LOADER_DEFAULTS[k])
        if isinstance(v, bool) != (k == "calibrated") or v not in choices:
            raise bad(k, f"{units.show(v)}: one of {', '.join(json.dumps(c) for c in choices)}")
        if v != LOADER_DEFAULTS[k]:
            loader[k] = v
    if "name" in doc:
        name = doc["name"]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise bad("name", f"{units.show(name)}: a name of 1 to 100 letters, digits, '.', '_' or "
                              f"'-', not starting with '.' (it names the output folder results/NAME)")
    else:  # the file's name, made a name
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", os.path.splitext(os.path.basename(where))[0])
        name = name.lstrip(".")[:100] or "experiment"
    corpus = doc.get("corpus")
    if corpus is not None and not isinstance(corpus, str):
        raise bad("corpus", "must be a directory path")
    try:
        pages = resolve_pages(doc["pages"], base, _abs(corpus, base))
    except PltError as e:
        raise bad("pages", str(e)) from None
    for ov in parsed["origin_rtt"]:
        for target, _, _ in ov:
            if isinstance(target, str) and not any(target in p.page.hosts for p in pages):
                raise bad("origin_rtt", f"host {units.show(target)} is in none of the pages")
            if isinstance(target, int) and any(target >= len(p.page.hosts) for p in pages):
                raise bad("origin_rtt", f"origin index {target} exceeds a page's number of hosts")
    configs = [Config(rtt=r, rate=ra, rate_up=ru, loss=lo, queue=q, icw=i, cc=c, client=cl, warm=w,
                      overrides=ov)
               for r, ra, ru, lo, q, i, c, cl, w, ov in itertools.product(
                   parsed["rtt"], parsed["rate"], parsed["rate_up"], parsed["loss"], parsed["queue"],
                   parsed["initcwnd"], parsed["cc"], parsed["client"], parsed["warmup"],
                   parsed["origin_rtt"])]
    return Experiment(name=name, pages=pages, configs=configs,
                      tfo_modes=tuple(parsed["tfo"]), repetitions=reps, seed=seed,
                      max_conns_per_host=mc, client_rmem=rmem, loader=loader)


class _KeyErr(Exception):
    def __init__(self, key, msg):
        self.key, self.msg = key, msg


def _parse(key: str, v):
    """One list element -> its canonical value (strings normalised so run keys are stable)."""
    try:
        if key == "rtt":
            return f"{units.duration_us(v, 'rtt')}us"
        if key in ("rate", "rate_up"):
            if v is None:
                return None
            bps = units.rate_bps(v, key)
            return None if bps is None else f"{bps}bit"
        if key == "loss":
            return f"{units.loss_fraction(v, 'loss'):.6g}"
        if key == "queue":
            qp, qb = units.queue_spec(v)
            return f"{qp}" if qp is not None else f"{qb}B"
    except PltError as e:
        raise _KeyErr(key, str(e)) from None
    if key == "tfo":
        m = {True: True, False: False, "on": True, "off": False}
        if isinstance(v, (bool, str)) and v in m:
            return m[v]
        raise _KeyErr(key, f"{units.show(v)}: use \"on\" or \"off\"")
    if key == "initcwnd":
        if v == "default":
            return None
        if isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= 1024:
            return v
        raise _KeyErr(key, f"{units.show(v)}: an integer from 1 to 1024 segments, or \"default\"")
    if key == "cc":
        if v in CC_CHOICES:
            return v
        raise _KeyErr(key, f"{units.show(v)}: one of {', '.join(CC_CHOICES)}")
    if key == "client":
        if v in ("builtin", "chromium"):
            return v
        raise _KeyErr(key, f"{units.show(v)}: builtin or chromium")
    if key == "warmup":
        if v in ("warm", "cold"):
            return v == "warm"
        raise _KeyErr(key, f"{units.show(v)}: warm or cold")
    raise AssertionError(key)


def _overrides(v) -> tuple:
    if not isinstance(v, dict):
        raise _KeyErr("origin_rtt", f"{units.show(v)}: each element is a table {{host or index = \"RTT[/LOSS]\"}}")
    out = []
    for target, val in v.items():
        t = int(target) if target.isascii() and target.isdigit() else target.lower()
        if isinstance(val, bool) or not isinstance(val, (str, int, float)):
            raise _KeyErr("origin_rtt", f"{units.show(target)}: {units.show(val)}: expected \"RTT[/LOSS]\"")
        r, _, lo = str(val).partition("/")
        try:
            out.append((t, units.duration_us(r, "origin rtt"),
                        units.loss_fraction(lo, "origin loss") if lo else None))
        except PltError as e:
            raise _KeyErr("origin_rtt", f"{units.show(target)}: {e}") from None
    return tuple(sorted(out, key=repr))


def _abs(p: str | None, base: str) -> str | None:
    if p is None:
        return None
    p = os.path.expanduser(p)
    return p if os.path.isabs(p) else os.path.join(base, p)


def resolve_pages(items, base: str = ".", corpus: str | None = None) -> list[PageEntry]:
    items = items if isinstance(items, list) else [items]
    if not items or not all(isinstance(x, str) and x for x in items):
        raise PltError("a non-empty list of strings")
    out: list[PageEntry] = []
    for item in items:
        path = _abs(item, base)
        seed_lists = sorted(f for f in os.listdir(path) if f.endswith(".pages")) \
            if os.path.isdir(path) and not any(f.endswith(".har") for f in os.listdir(path)) else []
        if item.endswith(".pages") and os.path.isfile(path):
            found = import_pages_file(path)[0]
        elif seed_lists:  # a seed-format folder (cs244-2013): every .pages list in it
            found = [p for f in seed_lists for p in import_pages_file(os.path.join(path, f))[0]]
        elif os.path.exists(path):
            found = resolver.resolve(path, corpus)
        else:
            found = resolver.resolve(item, corpus)
        for p in found:
            bname = next((n for n, u in bundled.NAMES.items() if item == n), None)
            out.append(PageEntry(bname or page_label(p.url), p))
    seen: dict[str, int] = {}
    for e in out:  # unique labels
        n = seen.get(e.label, 0)
        seen[e.label] = n + 1
        if n:
            e.label = f"{e.label}-{n + 1}"
    return out


def page_label(url: str) -> str:
    """www.nytimes.com -> nytimes; en.wikipedia.org/wiki/X -> wikipedia; foo.test -> foo."""
    host = (urlsplit(url).hostname or url).lower()
    parts = [x for x in host.split(".") if x not in ("www", "en", "m")]
    return parts[-2] if len(parts) >= 2 else (parts[0] if parts else host)
