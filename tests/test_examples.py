"""Every sweep file in examples/ reads as written (pages resolve, knobs valid, settings that go
together) and expands to what its comments say. (The studies' files: their studies' tests, e.g. tests/test_icw_config.py.)"""

import glob
import os
import tomllib

import pytest

from pltlab.experiments import spec
from pltlab.studies import STUDIES

FOLDER = os.path.join(os.path.dirname(__file__), "..", "examples")


def _study_file(path: str) -> bool:
    """A study's file (`pltlab reproduce STUDY --config`: one table named for its study), which its
    study's tests read, not an experiment file."""
    with open(path, "rb") as f:
        doc = tomllib.load(f)
    return any(k in STUDIES and isinstance(v, dict) for k, v in doc.items())


EXAMPLES = sorted(p for p in glob.glob(os.path.join(FOLDER, "*.toml")) if not _study_file(p))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_reads(path):
    exp = spec.load(path)
    assert exp.pages and exp.n_runs > 0
    for c in range(len(exp.configs)):
        exp.run_config(c)  # every configuration is a valid run


def test_chromium_tls_example_is_a_warm_visit_sweep():
    exp = spec.load(os.path.join(FOLDER, "today-tls-chromium.toml"))
    cfgs = [exp.run_config(c) for c in range(len(exp.configs))]
    assert {c.client for c in cfgs} == {"chromium"} and {c.protocol for c in cfgs} == {"h2"}
    assert sorted(c.tls for c in cfgs) == ["0rtt", "full", "resume"]
    assert exp.n_runs == 7 * 3 * 3
