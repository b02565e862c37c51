"""TLS 1.3 resumption and 0-RTT (issue 14): the `tls` knob, the proof of each load from the replay
server's own handshake counts, the round trips each mode saves over HTTP/1.1 and h2 (and with
TFO, early data in the SYN), and a load whose early data was refused marked invalid."""

import json
import os

import pytest
from conftest import pltlab_cmd
from test_validity import entry, har

from pltlab.archive.har import read_page
from pltlab.errors import PltError
from pltlab.loaders.chromium import tls_args
from pltlab.loaders.registry import get as loader_of
from pltlab.loaders.validity import tls_problem
from pltlab.replay.server import ReplayServer
from pltlab.run.config import RunConfig
from pltlab.run.runner import run_page

RTT = 40


def test_tls_knob_values():
    assert RunConfig().tls == "full"
    assert RunConfig(tls="0rtt").tls == "0rtt"
    assert RunConfig(tls="resume", client="chromium").tls == "resume"  # a warm visit in the browser
    with pytest.raises(PltError, match="invalid tls '2rtt'.*full, resume, 0rtt"):
        RunConfig(tls="2rtt")


def test_chromium_switches_per_tls_mode():
    assert tls_args("full") == []
    assert tls_args("resume") == ["--enable-net-benchmarking"]
    assert tls_args("0rtt") == ["--enable-net-benchmarking", "--enable-features=EnableTLS13EarlyData"]


def test_tls_problem_judges_the_servers_counts_of_used_connections():
    def counts(full, resumed, early, spare_full=0):
        return {
            "tls_full": full + spare_full,
            "tls_resumed": resumed,
            "tls_full_used": full,
            "tls_resumed_used": resumed,
            "tls_early_used": early,
        }

    assert tls_problem("full", counts(3, 0, 0), []) is None
    assert tls_problem("resume", counts(0, 3, 0), []) is None
    assert "1 of the 3 TLS connections that carried requests had full" in tls_problem("resume", counts(1, 2, 0), [])
    # a browser's spare connection (full handshake, no request) does not make the load invalid
    assert tls_problem("resume", counts(0, 3, 0, spare_full=2), []) is None
    assert "no request went over TLS" in tls_problem("0rtt", counts(0, 0, 0, spare_full=1), [])
    assert tls_problem("0rtt", counts(0, 3, 3), []) is None
    assert "only 2 of 3" in tls_problem("0rtt", counts(0, 3, 2), [])
    refused = [
        {"url": "https://a.test/x", "early_data": "rejected"},
        {"url": "https://a.test/y", "early_data": "rejected"},
    ]
    msg = tls_problem("0rtt", counts(0, 3, 1), refused)
    assert "https://a.test/x was refused" in msg and "(and 1 more)" in msg


def _page(tmp_path, h2: bool) -> str:
    """One https document of 2 KB (its load is a known number of round trips)."""
    e = entry("https://www.a.test/", 200, mime="text/html", size=2000)
    if h2:
        e["request"]["httpVersion"] = e["response"]["httpVersion"] = "h2"
    path = tmp_path / f"one-{'h2' if h2 else 'h1'}.har"
    path.write_text(json.dumps(har(e)))
    arch = tmp_path / f"arch-{'h2' if h2 else 'h1'}"
    assert pltlab_cmd("import", str(path), "-o", str(arch)).returncode == 0
    return str(next(p for p in arch.iterdir() if p.suffix == ".har"))


def _run(page: str, tls: str, tfo: str, *more: str) -> dict:
    opts = ["--client", "builtin", "--rtt", f"{RTT}ms", "--reps", "1", "--tfo", tfo, "--tls", tls, "--json", *more]
    cp = pltlab_cmd("run", page, *opts, timeout=180)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)["runs"][0]


@pytest.mark.root
@pytest.mark.parametrize("h2", [False, True], ids=["http1.1", "h2"])
def test_resumption_and_0rtt_are_proven_and_save_their_round_trips(tmp_path, h2):
    page = _page(tmp_path, h2)
    runs = {(tls, tfo): _run(page, tls, tfo) for tls in ("full", "resume", "0rtt") for tfo in ("off", "on")}
    for (tls, tfo), r in runs.items():
        assert r["valid"], (tls, tfo, r["invalid_reason"])
        assert r["tls"] == tls and r["tfo"] == (tfo == "on")
        (q,) = r["requests"]
        assert q["protocol"] == ("h2" if h2 else "http/1.1")
        st = r["server_tls"]
        if tls == "full":
            assert (st["tls_full"], st["tls_resumed"], q["tls_handshake"]) == (1, 0, "full") and r[
                "tls_warmup_ms"
            ] is None
        else:  # the visit before the load is not counted
            assert (st["tls_full"], st["tls_resumed"], q["tls_handshake"]) == (0, 1, "resumed"), st
            assert (st["tls_full_used"], st["tls_resumed_used"]) == (0, 1), st
            # the visit passed the link unimpaired (its tickets do not depend on the network's
            # conditions): well under one round trip, where over the link it takes 3
            assert r["tls_warmup_ms"] < RTT and r["metrics"]["warm_visit"] == "unimpaired", r["tls_warmup_ms"]
        if tls == "0rtt":
            assert st["tls_early_data"] == st["tls_early_used"] == 1 and st["tls_early_bytes"] > 0
            assert q["early_data"] == "accepted"
            # with TFO the ClientHello and the early data (the request) rode in the SYN
            assert r["server_tfo"]["tfo_tls_early_in_syn"] == (1 if tfo == "on" else 0)
        else:
            assert st["tls_early_data"] == 0 and q.get("early_data") is None
    plt = {k: r["plt_ms"] for k, r in runs.items()}
    # TCP + TLS + request: 3 RTT; resumption is still 1-RTT; 0-RTT sends the request with the
    # hello: 2; TFO saves the TCP round trip on top: 2, 2 and 1
    for tfo, rtts in (("off", {"full": 3, "resume": 3, "0rtt": 2}), ("on", {"full": 2, "resume": 2, "0rtt": 1})):
        for tls, n in rtts.items():
            assert n * RTT <= plt[(tls, tfo)] < (n + 0.5) * RTT, (tls, tfo, plt)


@pytest.mark.root
def test_a_clienthello_larger_than_a_syn_takes_tfo_off_tls_only(tmp_path):
    """Knob client_hello chromium (~2 KB, more than a SYN carries): over https TFO saves nothing,
    so the built-in loader opens its TLS connections without it (3 RTT as with TFO off, the
    load valid, the server saw no SYN data); a plain-http page keeps TFO (1 RTT saved)."""
    https = _page(tmp_path, False)
    e = entry("http://www.a.test/", 200, mime="text/html", size=2000)
    (tmp_path / "plain.har").write_text(json.dumps(har(e)))
    assert pltlab_cmd("import", str(tmp_path / "plain.har"), "-o", str(tmp_path / "plain")).returncode == 0
    http = str(next(p for p in (tmp_path / "plain").iterdir() if p.suffix == ".har"))
    big = ["--client-hello", "chromium"]
    r = _run(https, "full", "on", *big)
    assert r["valid"], r["invalid_reason"]
    assert r["tfo"] and r["server_tfo"]["tfo_connections"] == 0 and not r["requests"][0]["tfo"], r["server_tfo"]
    assert 3 * RTT <= r["plt_ms"] < 3.5 * RTT, r["plt_ms"]
    small = _run(https, "full", "on", "--client-hello", "600B")  # fits: the SYN carries it, 2 RTT
    assert small["valid"] and small["server_tfo"]["tfo_connections"] == 1
    assert 2 * RTT <= small["plt_ms"] < 2.5 * RTT, small["plt_ms"]
    p = _run(http, "full", "on", *big)
    assert p["valid"] and p["requests"][0]["tfo"], p["invalid_reason"]
    assert 1 * RTT <= p["plt_ms"] < 1.5 * RTT, p["plt_ms"]


@pytest.mark.root
def test_0rtt_refused_after_a_ticket_rotation_is_invalid(tmp_path, monkeypatch):
    page = read_page(_page(tmp_path, False))
    new_session = ReplayServer.new_session

    def rotating(self):  # the load's counts start here, after the warm-up visit: rotate then
        self.rotate_tickets()
        new_session(self)

    monkeypatch.setattr(ReplayServer, "new_session", rotating)
    (r,) = run_page(page, RunConfig(rtt="20ms", tfo="off", reps=1, tls="0rtt"))
    assert not r["valid"]
    assert (
        "TLS 0rtt asked but 1 of the 1 TLS connections that carried requests had full handshakes" in r["invalid_reason"]
    ), r["invalid_reason"]
    (q,) = r["requests"]
    # the loader sent its request again after the full handshake: the page still loaded
    assert (q["tls_handshake"], q["early_data"], q["status"]) == ("full", "rejected", 200)


def test_reproduce_tfo_on_todays_web_is_one_experiment():
    from pltlab.studies import tfo as study

    exp = study.experiment(quick=True, protocol="h2", tls="0rtt")
    cfg = exp.run_config(0)
    assert (cfg.schemes, cfg.protocol, cfg.tls, cfg.rate_bps) == ("https", "h2", "0rtt", 4_000_000)
    assert 'protocol = "h2"' in exp.source and "--protocol h2 --tls 0rtt" in exp.source
    # the 2013 table's runs keep their keys: nothing of today's web in them
    assert "protocol" not in study.experiment(quick=True).configs[0].key()
    with pytest.raises(PltError, match="--tls resume needs https"):
        study.experiment(tls="resume")
    with pytest.raises(PltError, match="--protocol h2 is for the built-in loader"):
        study.experiment(protocol="h2", client="chromium")
    with pytest.raises(PltError, match="invalid --protocol 'h4'"):
        study.experiment(protocol="h4")


def test_tls_note_says_how_many_connections_chromium_resumed():
    server = {"tls_full_used": 3, "tls_resumed_used": 8, "tls_early_used": 8}
    assert loader_of("builtin").tls_note("resume", server) is None
    assert loader_of("chromium").tls_note("full", server) is None
    note = loader_of("chromium").tls_note("0rtt", server)
    assert "resumed 8 of the 11 TLS connections" in note and "8 with early data" in note
    assert loader_of("chromium").tls_note("resume", {"tls_full_used": 0, "tls_resumed_used": 4}) is None
    # Chromium's judgement: one resumed connection proves the warm visit; none is invalid
    assert loader_of("chromium").tls_problem("resume", server, []) is None
    none = {"tls_full_used": 4, "tls_resumed_used": 0, "tls_early_used": 0}
    assert "Chromium resumed none of the 4" in loader_of("chromium").tls_problem("resume", none, [])
    no_early = {"tls_full_used": 0, "tls_resumed_used": 2, "tls_early_used": 0}
    assert "early data on none of its 2" in loader_of("chromium").tls_problem("0rtt", no_early, [])


@pytest.mark.root
@pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")
def test_chromium_warm_visit_resumes_and_sends_early_data(tmp_path):
    """tls resume/0rtt with Chromium: a warm visit in the same browser, its connections closed and
    caches emptied, leaves session tickets; the measured load resumes every connection that carried
    requests (two: www and img coalesced, cdn), with 0rtt sends its first request as early data and
    gets the document one round trip sooner."""
    from test_h2 import _coalescing_har

    arch = tmp_path / "arch"
    assert pltlab_cmd("import", _coalescing_har(str(tmp_path / "c.har")), "-o", str(arch)).returncode == 0
    page = str(next(p for p in arch.iterdir() if p.suffix == ".har"))
    runs = {}
    for tls in ("full", "resume", "0rtt"):
        opts = ["--client", "chromium", "--rtt", f"{RTT}ms", "--reps", "1", "--tfo", "off", "--tls", tls, "--json"]
        cp = pltlab_cmd("run", page, *opts, timeout=180)
        assert cp.returncode == 0, cp.stderr[-2000:]
        r = runs[tls] = json.loads(cp.stdout)["runs"][0]
        assert r["valid"], (tls, r["invalid_reason"])
        assert r["server_connections"]["h2_streams"] == 9  # the warm visit is not counted
        st = r["server_tls"]
        used = (st["tls_full_used"], st["tls_resumed_used"], st["tls_early_used"])
        assert used == {"full": (2, 0, 0), "resume": (0, 2, 0), "0rtt": (0, 2, 2)}[tls], (tls, st)
    doc = {t: r["requests"][0]["first_byte_ms"] - r["requests"][0]["start_ms"] for t, r in runs.items()}
    assert doc["full"] > 3 * RTT and doc["resume"] > 3 * RTT, doc  # TCP + TLS + request
    assert 2 * RTT <= doc["0rtt"] < 2.5 * RTT, doc  # the request rode with the ClientHello


@pytest.mark.root
def test_a_sweep_stores_each_loads_handshake_counts(tmp_path):
    import sqlite3

    page = _page(tmp_path, True)
    exp = tmp_path / "exp.toml"
    exp.write_text(
        f'name = "tls"\npages = ["{page}"]\nrtt = "{RTT}ms"\ntls = ["full", "0rtt"]\ntfo = "off"\nrepetitions = 1\n'
    )
    out = tmp_path / "out"
    cp = pltlab_cmd("sweep", str(exp), "-o", str(out), "--no-report", timeout=300)
    assert cp.returncode == 0, cp.stderr[-2000:]
    db = sqlite3.connect(out / "results.sqlite")
    cols = "tls, valid, tls_full, tls_resumed, tls_early_data, tls_full_used, tls_resumed_used, tls_early_used"
    rows = {r[0]: r[1:] for r in db.execute(f"SELECT {cols} FROM runs")}
    assert rows == {"full": (1, 1, 0, 0, 1, 0, 0), "0rtt": (1, 0, 1, 1, 0, 1, 1)}, rows
