"""Soak, short version (benches/bench_soak.py runs 10,000 loads): one sweep of a few hundred quick
loads keeps the control process's Python memory and every process's open fds flat, leaves no
process behind between loads, and still prints every per-load line whole."""

import gc
import math
import os
import tracemalloc

import pytest
from rich.console import Console

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.experiments import spec, sweep
from pltlab.experiments.results import Results

pytestmark = pytest.mark.root

LOADS, WARMUP = 240, 80
MAX_BYTES_PER_LOAD = 200

# rich's progress bar keeps the samples of its speed estimate (the last 30 s, at most 1000):
# bounded by time, not by loads, so left out of the comparison
NOT_LOAD_MEMORY = [
    tracemalloc.Filter(False, "*/rich/progress.py", all_frames=True),
    tracemalloc.Filter(False, tracemalloc.__file__),
]


def traced_bytes() -> int:
    """Python memory traced now, without the progress bar's samples (the snapshot is dropped, so
    it is not counted in the next measurement)."""
    gc.collect()
    snap = tracemalloc.take_snapshot().filter_traces(NOT_LOAD_MEMORY)
    return sum(s.size for s in snap.statistics("filename"))


def fds(pid: int | str = "self") -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def children_besides(expected: set[int]) -> list[int]:
    """Our child processes other than ``expected`` (a loader that outlived its load)."""
    me, out = os.getpid(), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                ppid = int(f.read().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == me and int(pid) not in expected:
            out.append(int(pid))
    return out


class MeasuredSweep(sweep.Sweep):
    """Measures after load WARMUP and after the last load, between loads."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.loads, self.at = 0, {}

    def _attempt(self, it, attempt):
        row = super()._attempt(it, attempt)
        self.loads += 1
        if self.loads in (WARMUP, LOADS):
            (pr,) = self.live.values()  # one page, one configuration: one runner throughout
            servers = {"replay": pr.replay.proc.pid, "link": pr.topo.link.proc.pid}
            self.at[self.loads] = {
                "traced": traced_bytes(),
                "fds": fds(),
                "server_fds": {k: fds(pid) for k, pid in servers.items()},
                "servers": servers,
                "stray": children_besides(set(servers.values())),
            }
        return row


@pytest.mark.slow
def test_sweep_of_many_loads_keeps_memory_and_fds_flat(tmp_path):
    write_page(
        generate(objects=4, total_bytes=12_000, origins=2, depth=2, seed=12, domain="soak"), str(tmp_path / "soak.har")
    )
    exp = spec.from_dict(
        {
            "name": "soak",
            "pages": ["soak.har"],
            "rtt": "1ms",
            "tfo": ["off", "on"],
            "repetitions": math.ceil(LOADS / 2),
            "seed": 1,
        },
        "soak",
        str(tmp_path),
    )
    out = str(tmp_path / "out")
    sweep.prepare(exp, out, False)
    tracemalloc.start(10)
    try:
        with open(tmp_path / "log.txt", "w") as log:
            sw = MeasuredSweep(exp, out, Console(file=log, width=40))
            stats = sw.run()
    finally:
        tracemalloc.stop()
    assert stats["runs"] == LOADS and stats["failed"] == 0 and stats["invalid"] == 0, stats
    a, b = sw.at[WARMUP], sw.at[LOADS]
    # the same servers served every load, and nothing else stayed
    assert a["servers"] == b["servers"]
    assert a["stray"] == [] and b["stray"] == []
    # fds flat in every process
    assert b["fds"] == a["fds"], (a["fds"], b["fds"])
    assert b["server_fds"] == a["server_fds"], (a["server_fds"], b["server_fds"])
    # the control process's memory: records go to the database, not into lists or caches
    per_load = (b["traced"] - a["traced"]) / (LOADS - WARMUP)
    print(
        f"control process: {per_load:+.1f} B per load after {WARMUP} loads; fds {a['fds']}, "
        f"servers' fds {a['server_fds']}"
    )
    assert per_load < MAX_BYTES_PER_LOAD, f"control process grows {per_load:.0f} B per load"
    res = Results(out)
    try:
        assert res.count() == LOADS
    finally:
        res.close()
    # every per-load line printed whole, though longer than the console is wide
    text = (tmp_path / "log.txt").read_text()
    lines = text.splitlines()
    assert sum(ln.startswith("Fetching soak took ") for ln in lines) == LOADS
    assert "Experiment 120 soak @ 1ms delay (no TFO)" in lines and "Experiment 120 soak @ 1ms delay (TFO)" in lines
