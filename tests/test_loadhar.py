"""The HAR of a load (pltlab.run.loadhar): built from a real built-in load, stored with its run,
exported by `pltlab export`, read back by pltlab's importer and by a HAR library (haralyzer);
the per-request TFO flag true only for the request that rode in a SYN."""

import json
import os
from collections import Counter
from urllib.parse import urlsplit

import pytest
from haralyzer import HarParser

from pltlab.archive import har as harfile
from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.experiments.results import Results
from pltlab.run import loadhar
from pltlab.run.runner import RunConfig, run_page
from tests.conftest import pltlab_cmd


def _page():
    # two origins, a chain of 3: some connections carry several requests (reuse), some one
    return generate(objects=9, total_bytes=9 * 3000, origins=2, depth=2, seed=3, domain="harx")


@pytest.fixture(scope="module")
def loads():
    """(page, {tfo: record}) of one load with TFO off and one with it on, at 20 ms."""
    page = _page()
    runs = run_page(page, RunConfig(rtt="20ms", reps=1))
    assert all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    return page, {r["tfo"]: r for r in runs}


def _field(fields: list[dict], name: str) -> str | None:
    return next((f["value"] for f in fields if f["name"].lower() == name.lower()), None)


@pytest.mark.root
def test_har_of_a_builtin_load_keeps_headers_sizes_timings_and_connections(loads):
    page, by = loads
    rec = by[False]
    doc = loadhar.build(page, rec)
    log = doc["log"]
    assert log["version"] == "1.2" and log["pages"][0]["pageTimings"]["onLoad"] == rec["plt_ms"]
    entries = {e["_load"]["index"]: e for e in log["entries"]}
    conns = {c["id"]: c for c in rec["connections"]}
    assert sorted(entries) == sorted(r["index"] for r in rec["requests"])
    recorded = {o.url: o for o in page.objects}
    for r in rec["requests"]:
        e = entries[r["index"]]
        req, resp = e["request"], e["response"]
        assert req["url"] == r["url"] and resp["status"] == r["status"] == 200
        assert req["httpVersion"] == resp["httpVersion"] == "HTTP/1.1"
        # the fields as the loader sent them and as the replay served the recording's
        assert _field(req["headers"], "Host") == urlsplit(r["url"]).netloc
        assert _field(req["headers"], "Accept-Encoding") == "gzip, deflate, br, zstd"
        assert req["headersSize"] == r["request_header_bytes"] > 0
        assert _field(resp["headers"], "Content-Type") == recorded[r["url"]].header("Content-Type")
        assert resp["content"]["size"] == r["body_bytes"] == recorded[r["url"]].size
        assert resp["bodySize"] == r["bytes"] and resp["_transferSize"] == r["transfer_bytes"]
        assert resp["headersSize"] == r["header_bytes"]
        assert resp["_transferSize"] == resp["headersSize"] + resp["bodySize"]
        # timings: the phases add up to the entry's time, which spans ready -> last byte
        t = e["timings"]
        phases = sum(max(0, t[k]) for k in ("blocked", "dns", "connect", "send", "wait", "receive"))
        assert e["time"] == pytest.approx(phases, abs=0.01)
        assert e["time"] == pytest.approx(r["last_byte_ms"] - r["ready_ms"], abs=0.01)
        assert t["wait"] == pytest.approx(r["first_byte_ms"] - r["request_ms"], abs=0.01)
        c = conns[r["conn_id"]]
        assert e["_connection_id"] == r["conn_id"] and e["serverIPAddress"] == c["ip"]
        if r["new_conn"]:  # one handshake at 20 ms RTT, no TLS: the part after the request was ready
            # (a connection opened for another request can be connected before this one was ready)
            since = max(r["connect_start_ms"], r["ready_ms"])
            assert t["connect"] == pytest.approx(max(0.0, r["connect_end_ms"] - since), abs=0.01)
            assert r["connect_end_ms"] - r["connect_start_ms"] == pytest.approx(20, abs=4) and t["ssl"] == -1
            assert e["_tfo_syn_data"] is False and e["_tfo_cookie_requested"] is False
        else:
            assert t["connect"] == t["dns"] == -1 and "_tfo_syn_data" not in e
    assert [c["id"] for c in log["_connections"]] == sorted(conns)


@pytest.mark.root
def test_tfo_flag_is_true_only_for_the_request_in_the_syn(loads):
    page, by = loads
    on, off = by[True], by[False]
    assert any(not r["new_conn"] for r in on["requests"]), "the page must reuse a connection"
    # per request: exactly the one that opened each TFO connection
    assert all(bool(r["tfo"]) == bool(r["new_conn"]) for r in on["requests"])
    # (a connection opened but never used — late binding — never sent its SYN: TFO defers it)
    used = [c for c in on["connections"] if c["requests"]]
    assert sum(r["tfo"] for r in on["requests"]) == len(used) and all(c["tfo"] for c in used)
    assert not any(r["tfo"] for r in off["requests"])
    entries = loadhar.build(page, on)["log"]["entries"]
    assert {e["_load"]["index"] for e in entries if e["_tfo"]} == {r["index"] for r in on["requests"] if r["new_conn"]}
    assert all(e["_tfo_syn_data"] is True and e["_tfo_client_fail"] == 0 for e in entries if e["_new_connection"])
    # the request rode in the SYN: no separate connect round trip before it was written
    assert all(e["timings"]["connect"] < 5 for e in entries if e["_tfo"])


@pytest.mark.root
def test_round_trip_through_pltlab_and_a_har_library(loads, tmp_path):
    page, by = loads
    rec = by[True]
    doc = loadhar.build(page, rec)
    path = tmp_path / "load.har"
    path.write_text(json.dumps(doc))
    back = harfile.read_page(str(path))
    assert back.url == page.url and back.objects[0].url == page.url
    got = {o.url: o for o in back.objects}
    assert Counter(o.url for o in back.objects) == Counter(r["url"] for r in rec["requests"])
    entries = {e["request"]["url"]: e for e in doc["log"]["entries"]}
    for r in rec["requests"]:
        o = got[r["url"]]
        assert (o.status, o.protocol, o.size, o.transfer_size) == (r["status"], "http/1.1", r["body_bytes"], r["bytes"])
        assert o.headers == [(f["name"], f["value"]) for f in entries[r["url"]]["response"]["headers"]]
        assert o.body is None and o.start_ms == pytest.approx(r["ready_ms"])
    # a HAR library reads it as a page with these entries
    parsed = HarParser(doc)
    assert parsed.creator["name"] == "pltlab" and len(parsed.pages) == 1
    hp = parsed.pages[0]
    assert sorted(e.url for e in hp.entries) == sorted(r["url"] for r in rec["requests"])
    for e in hp.entries:
        r = next(q for q in rec["requests"] if q["url"] == e.url)
        assert e.status == r["status"] and e.response.bodySize == r["bytes"]
        assert e.request.get_header_value("Host") == urlsplit(r["url"]).netloc
        assert e.serverAddress and e.timings["wait"] > 0
    assert hp.get_total_size(hp.entries) == sum(r["bytes"] for r in rec["requests"])


@pytest.mark.root
def test_stored_with_its_run_and_exported(loads, tmp_path):
    page, by = loads
    rec = by[True]
    doc = loadhar.build(page, rec)
    res = Results(str(tmp_path))
    rid = res.add_run({"run_key": "k", "attempt": 1, "status": "ok", "tfo": True}, rec["requests"], har=doc)
    bare = res.add_run({"run_key": "k2", "attempt": 1, "status": "ok"}, [])
    assert res.load_har(rid) == doc and res.load_har(bare) is None
    stored = res.rows("requests")
    assert [q["tfo"] for q in stored] == [int(bool(r["tfo"])) for r in rec["requests"]]
    res.close()
    out = tmp_path / "x.har"
    cp = pltlab_cmd("export", f"{tmp_path}#{rid}", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert json.loads(out.read_text()) == doc
    cp = pltlab_cmd("export", str(rid), "--dir", str(tmp_path))  # stdout
    assert cp.returncode == 0 and json.loads(cp.stdout) == doc
    cp = pltlab_cmd("export", f"{tmp_path}#{bare}")
    assert cp.returncode == 2 and f"run {bare} has no HAR stored" in cp.stderr and not cp.stdout
    cp = pltlab_cmd("export", f"{tmp_path}#999", "-o", str(tmp_path / "no.har"))
    assert cp.returncode == 2 and "no run with id 999" in cp.stderr
    assert not (tmp_path / "no.har").exists()


def test_a_chromium_record_keeps_cdp_timing_and_says_tcp_facts_are_unknown():
    """Chromium records carry CDP's ResourceTiming on the load clock, headers and the remote
    address, but nothing per connection about SYN data: those fields are null."""
    page = generate(objects=2, total_bytes=4000, origins=1, depth=1, seed=1, domain="chr")
    doc, child = page.objects
    base = {"method": "GET", "protocol": "http/1.1", "status": 200, "status_text": "OK", "remote_ip": "198.19.0.1"}
    reqs = [
        dict(
            base,
            index=0,
            url=doc.url,
            conn_id=7,
            new_conn=True,
            start_ms=0.0,
            dns_start_ms=1.0,
            dns_end_ms=2.0,
            connect_start_ms=2.0,
            connect_end_ms=22.0,
            request_ms=22.5,
            send_end_ms=23.0,
            first_byte_ms=43.0,
            last_byte_ms=45.0,
            bytes=doc.size,
            body_bytes=doc.size,
            header_bytes=100,
            transfer_bytes=100 + doc.size,
            request_headers=[["Host", "www.chr.test"], ["User-Agent", "Chromium"]],
            response_headers=doc.headers,
        ),
        dict(
            base,
            index=1,
            url=child.url,
            conn_id=7,
            new_conn=False,
            start_ms=50.0,
            request_ms=51.0,
            send_end_ms=51.0,
            first_byte_ms=71.0,
            last_byte_ms=72.0,
            bytes=child.size,
            body_bytes=child.size,
            header_bytes=90,
            transfer_bytes=90 + child.size,
            request_headers=[],
            response_headers=None,
        ),
    ]
    out = loadhar.build(page, {"client": "chromium", "plt_ms": 80.0, "requests": reqs, "load_started_at": 1e9})
    e0, e1 = out["log"]["entries"]
    # blocked: before the DNS lookup (1 ms) and between connect end and send start (0.5 ms)
    assert e0["timings"] == {
        "blocked": 1.5,
        "dns": 1.0,
        "connect": 20.0,
        "ssl": -1,
        "send": 0.5,
        "wait": 20.0,
        "receive": 2.0,
    }
    assert e0["time"] == 45.0 and e0["startedDateTime"] == "2001-09-09T01:46:40.000Z"
    assert e0["_tfo_syn_data"] is None and e0["_tls_handshake"] is None and "_connections" not in out["log"]
    assert e0["serverIPAddress"] == "198.19.0.1" and e0["request"]["headers"][1]["value"] == "Chromium"
    # a response without its headers recorded: the archive's, which the replay served, said so
    assert e1["response"]["headers"] == [{"name": k, "value": v} for k, v in child.headers]
    assert e1["_response_headers_from"] == "archive" and e1["timings"]["blocked"] == 1.0


@pytest.mark.root
def test_a_sweep_stores_every_load_har_and_export_writes_it(tmp_path):
    write_page(
        generate(objects=5, total_bytes=15000, origins=2, depth=2, seed=2, domain="swh"), str(tmp_path / "p.har")
    )
    (tmp_path / "exp.toml").write_text(
        'name = "h"\npages = ["p.har"]\nrtt = ["10ms"]\ntfo = ["off", "on"]\nrepetitions = 1\n'
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(tmp_path / "exp.toml"), "-o", str(out), timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = Results(str(out))
    runs = {r["id"]: r for r in res.rows()}
    reqs = res.rows("requests")
    assert len(runs) == 2 and all(r["status"] == "ok" and r["valid"] for r in runs.values())
    for rid, run in runs.items():
        doc = res.load_har(rid)
        mine = [q for q in reqs if q["run_id"] == rid]
        assert sorted(e["request"]["url"] for e in doc["log"]["entries"]) == sorted(q["url"] for q in mine)
        assert doc["log"]["pages"][0]["_pltlab_load"]["tfo"] == bool(run["tfo"])
        # the stored per-request flag: the SYN-data request of each connection, and only with TFO
        assert sum(q["tfo"] for q in mine) == (len({q["conn_id"] for q in mine}) if run["tfo"] else 0)
    res.close()
    rid = next(i for i, r in runs.items() if r["tfo"])
    cp = pltlab_cmd("export", f"{out}#{rid}", "-o", str(tmp_path / "load.har"))
    assert cp.returncode == 0, cp.stderr
    back = harfile.read_page(str(tmp_path / "load.har"))
    assert len(back.objects) == 5 and {o.status for o in back.objects} == {200}
    cp = pltlab_cmd("import", str(tmp_path / "load.har"), "-o", str(tmp_path / "corpus"))  # as a user would
    assert cp.returncode == 0 and "5 objects (5 size only)" in cp.stdout, cp.stdout + cp.stderr


@pytest.mark.root
@pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")
def test_har_of_a_chromium_load_has_what_cdp_gives():
    page = generate(objects=5, total_bytes=15000, origins=2, depth=2, seed=3, domain="chh")
    (rec,) = run_page(page, RunConfig(rtt="20ms", reps=1, client="chromium", tfo_modes=(False,)))
    assert rec["valid"], rec["invalid_reason"]
    log = loadhar.build(page, rec)["log"]
    assert len(log["entries"]) == len(rec["requests"]) and "_connections" not in log
    urls = {o.url for o in page.objects}
    ours = [e for e in log["entries"] if e["request"]["url"] in urls]  # (not a favicon Chromium may ask for)
    assert {e["request"]["url"] for e in ours} == urls
    for e in ours:
        req, resp = e["request"], e["response"]
        assert "HeadlessChrome" in (_field(req["headers"], "User-Agent") or "")  # as sent
        assert _field(req["headers"], "Host") == urlsplit(req["url"]).netloc
        assert resp["status"] == 200 and _field(resp["headers"], "Content-Length") is not None
        assert req["httpVersion"] == "HTTP/1.1" and e["serverIPAddress"].startswith("198.")
        assert isinstance(e["_connection_id"], int) and e["timings"]["wait"] > 15  # one RTT at least
        t = e["timings"]
        assert e["time"] == pytest.approx(sum(max(0, t[k]) for k in t if k != "ssl"), abs=0.01)
        if e["_new_connection"]:  # no per-connection TCP facts from Chromium: unknown, not false
            assert e["_tfo_syn_data"] is None and t["connect"] >= 0


@pytest.mark.root
def test_h2_0rtt_tfo_load_says_what_rode_in_the_syn(tmp_path):
    """https + h2 + TLS 0-RTT + TFO: each connection's first request went in its SYN with the
    ClientHello (one round trip in all), and the HAR says so per connection."""
    page = generate(objects=6, total_bytes=18000, origins=2, depth=2, seed=3, scheme="https", domain="h2h")
    (rec,) = run_page(page, RunConfig(rtt="20ms", reps=1, protocol="h2", tls="0rtt", tfo_modes=(True,)))
    assert rec["valid"], rec["invalid_reason"]
    doc = loadhar.build(page, rec)
    entries = doc["log"]["entries"]
    assert any(not e["_new_connection"] for e in entries)
    for e in entries:
        req = e["request"]
        assert req["httpVersion"] == e["response"]["httpVersion"] == "h2"
        assert [f["name"] for f in req["headers"][:4]] == [":method", ":scheme", ":authority", ":path"]
        assert _field(req["headers"], ":authority") == urlsplit(req["url"]).hostname
        if e["_new_connection"]:
            assert e["_tfo"] and e["_tfo_syn_data"] and e["_tls_handshake"] == "resumed"
            assert e["_early_data"] == "accepted" and e["timings"]["connect"] < 5
            assert e["timings"]["wait"] == pytest.approx(20, abs=6)  # SYN + ClientHello + request: 1 RTT
        else:
            assert not e["_tfo"] and "_early_data" not in e
    assert all(c["early_data"] == "accepted" for c in doc["log"]["_connections"] if c["requests"])
    path = tmp_path / "h2.har"
    path.write_text(json.dumps(doc))
    assert {o.protocol for o in harfile.read_page(str(path)).objects} == {"h2"}


@pytest.mark.root
def test_pltlab_run_writes_each_loads_har(tmp_path):
    write_page(
        generate(objects=4, total_bytes=8000, origins=1, depth=1, seed=4, domain="runh"), str(tmp_path / "p.har")
    )
    out = tmp_path / "hars"
    cp = pltlab_cmd("run", str(tmp_path / "p.har"), "--rtt", "10ms", "--reps", "1", "--har", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    runs = json.loads(cp.stdout)["runs"]
    assert len(runs) == 2 and sorted(os.listdir(out)) == sorted(os.path.basename(r["har"]) for r in runs)
    for r in runs:
        doc = json.load(open(r["har"]))
        assert sorted(e["request"]["url"] for e in doc["log"]["entries"]) == sorted(q["url"] for q in r["requests"])
        assert doc["log"]["pages"][0]["_pltlab_load"]["tfo"] == r["tfo"]
    # a file where the folder should be: one line, nothing loaded
    cp = pltlab_cmd("run", str(tmp_path / "p.har"), "--reps", "1", "--har", str(tmp_path / "p.har"))
    assert cp.returncode != 0 and "--har" in cp.stderr and "not a folder" in cp.stderr
    assert cp.stderr.strip().count("\n") == 0, cp.stderr


def test_h3_entries_and_connections():
    """A built-in loader's h3 record (hand-made: QUIC handshake 0..40 ms, connect_end = tls_end):
    httpVersion "h3" (as Chrome writes it), connect = the QUIC handshake with ssl the same span
    (Chrome's HAR for QUIC), no TCP facts, the connection's QUIC stats."""
    page = generate(objects=1, total_bytes=2000, origins=1, depth=0, seed=1)
    url = page.objects[0].url.replace("http://", "https://")
    conn = {
        "id": 0,
        "host": "a.test",
        "ip": "198.19.0.1",
        "port": 443,
        "tls": True,
        "protocol": "h3",
        "tfo": False,
        "tls_handshake": "full",
        "early_data": None,
        "rtt_ms": 40.5,
        "lost_packets": 0,
        "datagrams_out": 5,
        "datagrams_in": 7,
        "udp_bytes_out": 3000,
        "udp_bytes_in": 6000,
    }
    req = {
        "index": 0,
        "url": url,
        "conn_id": 0,
        "new_conn": True,
        "protocol": "h3",
        "status": 200,
        "ready_ms": 0.0,
        "connect_start_ms": 0.0,
        "connect_end_ms": 40.0,
        "tls_end_ms": 40.0,
        "request_ms": 40.0,
        "first_byte_ms": 80.0,
        "last_byte_ms": 85.0,
    }
    log = loadhar.build(page, {"client": "builtin", "plt_ms": 85.0, "requests": [req], "connections": [conn]})["log"]
    (e,) = log["entries"]
    assert e["request"]["httpVersion"] == e["response"]["httpVersion"] == "h3"
    t = e["timings"]
    assert (t["connect"], t["ssl"], t["wait"], t["receive"]) == (40.0, 40.0, 40.0, 5.0)
    assert e["time"] == 85.0  # (ssl is part of connect)
    assert e["_tfo_syn_data"] is None and e["_tls_handshake"] == "full" and e["_quic_rtt_ms"] == 40.5
    (c,) = log["_connections"]
    assert c["protocol"] == "h3" and c["tfo_syn_data"] is None and c["quic_udp_bytes_in"] == 6000
