"""The protocols table (issue 25, 2): one row per HTTP version, the one place a protocol is named."""

import pytest

from pltlab import protocols
from pltlab.dataplane import document
from pltlab.errors import PltError
from pltlab.loaders.validity import expected_protocol
from pltlab.replay.manifest import _listen
from pltlab.run import knobs


def test_the_table_is_the_protocol_knobs_choices():
    assert protocols.CHOICES == ("recorded", "h1", "h2") == knobs.PROTOCOLS
    assert [(p.name, p.alpn, p.transport, p.multiplexed) for p in protocols.PROTOCOLS] == [
        ("h1", "http/1.1", "tcp", False),
        ("h2", "h2", "tcp", True),
    ]
    with pytest.raises(PltError, match=r"unknown protocol 'h3' \(choose from h1, h2\)"):
        protocols.get("h3")


@pytest.mark.parametrize(
    "recorded,want", [("h2", "h2"), ("H3", "h2"), ("spdy", "h2"), ("http/1.1", "h1"), ("", "h1"), (None, "h1")]
)
def test_recorded_protocols_replay_as_a_row(recorded, want):
    assert protocols.of_recorded(recorded).name == want


def test_the_validity_rule_and_alpn_offers():
    h2 = protocols.get("h2")
    assert protocols.expected("https", h2) == "h2" and protocols.expected("http", h2) == "http/1.1"
    assert protocols.expected("https", None) == "http/1.1"
    ips = {"a.test": "10.0.0.1", "b.test": "10.0.0.2"}
    assert expected_protocol("https://a.test/x", ips, {"10.0.0.1": h2}) == "h2"
    assert expected_protocol("https://b.test/x", ips, {"10.0.0.1": h2}) == "http/1.1"
    h1 = protocols.get("h1")
    assert expected_protocol("https://a.test/x", ips, {"10.0.0.1": h1}) == "http/1.1"
    assert document(_listen("10.0.0.1", 443, True, h2))["alpn"] == ["h2", "http/1.1"]
    assert document(_listen("10.0.0.1", 443, True, h1))["alpn"] == ["http/1.1"]
    assert "alpn" not in document(_listen("10.0.0.1", 80, False, h2))
    # of two protocols recorded for one address, the later row of the table is offered
    assert protocols.preferred(h1, h2) is h2 and protocols.preferred(h2, h1) is h2
    assert protocols.by_alpn("H2") is h2 and protocols.by_alpn(None) is None


def test_knobs_a_row_claims_apply_only_under_it():
    assert protocols.applies("h2", "server_priority") and protocols.applies("recorded", "server_priority")
    assert not protocols.applies("h1", "server_priority")
    assert protocols.applies("h1", "tfo")
