"""The handshake study's parameters: the defaults (full and --quick), the study file (one TOML
table [handshakes] with a sub-table [handshakes.chromium]; examples/handshakes.toml is the
default study key by key) and the command's options. Precedence: flags > file > defaults (full,
or quick). Every error is one line; a file's errors name the file and the key."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from pltlab import protocols, units
from pltlab.archive import bundled
from pltlab.errors import PltError
from pltlab.experiments.spec import read_toml
from pltlab.loaders.registry import LOADERS
from pltlab.studies.engine import JSON, OUTPUT, QUICK, RESUME, Param, file_table, file_value, values
from pltlab.studies.engine import resolve as engine_resolve

TLS = ("full", "resume", "0rtt")  # the tls knob's values, baseline first
CLIENTS = tuple(LOADERS)  # builtin, chromium
# The pages of the full study: the TFO paper's four, the three recent ones, one page per site of
# the public set (pltlab.archive.bundled; benches/pagesets/public.txt).
PAGES = bundled.PAPER + bundled.RECENT + bundled.PUBLIC_SITES

# Seconds per load (wall time, warm visits included) of a planned loader (the built-in one) and of
# a browser (Chromium), measured on the 2-core lab machine: the built-in loader 2.14 s (the full
# run's first 238 loads, 2026-11-28, its warm-up visits over the unimpaired link; 3.9 s before,
# when they crossed the emulated link); Chromium 5.4 s at load average 6-7 (--quick, 2026-11-27),
# its resume and 0-RTT loads a warm visit more, as configured: what the announced estimate of a
# run's duration multiplies.
SECONDS_PER_LOAD = {True: 2.2, False: 12.0}


@dataclass(frozen=True)
class Params:
    """Every parameter of the study (losses fractions, RTTs ms). The defaults are the full study."""

    quick: bool = False
    pages: tuple = PAGES
    rtts: tuple = (20, 100, 200)
    losses: tuple = (0.0, 0.01)
    reps: int = 3  # 18 pages x 3: 54 pairs per cell (5 took ~11 h on the 2-core machine)
    seed: int = 1
    protocols: tuple = ("h1", "h2", "h3")
    tls: tuple = TLS
    clients: tuple = CLIENTS
    # Chromium takes part on the pages recorded over https (its own schemes; the built-in loader
    # is told to use https everywhere) and, being ~6x slower a load, at fewer points
    chromium_pages: tuple = tuple(n for n in PAGES if bundled.NAMES[n].startswith("https://"))
    chromium_protocols: tuple = ("h2", "h3")
    chromium_tls: tuple = TLS
    # over QUIC Chromium sends 0-RTT whenever it resumes (no switch turns it off): a "resume"
    # load of it is invalid (loaders/chromium.py), so its QUIC loads are full or 0-RTT
    chromium_quic_tls: tuple = ("full", "0rtt")
    chromium_rtts: tuple = (20, 100, 200)
    chromium_losses: tuple = (0.0,)
    chromium_reps: int = 3

    def as_json(self) -> dict:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


QUICK_VALUES = {
    "pages": ("wikipedia", "filamentgroup", "github"),
    "rtts": (100,),
    "losses": (0.0,),
    "reps": 2,
    "chromium_pages": ("filamentgroup",),
    "chromium_protocols": ("h2",),
    "chromium_tls": ("full",),
    "chromium_quic_tls": ("full",),
    "chromium_rtts": (100,),
    "chromium_losses": (0.0,),
    "chromium_reps": 2,
}


def defaults(quick: bool = False) -> Params:
    return dataclasses.replace(Params(), quick=True, **QUICK_VALUES) if quick else Params()


# ---- one value -> its Params value, or a PltError (the message the CLI prints) --------------
def _bool(v):
    if not isinstance(v, bool):
        raise PltError(f"invalid value {units.show(v)}: must be true or false")
    return v


def _int(what: str, lo: int, hi: int):
    def parse(v):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise PltError(f"invalid {what} {units.show(v)}: must be an integer from {lo} to {hi}")
        return v

    return parse


def _choice(what: str, choices):
    def parse(v):
        if not isinstance(v, str) or v not in choices:
            raise PltError(f"unknown {what} {units.show(v)} (choose from {', '.join(choices)})")
        return v

    return parse


def _page(v):
    if not isinstance(v, str):
        raise PltError(f"invalid page {units.show(v)}: a bundled page name (benches/pagesets/public.txt)")
    bundled.path(v)  # unknown name -> PltError listing the names
    return v


def rtt_ms(v) -> float:
    """An RTT as experiment files write it ("50ms"; a bare number is ms) -> ms."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise PltError(f'invalid RTT {units.show(v)}: e.g. "100ms"')
    ms = units.duration_us(v if isinstance(v, str) else f"{v}ms", "RTT") / 1000
    if not 0 < ms <= 10_000:
        raise PltError(f"invalid RTT {units.show(v)}: must be in (0, 10000] ms")
    return int(ms) if ms == int(ms) else ms


def loss(v) -> float:
    """A loss rate: "1%" or "0.01" as experiment files write it, or a number in percent (--loss)."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise PltError(f'invalid loss {units.show(v)}: e.g. "1%"')
    f = units.loss_fraction(v if isinstance(v, str) else f"{v}%", "loss")
    if f >= 1:
        raise PltError(f"invalid loss {units.show(v)}: must be below 100%")
    return f


def _fraction(v):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < 1:
        raise PltError(f"invalid loss {units.show(v)}: a fraction in [0, 1)")
    return float(v)


_PROTOCOL = _choice("protocol", tuple(protocols.BY_NAME))  # (every origin over https: no "recorded")
_REPS = _int("number of repetitions", 1, 10_000)
# file key (under [handshakes]) -> (Params field, element parser, is a list)
KEYS = {
    "quick": ("quick", _bool, False),
    "pages": ("pages", _page, True),
    "rtt": ("rtts", rtt_ms, True),
    "loss": ("losses", loss, True),
    "repetitions": ("reps", _REPS, False),
    "seed": ("seed", _int("seed", 0, 2**32 - 1), False),
    "protocol": ("protocols", _PROTOCOL, True),
    "tls": ("tls", _choice("TLS mode", TLS), True),
    "client": ("clients", _choice("loader", CLIENTS), True),
    "chromium.pages": ("chromium_pages", _page, True),
    "chromium.protocol": ("chromium_protocols", _PROTOCOL, True),
    "chromium.tls": ("chromium_tls", _choice("TLS mode", TLS), True),
    "chromium.quic_tls": ("chromium_quic_tls", _choice("TLS mode", TLS), True),
    "chromium.rtt": ("chromium_rtts", rtt_ms, True),
    "chromium.loss": ("chromium_losses", loss, True),
    "chromium.repetitions": ("chromium_reps", _REPS, False),
}
# Params field -> element check in Params units (losses fractions, RTTs ms)
_CHECK = {f: (_fraction if p is loss else p, many) for f, p, many in KEYS.values()}


def load(path: str) -> dict:
    """The values a handshake-study file sets, as {Params field: value}."""
    return from_dict(read_toml(path)[0], path)


def from_dict(doc: dict, where: str = "handshake study") -> dict:
    def bad(key, msg):
        return PltError(f"{where}: key '{key}': {msg}")

    flat = file_table(doc, "handshakes", ("chromium",), where, "examples/handshakes.toml", "a handshake-study file")
    out = {}
    for key, v in flat.items():
        if key not in KEYS:
            sec = key.rpartition(".")[0]
            known = [k.rpartition(".")[2] for k in KEYS if k.rpartition(".")[0] == sec]
            raise bad(f"handshakes.{key}", f"unknown key (known here: {', '.join(known)})")
        field, parse, many = KEYS[key]
        try:
            out[field] = file_value(v, parse, many)
        except PltError as e:
            raise bad(f"handshakes.{key}", str(e)) from None
    return out


def resolve(file_values: dict | None = None, **given) -> Params:
    """Defaults < ``file_values`` < ``given`` (None: not given); checked. Whatever neither sets
    takes the quick defaults if ``quick`` is set by either."""
    return engine_resolve("handshake-study", defaults, check, file_values, given)


def check(p: Params) -> Params:
    """Every value checked (lists as tuples); the messages name the value, not a key."""
    fixed = {f: file_value(getattr(p, f), parse, many) for f, (parse, many) in _CHECK.items()}
    p = dataclasses.replace(p, **fixed)
    if not any(points(p, c)[0] for c in p.clients):
        raise PltError(
            f"no page to load: Chromium takes the pages of chromium.pages (recorded over https: "
            f"{', '.join(p.chromium_pages)}) that are among the pages"
        )
    return p


def params(doc: dict) -> Params:
    """The parameters study.json recorded."""
    return resolve({k: tuple(v) if isinstance(v, list) else v for k, v in doc.items()})


def points(p: Params, client: str) -> tuple:
    """(pages, RTTs, losses, repetitions) of a loader: a planned one (the built-in loader) at
    every point, a browser (Chromium) at the chromium_* points."""
    if LOADERS[client].planned:
        return p.pages, p.rtts, p.losses, p.reps
    pages = tuple(x for x in p.chromium_pages if x in p.pages)  # (none: the browser sits out)
    return pages, p.chromium_rtts, p.chromium_losses, p.chromium_reps


HELP = (
    "What the handshake features save (issue 26): TLS 1.3 full/resume/0-RTT over h1 and h2 with TFO off/on, and h3 "
    "(QUIC) full/resume/0-RTT, at RTT 20/100/200 ms and loss 0/1 %, on the TFO paper's pages, the recent ones and "
    "11 public ones, built-in loader and Chromium. Round trips and ms saved with 95 % CIs, and what TFO still adds "
    "once 0-RTT and QUIC exist. Full run: {full}; --quick: {quick} (estimated on the 2-core lab machine)."
)

# `pltlab reproduce handshakes`'s options, in their order (pltlab.studies.engine.Param)
PARAMS = (
    Param(
        "config",
        str,
        None,
        "Handshake-study file (TOML, see examples/handshakes.toml); the flags below override it.",
        flags=("--config", "-c"),
    ),
    QUICK.but(
        default=None,
        help="3 pages, RTT 100 ms, no loss, 2 repetitions, one Chromium point (< 10 min). Default: full, or the file's `quick`.",
        flags=("--quick/--full",),
        show_default=False,
    ),
    OUTPUT,
    JSON,
    Param("page", str, None, "Pages (bundled names, repeatable); default the 18 of the study.", many=True),
    Param("rtt", float, None, "RTTs in ms (repeatable); default 20 100 200.", many=True),
    Param("loss", float, None, "Loss rates in % (repeatable); default 0 1.", many=True),
    Param("reps", int, None, "Repetitions (default 3, --quick 2)."),
    Param("client", str, None, "Loaders (repeatable): builtin, chromium; default both.", CLIENTS, many=True),
    RESUME,
)


def options(given: dict) -> Params:
    """The study's parameters from its options' values (``PARAMS``): defaults < the --config
    file < the flags given."""
    v = values(PARAMS, given)
    return resolve(
        load(v["config"]) if v["config"] else {},
        quick=v["quick"],
        pages=v["page"] or None,
        rtts=v["rtt"] or None,
        losses=[loss(x) for x in v["loss"]] if v["loss"] else None,
        reps=v["reps"],
        clients=v["client"] or None,
    )


def note(given: dict) -> dict:
    """What study.json records besides the parameters: the file they came from."""
    return {"config_file": os.path.abspath(given["config"]) if given.get("config") else None}
