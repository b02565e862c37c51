"""ICW-study experiment files: every parameter of `pltlab reproduce icw` in one TOML table
[icw] with a sub-table per part (examples/icw-study.toml is the default study, key by key).
Keys carry the names experiment files use where there is one (rtt, loss, initcwnd,
repetitions, with their units: "50ms", "1%"); the study's older names (rtts_ms, losses, icws,
reps, rtt_ms: numbers in ms and percent) are still read. Precedence: CLI flags > file > defaults
(full, or quick). Every error is one line; a file's errors name the file and the key."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from pltlab import units
from pltlab.archive import bundled
from pltlab.errors import PltError
from pltlab.experiments.spec import read_toml
from pltlab.net.wan import CC_CHOICES
from pltlab.run.flows import LONG_FLOWS, SHORT_BYTES
from pltlab.run.traced import check_icw
from pltlab.studies import presets
from pltlab.studies.engine import JSON, OUTPUT, QUICK, RESUME, Param, file_table, file_value, values
from pltlab.studies.engine import resolve as engine_resolve
from pltlab.studies.icw import parts as study

PARTS = ("rtt", "loss", "transfer", "fairness")
STACKS = (presets.TODAY, "2011")  # --stack: today's defaults, or the study's 2011 set-up (studies.presets)
HELP = (
    "Initial congestion window study (Yahoo! CDN, IMC 2011): PLT vs RTT and loss, object transfer times in RTTs, "
    "fairness of a large ICW against a long flow."
)
# `pltlab reproduce icw`'s options, in their order (pltlab.studies.engine.Param): a file's values
# (--config), and the flags that override them (None: not given)
PARAMS = (
    Param(
        "config",
        str,
        None,
        "ICW-study experiment file (TOML, see examples/icw-study.toml); the flags below override it.",
        flags=("--config", "-c"),
    ),
    QUICK.but(
        default=None,
        help="Fewer loads, loss points and corpus pages; 60 s fairness (< 15 min). Default: full, or the file's `quick`.",
        flags=("--quick/--full",),
        show_default=False,
    ),
    OUTPUT.but(
        default="icw-results",
        help="Output directory (one results database per part, results.json, tables.md, figures, report.html).",
        flags=("--out", "-o"),
    ),
    Param("cc", str, None, "Congestion control: cubic (the study's era; default), reno or bbr.", CC_CHOICES),
    JSON,
    Param("reps", int, None, "Loads per point (geometric mean); default 5, quick 2."),
    Param("icw", int, None, "ICWs of Fig. 19/20 (repeatable); default 1 3 8 16.", many=True),
    Param("rtt", float, None, "RTTs in ms of Fig. 19 (repeatable).", many=True),
    Param("loss", float, None, "Loss rates in % of Fig. 20 (repeatable).", many=True),
    Param("fairness_seconds", float, None, "Duration of each fairness run; default 300, quick 60."),
    Param("only", str, None, "Run only these parts: rtt, loss, transfer, fairness (repeatable).", PARTS, many=True),
    Param(
        "stack",
        str,
        None,
        "today (every knob at its default; default) or 2011: the study's stacks as knobs (no RACK, no TLP, "
        'clients without window scaling or timestamps, random loss; docs/knobs.md "Presets").',
        STACKS,
    ),
    Param(
        "knob",
        str,
        None,
        "NAME=VALUE: one knob set otherwise than the stack sets it (repeatable), e.g. loss_burst=4.",
        many=True,
    ),
    RESUME.but(help="Continue a killed study in --out DIR: no finished load is repeated."),
)


@dataclass(frozen=True)
class Params:
    """Every parameter of the study; losses are fractions. The defaults are the full study."""

    quick: bool = False
    cc: str = "cubic"
    reps: int = 5  # loads per point of Fig. 19/20
    seed: int = 1  # link seed (Fig. 20: seed + load - 1), bootstrap
    parts: tuple = PARTS
    rate: str | None = None  # the page loads' link rate; None: unlimited
    max_conns_per_host: int = 6  # the loader's limit: 12 connections, 2.5 obj/conn
    load_timeout_s: float = 900  # one page load may take this long (25 % loss, ICW 1: ~2 min)
    icws: tuple = study.FIG19_ICWS  # Fig. 19 and 20
    rtts: tuple = study.FIG19_RTTS  # Fig. 19, ms
    losses: tuple = study.FIG20_LOSSES  # Fig. 20, both directions
    loss_rtt_ms: float = 100  # Fig. 20
    transfer_icws: tuple = study.FIG18_ICWS  # Fig. 18
    transfer_rtts: tuple = study.FIG18_RTTS
    transfer_pages: tuple = bundled.PAPER
    transfer_reps: int = 1
    fairness_icws: tuple = study.FAIR_ICWS
    fairness_seconds: float = 300
    fairness_rtt_ms: float = 100
    fairness_rate: str = "4mbit"
    fairness_loss: float = 0.25  # downlink (the data direction)
    fairness_loss_up: float = 0.0
    fairness_download_bytes: int = SHORT_BYTES
    fairness_long_flow: str = "iperf3"
    stack: str = presets.TODAY  # the set-up's knobs (studies.presets), --knob's over them
    knobs: tuple = ()

    def setup(self) -> dict:
        """The stack's knob values with --knob's over them (user values)."""
        return presets.values(self.stack, self.knobs, FIXED)

    def as_json(self) -> dict:
        d = dataclasses.asdict(self)
        return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()}


QUICK = {
    "reps": 2,
    "losses": (0.0, 0.02, 0.05, 0.10),
    "transfer_pages": ("amazon", "wikipedia"),
    "transfer_rtts": (200,),
    "fairness_seconds": 60,
}
FIELDS = tuple(f.name for f in dataclasses.fields(Params))


# the knobs the study sets itself (its own options: --knob refuses them; the stack's cubic is
# the study's --cc default too)
FIXED = ("rtt", "loss", "icw", "rate", "cc")


def defaults(quick: bool = False) -> Params:
    return dataclasses.replace(Params(), quick=True, **QUICK) if quick else Params()


# ---- one value -> its Params value, or a PltError (the message the CLI prints) --------------
def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _int(what: str, lo: int, hi: int):
    def parse(v):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise PltError(f"invalid {what} {units.show(v)}: must be an integer from {lo} to {hi}")
        return v

    return parse


def _bool(v):
    if not isinstance(v, bool):
        raise PltError(f"invalid value {units.show(v)}: must be true or false")
    return v


def _choice(what: str, choices):
    def parse(v):
        if not isinstance(v, str) or v not in choices:
            raise PltError(f"unknown {what} {units.show(v)} (choose from {', '.join(choices)})")
        return v

    return parse


def _rtt(v):
    if not _is_num(v) or not 0 < v <= 10_000:
        raise PltError(f"invalid RTT {units.show(v)} ms: must be in (0, 10000]")
    return v


def _seconds(v):
    if not _is_num(v) or not 0 < v <= 86_400:
        raise PltError(f"invalid fairness duration {units.show(v)} s: must be > 0 (at most 86400)")
    return v


def _timeout(v):
    if not _is_num(v) or not 1 <= v <= 86_400:
        raise PltError(f"invalid load timeout {units.show(v)} s: must be from 1 to 86400")
    return v


def percent(v) -> float:
    """A loss rate in percent (files, --loss) -> a fraction."""
    if not _is_num(v) or not 0 <= v < 100:
        raise PltError(f"invalid loss {units.show(v)} %: must be in [0, 100)")
    return v / 100


def _knob_rtt(v):
    """An RTT as experiment files write it ("50ms", "1.5s"; a bare number is ms) -> ms."""
    if isinstance(v, bool) or not isinstance(v, (str, int, float)):
        raise PltError(f'invalid RTT {units.show(v)}: e.g. "50ms"')
    ms = units.duration_us(v, "RTT") / 1000
    return _rtt(int(ms) if ms == int(ms) else ms)


def loss(v) -> float:
    """A loss rate: a string as experiment files write it ("1%", "0.01"), or a number in percent
    (this file's older dialect, and --loss) -> a fraction."""
    if isinstance(v, str):
        f = units.loss_fraction(v, "loss")
        if f >= 1:
            raise PltError(f"invalid loss {units.show(v)}: must be below 100%")
        return f
    return percent(v)


def _fraction(v):
    if not _is_num(v) or not 0 <= v < 1:
        raise PltError(f"invalid loss {units.show(v)}: a fraction in [0, 1)")
    return v


def _rate(unlimited_ok: bool):
    def parse(v):
        if v is None and unlimited_ok:
            return None
        if not isinstance(v, str):
            raise PltError(f'invalid rate {units.show(v)}: a string such as "4mbit"')
        if units.rate_bps(v, "rate") is None:
            if not unlimited_ok:
                raise PltError(f"invalid rate {units.show(v)}: the fairness runs need a bottleneck rate")
            return None
        return v

    return parse


def _page(v):
    if not isinstance(v, str):
        raise PltError(f"invalid page {units.show(v)}: a bundled page name")
    bundled.path(v)  # unknown name -> PltError listing the names
    return v


def _knob_item(v):
    if not isinstance(v, str):
        raise PltError(f'invalid knob {units.show(v)}: "NAME=VALUE"')
    presets.values(None, [v], FIXED)
    return v


# file key (under [icw]) -> (Params field, element parser, is a list)
KEYS = {
    "quick": ("quick", _bool, False),
    "cc": ("cc", _choice("congestion control", CC_CHOICES), False),
    "repetitions": ("reps", _int("number of loads per point", 1, 10_000), False),
    "seed": ("seed", _int("seed", 0, 2**32 - 1), False),
    "parts": ("parts", _choice("part", PARTS), True),
    "rate": ("rate", _rate(True), False),
    "max_conns_per_host": ("max_conns_per_host", _int("connections per host", 1, 64), False),
    "load_timeout_s": ("load_timeout_s", _timeout, False),
    "initcwnd": ("icws", check_icw, True),
    "rtt.rtt": ("rtts", _knob_rtt, True),
    "loss.loss": ("losses", loss, True),
    "loss.rtt": ("loss_rtt_ms", _knob_rtt, False),
    "transfer.initcwnd": ("transfer_icws", check_icw, True),
    "transfer.rtt": ("transfer_rtts", _knob_rtt, True),
    "transfer.pages": ("transfer_pages", _page, True),
    "transfer.repetitions": ("transfer_reps", _int("number of loads per point", 1, 10_000), False),
    "fairness.initcwnd": ("fairness_icws", check_icw, True),
    "fairness.seconds": ("fairness_seconds", _seconds, False),
    "fairness.rtt": ("fairness_rtt_ms", _knob_rtt, False),
    "fairness.rate": ("fairness_rate", _rate(False), False),
    "fairness.loss": ("fairness_loss", loss, False),
    "fairness.loss_up": ("fairness_loss_up", loss, False),
    "fairness.download_bytes": ("fairness_download_bytes", _int("download size", 1, 100_000_000), False),
    "fairness.long_flow": ("fairness_long_flow", _choice("long-flow tool", LONG_FLOWS), False),
    "stack": ("stack", _choice("stack", STACKS), False),
    "knobs": ("knobs", _knob_item, True),
}
# the study's older key names (numbers in ms and percent), still read
OLD_KEYS = {
    "reps": ("reps", KEYS["repetitions"][1], False),
    "icws": ("icws", check_icw, True),
    "rtt.rtts_ms": ("rtts", _rtt, True),
    "loss.losses": ("losses", percent, True),
    "loss.rtt_ms": ("loss_rtt_ms", _rtt, False),
    "transfer.icws": ("transfer_icws", check_icw, True),
    "transfer.rtts_ms": ("transfer_rtts", _rtt, True),
    "transfer.reps": ("transfer_reps", KEYS["transfer.repetitions"][1], False),
    "fairness.icws": ("fairness_icws", check_icw, True),
    "fairness.rtt_ms": ("fairness_rtt_ms", _rtt, False),
}
# Params field -> element check in Params units (losses are fractions there, RTTs ms)
_CHECK = {f: (_fraction if p is loss else _rtt if p is _knob_rtt else p, many) for f, p, many in KEYS.values()}


# ---- files -------------------------------------------------------------------------------
def load(path: str) -> dict:
    """The values an ICW-study file sets, as {Params field: value}."""
    return from_dict(read_toml(path)[0], path)


def from_dict(doc: dict, where: str = "icw study") -> dict:
    def bad(key, msg):
        return PltError(f"{where}: key '{key}': {msg}")

    flat = file_table(doc, "icw", PARTS, where, "examples/icw-study.toml", "an ICW-study file")
    out, by = {}, {}
    for key, v in flat.items():
        if key not in KEYS and key not in OLD_KEYS:
            sec = key.rpartition(".")[0]
            known = [k.rpartition(".")[2] for k in KEYS if k.rpartition(".")[0] == sec]
            known += [] if sec else [f"[icw.{x}]" for x in PARTS]
            raise bad(f"icw.{key}", f"unknown key (known here: {', '.join(known)})")
        field, parse, many = KEYS.get(key) or OLD_KEYS[key]
        if field in by:
            raise bad(f"icw.{key}", f"set twice (also as icw.{by[field]})")
        by[field] = key
        try:
            out[field] = () if field == "knobs" and v == [] else file_value(v, parse, many)
        except PltError as e:
            raise bad(f"icw.{key}", str(e)) from None
    return out


def resolve(file_values: dict | None = None, **given) -> Params:
    """Defaults < ``file_values`` < ``given`` (None: not given); checked. Whatever neither sets
    takes the quick defaults if ``quick`` is set by either."""
    return engine_resolve("ICW-study", defaults, check, file_values, given)


def options(given: dict) -> Params:
    """The study's parameters from its options' values (``PARAMS``): defaults < the --config
    file < the flags given."""
    v = values(PARAMS, given)
    return resolve(
        load(v["config"]) if v["config"] else {},
        quick=v["quick"],
        cc=v["cc"],
        reps=v["reps"],
        icws=v["icw"] or None,
        rtts=v["rtt"] or None,
        losses=[percent(x) for x in v["loss"]] if v["loss"] else None,
        fairness_seconds=v["fairness_seconds"],
        parts=v["only"] or None,
        stack=v["stack"],
        knobs=tuple(v["knob"] or ()) or None,
    )


def note(given: dict) -> dict:
    """What study.json records besides the parameters: the file they came from."""
    return {"config_file": os.path.abspath(given["config"]) if given.get("config") else None}


def check(p: Params) -> Params:
    """Every value checked (lists as tuples); the messages name the value, not a key."""
    fixed = {}
    for f, (parse, many) in _CHECK.items():
        if f == "knobs" and not p.knobs:
            continue  # (an empty list: none)
        fixed[f] = file_value(getattr(p, f), parse, many)
    p = dataclasses.replace(p, **fixed)
    p.setup()  # the stack with the knobs given: checked now, in one line
    return p
