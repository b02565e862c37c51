"""`pltlab explain`: the critical path on pages whose path is known by construction (hand-written
request records, pure), a results folder read back through the CLI, and end to end (root): a page
of k origins in a chain where TFO saves exactly k handshakes on the path."""

import json
import os
import sqlite3

import pytest

from pltlab.archive.har import write_page
from pltlab.archive.model import Obj, Page
from pltlab.experiments.results import Results
from pltlab.explain import pair as cmp
from pltlab.explain.critical import KINDS, critical_path
from pltlab.run import graph
from tests.conftest import pltlab_cmd

R = 50.0  # RTT of the hand-written loads


def rec(idx, host, conn, new, ready, req, fb, lb, parent=None, cs=None, ce=None, te=None, tfo=False, **kw):
    """A built-in loader's request record (as results.sqlite stores it)."""
    return {
        "idx": idx,
        "url": f"http://{host}.test/o{idx}",
        "host": f"{host}.test",
        "conn_id": conn,
        "new_conn": new,
        "tfo": tfo,
        "ready_ms": ready,
        "released_ms": ready,
        "connect_start_ms": cs,
        "connect_end_ms": ce,
        "tls_end_ms": te,
        "request_ms": req,
        "first_byte_ms": fb,
        "last_byte_ms": lb,
        "parent": parent,
        "after": kw.get("after", []),
        "at_first_byte": kw.get("at_first_byte", False),
        "delay_ms": kw.get("delay_ms", 0.0),
        "protocol": "http/1.1",
    }


def fresh(idx, host, conn, t, parent=None, transfer=10.0, tfo=False):
    """A request that opens a connection at t: handshake (none with TFO), round trip, transfer."""
    hs = 0.0 if tfo else R
    return rec(idx, host, conn, True, t, t + hs, t + hs + R, t + hs + R + transfer, parent, cs=t, ce=t + hs, tfo=tfo)


def test_chain_every_object_is_on_the_path():
    # one connection, each object found in the previous one's body
    reqs = [fresh(0, "a", 0, 0.0)]
    for i in range(1, 5):
        t = reqs[-1]["last_byte_ms"]
        reqs.append(rec(i, "a", 0, False, t, t, t + R, t + R + 10, parent=i - 1))
    p = critical_path(reqs)
    assert p.objects == [0, 1, 2, 3, 4]
    assert p.split["tcp"] == pytest.approx(R) and p.split["request"] == pytest.approx(5 * R)
    assert p.split["transfer"] == pytest.approx(50) and sum(p.split.values()) == pytest.approx(p.plt_ms)
    assert p.plt_ms == pytest.approx(reqs[-1]["last_byte_ms"])
    assert [h["idx"] for h in p.handshakes] == [0] and p.new_connections == 1
    # the segments cover 0..PLT without gaps or overlaps
    assert p.segments[0].start_ms == 0 and p.segments[-1].end_ms == pytest.approx(p.plt_ms)
    assert all(a.end_ms == pytest.approx(b.start_ms) for a, b in zip(p.segments, p.segments[1:]))


def fan_out_behind_slow():
    """Root, then S (slow: 500 ms transfer) and two fast siblings; behind S a fan-out of three,
    two on the siblings' reused connections, the last on a new one."""
    reqs = [fresh(0, "a", 0, 0.0)]
    reqs.append(fresh(1, "b", 1, 110.0, parent=0, transfer=500.0))  # S: 110 .. 710
    reqs += [fresh(2, "c", 2, 110.0, parent=0), fresh(3, "c", 3, 110.0, parent=0)]
    reqs.append(rec(4, "c", 2, False, 710.0, 710.0, 760.0, 770.0, parent=1))
    reqs.append(rec(5, "c", 3, False, 710.0, 710.0, 760.0, 780.0, parent=1))
    reqs.append(fresh(6, "c", 4, 710.0, parent=1))  # the pool's third connection: ends the load
    return reqs


def test_fan_out_behind_one_slow_object():
    p = critical_path(fan_out_behind_slow())
    assert p.objects == [0, 1, 6]
    assert p.plt_ms == pytest.approx(820.0)
    assert p.split["transfer"] == pytest.approx(520.0)  # S's 500 ms dominate
    assert p.split["tcp"] == pytest.approx(150.0) and p.split["request"] == pytest.approx(150.0)
    assert [h["idx"] for h in p.handshakes] == [0, 1, 6] and p.new_connections == 5


def test_waits_for_a_busy_connection_follow_the_request_that_held_it():
    # one connection for four objects all found in the root: each waits for the one before it
    reqs = [fresh(0, "a", 0, 0.0)]
    t = 110.0
    for i in (1, 2, 3):
        reqs.append(rec(i, "a", 0, False, 110.0, t, t + R, t + R + 10, parent=0))
        t += R + 10
    p = critical_path(reqs)
    assert p.objects == [0, 1, 2, 3]  # through the connection, not straight back to the root
    assert p.split["request"] == pytest.approx(4 * R) and p.split["wait"] == pytest.approx(0, abs=1e-6)


def test_h2_requests_wait_for_the_connection_handshake_not_for_each_other():
    doc = fresh(0, "a", 0, 0.0, transfer=100.0)  # first byte 100: the preload scanner's
    doc["protocol"] = "h2"
    # the second connection of pool b opens at 100; its two requests go as soon as it is up
    css = rec(1, "b", 1, True, 100.0, 150.0, 200.0, 400.0, parent=0, cs=100.0, ce=150.0, at_first_byte=True)
    js = rec(2, "b", 1, False, 110.0, 150.0, 200.0, 260.0, parent=0, at_first_byte=True)
    img = rec(3, "b", 1, False, 260.0, 260.0, 310.0, 450.0, parent=2)
    for r in (css, js, img):
        r["protocol"] = "h2"
    p = critical_path([doc, css, js, img])
    # img: js's last byte <- js sent when the connection was up (css's handshake) <- the document
    assert p.objects == [0, 1, 2, 3] and [h["idx"] for h in p.handshakes] == [0, 1]
    assert p.split["tcp"] == pytest.approx(2 * R) and p.split["transfer"] == pytest.approx(60 + 140)


def test_compute_delay_and_priority_hold_are_charged():
    reqs = [fresh(0, "a", 0, 0.0)]  # ends at 110
    held = rec(1, "a", 0, False, 140.0, 170.0, 170 + R, 180 + R, parent=0, delay_ms=30.0)
    held["released_ms"] = 170.0  # a scheduler's slot opened 30 ms after it was ready
    p = critical_path([*reqs, held])
    assert p.split["compute"] == pytest.approx(30.0) and p.split["wait"] == pytest.approx(30.0)


def test_at_first_byte_and_after_edges():
    root = fresh(0, "a", 0, 0.0, transfer=200.0)  # first byte 100, last 300
    early = rec(1, "b", 1, True, 100.0, 150.0, 200.0, 210.0, parent=0, cs=100.0, ce=150.0, at_first_byte=True)
    late = rec(2, "c", 2, True, 310.0, 360.0, 410.0, 420.0, parent=0, cs=310.0, ce=360.0, after=[1], delay_ms=10.0)
    p = critical_path([root, early, late])
    # 2 waited for the root's last byte (300), the latest of its prerequisites (1 arrived at 210)
    assert p.objects == [0, 2] and p.split["compute"] == pytest.approx(10.0)
    late2 = dict(late, after=[1], parent=0)
    early2 = dict(early, last_byte_ms=305.0, first_byte_ms=300.0)
    p2 = critical_path([root, early2, late2])
    assert p2.objects == [0, 1, 2]  # now 1's last byte (305) is the binding one
    assert p2.segments[0].kind == "tcp"  # root's handshake, then its first byte lets 1 go


def k_origin_chain(k: int, leaves: int, tfo: bool) -> list[dict]:
    """k objects in a chain, each on its own origin (a new connection each); ``leaves`` more
    children of the root on origins of their own, done long before the chain."""
    reqs = [fresh(0, "h0", 0, 0.0, tfo=tfo)]
    for i in range(1, k):
        reqs.append(fresh(i, f"h{i}", i, reqs[-1]["last_byte_ms"], parent=i - 1, tfo=tfo))
    t0 = reqs[0]["last_byte_ms"]
    for j in range(leaves):
        reqs.append(fresh(k + j, f"leaf{j}", k + j, t0, parent=0, transfer=1.0, tfo=tfo))
    return reqs


@pytest.mark.parametrize("k, leaves", [(1, 0), (2, 4), (3, 4), (5, 4)])
def test_tfo_saves_exactly_k_handshakes_on_the_path(k, leaves):
    off = cmp.Load(critical_path(k_origin_chain(k, leaves, tfo=False)), 2, "TFO off", R, False, "p")
    on = cmp.Load(critical_path(k_origin_chain(k, leaves, tfo=True)), 1, "TFO on", R, True, "p")
    c = cmp.compare(on, off)
    assert c["saved_ms"] == pytest.approx(k * R) and c["saved_rtts"] == pytest.approx(k)
    hs = c["handshakes_saved"]
    assert c["handshakes_saved_on_path"] == len(hs)
    assert len(hs) == k and [h["idx"] for h in hs] == list(range(k))
    assert all(h["handshakes"] == ["tcp"] and h["tfo"] and h["saved_ms"] == pytest.approx(R) for h in hs)
    assert (c["new_connections"], c["new_connections_off_path"]) == (k + leaves, leaves)
    assert c["split_saved_ms"]["tcp"] == pytest.approx(k * R)
    s = cmp.saved_sentence(c)
    assert s.startswith(f"saved {k * R:.0f} ms = {k:.1f} RTT: the handshakes of h0.test/o0")
    assert s.endswith(f"{leaves} of {k + leaves} new connection{'s' if k + leaves > 1 else ''} were off the path")


def test_a_tcp_round_trip_moved_into_tls_is_no_handshake_saved():
    """TFO whose SYN could not carry the ClientHello (Chromium's post-quantum hello): TCP ~0,
    TLS two round trips: the set-up is as long as without TFO."""

    def load(tfo):
        hs = (R, R) if not tfo else (0.0, 2 * R)
        r = rec(0, "a", 0, True, 0.0, sum(hs), sum(hs) + R, sum(hs) + R + 5, cs=0.0, ce=hs[0], te=sum(hs), tfo=tfo)
        r["url"] = "https://a.test/"
        return critical_path([r])

    c = cmp.compare(cmp.Load(load(True), 1, "on", R), cmp.Load(load(False), 2, "off", R))
    assert c["handshakes_saved"] == [] and c["handshakes_saved_on_path"] == 0 and c["saved_ms"] == pytest.approx(0)
    assert "no handshake saved on the critical path; 0 of 1 new connection were off the path" in cmp.saved_sentence(c)


def test_https_split_and_tls_handshakes():
    t = 0.0
    r0 = rec(0, "a", 0, True, t, 2 * R, 3 * R, 3 * R + 5, cs=0.0, ce=R, te=2 * R)
    r0["url"] = "https://a.test/"
    p = critical_path([r0])
    assert (p.split["tcp"], p.split["tls"], p.split["request"]) == (R, R, R)
    assert p.handshakes[0]["tls_ms"] == R


def test_calibrated_tail_is_compute_at_the_end():
    p = critical_path([fresh(0, "a", 0, 0.0)], plt_ms=200.0)
    assert p.plt_ms == 200.0 and p.split["compute"] == pytest.approx(90.0)
    assert sum(p.split.values()) == pytest.approx(200.0)


def test_records_without_a_graph_still_cover_the_plt():
    reqs = fan_out_behind_slow()
    for r in reqs:
        r["parent"] = None
    p = critical_path(reqs)
    assert sum(p.split.values()) == pytest.approx(p.plt_ms) and set(p.split) == set(KINDS)
    with pytest.raises(ValueError):
        critical_path([dict(reqs[0], last_byte_ms=None)])


def test_graph_from_the_plan_and_from_chromium_initiators():
    plan = {
        "objects": [
            {"parent": None},
            {"parent": 0, "at_first_byte": True, "delay_ms": 2.5},
            {"parent": 1, "after": [0]},
        ]
    }
    recs = [{"index": i} for i in (0, 2, 1)]
    graph.from_plan(recs, plan)
    by = {r["index"]: r for r in recs}
    assert (by[1]["parent"], by[1]["at_first_byte"], by[1]["delay_ms"]) == (0, True, 2.5)
    assert (by[2]["parent"], by[2]["after"], by[2]["at_first_byte"]) == (1, [0], False)
    assert by[0]["parent"] is None
    # Chromium: the initiator's URL names the latest earlier request of that URL
    recs = [
        {"index": 0, "url": "http://a.test/"},
        {"index": 2, "url": "http://a.test/s.js#x", "initiator_url": "http://a.test/"},
        {"index": 3, "url": "http://b.test/i.png", "initiator_url": "http://a.test/s.js"},
        {"index": 4, "url": "http://b.test/j.png", "initiator_url": "http://elsewhere.test/"},
    ]
    graph.from_initiators(recs)
    assert [r.get("parent") for r in recs] == [None, 0, 2, None]


def test_chromium_records_parse_streaming_and_tls_from_connect_end():
    """No ready_ms (the request's start instead), no at_first_byte: a request that started
    before its initiator's last byte waited for its first; connectEnd includes TLS (sslStart)."""
    doc = {
        "index": 0, "url": "https://a.test/", "host": "a.test", "conn_id": 7, "new_conn": True,
        "start_ms": 0.0, "released_ms": 0.0, "connect_start_ms": 0.0, "tls_start_ms": R,
        "connect_end_ms": 2 * R, "request_ms": 2 * R, "first_byte_ms": 3 * R, "last_byte_ms": 3 * R + 100,
    }  # fmt: skip
    img = {
        "index": 1, "url": "https://a.test/i.png", "host": "a.test", "conn_id": 8, "new_conn": True,
        "parent": 0, "start_ms": 3 * R + 5, "connect_start_ms": 3 * R + 5, "tls_start_ms": 4 * R + 5,
        "connect_end_ms": 5 * R + 5, "request_ms": 5 * R + 5, "first_byte_ms": 6 * R + 5,
        "last_byte_ms": 6 * R + 200,
    }  # fmt: skip
    p = critical_path([doc, img])
    assert p.objects == [0, 1]
    assert p.split["tls"] == pytest.approx(2 * R) and p.split["tcp"] == pytest.approx(2 * R)
    assert p.split["compute"] == pytest.approx(5)  # parse: first byte to the image's start
    assert p.split["transfer"] == pytest.approx(195) and p.plt_ms == 6 * R + 200  # not the document's


# ---- a results folder, read back by the CLI (no root) ------------------------------------------


def _folder(tmp_path, k=3, leaves=2) -> str:
    out = str(tmp_path / "res")
    os.makedirs(out)
    res = Results(out)
    ids = {}
    for tfo in (False, True):
        for rep, extra in ((1, 0.0), (2, 40.0), (3, 5.0)):  # the median is rep 3
            reqs = k_origin_chain(k, leaves, tfo)
            for r in reqs:
                for f in ("last_byte_ms",):
                    r[f] += extra if r["idx"] == k - 1 else 0.0
                r["index"] = r.pop("idx")
            plt = max(r["last_byte_ms"] for r in reqs)
            row = {
                "run_key": f"k{tfo}{rep}",
                "attempt": 1,
                "status": "ok",
                "page": "kchain",
                "page_id": "kchain",
                "config_key": "c",
                "rtt_ms": R,
                "tfo": tfo,
                "rep": rep,
                "plt_ms": plt,
                "valid": True,
            }
            ids[(tfo, rep)] = res.add_run(row, reqs)
    res.close()
    return out, ids


def test_cli_explains_a_folder_and_two_run_ids(tmp_path):
    out, ids = _folder(tmp_path)
    cp = pltlab_cmd("explain", out, "--page", "kchain", "--rtt", "50ms", "--json")
    assert cp.returncode == 0, cp.stderr
    j = json.loads(cp.stdout)
    assert j["a"]["run_id"] == ids[(True, 3)] and j["b"]["run_id"] == ids[(False, 3)]  # the medians
    assert j["saved_ms"] == pytest.approx(3 * R) and j["saved_rtts"] == pytest.approx(3)
    assert j["handshakes_saved_on_path"] == len(j["handshakes_saved"]) == 3 and j["new_connections_off_path"] == 2
    assert j["notes"] == [] and "saved 150 ms = 3.0 RTT" in j["sentences"][0]
    # the same by run ids, on screen
    cp = pltlab_cmd("explain", f"{out}#{ids[(True, 1)]}", "--vs", str(ids[(False, 1)]))
    assert cp.returncode == 0, cp.stderr
    assert "saved 150 ms = 3.0 RTT: the handshakes of h0.test/o0, h1.test/o1 and h2.test/o2" in cp.stdout
    assert "2 of 5 new connections were off the path" in cp.stdout and "TCP handshakes" in cp.stdout
    # one run alone
    cp = pltlab_cmd("explain", str(ids[(False, 2)]), "--dir", out, "--json")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["a"]["split_ms"]["tcp"] == pytest.approx(3 * R)
    # results without the graph (written before explain): still explained, with a note saying so
    db = sqlite3.connect(os.path.join(out, "results.sqlite"))
    with db:
        db.execute("UPDATE requests SET parent = NULL WHERE run_id = ?", (ids[(False, 2)],))
    db.close()
    cp = pltlab_cmd("explain", f"{out}#{ids[(False, 2)]}", "--json")
    j = json.loads(cp.stdout)
    assert cp.returncode == 0 and "carry no initiators" in j["notes"][0]
    assert sum(j["a"]["split_ms"].values()) == pytest.approx(j["a"]["plt_ms"])


@pytest.mark.parametrize(
    "args, words",
    [
        (["{out}#999"], "no run with id 999"),
        (["{out}", "--page", "nope", "--rtt", "50ms"], "no valid load of page 'nope'"),
        (["{out}", "--page", "kchain", "--rtt", "20ms"], "at RTT 20 ms"),
        (["{out}", "--page", "kchain"], "--page and --rtt go together"),
        (["{out}"], "give --page and --rtt"),
        (["{out}/nowhere#1"], "no such results folder"),
        (["{out}#x"], "is not a number"),
    ],
)
def test_cli_bad_references_are_one_error_line(tmp_path, args, words):
    out, _ = _folder(tmp_path)
    cp = pltlab_cmd("explain", *[a.format(out=out) for a in args])
    assert cp.returncode == 2 and words in cp.stderr and cp.stderr.strip().count("\n") == 0, cp.stderr


# ---- end to end (root): the built-in loader, TFO off and on ------------------------------------


def chain_page(k: int, leaves: int) -> Page:
    """k objects in a chain over k origins (each found in the previous one's body), and leaves
    found in the document on origins of their own."""
    page = Page(url="http://h0.chain.test/", title="k-origin chain")
    prev = None
    for i in range(k):
        url = page.url if i == 0 else f"http://h{i}.chain.test/js/{i}.js"
        mime = "text/html" if i == 0 else "application/javascript"
        o = Obj(url=url, mime=mime, size=3000, status_text="OK")
        o.headers = [("Content-Type", mime)]
        if prev is not None:
            o.initiator, o.initiator_type = prev.url, "script" if i > 1 else "parser"
        page.objects.append(o)
        prev = o
    for j in range(leaves):
        o = Obj(url=f"http://leaf{j}.chain.test/img/{j}.png", mime="image/png", size=2000, status_text="OK")
        o.headers = [("Content-Type", "image/png")]
        o.initiator, o.initiator_type = page.url, "parser"
        page.objects.append(o)
    return page


@pytest.mark.root
def test_end_to_end_tfo_saves_the_k_handshakes_of_the_chain(tmp_path):
    k, leaves = 3, 2
    write_page(chain_page(k, leaves), str(tmp_path / "kchain.har"))
    exp = tmp_path / "exp.toml"
    exp.write_text('name = "kchain"\npages = ["kchain.har"]\nrtt = ["40ms"]\ntfo = ["off", "on"]\nrepetitions = 3\n')
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(exp), "-o", str(out), "--no-report", timeout=300)
    assert cp.returncode == 0, cp.stderr
    cp = pltlab_cmd("explain", str(out), "--page", "chain", "--rtt", "40ms", "--json")
    assert cp.returncode == 0, cp.stderr
    j = json.loads(cp.stdout)
    assert j["notes"] == []  # the graph came from the plan
    hs = j["handshakes_saved"]
    assert j["handshakes_saved_on_path"] == len(hs)
    assert len(hs) == k and all(h["tfo"] and h["handshakes"] == ["tcp"] for h in hs), hs
    assert sorted(h["url"].split("/")[2] for h in hs) == [f"h{i}.chain.test" for i in range(k)]
    # at least the k handshake round trips (a busy machine may slow either load down further)
    assert j["saved_rtts"] >= k - 0.5 and j["split_saved_ms"]["tcp"] == pytest.approx(k * 40, rel=0.25)
    assert (j["new_connections"], j["new_connections_off_path"]) == (k + leaves, leaves)
    # the path of the TFO-off load is the chain; its split adds up to its PLT
    off = j["b"]
    assert [p["url"].split("/")[2] for p in off["path"]] == [f"h{i}.chain.test" for i in range(k)]
    assert sum(off["split_ms"].values()) == pytest.approx(off["plt_ms"], abs=0.01)
    assert off["split_ms"]["tcp"] == pytest.approx(k * 40, rel=0.25)
    assert j["a"]["split_ms"]["tcp"] < 5


@pytest.mark.root
@pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")
def test_end_to_end_chromium_initiators_give_the_chain(tmp_path):
    """Chromium's CDP initiators make the graph: the path of each load is the chain, and TFO's
    TCP handshakes on it are saved (Chromium's own compute may differ between the loads)."""
    k, leaves = 3, 2
    write_page(chain_page(k, leaves), str(tmp_path / "kchain.har"))
    exp = tmp_path / "exp.toml"
    exp.write_text(
        'name = "kchain"\npages = ["kchain.har"]\nrtt = ["40ms"]\ntfo = ["off", "on"]\nclient = ["chromium"]\n'
        "repetitions = 1\n"
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(exp), "-o", str(out), "--no-report", timeout=600)
    assert cp.returncode == 0, cp.stderr
    cp = pltlab_cmd("explain", str(out), "--page", "chain", "--rtt", "40ms", "--json")
    assert cp.returncode == 0, cp.stderr
    j = json.loads(cp.stdout)
    assert j["notes"] == []  # initiators found
    for x in (j["a"], j["b"]):
        hosts = [p["url"].split("/")[2] for p in x["path"]]
        assert [h for h in hosts if h.startswith("h")] == [f"h{i}.chain.test" for i in range(k)], hosts
        assert sum(x["split_ms"].values()) == pytest.approx(x["plt_ms"], abs=0.01)
    assert (
        j["handshakes_saved_on_path"] == len(j["handshakes_saved"]) == k and j["split_saved_ms"]["tcp"] >= k * 40 * 0.75
    )
