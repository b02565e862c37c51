"""The link emulator's precision aids (SCHED_FIFO, CPU pinning, mlock, idle polling) asked for and
refused: read from the emulator, recorded per load, said once per aid."""

import dataclasses
import io
import os
import sqlite3

import pytest
from rich.console import Console

from pltlab.net import emulator
from pltlab.net.emulator import AidWarnings, aid_warning, aids_column, aids_missing

# a CPU this machine does not have (< CPU_SETSIZE, so the emulator accepts the config): pinning
# to it fails for real (sched_setaffinity: EINVAL)
ABSENT_CPU = 1023


def test_aids_missing_reads_requested_and_refused_aids_with_their_errors():
    stats = {
        "event": "stats",
        "sched_fifo_requested": True,
        "sched_fifo_applied": False,
        "sched_fifo_error": "Operation not permitted (os error 1)",
        "cpu": 63,
        "cpu_error": "Invalid argument (os error 22)",
        "mlock_applied": True,
        "mlock_error": None,
        "idle_poll_requested": True,
        "idle_poll_applied": False,
        "idle_poll_error": "/dev/cpu_dma_latency: Permission denied (os error 13)",
    }
    got = aids_missing(stats)
    assert got == {
        "sched_fifo": "Operation not permitted (os error 1)",
        "cpu": "Invalid argument (os error 22)",
        "idle_poll": "/dev/cpu_dma_latency: Permission denied (os error 13)",
    }
    assert aids_column(got) == "sched_fifo,cpu,idle_poll"


def test_aids_missing_is_empty_when_every_aid_asked_for_applied_or_none_asked():
    applied = {
        "sched_fifo_requested": True,
        "sched_fifo_applied": True,
        "sched_fifo_error": None,
        "cpu": None,
        "cpu_error": None,
        "mlock_applied": False,
        "mlock_error": None,
        "idle_poll_requested": False,
        "idle_poll_applied": False,
        "idle_poll_error": None,
    }
    assert aids_missing(applied) == {}
    assert aids_column(aids_missing(applied)) == ""
    assert aids_column(None) is None
    # netem's statistics, no emulator, an older ready line: nothing said, nothing missing
    assert aids_missing({"event": "stats", "backend": "netem"}) == {} and aids_missing(None) == {}
    # requested, not applied, no error text: still missing
    assert aids_missing({"idle_poll_requested": True, "idle_poll_applied": False}) == {
        "idle_poll": "requested, not applied"
    }


def test_each_missing_aid_is_warned_about_once_per_run():
    w = AidWarnings()
    first = w.new({"idle_poll": "/dev/cpu_dma_latency: No such file or directory (os error 2)"})
    assert first == [
        "pltlab: warning: link emulator could not apply idle_poll (/dev/cpu_dma_latency: No such file or "
        "directory (os error 2)): link timing less precise; loads still checked for lateness"
    ]
    assert w.new({"idle_poll": "again"}) == [] and w.new({}) == [] and w.new(None) == []
    assert w.new({"idle_poll": "x", "sched_fifo": "EPERM"}) == [aid_warning("sched_fifo", "EPERM")]


def _refused_cpu(monkeypatch):
    """Topologies whose emulator is asked to pin itself to a CPU that does not exist."""
    from pltlab.net.topology import Topology

    assert (os.cpu_count() or 1) <= ABSENT_CPU
    real = Topology.link_config
    monkeypatch.setattr(Topology, "link_config", lambda self: dataclasses.replace(real(self), cpu=ABSENT_CPU))


@pytest.mark.root
def test_a_refused_aid_is_read_from_the_ready_line_and_matches_the_final_stats(monkeypatch):
    from pltlab.net import probes
    from pltlab.net.topology import Topology
    from pltlab.net.wan import LinkSpec, TopologySpec

    _refused_cpu(monkeypatch)
    with Topology(TopologySpec(link=LinkSpec.build(rtt="10ms"), sched_fifo=True)) as topo:
        missing = dict(topo.link_aids_missing)  # known while the link is up, before any load
        probes.start_server(topo)
        stats = topo.down()
    assert set(missing) == {"cpu"} and "Invalid argument" in missing["cpu"], missing
    assert stats["cpu"] == ABSENT_CPU and emulator.aids_missing(stats) == missing
    assert stats["sched_fifo_applied"]  # (the others still applied)


@pytest.mark.root
def test_a_sweep_records_the_refused_aid_per_load_and_warns_once(tmp_path, monkeypatch):
    from pltlab.archive.generate import generate
    from pltlab.archive.har import write_page
    from pltlab.experiments import spec, sweep

    write_page(generate(objects=2, total_bytes=4000, origins=1, depth=1, seed=3, domain="aids"), tmp_path / "a.har")
    (tmp_path / "exp.toml").write_text(
        'name = "aids"\npages = ["a.har"]\nrtt = ["10ms"]\ntfo = ["off", "on"]\nrepetitions = 2\nseed = 1\n'
    )
    _refused_cpu(monkeypatch)
    err = io.StringIO()
    res = sweep.run(spec.load(str(tmp_path / "exp.toml")), str(tmp_path / "o"), console=Console(file=err, width=200))
    assert res["runs"] == 4 and res["failed"] == 0
    db = sqlite3.connect(tmp_path / "o" / "results.sqlite")
    rows = db.execute("SELECT link_aids_missing, valid FROM runs WHERE status = 'ok'").fetchall()
    assert rows == [("cpu", 1)] * 4, rows  # recorded on every load, the loads still valid
    lines = [ln for ln in err.getvalue().splitlines() if "warning" in ln]
    assert len(lines) == 1, err.getvalue()
    assert lines[0].startswith("pltlab: warning: link emulator could not apply cpu (Invalid argument")
    assert lines[0].endswith("): link timing less precise; loads still checked for lateness")
