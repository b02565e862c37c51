"""Studies: the published experiments this lab reproduces, as plugins of the experiment engine.

A study is a module or package here and one line in STUDIES; `pltlab reproduce <name>` is built
from it (cli/studies.py), with no command of its own. It provides:

- ``NAME``, ``HELP`` (the command's help) and ``PARAMS``: its parameters, declared once
  (pltlab.studies.engine.Param: name, type, default, help, choices), in the order of the
  command's options; the options every study has (engine.SHARED: --quick, --json, -o, --resume)
  follow unless it lists them (to place them or give them its own words);
- ``options(values) -> params``: its parameters from the options' values, checked (one-line
  errors); a dict, or an object with ``as_json()``: what study.json records;
- ``experiments(params) -> [(folder, Experiment)]``: each run by the sweep engine into its own
  results database under the study's output folder (folder "": the output folder itself),
  measurement kinds from pltlab.run.kinds; pltlab.studies.engine runs them, resumable run by run;
- ``announce(params, experiments, out_dir, resume) -> str``: the line the command starts with;
  ``note(values) -> dict`` (optional): what study.json records besides the parameters;
- its checks against the published results, and its report: ``sections`` (and, for a study of
  several experiments, ``results(params, out_dir, explainer)`` (``explainer``: what
  `pltlab explain`, a layer above the studies, finds in a folder's loads: the report's
  pltlab.report.why.StudyExplainer), ``figures``, ``title``, ``document``, ``params``: rendered
  by pltlab.report.study_report); ``summary``: what --json prints (one experiment: from the
  sweep's analysis, with ``conclusions`` and ``TABLE`` for the text; several: from the results).


A study of studies (``ablations``) provides instead of experiments ``runs(params) -> [(folder,
study, options' values)]`` (each another study's run into its folder, with its own resume),
``finished(folder)`` (a variant not to run again), ``begin``, ``announce(params, out_dir)``,
``finish(params, out_dir) -> summary`` and ``text(summary)``.
"""

from pltlab.studies import ablations, handshakes, icw, tfo

STUDIES = {"tfo": tfo, "icw": icw, "handshakes": handshakes, "ablations": ablations}
