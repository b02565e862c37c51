"""The report of a cluster sweep: configurations whose loads came from machines that differ are
named, with what differs; statistics split by node. Results of one machine get neither."""

import json

from pltlab.report import nodes


def _run(page, cfg, tfo, plt, **node):
    n = {"host": "h", "node_id": "a" * 40, "kernel": "6.1", "cpu": "EPYC", "pltlab": "0.1.0", "pltlab_dp": "dp 0.1"}
    n.update(node)
    return {
        "rtt_ms": float(cfg.split("=")[1][:-2]),
        "status": "ok",
        "valid": 1,
        "page": page,
        "config_key": cfg,
        "tfo": tfo,
        "plt_ms": plt,
        "node": json.dumps(n),
    }


def test_a_configuration_on_machines_that_differ_is_named_with_what_differs():
    runs = [
        _run("amazon", "rtt=20ms", 0, 100.0),
        _run("amazon", "rtt=20ms", 0, 110.0, host="g", node_id="b" * 40, kernel="6.8"),
        _run("amazon", "rtt=100ms", 0, 300.0),  # one machine: no note
        _run("amazon", "rtt=100ms", 1, 280.0, host="k", node_id="c" * 40),  # another node, a machine alike
    ]
    notes = nodes.notes(runs)
    assert len(notes) == 1
    text, bad = notes[0]
    assert bad and text.startswith("amazon @ rtt_ms=20: loads from 2 machines that differ (kernel 6.1 / 6.8)")
    rows = nodes.rows(runs)
    assert [r[:4] for r in rows] == [
        ["amazon", "rtt_ms=100", "off", "h (aaaaaaaa)"],
        ["amazon", "rtt_ms=100", "on", "k (cccccccc)"],
        ["amazon", "rtt_ms=20", "off", "g (bbbbbbbb)"],
        ["amazon", "rtt_ms=20", "off", "h (aaaaaaaa)"],
    ]
    assert rows[2][4:] == ["6.8", "EPYC", "1", "110.0", "110.0"]
    assert nodes.on_cluster(runs)


def test_one_machine_results_have_no_node_notes_or_table():
    runs = [{**_run("a", "rtt=1ms", 0, 1.0), "node": None}]
    assert not nodes.on_cluster(runs) and nodes.notes(runs) == [] and nodes.rows(runs) == []
