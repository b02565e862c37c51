"""Studies: the published experiments this lab reproduces, as plugins of the experiment engine.

A study (a module or package here, registered in STUDIES) provides its parameters, its
experiments (``experiments(params) -> [(folder, Experiment)]``: each run by the sweep engine into
its own results database under the study's output folder, measurement kinds from
pltlab.run.kinds), its checks against the published results, and its report sections and
figures (``sections``, ``figures``; rendered by pltlab.report). pltlab.studies.engine runs a
study's experiments, resumable run by run.
"""

from pltlab.studies import icw, tfo

STUDIES = {"tfo": tfo, "icw": icw}
