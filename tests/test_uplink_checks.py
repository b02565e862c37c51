"""A saving the handshakes cannot account for, and waiting in the uplink's queue, said by `pltlab
explain` and the report (pltlab.explain.pair, pltlab.report.why): on loads made by hand, at
RTT 20 ms, whose times are known."""

import json

import pytest

from pltlab.archive.generate import generate
from pltlab.experiments.results import Results
from pltlab.explain import explain
from pltlab.report import build
from pltlab.run.runner import RunConfig, run_page

RTT = 20


def _chain(setup_ms: float, tfo: bool, first_byte_ms: float = RTT) -> list[dict]:
    """Three requests one after the other (each the initiator of the next), each on a new
    connection whose set-up takes ``setup_ms``, then ``first_byte_ms`` to its first byte and one
    round trip to its last."""
    out, t = [], 0.0
    for i in range(3):
        out.append(
            {
                "index": i,
                "url": f"http://h{i}.test/{i}",
                "host": f"h{i}.test",
                "conn_id": i + 1,
                "new_conn": True,
                "tfo": tfo,
                "ready_ms": t,
                "connect_start_ms": t,
                "connect_end_ms": t + setup_ms,
                "request_ms": t + setup_ms,
                "first_byte_ms": t + setup_ms + first_byte_ms,
                "last_byte_ms": t + setup_ms + first_byte_ms + RTT,
                "parent": i - 1 if i else None,
                "at_first_byte": False,
                "status": 200,
            }
        )
        t += setup_ms + first_byte_ms + RTT
    return out


def _queue(up_max_ms: float, up_mean_ms: float) -> str:
    return json.dumps(
        {
            "queue_wait_us": {
                "uplink": {
                    "count": 100,
                    "p50": 0.0,
                    "p99": up_max_ms * 1000,
                    "max": up_max_ms * 1000,
                    "mean": up_mean_ms * 1000,
                },
                "downlink": {"count": 100, "p50": 0.0, "p99": 500.0, "max": 500.0, "mean": 100.0},
            }
        }
    )


def _folder(d) -> dict:
    """Page q: without TFO each SYN waits 300 ms behind other packets on the uplink (set-up 320
    ms); with TFO the requests ride in the SYNs. Page r: set-up one RTT without TFO, none with:
    TFO saves exactly its handshakes. Page s: as r, but with TFO each first byte comes a round
    trip later: what the handshakes saved is lost again."""
    res = Results(str(d))
    res.set_meta(name="checks", experiment='pages = ["q", "r"]\n')
    ids = {}
    for page, setup_off, queue_off in (("q", 320.0, _queue(300, 150)), ("r", 20.0, _queue(1, 0.5)), ("s", 20.0, None)):
        for tfo in (False, True):
            reqs = _chain(0.0 if tfo else setup_off, tfo, 2 * RTT if tfo and page == "s" else RTT)
            row = {
                "run_key": f"{page}|{tfo}",
                "attempt": 1,
                "status": "ok",
                "page": page,
                "config_key": "k",
                "rtt_ms": RTT,
                "rate_up_bps": 256_000,
                "client": "chromium",
                "tfo": tfo,
                "rep": 1,
                "plt_ms": reqs[-1]["last_byte_ms"],
                "valid": True,
                "metrics": _queue(1, 0.2) if tfo else queue_off,
            }
            ids[(page, tfo)] = res.add_run(row, reqs)
    res.close()
    return ids


def test_explain_says_a_saving_beyond_the_handshakes_and_the_uplink_queueing(tmp_path):
    ids = _folder(tmp_path)
    on, off = ids[("q", True)], ids[("q", False)]
    res = explain(str(tmp_path), on, vs=off)
    # 3 x 320 ms of set-up saved = 48 RTT, where 3 saved handshakes account for 4 RTT
    assert res["saved_ms"] == 960 and res["handshakes_saved_on_path"] == 3
    assert res["handshake_bound_rtts"] == 4 and res["beyond_handshakes"] is True
    said = res["sentences"]
    assert (
        f"run {off} (TFO off): its handshakes and requests on the critical path waited 900 ms beyond their "
        "6 round trips (120 ms): uplink queueing (256 kbit/s): packets waited up to 300 ms (mean 150 ms) "
        "behind those sent before them"
    ) in said
    assert said[-1] == (
        "more saved than the handshakes account for (48.0 RTT > k + 1 = 4): TCP handshakes 960 ms less; "
        f"run {off} (TFO off) waited 900 ms beyond its 6 round trips in uplink queueing (up to 300 ms)"
    )
    # TFO saving exactly its three handshakes: nothing to say
    r = explain(str(tmp_path), ids[("r", True)], vs=ids[("r", False)])
    assert r["saved_ms"] == 60 and r["beyond_handshakes"] is False and len(r["sentences"]) == 3


def test_the_report_flags_the_page_and_names_the_cause(tmp_path):
    ids = _folder(tmp_path)
    on, off = ids[("q", True)], ids[("q", False)]
    built = build(str(tmp_path))
    assert built["checks"] == [
        f"q @ 20 ms: TFO saved 960 ms = 48.0 RTT, more than the 3 handshakes it saved on the critical path "
        f"account for (k + 1 = 4 RTT); explain (run #{on} vs #{off}): TCP handshakes 960 ms less; run {off} "
        "(TFO off) waited 900 ms beyond its 6 round trips in uplink queueing (up to 300 ms)",
        f"q @ 20 ms, run {off} (TFO off): its handshakes and requests on the critical path waited 900 ms "
        "beyond their 6 round trips (120 ms): uplink queueing (256 kbit/s): packets waited up to 300 ms "
        "(mean 150 ms) behind those sent before them",
        f"s @ 20 ms: TFO saved 0 ms = 0.0 RTT although it saved 3 handshakes on the critical path; explain (run "
        f"#{ids[('s', True)]} vs #{ids[('s', False)]}): TCP handshakes 60 ms less, request round trips 60 ms more",
    ]
    html = (tmp_path / "report.html").read_text()
    assert "Savings checked against the critical path" in html and "q @ 20 ms: TFO saved 960 ms" in html


@pytest.mark.root
def test_a_load_records_how_long_its_packets_queued():
    """With a 64 kbit/s uplink the SYNs and requests of connections opened together wait behind
    each other (a 60-byte SYN takes 7.5 ms to send): the emulator's waits are in the record."""
    page = generate(objects=13, total_bytes=13 * 2000, origins=3, depth=1, seed=5, domain="qw")
    (r,) = run_page(page, RunConfig(rtt="20ms", rate="4mbit", rate_up="64kbit", reps=1, tfo_modes=(False,)))
    assert r["valid"], r["invalid_reason"]
    up = r["metrics"]["queue_wait_us"]["uplink"]
    assert up["count"] > 0 and up["max"] >= 7500 and 0 < up["mean"] < up["max"]
    (plain,) = run_page(page, RunConfig(rtt="20ms", reps=1, tfo_modes=(False,)))
    assert "queue_wait_us" not in plain["metrics"]  # no rate: no queue to wait in (its drops: none)
