"""The cluster sweep's simulation (benches/cluster_sim.py): expectations computed by hand."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benches"))

from cluster_sim import Overheads, draws, simulate  # noqa: E402


def test_one_node_without_overheads_is_the_sequential_sum():
    loads = [3.0, 0.5, 7.25, 1.0, 2.0]
    for pipeline in (1, 2, 3):
        out = simulate(loads, 1, pipeline=pipeline)
        assert out.makespan_s == pytest.approx(13.75)
        assert out.per_slot_runs == [5] and out.efficiency == pytest.approx(1.0)


def test_equal_loads_without_overheads_split_ideally():
    # 12 loads of 2 s on 3 nodes: 4 each, 8 s; on 5 nodes: rounds of 5, 5, 2 -> 6 s
    out = simulate([2.0] * 12, 3)
    assert out.makespan_s == pytest.approx(8.0) and out.per_slot_runs == [4, 4, 4]
    out = simulate([2.0] * 12, 5)
    assert out.makespan_s == pytest.approx(6.0) and sorted(out.per_slot_runs) == [2, 2, 2, 3, 3]
    assert simulate([2.0] * 12, 2, slots_per_node=2).makespan_s == pytest.approx(6.0)  # 4 slots: 3 rounds


def test_the_pipeline_queues_the_next_load_behind_a_long_one():
    # places handed slot by slot: load 0 and 2 to slot 0, 1 and 3 to slot 1 (driver.PIPELINE = 2),
    # so slot 0 runs 3 + 1 while slot 1 ends at 2; one place per slot is greedy: 3 vs 1 + 1 + 1
    assert simulate([3.0, 1.0, 1.0, 1.0], 2, pipeline=2).makespan_s == pytest.approx(4.0)
    assert simulate([3.0, 1.0, 1.0, 1.0], 2, pipeline=1).makespan_s == pytest.approx(3.0)


def test_overheads_hand_computed():
    o = Overheads(submit_s=0.1, return_s=0.2, record_s=0.05, actor_gap_s=0.01, node_start_s=1.0, check_s=5.0)
    # ready at 6; both loads handed at once, arriving at 6.1; load 0: 6.1-8.1; load 1 queued on
    # the slot: 8.11-10.11; its result at 10.31, recorded at 10.36
    out = simulate([2.0, 2.0], 1, o=o, pipeline=2)
    assert out.makespan_s == pytest.approx(10.36)
    assert (out.first_start_s, out.last_end_s) == (pytest.approx(6.1), pytest.approx(10.11))
    # one place per slot: load 1 handed only once load 0's result is recorded (8.35), arrives
    # 8.45, ends 10.45; result 10.65, recorded 10.70
    assert simulate([2.0, 2.0], 1, o=o, pipeline=1).makespan_s == pytest.approx(10.70)


def test_the_driver_records_one_result_at_a_time():
    # 4 nodes end their 1 s loads at once; recording takes 0.5 s each: the last is recorded at
    # 1 + 4 x 0.5 = 3 s, and the driver was busy 2 s of it
    out = simulate([1.0] * 4, 4, o=Overheads(record_s=0.5))
    assert out.makespan_s == pytest.approx(3.0) and out.driver_busy_s == pytest.approx(2.0)


def test_per_load_return_times_and_bad_input():
    # one node, pipeline 1: each load's next waits for its own result: 1 + 0.5, then 1 + 2.0
    out = simulate([1.0, 1.0], 1, o=Overheads(return_s=(0.5, 2.0)), pipeline=1)
    assert out.makespan_s == pytest.approx(4.5)
    with pytest.raises(ValueError, match="2 return times for 3 loads"):
        simulate([1.0] * 3, 1, o=Overheads(return_s=(0.5, 2.0)))
    with pytest.raises(ValueError):
        simulate([1.0], 0)


def test_draws_come_from_the_samples_and_are_seeded():
    d = draws([1.0, 2.0, 3.0], 500, seed=4)
    assert len(d) == 500 and set(d) == {1.0, 2.0, 3.0}
    assert d == draws([1.0, 2.0, 3.0], 500, seed=4) and d != draws([1.0, 2.0, 3.0], 500, seed=5)
