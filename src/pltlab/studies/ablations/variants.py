"""The ablations' variants, declared once, from the presets (pltlab.studies.presets): starting from
today's defaults, one factor of the 2011 set-up switched at a time (``today+K=V``), the preset
itself, the preset with one factor switched back to today's value (``PRESET+K=V0``), and candidate
causes the preset does not hold (EXTRA, each with its source). A variant whose knob values equal an
earlier one's is left out (a preset value that is today's default moves nothing)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pltlab.errors import PltError
from pltlab.run import knobs
from pltlab.studies import presets
from pltlab.studies import tfo as tfo_study
from pltlab.studies.icw import study_file as icw_study

# what a knob left at "default" is, where its typed value does not say it: the routes' initcwnd
# None is the kernel's 10 (net/wan.py), so icw=10 is no variant of today's
_DEFAULT_AS = {"icw": 10}


@dataclass(frozen=True)
class Extra:
    """A candidate cause that is not a factor of the preset: one knob value, and why it is one."""

    knob: str
    value: object
    why: str


@dataclass(frozen=True)
class Paper:
    """What the ablations of one paper run: its study (``study``, its set-up option ``option``
    naming ``preset``), the knobs the study sets itself (``fixed``), its EXTRA candidate causes
    and the study options of a variant (``study_values``: the ablation's values -> the study's)."""

    name: str
    study: str
    preset: str
    option: str
    fixed: tuple
    extra: tuple[Extra, ...]
    quick_minutes: float  # machine time of one --quick variant (measured, busy machine)
    full_minutes: float  # machine time of one variant of the full study (measured, quiet machine)
    options: Callable  # the study's options' values -> its parameters, checked


PAPERS = {
    "tfo": Paper(
        "tfo",
        "tfo",
        "paper2011",
        "setup",
        tfo_study.FIXED,
        (
            Extra("icw", 3, "Linux 2.6.34 upstream sent an initial window of 3 (RFC 3390); IW10 came with 2.6.39"),
            # an HTTP/1.0-like server (no keep-alive), as the CS244 2013 reproduction's SimpleHTTPServer;
            # its knob is another change's: the row joins when pltlab.run.knobs has it
            Extra("keepalive", "off", "the CS244 2013 reproduction served the pages with SimpleHTTPServer (HTTP/1.0)"),
            # the lab's drop-tail queue of 1000 packets holds ~3 s at 4 Mbit/s (a load's downlink packets
            # waited 0.5-0.9 s in it, quick run of 2026-11-27); the paper does not state its emulator's
            Extra(
                "queue",
                50,
                "a short bottleneck queue: Dummynet's default of 50 slots (the paper's queue is not stated)",
            ),
        ),
        7.0,  # `reproduce tfo --quick`: 5-7 min of loads on this machine
        13.0,  # 5 loads a side: 12 min a variant, 14 with keepalive=off (2026-11-28)
        tfo_study.options,
    ),
    "icw": Paper(
        "icw",
        "icw",
        "2011",
        "stack",
        icw_study.FIXED,
        (
            Extra("loss_burst", 4, "bursty (Gilbert-Elliott, mean burst 4) rather than random loss at the same rate"),
            Extra("wscale", "off", "Windows XP clients: no window scaling (receive windows of at most 64 KB)"),
            Extra("timestamps", "off", "Windows XP clients: no TCP timestamps"),
            Extra("rack", "off", "no RACK loss detection (Linux before 4.4)"),
            Extra("tlp", "off", "no tail loss probes (Linux before 3.10)"),
        ),
        2.5,  # its two 60 s fairness runs took 61-69 s each (quick runs of 2026-11-27), then the report
        12.0,  # two 300 s fairness runs and the report (2026-11-28)
        icw_study.options,
    ),
}


@dataclass(frozen=True)
class Variant:
    """One run of the paper's study: its folder name, the set-up and knobs it runs with, what it
    is (``role``: today, toward (one factor toward 2011), preset, back (one factor back to today),
    extra) and the variant it is compared with (``base``: None for today and the preset)."""

    name: str
    setup: str
    knobs: tuple[str, ...]
    role: str
    base: str | None
    why: str = ""

    @property
    def factor(self) -> str:
        return " ".join(self.knobs)


def _name(setup: str, knob: str | None) -> str:
    return setup if knob is None else f"{setup}+{knob}"


def _item(k: str, v) -> str:
    return f"{k}={v}"


def declared(paper: Paper, quick: bool = False) -> list[Variant]:
    """Every variant of ``paper`` in order, before duplicates are left out. ``quick``: today, one
    factor toward 2011 at a time, the preset and the extras on the preset (no switching back)."""
    preset = presets.PRESETS[paper.preset]
    factors = [(k, v, why) for k, (v, why) in preset.knobs.items() if k not in paper.fixed]
    extras = [e for e in paper.extra if e.knob in knobs.KNOBS]  # (a knob not merged yet: no row)
    today, p = presets.TODAY, paper.preset
    out = [Variant(today, today, (), "today", None), Variant(p, p, (), "preset", None)]
    out += [Variant(_name(today, _item(k, v)), today, (_item(k, v),), "toward", today, why) for k, v, why in factors]
    if not quick:
        for k, _, _ in factors:
            item = _item(k, knobs.KNOBS[k].default)
            out.append(Variant(_name(p, item), p, (item,), "back", p, "today's default"))
    for e in extras:
        item = _item(e.knob, e.value)
        out.append(Variant(_name(p, item), p, (item,), "extra", p, e.why))
        if not quick:
            out.append(Variant(_name(today, item), today, (item,), "extra", today, e.why))
    return out


def knob_values(paper: Paper, v: Variant) -> dict:
    """The variant's set-up as knob values (checked: one PltError line naming the set-up or
    --knob), typed, with what "default" means filled in."""
    vals = presets.values(v.setup, list(v.knobs), paper.fixed)
    typed = knobs.parse(vals)
    for k, d in _DEFAULT_AS.items():
        field = knobs.KNOBS[k].field
        if typed.get(field) is None:
            typed[field] = d
    return typed


def variants(paper: str, quick: bool = False, only: tuple = ()) -> list[Variant]:
    """The variants of ``paper`` ("tfo" or "icw") to run, duplicates left out (a variant whose
    knob values equal an earlier one's), every one checked before anything runs. ``only``: these
    variants (by name, from the whole table even with ``quick``) and the bases they are compared
    with."""
    if paper not in PAPERS:
        raise PltError(f"invalid --paper {paper!r}: {' or '.join(PAPERS)}")
    pp = PAPERS[paper]
    out, seen = [], {}
    for v in declared(pp, quick and not only):  # --variant picks from the whole table
        key = repr(sorted(knob_values(pp, v).items()))
        if key in seen:
            continue
        seen[key] = v.name
        out.append(v)
    if only:
        names = {v.name for v in out}
        bad = [n for n in only if n not in names]
        if bad:
            raise PltError(f"--variant {bad[0]!r}: no such variant of {paper} (choose from {', '.join(sorted(names))})")
        want = set(only) | {v.base for v in out if v.name in only and v.base}
        out = [v for v in out if v.name in want]
    return out
