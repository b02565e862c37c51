"""What every study shares: its parameters as declared for `pltlab reproduce STUDY` (``Param``,
the options every study has: ``SHARED``), its experiments as the sweep engine runs them (one
results database per experiment, in a folder of the study's output folder), and running them all,
resumable."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
from dataclasses import dataclass, field

from rich.console import Console

from pltlab import __version__, files, units
from pltlab.errors import PltError
from pltlab.experiments import lock, sweep
from pltlab.experiments.spec import Config, Experiment
from pltlab.run.config import RunConfig

STUDY_FILE = "study.json"  # in a study's output folder: which study, with which parameters


@dataclass(frozen=True)
class Param:
    """One parameter of a study, declared once: `pltlab reproduce STUDY` offers it as an option
    (cli/studies.py builds the command from the study's ``PARAMS``). ``name``: the key of the
    values the study's ``options`` receives, and the option --name ("_" as "-") unless ``flags``
    name it ("-c", "--config"; an on/off pair "--quick/--full"). ``default``: what a value not
    given is (None: the study's own default applies; shown in the help unless ``show_default``
    is False or it is None/False). ``choices``: the values the study takes (its own checks
    refuse any other in one line, naming the option). ``many``: repeatable, a list of ``type``.
    ``help`` may name the study as {study}."""

    name: str
    type: type = str
    default: object = None
    help: str = ""
    choices: tuple = ()
    many: bool = False
    flags: tuple[str, ...] = ()
    show_default: bool | None = None

    def but(self, **changes) -> Param:
        """This parameter with other words (a study's own help, flags or default)."""
        return dataclasses.replace(self, **changes)


# The options of every study (`pltlab reproduce STUDY`; the cluster's come from the CLI). A study
# lists one in its PARAMS to place it among its own or to give it its own words (``but``); those
# it does not list follow its own. `quick` reaches the study's ``options``; the others say where
# the results go and how they are printed.
QUICK = Param("quick", bool, False, "Fewer repetitions.")
JSON = Param("json", bool, False, "Print one JSON object.", flags=("--json",))
OUTPUT = Param("output", str, None, "Output folder (default results/reproduce-{study}-TIME).", flags=("-o", "--output"))
RESUME = Param("resume", bool, False, "Continue a killed run in -o DIR.")
SHARED = (QUICK, JSON, OUTPUT, RESUME)
RUN_OPTIONS = ("json", "output", "resume")  # (the shared ones that are not the study's parameters)


def declared(params: tuple[Param, ...]) -> tuple[Param, ...]:
    """A study's options in their order: its ``PARAMS``, then the shared ones it does not list."""
    names = [p.name for p in params]
    if len(set(names)) != len(names):
        raise ValueError(f"a study declares a parameter twice: {names}")
    return tuple(params) + tuple(p for p in SHARED if p.name not in names)


def values(params: tuple[Param, ...], given: dict) -> dict:
    """Every declared parameter's value: ``given``, else its default."""
    unknown = set(given) - {p.name for p in declared(params)}
    if unknown:
        raise TypeError(f"unknown study parameter(s) {sorted(unknown)}")
    return {**{p.name: p.default for p in declared(params)}, **given}


def file_table(doc: dict, name: str, parts, where: str, example: str, what: str) -> dict:
    """A study file's one table ``[name]`` flattened: its keys, and those of its sub-tables
    ``parts`` as "part.key"; one PltError line naming ``where`` and the key otherwise (``what``:
    the file's kind in words, "an ICW-study file"; ``example``: the file to see)."""
    for k in doc:
        if k != name:
            raise PltError(f"{where}: key '{k}': unknown key ({what} holds one table, [{name}])")
    tab = doc.get(name)
    if not isinstance(tab, dict):
        raise PltError(f"{where}: no [{name}] table (see {example})")
    flat = {}
    for k, v in tab.items():
        if k in parts:
            if not isinstance(v, dict):
                raise PltError(f"{where}: key '{name}.{k}': must be a table ([{name}.{k}])")
            flat.update({f"{k}.{k2}": v2 for k2, v2 in v.items()})
        else:
            flat[k] = v
    return flat


def file_value(v, parse, many: bool):
    """A study file's value of one key: ``parse``d, or with ``many`` a tuple of distinct parsed
    values (a single value is a list of one); one PltError line otherwise."""
    if not many:
        return parse(v)
    vs = v if isinstance(v, (list, tuple)) else [v]
    if not vs:
        raise PltError("empty list")
    out = tuple(parse(x) for x in vs)
    if len(set(out)) != len(out):
        raise PltError(f"duplicate values in {list(vs)!r}")
    return out


def resolve(what: str, defaults, check, file_values: dict | None, given: dict):
    """A study's parameters (a dataclass): ``defaults(quick)`` < ``file_values`` < ``given``
    (None: not given), then ``check``ed. Whatever neither sets takes the quick defaults if
    ``quick`` is set by either. ``what`` names the study in the TypeError of an unknown field."""
    vals = {**(file_values or {}), **{k: v for k, v in given.items() if v is not None}}
    base = defaults(bool(vals.get("quick", False)))
    fields = {f.name for f in dataclasses.fields(base)}
    for k in vals:
        if k not in fields:
            raise TypeError(f"unknown {what} parameter {k!r}")
    return check(dataclasses.replace(base, **vals))


def as_json(params) -> dict:
    """A study's parameters as study.json records them (a dict, or an object with ``as_json``)."""
    return params.as_json() if hasattr(params, "as_json") else dict(params)


@dataclass
class StudyExperiment(Experiment):
    """An Experiment with RunConfig settings common to all its configurations (``run``: e.g. a
    load timeout, the kind's parameters in ``extra``), part of its digest, so a resume with other
    settings is refused like any other experiment."""

    run: dict = field(default_factory=dict)

    def run_config(self, c: int) -> RunConfig:
        return dataclasses.replace(super().run_config(c), **self.run)

    def digest(self) -> str:
        base = super().digest()
        if not self.run:
            return base
        return hashlib.sha256(json.dumps([base, self.run], sort_keys=True).encode()).hexdigest()[:16]


def table(title: str, headers: list[str], rows: list[list[str]], note: str = "") -> dict:
    """A report section: a table of text cells (pltlab.report renders it in Markdown and HTML)."""
    return {"title": title, "headers": headers, "rows": rows, "note": note}


def lines(title: str, items: list[str], bad: list[str] | tuple = ()) -> dict:
    """A report section: a list of lines; those starting with an entry of ``bad`` are marked."""
    return {"title": title, "lines": items, "bad": list(bad)}


def config(
    rtt_ms: float,
    icw: int | None = None,
    loss: float = 0.0,
    rate: str | None = None,
    rate_up: str | None = None,
    cc: str = "cubic",
    client: str = "builtin",
    warm: bool = True,
) -> Config:
    """One configuration from user-facing values (RTT in ms, loss a fraction, rates such as
    "4mbit"), in the canonical form experiment files give (spec._parse): run keys stay stable."""
    rate_bps = units.rate_bps(rate, "rate")
    up_bps = units.rate_bps(rate_up, "uplink rate") if rate_up is not None else None
    return Config(
        rtt=f"{units.duration_us(f'{rtt_ms}ms', 'rtt')}us",
        rate=None if rate_bps is None else f"{rate_bps}bit",
        rate_up=None if up_bps is None else f"{up_bps}bit",
        loss=f"{units.loss_fraction(loss, 'loss'):.6g}",
        queue="1000",
        icw=icw,
        cc=cc,
        client=client,
        warm=warm,
        overrides=(),
    )


def plan(experiments: list[tuple[str, Experiment]], out_dir: str) -> list[tuple[str, Experiment]]:
    """(folder, experiment) with each folder under ``out_dir`` ("" = the folder itself)."""
    return [(os.path.join(out_dir, sub) if sub else out_dir, exp) for sub, exp in experiments]


def prepare(name: str, params: dict, experiments: list[tuple[str, Experiment]], out_dir: str, resume: bool) -> None:
    """Refuse before anything is written: a study folder that is not empty without ``resume``,
    another study's folder, or an experiment folder holding a different experiment."""
    sweep.check_out_dir(out_dir)
    if os.path.isdir(out_dir) and lock.contents(out_dir):
        if not resume:
            raise PltError(
                f"{out_dir} exists and is not empty: pass --resume to continue that study, "
                f"or choose another output folder (-o)"
            )
        other = read_study(out_dir)
        if other is not None and other.get("study") != name:
            raise PltError(f"{out_dir} holds another study ({other.get('study')!r}): choose another output folder (-o)")
    for d, exp in plan(experiments, out_dir):
        sweep.prepare(exp, d, resume)


def read_study(out_dir: str) -> dict | None:
    try:
        with open(os.path.join(out_dir, STUDY_FILE)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def record(name: str, params: dict, out_dir: str, note: dict) -> None:
    """Write ``study.json``: the study, its parameters, its sessions and ``note``."""
    prev = read_study(out_dir) or {}
    doc = {
        "study": name,
        "params": params,
        "pltlab": __version__,
        "started": prev.get("started", time.strftime("%Y-%m-%d %H:%M:%S %z")),
        "sessions": prev.get("sessions", 0) + 1,
        **note,
    }
    files.write_text(os.path.join(out_dir, STUDY_FILE), json.dumps(doc, indent=1))


def run(
    name: str,
    params: dict,
    experiments: list[tuple[str, Experiment]],
    out_dir: str,
    resume: bool = False,
    console: Console | None = None,
    note: dict | None = None,
    executor=None,
) -> dict:
    """Run every experiment of a study through the sweep engine, one after the other, each into
    its folder (resumable run by run). ``study.json`` records the study, its parameters (``params``:
    JSON) and ``note`` (e.g. the parameters file). Returns {experiment name: the sweep's
    statistics} and the session's wall time. ``executor``: where the loads run (sweep.Sweep)."""
    with lock.held(out_dir, "study"):  # before the checks: two started at once, one refused
        return _run(name, params, experiments, out_dir, resume, console, note, executor)


def _run(name, params, experiments, out_dir, resume, console, note, executor) -> dict:
    prepare(name, params, experiments, out_dir, resume)
    record(name, params, out_dir, {"experiments": {exp.name: sub for sub, exp in experiments}, **(note or {})})
    t0 = time.monotonic()
    out = {}
    for d, exp in plan(experiments, out_dir):
        out[exp.name] = sweep.Sweep(exp, d, console, executor=executor).run()
    return {"sweeps": out, "wall_s": time.monotonic() - t0}
