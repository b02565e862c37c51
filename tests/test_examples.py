"""Every sweep file in examples/ reads as written (pages resolve, knobs valid, settings that go
together) and expands to what its comments say. (The ICW-study files: tests/test_icw_config.py.)"""

import glob
import os

import pytest

from pltlab.experiments import spec

FOLDER = os.path.join(os.path.dirname(__file__), "..", "examples")
EXAMPLES = sorted(
    p for p in glob.glob(os.path.join(FOLDER, "*.toml")) if not os.path.basename(p).startswith("icw-study")
)


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
