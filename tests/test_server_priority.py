"""Knob server_priority is the multiplexed rows' (h2, h3: the order of the responses sharing a
connection): refused off its default with protocol h1 in one line, n/a in h1's results column,
as keepalive is under h2 and h3 (tests/test_keepalive.py). In an experiment file one value of a
row's knob beside several protocols applies where it applies (n/a elsewhere); a list of its
values crossed with a protocol it does not apply to is refused, naming the point."""

import pytest
from conftest import pltlab_cmd

from pltlab import protocols
from pltlab.errors import PltError
from pltlab.experiments import spec
from pltlab.run.config import RunConfig

PAGE = "wikipedia"


def test_round_robin_is_refused_with_h1_and_its_column_says_n_a():
    with pytest.raises(PltError) as e:
        RunConfig(protocol="h1", server_priority="round-robin")
    msg = str(e.value)
    assert msg.startswith("server_priority does not apply to protocol h1: ") and "\n" not in msg
    cfg = RunConfig(protocol="h1")  # its default: fine, and its column says it did nothing
    assert cfg.server_priority == "rfc9218" and cfg.columns()["server_priority"] == "n/a"
    for p in ("h2", "h3", "recorded"):  # (recorded: its h2/h3 origins)
        cols = RunConfig(protocol=p, server_priority="round-robin", tfo="off").columns()
        assert cols["server_priority"] == "round-robin"


def test_the_cli_refuses_it_in_one_line():
    cp = pltlab_cmd("run", PAGE, "--protocol", "h1", "--server-priority", "round-robin")
    assert cp.returncode != 0 and "server_priority does not apply to protocol h1" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_one_value_beside_h1_and_h2_orders_the_h2_runs_only():
    doc = {"pages": [PAGE], "protocol": ["h1", "h2"], "server_priority": "round-robin", "compare": "protocol"}
    exp = spec.from_dict(doc, "e.toml")
    cfgs = {c.protocol: c for c in (exp.run_config(i) for i in range(len(exp.configs)))}
    assert cfgs["h2"].server_priority == "round-robin" and cfgs["h2"].columns()["server_priority"] == "round-robin"
    assert cfgs["h1"].server_priority == "rfc9218" and cfgs["h1"].columns()["server_priority"] == "n/a"
    assert exp.blocks() == [[0, 1]]  # h1 and h2 still pair: n/a is no difference between them
    # keepalive alike: off for the h1 runs, n/a for the h2 ones
    exp = spec.from_dict({"pages": [PAGE], "protocol": ["h1", "h2"], "keepalive": "off"}, "e.toml")
    assert [(c.protocol, c.keepalive) for c in exp.configs] == [("h1", "off"), ("h2", "on")]
    assert [exp.run_config(i).columns()["keepalive"] for i in range(2)] == ["off", "n/a"]


def test_a_list_crossed_with_h1_is_refused_naming_the_point():
    doc = {"pages": [PAGE], "protocol": ["h1", "h2"], "server_priority": ["rfc9218", "round-robin"]}
    with pytest.raises(PltError) as e:
        spec.from_dict(doc, "e.toml")
    assert str(e.value).startswith(
        "e.toml: the point protocol h1, server_priority round-robin: server_priority does not apply to protocol h1"
    )
    assert "\n" not in str(e.value)
    with pytest.raises(PltError, match="^e.toml: server_priority does not apply to protocol h1"):
        spec.from_dict({"pages": [PAGE], "protocol": "h1", "server_priority": "round-robin"}, "e.toml")
    with pytest.raises(PltError, match="^e.toml: key 'compare': server_priority does not apply to protocol h1"):
        spec.from_dict(
            {"pages": [PAGE], "protocol": ["h1", "h2"], "server_priority": ["rfc9218"], "compare": "server_priority"},
            "e.toml",
        )


def test_comparing_it_over_h2_and_h3_pairs_each_protocols_values():
    doc = {
        "pages": [PAGE],
        "protocol": ["h2", "h3"],
        "server_priority": ["rfc9218", "round-robin"],
        "compare": "server_priority",
        "tfo": "off",
    }
    exp = spec.from_dict(doc, "e.toml")
    pairs = [[(exp.configs[c].protocol, exp.configs[c].server_priority) for c in b] for b in exp.blocks()]
    assert pairs == [[("h2", "rfc9218"), ("h2", "round-robin")], [("h3", "rfc9218"), ("h3", "round-robin")]]
    assert protocols.not_applying("h3", "server_priority") is None


def test_a_protocol_folder_compares_and_reports_across_the_n_a_knobs(tmp_path):
    """h1 runs hold server_priority n/a, h2 runs keepalive n/a (RunConfig.columns, as a sweep
    stores them): `compare --by protocol` and `report --by protocol` still pair h1 with h2."""
    import json

    from conftest import pltlab_cmd as cmd

    from pltlab.experiments.results import Results
    from pltlab.report import compare_dirs

    res = Results(str(tmp_path))
    res.set_meta(name="p", digest="x", experiment="", environment={}, n_runs=0, pages=[], compare="protocol")
    seq = 0
    for rep in range(1, 7):
        for i, proto in enumerate(("h1", "h2")):
            cols = RunConfig(protocol=proto, tfo="off").columns()
            key = f"p|u|[20.0,{json.dumps(proto)}]|tfo=0|rep={rep}"
            row = {"run_key": key, "attempt": 1, "status": "ok", "seq": seq, "page": "p", "rtt_ms": 20.0}
            row |= {"config_key": key.split("|")[2], "tfo": 0, "rep": rep, "valid": 1, "plt_ms": 1000 - 40 * i + rep}
            res.add_run(row | {k: cols[k] for k in ("protocol", "server_priority", "keepalive", "cc", "client")}, [])
            seq += 1
    res.close()
    got = compare_dirs.compare(str(tmp_path), by="protocol")
    assert got["compared"] == ["protocol"] and [r["diff_ms"] for r in got["rows"]] == [-40]
    cp = cmd("report", str(tmp_path), "--by", "protocol", "--json")
    assert cp.returncode == 0, cp.stderr
    (row,) = json.loads(cp.stdout)["plt"]
    assert (row["base"]["value"], row["alt"]["value"]) == ("h1", "h2")
