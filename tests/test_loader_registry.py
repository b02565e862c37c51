"""The loaders table (issue 25, 2): the client knob's choices and every loader-specific branch
come from one row per loader, never from comparing names."""

import os
import re

import pytest

from pltlab.errors import PltError
from pltlab.loaders import registry
from pltlab.run import knobs
from pltlab.run.runner import _request_record, tls_note, tls_problem

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
    assert tls_problem("resume", server, [], "chromium") is None
    assert "2 of the 3 TLS connections" in tls_problem("resume", server, [], "builtin")
    assert tls_note("resume", server, "builtin") is None and "resumed 1 of the 3" in tls_note(
        "resume", server, "chromium"
    )
    assert _request_record({"protocol": None}, "builtin")["protocol"] == "http/1.1"
    assert _request_record({"protocol": None}, "chromium")["protocol"] is None
