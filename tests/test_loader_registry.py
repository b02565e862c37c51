"""The loaders table (issue 25, 2): the client knob's choices and every loader-specific branch
come from one row per loader, never from comparing names."""

import os
import re
import subprocess
import sys

import pytest

from pltlab.errors import PltError
from pltlab.loaders import registry
from pltlab.run import knobs

SRC = os.path.join(os.path.dirname(__file__), "..", "src", "pltlab")


def test_the_client_knob_offers_the_table():
    assert tuple(registry.LOADERS) == ("builtin", "chromium") and knobs.KNOBS["client"].default == "builtin"
    with pytest.raises(PltError, match=r"unknown loader 'lynx' \(choose from builtin, chromium\)"):
        registry.get("lynx")


def test_no_loader_name_is_compared_outside_the_table():
    found = []
    for d, _, fs in os.walk(SRC):
        for f in fs:
            if f.endswith(".py") and f != "registry.py":
                text = open(os.path.join(d, f)).read()
                found += [f"{f}: {m}" for m in re.findall(r"client [!=]= \"\w+\"", text)]
    assert found == []


def test_rows_drive_validity_and_records():
    server = {"tls_full_used": 2, "tls_resumed_used": 1, "tls_early_used": 0}
    # a loader that resumes by itself needs one resumed connection; the built-in one every one
    builtin, chromium = registry.get("builtin"), registry.get("chromium")
    assert chromium.tls_problem("resume", server, []) is None
    assert "2 of the 3 TLS connections" in builtin.tls_problem("resume", server, [])
    assert builtin.tls_note("resume", server) is None and "resumed 1 of the 3" in chromium.tls_note("resume", server)
    assert builtin.request_record({"protocol": None})["protocol"] == "http/1.1"
    assert chromium.request_record({"protocol": None})["protocol"] is None


def test_the_runner_asks_the_registry_only():
    """A loader is a plug-in: its load and its own rules are reached through its row."""
    text = open(os.path.join(SRC, "run", "runner.py")).read()
    assert not re.search(r"pltlab\.loaders(\.| import )(builtin|chromium)|loaders import plan", text)
    assert registry.get("builtin").planned and registry.get("chromium").plan(None, False) is None


def test_the_table_stays_light_to_import():
    """`pltlab --help` reads the table (the client knob's choices): no pyroute2 behind it."""
    code = "import sys, pltlab.loaders.registry; assert 'pyroute2' not in sys.modules, 'pyroute2 loaded'"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_command_that_draws_and_links_nothing_loads_neither(tmp_path):
    """Every CLI command pays its imports at start-up (and the tests start the CLI hundreds of
    times): matplotlib and pyroute2 are imported where a figure is
    drawn or a link set up, not by a command refusing its experiment file."""
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "x"\npages = ["p.har"]\nloss = nan\n')
    code = (
        "import runpy, sys\n"
        f"sys.argv = ['pltlab', 'sweep', {str(exp)!r}]\n"
        "try:\n    runpy.run_module('pltlab', run_name='__main__')\n"
        "except SystemExit as e:\n    assert e.code == 2, e.code\n"
        "assert not {'matplotlib', 'pyroute2'} & set(sys.modules), 'matplotlib or pyroute2 loaded'\n"
    )
    cp = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert cp.returncode == 0, cp.stderr
    assert "key 'loss'" in cp.stderr
