"""The protocols table (issue 25, 2): one row per HTTP version, the one place a protocol is named."""

import dataclasses
import sqlite3

import pytest

from pltlab import protocols
from pltlab.dataplane import document
from pltlab.errors import PltError
from pltlab.experiments import results, spec
from pltlab.loaders import registry
from pltlab.loaders.validity import expected_protocol
from pltlab.replay.manifest import _listen
from pltlab.report import statistics
from pltlab.run import knobs
from pltlab.run.config import RunConfig


def test_the_table_is_the_protocol_knobs_choices():
    assert protocols.CHOICES == ("recorded", "h1", "h2", "h3") == knobs.PROTOCOLS
    assert [(p.name, p.alpn, p.transport, p.multiplexed) for p in protocols.PROTOCOLS] == [
        ("h1", "http/1.1", "tcp", False),
        ("h2", "h2", "tcp", True),
        ("h3", "h3", "udp", True),
    ]
    with pytest.raises(PltError, match=r"unknown protocol 'h4' \(choose from h1, h2, h3\)"):
        protocols.get("h4")


@pytest.mark.parametrize(
    "recorded,want",
    [("h2", "h2"), ("H3", "h3"), ("spdy", "h2"), ("http/1.1", "h1"), ("", "h1"), (None, "h1")],
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
    assert protocols.applies("h3", "server_priority")
    assert not protocols.applies("h1", "server_priority")
    assert protocols.applies("h1", "tfo")


@pytest.mark.parametrize("knob", ["tfo", "warm", "icw", "cc", "client_rmem"])
def test_tcp_knobs_apply_over_tcp_only(knob):
    assert protocols.applies("h1", knob) and protocols.applies("h2", knob)
    assert not protocols.applies("h3", knob)
    assert protocols.applies("recorded", knob)  # (TCP origins of a page of both transports)


@pytest.mark.parametrize("knob", ["quic_cc", "quic_icw", "h3_discovery"])
def test_quic_knobs_apply_over_quic_only(knob):
    assert protocols.applies("h3", knob) and protocols.applies("recorded", knob)
    assert not protocols.applies("h1", knob) and not protocols.applies("h2", knob)


def test_knobs_of_no_transport_apply_everywhere():
    for knob in ("rtt", "loss", "tls", "max_conns_per_host", "model"):
        assert all(protocols.applies(p, knob) for p in protocols.CHOICES)


# ---- refusals and n/a -------------------------------------------------------------------------


@pytest.fixture
def h2_loader(monkeypatch):
    """A built-in loader that does not speak HTTP/3 (as before issue 26 step 8)."""
    spoken = dataclasses.replace(registry.LOADERS["builtin"], protocols=("h1", "h2"), protocols_later="issue 26 step 8")
    monkeypatch.setitem(registry.LOADERS, "builtin", spoken)


def test_tfo_under_h3_is_refused_in_one_line():
    with pytest.raises(PltError) as e:
        RunConfig(protocol="h3", tfo="on")
    assert str(e.value) == "tfo does not apply to protocol h3: TFO is TCP's; QUIC's handshake is its own"
    with pytest.raises(PltError, match="^tfo does not apply to protocol h3"):
        RunConfig.from_knobs({"protocol": "h3", "tfo": "both"})


@pytest.mark.parametrize(
    "protocol,knob,value",
    [
        ("h3", "icw", 20),
        ("h3", "cc", "bbr"),
        ("h3", "client_rmem", "kernel"),
        ("h3", "warm", "cold"),
        ("h2", "quic_cc", "bbr"),
        ("h1", "quic_icw", 32),
        ("h2", "h3_discovery", "alt-svc"),
    ],
)
def test_a_knob_of_the_other_transport_is_refused_off_its_default(protocol, knob, value):
    with pytest.raises(PltError, match=f"^{knob} does not apply to protocol {protocol}: "):
        RunConfig.from_knobs({"protocol": protocol, knob: value})
    RunConfig.from_knobs({"protocol": protocol, knob: knobs.KNOBS[knob].default})  # its default: fine
    RunConfig.from_knobs({"protocol": "recorded", knob: value})  # either transport's origins: fine


def test_columns_say_na_where_a_knob_does_not_apply():
    tcp, quic = ("icw", "cc", "client_rmem", "warm"), ("quic_cc", "quic_icw", "h3_discovery")
    h3 = RunConfig(protocol="h3", quic_cc="bbr", quic_icw=32)
    assert h3.tfo_modes == (False,)  # (TFO's default, both, asks for nothing a QUIC load can do)
    cols = h3.columns()
    assert [cols[c] for c in tcp] == [protocols.NA] * 4
    assert [cols[c] for c in quic] == ["bbr", 32, "forced"]
    cols = RunConfig(protocol="h2", icw=20).columns()
    assert [cols[c] for c in quic] == [protocols.NA] * 3 and cols["icw"] == 20
    cols = RunConfig(protocol="recorded", icw=20, quic_icw=32).columns()  # both transports apply
    assert cols["icw"] == 20 and cols["quic_icw"] == 32 and protocols.NA not in cols.values()
    assert RunConfig(protocol="h2").tfo_modes == (False, True)
    assert knobs.KNOBS["warm"].words(protocols.NA) == "TFO cookies n/a"


def test_the_builtin_loader_speaks_http3():
    assert "h3" in registry.LOADERS["builtin"].protocols and RunConfig(protocol="h3").protocol == "h3"


def test_a_loader_without_http3_refuses_protocol_h3(h2_loader):
    with pytest.raises(PltError) as e:
        RunConfig(protocol="h3")
    assert str(e.value) == "protocol h3: the built-in loader does not speak HTTP/3 yet (issue 26 step 8)"
    # Chromium speaks it (step 9: tests/test_chromium_h3.py)
    assert RunConfig.from_knobs({"protocol": "h3", "client": "chromium"}, where="x.toml").protocol == "h3"
    with pytest.raises(PltError, match=r"^exp\.toml: protocol h3: the built-in loader does not speak HTTP/3"):
        spec.from_dict({"pages": ["wikipedia"], "protocol": ["h2", "h3"], "tfo": "off"}, "exp.toml")
    assert RunConfig(protocol="recorded").protocol == "recorded"  # (recorded h3: replayed as h2, below)


def test_experiments_over_h3_refuse_tcp_knobs_and_their_comparison():
    exp = spec.from_dict({"pages": ["wikipedia"], "protocol": "h3"}, "e.toml")
    assert exp.tfo_modes == (False,) and exp.axis() is None  # TFO's default: off, nothing compared
    assert exp.run_config(0).columns()["icw"] == protocols.NA
    with pytest.raises(PltError, match="^e.toml: key 'compare': tfo does not apply to protocol h3"):
        spec.from_dict({"pages": ["wikipedia"], "protocol": "h3", "compare": "tfo"}, "e.toml")
    with pytest.raises(PltError, match="^e.toml: key 'tfo': tfo does not apply to protocol h3"):
        spec.from_dict({"pages": ["wikipedia"], "protocol": "h3", "tfo": ["off", "on"]}, "e.toml")
    with pytest.raises(PltError, match=r"^e.toml: key 'tfo': tfo does not apply to protocol h3.*tfo = \"off\""):
        spec.from_dict({"pages": ["wikipedia"], "protocol": ["h2", "h3"]}, "e.toml")
    with pytest.raises(PltError, match="^e.toml: icw does not apply to protocol h3"):
        spec.from_dict(
            {"pages": ["wikipedia"], "protocol": "h3", "initcwnd": ["default", 20], "compare": "icw"}, "e.toml"
        )
    both = spec.from_dict({"pages": ["wikipedia"], "protocol": ["h2", "h3"], "tfo": "off", "compare": "protocol"}, "e")
    assert [c.protocol for c in both.configs] == ["h2", "h3"] and both.blocks() == [[0, 1]]
    q = spec.from_dict({"pages": ["wikipedia"], "protocol": "h3", "quic_cc": ["cubic", "bbr"], "compare": "quic_cc"})
    assert [q.run_config(c).columns()["quic_cc"] for c in range(2)] == ["cubic", "bbr"]


def test_transport_knobs_beside_both_transports_apply_where_they_apply():
    """One value of a TCP knob and one of a QUIC knob beside h2 and h3: each where it applies,
    n/a on the other row; a list of values crossed with a row it does not apply to is refused."""
    doc = {"pages": ["wikipedia"], "protocol": ["h2", "h3"], "tfo": "off", "compare": "protocol"}
    exp = spec.from_dict(doc | {"cc": "cubic", "quic_cc": "bbr", "initcwnd": 20}, "e.toml")
    cols = [exp.run_config(c).columns() for c in range(len(exp.configs))]
    assert [(c["protocol"], c["cc"], c["icw"], c["quic_cc"]) for c in cols] == [
        ("h2", "cubic", 20, protocols.NA),
        ("h3", protocols.NA, protocols.NA, "bbr"),
    ]
    assert exp.blocks() == [[0, 1]]  # (the n/a columns are no difference between the pair)
    with pytest.raises(
        PltError, match="^e.toml: the point protocol h3, cc (cubic|bbr): cc does not apply to protocol h3"
    ):
        spec.from_dict(doc | {"cc": ["cubic", "bbr"]}, "e.toml")


def test_reports_pair_runs_over_tcp_and_quic():
    """A comparison of h2 and h3: their n/a columns (each the other transport's knobs) do not keep
    them apart."""
    rows = []
    for proto, plts in (("h2", (100.0, 110.0)), ("h3", (80.0, 90.0))):
        cols = RunConfig(protocol=proto, tfo="off").columns()
        for rep, plt in enumerate(plts, 1):
            rows.append(
                {
                    **cols,
                    "run_key": f"{proto}{rep}",
                    "status": "ok",
                    "valid": 1,
                    "plt_ms": plt,
                    "page": "p",
                    "config_key": proto,
                    "tfo": 0,
                    "rep": rep,
                }
            )
    got = statistics.analyse(rows, by="protocol")
    assert len(got["rows"]) == 1 and got["varying"] == []
    (row,) = got["rows"]
    assert row["values"] == ("h2", "h3") and row["plt"] == {False: [100.0, 110.0], True: [80.0, 90.0]}


def test_older_databases_open_with_na_in_the_quic_columns(tmp_path):
    """A results database from before the QUIC knobs gains their columns holding n/a (its runs were
    all over TCP)."""
    old = {k: v for k, v in results.RUN_COLUMNS.items() if k not in ("quic_cc", "quic_icw", "h3_discovery")}
    db = sqlite3.connect(tmp_path / results.DB_NAME)
    db.execute(f"CREATE TABLE runs (id INTEGER PRIMARY KEY, {', '.join(f'{k} {v}' for k, v in old.items())})")
    db.execute("INSERT INTO runs (run_key, attempt, status, icw) VALUES ('k', 1, 'ok', 10)")
    db.commit()
    db.close()
    res = results.Results(str(tmp_path))
    try:
        (row,) = res.rows()
    finally:
        res.close()
    assert (row["icw"], row["quic_cc"], row["quic_icw"], row["h3_discovery"]) == (10, "n/a", "n/a", "n/a")
