"""The initial-congestion-window study (Yahoo! CDN, IMC 2011): `pltlab reproduce icw`, a plugin
of the experiment engine. Its four parts are experiments the sweep engine runs (resumable, one
results database each under the study's output folder); the statistics are
pltlab.experiments.stats'; the report is pltlab.report's.

Modules: study_file (the study's parameters and its files), parts (the Yahoo-like page, the parts as
experiments), analysis (results and checks from the databases), report (tables, figures, JSON).
"""

from pltlab.run.traced import check_icw
from pltlab.studies.icw import analysis, parts, report, study_file
from pltlab.studies.icw.parts import yahoo_page

NAME = "icw"
HELP = study_file.HELP  # `pltlab reproduce icw`: its help and options
PARAMS = study_file.PARAMS
options = study_file.options  # the study's parameters from the options' values
note = study_file.note  # study.json: the --config file
announce = report.announce  # the line the command starts with
Params = study_file.Params
params = study_file.resolve  # the study's parameters from field values (defaults < file < flags)
experiments = parts.experiments  # (folder, experiment) per part
results = analysis.results  # the study's results from the parts' databases
checks = analysis.checks  # against the published shapes
sections = report.sections  # tables and checks for the report
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
    "check_icw",
    "checks",
    "document",
    "experiments",
    "figures",
    "note",
    "options",
    "params",
    "results",
    "sections",
    "summary",
    "title",
    "yahoo_page",
]
