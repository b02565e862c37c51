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
    schemes = "recorded"             # or "chromium" (Chromium's HSTS https upgrades, both loaders), "https" (all)
    calibrated = true                # model "chromium": use a page's calibration (pltlab calibrate)
    trace_down = "lte.down"          # Mahimahi delivery traces instead of rates (trace_up too)
    pcap = true                      # one pcap per load in OUT_DIR/pcap (or a folder)
    warmup = ["warm"]                # warm: TFO cookies cached by a prior visit; cold: keys reset
    origin_rtt = [{}, {"cdn.example.com" = "10ms"}]   # per-origin RTT[/LOSS] by host or index
    repetitions = 5
    seed = 1
    compare = "tfo"                  # the knob compared (default: tfo when it lists two modes)

The keys besides name, pages and corpus are the knobs of scope "sweep" (pltlab.run.knobs; `pltlab
knobs` lists them), parsed by the knob's parser: every value is checked against the limits of
pltlab.units when the file is read, before anything is built or written. A configuration (Config)
holds one parsed value per list knob; Experiment.run_config(c) is the RunConfig of its runs.

`compare` names the experiment's comparison axis: tfo, or a list knob (protocol, tls, initcwnd,
...) that lists at least two values. The engine runs that knob's values back to back within each
block (sweep.schedule) and the report pairs them (pltlab report --by). Default: tfo when it lists
two modes, else none.
"""

import hashlib
import itertools
import json
import os
import re
import tomllib
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from pltlab import protocols, units
from pltlab.archive import bundled
from pltlab.archive import resolve as resolver
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.net.wan import DEFAULT_CLIENT_RMEM
from pltlab.run import knobs
from pltlab.run.config import RunConfig

# The experiment file's keys: its own (what and where) and every knob of scope "sweep".
SWEEP_KNOBS = knobs.for_scope("sweep")
POINT_KNOBS = knobs.point()  # the lists that multiply configurations (TFO modes apart)
LIST_KEYS = tuple(k.toml for k in SWEEP_KNOBS if k.sweep)
SCALAR_KEYS = ("name", "pages", "corpus", "compare") + tuple(k.toml for k in SWEEP_KNOBS if not k.sweep)
# A run key's configuration part lists these in this order (every experiment so far: never change
# it, or resumes and digests break); a point knob added later joins as {name: value}, where set.
KEY_ORDER = ("rtt", "rate", "rate_up", "loss", "queue", "icw", "cc", "client", "warm", "origin_rtt")
# Experiment-level knobs with their own Experiment attribute (and place in the digest).
_OWN = ("reps", "seed", "max_conns_per_host", "client_rmem")
PATH_KEYS = ("trace_up", "trace_down", "pcap")  # relative to the experiment file's folder
# An experiment's name names its output folder (results/NAME): a name, never a path.
NAME_RE = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,99}")


class SpecError(PltError):
    pass


@dataclass(frozen=True, init=False)
@knobs.fields(POINT_KNOBS)
class Config:
    """One point of the cross product without the TFO mode (= one runner): a typed value per
    point knob (rtt_us, rate_bps, ..., overrides). Made like RunConfig: Config(rtt="50ms", icw=10)."""

    def __init__(self, **values):
        for f, v in knobs.parse(values, POINT_KNOBS).items():
            object.__setattr__(self, f, v)

    @classmethod
    def from_knobs(cls, values: dict, where: str = "") -> "Config":
        cfg = cls.__new__(cls)
        for f, v in knobs.parse(values, POINT_KNOBS, where).items():
            object.__setattr__(cfg, f, v)
        return cfg

    def values(self) -> dict:
        """Typed values by field (RunConfig's keywords)."""
        return {k.field: getattr(self, k.field) for k in POINT_KNOBS}

    def key(self) -> str:
        """Canonical, stable text (part of every run key)."""
        parts = [knobs.KNOBS[n].key(getattr(self, knobs.KNOBS[n].field)) for n in KEY_ORDER]
        later = {
            k.name: k.key(getattr(self, k.field))
            for k in POINT_KNOBS
            if k.name not in KEY_ORDER and getattr(self, k.field) != k.value
        }
        return json.dumps(parts + ([later] if later else []), separators=(",", ":"))


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
    # the other experiment-level knobs (model, schemes, calibrated, ...) by name, where not the default
    settings: dict = field(default_factory=dict)
    source: str = ""  # the experiment file's text
    path: str = ""
    extras: dict = field(default_factory=dict)
    # the measurement kind of its runs (pltlab.run.kinds): "page_load" unless a study says otherwise
    kind: str = "page_load"
    # the knob compared (a knob name: "tfo", "protocol", ...); None: the default (axis())
    compare: str | None = None

    def axis(self) -> str | None:
        """The comparison axis: the knob whose values run back to back within a block (and the
        report's default --by): ``compare`` if set, else tfo when it lists two modes, else none."""
        if self.compare is not None:
            return self.compare
        return "tfo" if len(self.tfo_modes) == 2 else None

    def blocks(self) -> list[list[int]]:
        """The configurations grouped into blocks: configurations equal in every knob but the
        axis, in the axis's listed order (an axis of tfo or none: one configuration each)."""
        axis = self.axis()
        if axis in (None, "tfo"):
            return [[c] for c in range(len(self.configs))]
        groups: dict[tuple, list[int]] = {}
        # a knob n/a under some configuration's protocol is no difference (one value where it
        # applies: _where_they_apply; the report's pairing skips it alike)
        ks = [k for k in POINT_KNOBS if k.name != axis and not any(_not_applying(k, c) for c in self.configs)]
        for c, conf in enumerate(self.configs):
            key = tuple(json.dumps(k.key(getattr(conf, k.field))) for k in ks)
            groups.setdefault(key, []).append(c)
        return list(groups.values())

    def digest(self) -> str:
        """Identity of what is swept (resume refuses a different experiment)."""
        h = hashlib.sha256()
        h.update(json.dumps([[p.label, p.page.url, len(p.page.objects)] for p in self.pages]).encode())
        h.update(json.dumps([c.key() for c in self.configs]).encode())
        h.update(json.dumps([list(self.tfo_modes), self.repetitions, self.seed, self.max_conns_per_host]).encode())
        # sweeps from before the 1 MiB default ran with the kernel's buffer and no entry here:
        # they keep their digest with client_rmem = "kernel" (a resume with the new default is
        # refused: a different experiment)
        if self.client_rmem is not None:
            h.update(json.dumps({"client_rmem": self.client_rmem}).encode())
        settings = {  # (where packet traces are written changes nothing measured)
            n: knobs.KNOBS[n].key(v) for n, v in self.settings.items() if v != knobs.KNOBS[n].value and n != "pcap"
        }
        if settings:  # (before other knobs: the loader's model/schemes/calibrated, same form)
            h.update(json.dumps(settings, sort_keys=True).encode())
        if self.kind != "page_load":
            h.update(json.dumps({"kind": self.kind}).encode())
        if self.compare is not None and self.compare != ("tfo" if len(self.tfo_modes) == 2 else None):
            h.update(json.dumps({"compare": self.compare}).encode())  # (the default: as before)
        return h.hexdigest()[:16]

    def run_config(self, c: int) -> RunConfig:
        """The settings of every run of configuration ``c``."""
        return RunConfig(
            **self.configs[c].values(),
            tfo_modes=tuple(self.tfo_modes),
            reps=self.repetitions,
            seed=self.seed,
            max_conns_per_host=self.max_conns_per_host,
            client_rmem=self.client_rmem,
            **{knobs.KNOBS[n].field: v for n, v in self.settings.items()},
        )

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


def parse_knobs(doc: dict, where: str = "experiment") -> tuple[dict[str, list], dict[str, object]]:
    """The knobs an experiment document sets: ({knob name: [typed values]} of the lists,
    {knob name: typed value} of the rest), defaults filled in. One PltError names file and key."""
    lists, scalars = {}, {}
    for k in SWEEP_KNOBS:
        v = doc.get(k.toml, k.default)
        try:
            if k.sweep and not k.many:
                v = v if isinstance(v, list) else [v]
                if not v:
                    raise PltError("empty list")
                vals = [k.parse(x, k.toml) for x in v]
                if len({json.dumps(k.key(x)) for x in vals}) != len(vals):
                    raise PltError("duplicate values")
                lists[k.name] = vals
            else:
                if k.many and isinstance(v, list) and not v:
                    raise PltError("empty list")
                scalars[k.name] = k.parse(v, k.toml)
        except PltError as e:
            raise PltError(f"{where}: key '{k.toml}': {e}") from None
    return lists, scalars


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
    # files and folders the file names are relative to its own folder, as its pages are
    doc = {k: _abs(v, base) if k in PATH_KEYS and isinstance(v, str) else v for k, v in doc.items()}
    lists, scalars = parse_knobs(doc, where)
    if "name" in doc:
        name = doc["name"]
        if not isinstance(name, str) or not NAME_RE.fullmatch(name):
            raise bad(
                "name",
                f"{units.show(name)}: a name of 1 to 100 letters, digits, '.', '_' or "
                f"'-', not starting with '.' (it names the output folder results/NAME)",
            )
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
    for ov in lists["origin_rtt"]:
        for target, _, _ in ov:
            if isinstance(target, str) and not any(target in p.page.hosts for p in pages):
                raise bad("origin_rtt", f"host {units.show(target)} is in none of the pages")
            if isinstance(target, int) and any(target >= len(p.page.hosts) for p in pages):
                raise bad("origin_rtt", f"origin index {target} exceeds a page's number of hosts")
    names = [k.name for k in POINT_KNOBS]
    product = itertools.product(*(lists[n] for n in names))
    points = [_where_they_apply(dict(zip(names, p)), lists, where) for p in product]
    try:  # (a knob that applies under none of the listed protocols: refused, pltlab.protocols)
        configs = [Config(**{knobs.KNOBS[n].field: v for n, v in point.items()}) for point in points]
    except PltError as e:
        raise PltError(f"{where}: {e}") from None
    quic = [c.protocol for c in configs if not protocols.applies(c.protocol, "tfo")]
    if "tfo" not in doc and len(quic) == len(configs):  # (TFO applies to none: its default "both" is off)
        scalars["tfo"] = (False,)
    elif True in scalars["tfo"] and quic:
        default = " (both, the default)" if "tfo" not in doc else ""
        raise bad("tfo", f'{protocols.not_applying(quic[0], "tfo")}: TFO on asked for{default}; set tfo = "off"')
    settings = {n: v for n, v in scalars.items() if n not in _OWN + ("tfo",) and v != knobs.KNOBS[n].value}
    compare = doc.get("compare")
    if compare is not None:
        try:
            compare = knobs.axis(compare).name
        except PltError as e:
            raise bad("compare", str(e)) from None
        for c in configs:  # (comparing a knob that does not apply: refused)
            why = protocols.not_applying(c.protocol, compare) if compare in protocols.EXCLUSIVE else None
            if why:
                raise bad("compare", why)
        listed = scalars["tfo"] if compare == "tfo" else lists[compare]
        if len(listed) < 2:
            k = knobs.KNOBS[compare]
            raise bad("compare", f"{k.toml} lists one value: nothing to compare (list two or more)")
    exp = Experiment(
        name=name,
        pages=pages,
        configs=configs,
        tfo_modes=scalars["tfo"],
        repetitions=scalars["reps"],
        seed=scalars["seed"],
        max_conns_per_host=scalars["max_conns_per_host"],
        client_rmem=scalars["client_rmem"],
        settings=settings,
        compare=compare,
    )
    for c in range(len(configs)):  # settings that do not go together (a trace and a rate): now, not mid-sweep
        try:
            exp.run_config(c)
        except PltError as e:
            raise PltError(f"{where}: {e}") from None
    return exp


def _not_applying(k: knobs.Knob, conf: Config) -> bool:
    """Whether knob ``k`` does not apply under configuration ``conf``'s protocol (its column n/a)."""
    return k.name in protocols.EXCLUSIVE and not knobs.applies(conf, k.name)


def _where_they_apply(point: dict, lists: dict, where: str) -> dict:
    """One point of the cross product ({knob name: value}) with the knobs that apply under some
    protocols only (pltlab.protocols.EXCLUSIVE: a row's own, keepalive and server_priority, and a
    transport's, cc, icw, quic_cc, ...) settled against its protocol. Such a knob set to one value
    in a file that lists several protocols is that value where it applies and its default
    elsewhere (its results column n/a: `protocol = ["h1", "h2"]` with `server_priority =
    "round-robin"` orders the h2 runs' responses; `protocol = ["h2", "h3"]` with `cc = "cubic"`
    runs h2 over cubic, h3 with QUIC's own). A list of values crossed with a protocol it does not
    apply to is refused, naming the point: those runs would repeat one another. Set where it
    applies under none of the listed protocols: refused as in a run. (TFO, a per-load knob, is
    settled by the caller.)"""
    proto = point.get("protocol")
    protos = lists.get("protocol", [])
    for n in sorted(protocols.EXCLUSIVE & point.keys()):
        k = knobs.KNOBS[n]
        why = protocols.not_applying(proto, n) if proto is not None else None
        if why is None or point[n] == k.value or not any(protocols.applies(p, n) for p in protos):
            continue  # (applies, its default, or applies nowhere: Config refuses it)
        if len(lists[n]) > 1:
            raise PltError(f"{where}: the point protocol {proto}, {k.toml} {point[n]}: {why}")
        point = {**point, n: k.value}
    return point


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
        # an archive of any format (a seed .pages list too) or a folder of them, as `pltlab
        # import` reads it (pltlab.archive.formats); else a bundled name or a page URL
        found = resolver.resolve(path if os.path.exists(path) else item, corpus)
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
