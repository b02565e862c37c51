"""The 2011 set-ups as presets: each a named plain combination of knob values (pltlab.run.knobs),
declared once here with where each value comes from, so a user can vary them one by one
(`--knob NAME=VALUE` of `reproduce tfo` and `reproduce icw` overrides one; docs/knobs.md
"Presets" has the table and the sources).

    values("paper2011")                        # {knob: user value}
    values("paper2011", ["rack=on"])           # the same with one knob set otherwise
    split(values(...))                         # (point knobs: each Config's, experiment-level)

`reproduce tfo --setup paper2011` and `reproduce icw --stack 2011` name them; "today" is no
preset (every knob at its default, as the studies ran before).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pltlab import units
from pltlab.errors import PltError
from pltlab.experiments.spec import POINT_KNOBS, Config
from pltlab.run import knobs

TODAY = "today"
# experiment-level knobs a preset or --knob may set besides the point knobs (Experiment fields)
EXPERIMENT_KNOBS = ("client_rmem", "max_conns_per_host")


@dataclass(frozen=True)
class Preset:
    name: str
    what: str
    # knob -> (user value, where it comes from / the nearest available on this kernel)
    knobs: dict


# Linux 2.6.34 (2010), the TFO patches' base: what its TCP had and had not.
_LINUX_2634 = {
    "rack": ("off", "RACK came with Linux 4.4 (2016): 2.6.34 counted duplicate ACKs"),
    "tlp": ("off", "tail loss probes came with Linux 3.10 (2013), early retransmit with 3.5"),
    "frto": ("on", "F-RTO was on (2) by default from 2.6.24"),
    "sack": ("on", "on by default"),
    "ss_after_idle": ("on", "on by default (since 2.6.18)"),
    "cc": (
        "cubic",
        "CUBIC was the default from 2.6.19; HyStart (2.6.29) is a module parameter of the host, not a knob",
    ),
}

PRESETS: dict[str, Preset] = {
    "paper2011": Preset(
        "paper2011",
        "the TFO paper's testbed (CoNEXT 2011): Linux 2.6.34 with the TFO patches, Chrome of 2011",
        {
            **_LINUX_2634,
            "icw": (
                10,
                "not stated in the paper as we could read it; two of its authors proposed IW10 (Dukkipati et "
                "al. 2010) and Linux made 10 the default in 2.6.39 (2011); upstream 2.6.34 sent 3 (RFC 3390)",
            ),
            "client_rmem": (
                "87380",
                "the client's initial receive buffer (net.ipv4.tcp_rmem) of 2.6.34: 87380 bytes, autotuned",
            ),
            "max_conns_per_host": (6, "Chrome's per-host limit in 2011, as today (keep-alive reuse as Chrome's)"),
        },
    ),
    "2011": Preset(
        "2011",
        "the Yahoo! ICW study's set-up (IMC 2011): Linux servers of 2011, Windows-XP-era clients, netem loss",
        {
            **_LINUX_2634,
            "wscale": (
                "off",
                "most of the study's clients ran Windows XP, whose TCP offers neither window scaling nor "
                "timestamps by default (Tcp1323Opts 0): receive windows of at most 64 KB",
            ),
            "timestamps": ("off", "Windows XP's default (Tcp1323Opts 0)"),
            "loss_burst": (
                1,
                "the study's lab emulated loss with netem, whose default is random per packet; set loss_burst "
                "above 1 for bursty (Gilbert-Elliott) loss",
            ),
        },
    ),
}


def names() -> tuple[str, ...]:
    return tuple(PRESETS)


_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+\.[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?")


def _parse_override(item: str, fixed: tuple) -> tuple[str, object]:
    """ "NAME=VALUE" -> (knob name, value as an experiment file would hold it: a number or text)."""
    name, sep, value = item.partition("=")
    name, value = name.strip(), value.strip()
    if not sep or not name or not value:
        raise PltError(f"invalid --knob {units.show(item)}: NAME=VALUE, e.g. rack=on")
    k = knobs.ALIASES.get(name)
    allowed = {x.name for x in POINT_KNOBS if x.name not in ("tfo", "client", "protocol", "hosts")}
    allowed = (allowed | set(EXPERIMENT_KNOBS)) - set(fixed)
    if k is not None and k.name in fixed:
        raise PltError(f"invalid --knob {units.show(item)}: the study sets {k.name} itself (its own options)")
    if k is None or k.name not in allowed:
        raise PltError(
            f"invalid --knob {units.show(item)}: {name!r} is not a knob a set-up sets (choose from "
            f"{', '.join(sorted(allowed))})"
        )
    if _INT.fullmatch(value):
        return k.name, int(value)
    return k.name, float(value) if _FLOAT.fullmatch(value) else value


def values(name: str | None, overrides=(), fixed: tuple = ()) -> dict:
    """The preset's knob values (user values), then ``overrides`` ("NAME=VALUE" each, or a dict):
        what the user gives wins. ``name`` None or "today": the overrides alone. Checked (one PltError
        line naming the preset or the --knob). ``fixed``: knobs the study sets itself (--knob refuses
    them; a preset's value of one is dropped)."""
    if name not in (None, TODAY) and name not in PRESETS:
        raise PltError(f"unknown set-up {name!r} (choose from {', '.join((TODAY, *PRESETS))})")
    out = {} if name in (None, TODAY) else {k: v for k, (v, _) in PRESETS[name].knobs.items() if k not in fixed}
    items = overrides.items() if isinstance(overrides, dict) else (_parse_override(o, fixed) for o in overrides)
    given = {}
    for k, v in items:
        if k in given:
            raise PltError(f"--knob {k} given twice")
        given[k] = v
    out.update(given)
    knobs.parse(out, where=f"set-up {name}" if name not in (None, TODAY) else "--knob")
    return out


def split(vals: dict) -> tuple[dict, dict]:
    """(point-knob values: each Config's, experiment-level ones: EXPERIMENT_KNOBS), typed by field."""
    typed = knobs.parse(vals, [knobs.KNOBS[n] for n in vals])
    point = {knobs.KNOBS[n].field: typed[knobs.KNOBS[n].field] for n in vals if n not in EXPERIMENT_KNOBS}
    exp = {n: typed[knobs.KNOBS[n].field] for n in vals if n in EXPERIMENT_KNOBS}
    return point, exp


def configure(configs: list[Config], point: dict) -> list[Config]:
    """``configs`` with the point knobs of a set-up (typed, by field) set."""
    return [Config(**{**c.values(), **point}) for c in configs] if point else configs


def toml_lines(vals: dict) -> str:
    """The set-up's knobs as experiment-file lines (the study's source shows them)."""
    out = []
    for n, v in vals.items():
        k = knobs.KNOBS[n]
        typed = k.parse(v, n)
        number = isinstance(typed, (int, float)) and not isinstance(typed, bool)
        out.append(f"{k.toml} = {typed:g}\n" if number else f'{k.toml} = "{v}"\n')
    return "".join(out)
