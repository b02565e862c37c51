"""The handshake study (issue 26): `pltlab reproduce handshakes`, a plugin of the experiment
engine. What TLS 1.3 resumption and 0-RTT, TFO, h2 and QUIC save in round trips and ms, paired
load against load, and what TFO still adds once 0-RTT and QUIC exist.

Modules: study_file (parameters, the study file examples/handshakes.toml, options), parts (the
experiments: per loader, TCP and QUIC), effects (pure: the paired comparisons and the answer),
analysis (results from the databases), report (sections, figure, JSON).
"""

from pltlab.studies.handshakes import analysis, effects, parts, report, study_file

NAME = "handshakes"
PARAMS = study_file.PARAMS
HELP = study_file.HELP.format(full=parts.size(study_file.defaults()), quick=parts.size(study_file.defaults(quick=True)))
Params = study_file.Params
options = study_file.options  # the study's parameters from the options' values
note = study_file.note  # study.json: the --config file
params = study_file.params  # the parameters study.json recorded
announce = report.announce
experiments = parts.experiments
results = analysis.results  # (p, out_dir, explainer): from the experiments' databases
sections = report.sections
figures = report.figures
title = report.title
document = report.full  # results.json
summary = report.slim  # what --json prints

__all__ = [
    "HELP",
    "NAME",
    "PARAMS",
    "Params",
    "announce",
    "document",
    "effects",
    "experiments",
    "figures",
    "note",
    "options",
    "params",
    "results",
    "sections",
    "summary",
    "title",
]
