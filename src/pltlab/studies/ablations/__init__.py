"""`pltlab reproduce ablations --paper tfo|icw`: which factors of the 2011 set-ups (pltlab.studies.presets)
account for the gap between a reproduction's figures and its paper's (issue 29).

A study of studies: each variant (``variants``: today's defaults, one factor switched toward
2011, the preset, one factor switched back, candidate causes the preset lacks; declared once in
``variants.PAPERS``) is the paper's own study (`reproduce tfo`, `reproduce icw --only fairness`)
run into its own folder DIR/<variant>, with that study's outputs and its own resume; a finished
variant is not run again. Then ``findings`` reads the folders: each variant's headline figures, each
factor's effect (variant minus base) with a BCa bootstrap interval (``effects``), written as
DIR/ablations.json and DIR/ablations.md; docs/results/paper-gaps.md is generated from such
folders (`python3 -m pltlab.studies.ablations.gaps DIR_TFO DIR_ICW`).

The command (cli/studies.py) runs a study that has ``runs(params)`` so: each (folder, study,
options) in turn, then ``finish(params, out_dir)``."""

from __future__ import annotations

import os

from pltlab.errors import PltError
from pltlab.studies import engine
from pltlab.studies.ablations import effects, findings, variants
from pltlab.studies.engine import JSON, OUTPUT, QUICK, RESUME, Param

NAME = "ablations"
PAPERS = tuple(variants.PAPERS)
_Q = {p: (len(variants.variants(p, True)), variants.PAPERS[p].quick_minutes) for p in PAPERS}
_F = {p: (len(variants.variants(p)), variants.PAPERS[p].full_minutes) for p in PAPERS}
HELP = (
    "Ablations of the 2011 set-ups: the paper's study once per variant (today, one factor toward the preset, the "
    "preset, one factor back, candidate causes), each factor's effect with its CI (DIR/ablations.md). Machine time "
    "with --quick (busy machine): "
    + "; ".join(f"{p}: {n} variants x ~{m:g} min = ~{n * m:.0f} min" for p, (n, m) in _Q.items())
    + "; full: "
    + "; ".join(f"{p}: {n} variants x ~{m:g} min = ~{n * m / 60:.1f} h" for p, (n, m) in _F.items())
    + "."
)
PARAMS = (
    Param("paper", str, None, "tfo (reproduce tfo, Table 1) or icw (reproduce icw --only fairness).", PAPERS),
    QUICK.but(help="Each study's --quick, and no variant switching a factor back from the preset."),
    OUTPUT.but(
        help="Output folder (default results/reproduce-ablations-PAPER-TIME).", flags=("-o", "--out", "--output")
    ),
    RESUME.but(help="Continue a killed ablation in -o DIR (a finished variant is not run again)."),
    JSON,
    Param(
        "variant",
        str,
        None,
        "Only these variants (repeatable; any of the full table, with --quick too) and the bases they are compared "
        "with.",
        many=True,
    ),
    Param("pages", str, None, "tfo: only these pages (amazon,nytimes,wsj,wikipedia)."),
    Param("reps", int, None, "tfo: repetitions per variant (the study's default otherwise)."),
    Param("fairness_seconds", float, None, "icw: duration of each fairness run (the study's default otherwise)."),
)


def options(given: dict) -> dict:
    """The ablation's parameters (checked, every variant's set-up included: one line, before
    anything runs)."""
    v = engine.values(PARAMS, given)
    if v["paper"] not in PAPERS:
        raise PltError(
            f"invalid --paper {v['paper']!r}: {' or '.join(PAPERS)}"
            if v["paper"]
            else "--paper is required: tfo or icw"
        )
    tfo = v["paper"] == "tfo"
    for k, ok in (("pages", tfo), ("reps", tfo), ("fairness_seconds", not tfo)):
        if v[k] is not None and not ok:
            raise PltError(f"--{k.replace('_', '-')} is for --paper {'tfo' if k != 'fairness_seconds' else 'icw'}")
    params = {k: v[k] for k in ("paper", "quick", "pages", "reps", "fairness_seconds")}
    params["variant"] = list(v["variant"] or ())
    check = variants.PAPERS[params["paper"]].options
    for _, _, vals in runs(params):  # every variant's options as its study checks them
        check(vals)
    return params


def plan(params: dict) -> list[variants.Variant]:
    return variants.variants(params["paper"], params["quick"], tuple(params["variant"]))


def runs(params: dict) -> list[tuple[str, str, dict]]:
    """(folder under the output folder, study, its options' values) per variant."""
    paper = variants.PAPERS[params["paper"]]
    out = []
    for v in plan(params):
        vals = {"quick": params["quick"], paper.option: v.setup, "knob": list(v.knobs)}
        if paper.name == "tfo":
            vals.update(pages=params["pages"], reps=params["reps"])
        else:
            vals.update(only=["fairness"], fairness_seconds=params["fairness_seconds"])
        out.append((v.name, paper.study, vals))
    return out


def finished(folder: str) -> bool:
    """A variant's study ran to its end: its report is written last."""
    return os.path.isfile(os.path.join(folder, "report.html"))


def begin(params: dict, out_dir: str, resume: bool) -> None:
    """Refuse a folder that is not empty without ``resume`` or that holds another study, then
    record study.json: the parameters and the variants (what findings reads)."""
    engine.prepare(NAME, params, [], out_dir, resume)
    prev = (engine.read_study(out_dir) or {}).get("params") or {}
    if prev and prev.get("paper") != params["paper"]:
        raise PltError(
            f"{out_dir} holds the ablations of --paper {prev.get('paper')}: choose another output folder (-o)"
        )
    engine.record(NAME, params, out_dir, {"variants": [v.__dict__ | {"knobs": list(v.knobs)} for v in plan(params)]})


def announce(params: dict, out_dir: str) -> str:
    names = [v.name for v in plan(params)]
    return f"reproduce ablations --paper {params['paper']}: {len(names)} variant(s) ({', '.join(names)}) -> {out_dir}"


def finish(params: dict, out_dir: str) -> dict:
    """DIR/ablations.json and DIR/ablations.md from the variants' folders; the summary."""
    return findings.write(out_dir)


text = findings.markdown  # what the command prints

__all__ = ["HELP", "NAME", "PARAMS", "announce", "begin", "effects", "finish", "finished", "options", "runs", "text"]
