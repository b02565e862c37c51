"""Chromium over HTTP/3 (issue 26 step 9): the switches per load, and (root) a bundled page
loaded over QUIC, proven per load by CDP's protocol per request and the replay server's QUIC
handshake counts: forced mode, Alt-Svc mode, a warm visit with 0-RTT, and a load that asked for
h3 and got h2 marked invalid."""

import os

import pytest

from pltlab.archive import bundled
from pltlab.loaders import chromium
from pltlab.loaders.browser import flags
from pltlab.loaders.registry import get as loader_of
from pltlab.loaders.validity import protocol_problem
from pltlab.protocols import BY_NAME
from pltlab.run.config import RunConfig
from pltlab.run.runner import run_page

PAGE = "wikipedia"  # 29 requests on 4 https origins (HSTS-upgraded by Chromium)
chromium_missing = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")


def test_quic_switches_per_load():
    assert flags.quic_args([]) == []  # no h3 address: QUIC stays off
    assert "--disable-quic" in flags.build_args()
    forced = flags.quic_args(["b.test", "a.test"])
    assert forced == ["--enable-quic", "--origin-to-force-quic-on=a.test:443,b.test:443"]
    assert flags.quic_args(["a.test"], "alt-svc") == ["--enable-quic"]
    args = flags.build_args({"a.test": "198.19.0.1"}, ["pin"], forced)
    assert "--disable-quic" not in args and "--enable-quic" in args
    assert "--ignore-certificate-errors-spki-list=pin" in args
    offered = {"198.19.0.1": BY_NAME["h3"], "198.19.0.2": BY_NAME["h2"]}
    assert chromium.h3_hosts({"a.test": "198.19.0.1", "b.test": "198.19.0.2"}, offered) == ["a.test"]
    assert "h3" in loader_of("chromium").protocols
    assert loader_of("chromium").protocol_problem("h3") is None


def test_asked_h3_got_h2_names_it():
    host_ips, offered = {"a.test": "198.19.0.1"}, {"198.19.0.1": BY_NAME["h3"]}
    reqs = [{"url": "https://a.test/", "protocol": "h2"}, {"url": "https://a.test/x", "protocol": "h3"}]
    assert protocol_problem(reqs, host_ips, offered).startswith("asked for h3, got h2: protocol: https://a.test/")
    # Alt-Svc discovery: the TCP protocol before h3 is known is what the mode means
    assert protocol_problem(reqs, host_ips, offered, alt_svc=True) is None
    assert "asked for h3, got http/1.1" in protocol_problem(
        [{"url": "https://a.test/", "protocol": "http/1.1"}], host_ips, offered, alt_svc=True
    )


def test_quic_handshakes_judge_tls_modes():
    c = loader_of("chromium")
    zero = {"quic_full_used": 0, "quic_resumed_used": 4, "quic_early_used": 4}
    assert c.tls_problem("0rtt", zero, []) is None
    assert "QUIC 0-RTT on 4" in c.tls_problem("resume", zero, [])
    none = {"quic_full_used": 4, "quic_resumed_used": 0, "quic_early_used": 0}
    assert "resumed none of the 4" in c.tls_problem("0rtt", none, [])
    failed = {"quic_connections": 5, "quic_handshake_errors": 1}
    assert c.quic_problem("forced", {"quic_connections": 4}, []) is None
    assert "1 of the 5 QUIC connections" in c.quic_problem("forced", failed, [{"protocol": "h3"}])
    refused = c.quic_problem("alt-svc", {"quic_connections": 4, "quic_handshake_errors": 4}, [{"protocol": "h2"}])
    assert "Chromium refused the replay's certificate over QUIC" in refused


def _runs(n: int = 1, **kw) -> list[dict]:
    cfg = RunConfig(client="chromium", protocol="h3", rtt="50ms", tfo="off", reps=n, **kw)
    return run_page(bundled.load(PAGE), cfg)


def _valid(**kw) -> dict:
    """One load, valid: every QUIC handshake completes (the replay reads Chromium's two-Initial
    post-quantum ClientHello whole before it answers: replay/h3.rs)."""
    (r,) = _runs(1, **kw)
    assert r["valid"], r["invalid_reason"]
    assert r["server_tls"]["quic_handshake_errors"] == 0, r["server_tls"]
    return r


def _protocols(r: dict) -> list[str]:
    return [q["protocol"] for q in r["requests"] if q["url"].startswith("https:") and q.get("status")]


@pytest.mark.root
@pytest.mark.slow
@chromium_missing
def test_forced_quic_every_request_over_h3():
    r = _valid()
    got = _protocols(r)
    assert len(got) >= 20 and set(got) == {"h3"}, got
    st, conns = r["server_tls"], r["server_connections"]
    assert st["quic_full_used"] >= 1 and st["h3_streams"] >= len(got), st
    assert conns["h2_streams"] == 0 and st["tls_full"] == 0, (conns, st)  # nothing over TCP
    # the post-quantum ClientHello spans two Initial packets (Chromium's 1,250-byte datagrams)
    assert st["quic_initial_bytes_max"] >= 2500, st


@pytest.mark.root
@pytest.mark.slow
@chromium_missing
def test_alt_svc_mode_chromium_refuses_the_private_root_over_quic():
    """A fresh browser: the document goes over h2 (nothing tells Chromium of h3 yet); the Alt-Svc
    it gets makes it open QUIC connections, whose certificate it refuses (a private root is taken
    over QUIC only on forced origins), so everything stays on h2: invalid, saying why."""
    (r,) = _runs(h3_discovery="alt-svc")
    got = _protocols(r)
    assert got[0] == "h2" and set(got) == {"h2"}, got
    st = r["server_tls"]
    assert st["quic_connections"] >= 1 and st["quic_handshake_errors"] == st["quic_connections"], st
    assert not r["valid"] and "Chromium refused the replay's certificate over QUIC" in r["invalid_reason"]


@pytest.mark.root
@pytest.mark.slow
@chromium_missing
def test_warm_visit_quic_0rtt_and_resume():
    """closeConnections closes the QUIC sessions (the measured load does new handshakes), the
    QUIC session tickets stay: connections that carried requests resumed with 0-RTT, without a
    feature switch; with "resume" Chromium sends 0-RTT all the same, so that load is invalid."""
    r = _valid(tls="0rtt")
    assert set(_protocols(r)) == {"h3"}
    st = r["server_tls"]
    assert st["quic_early_used"] >= 1 and st["quic_resumed_used"] >= st["quic_early_used"], st
    assert st["quic_early_bytes"] > 0, st
    (r,) = _runs(1, tls="resume")
    assert not r["valid"] and "sent QUIC 0-RTT" in r["invalid_reason"], r["invalid_reason"]


@pytest.mark.root
@pytest.mark.slow
@chromium_missing
def test_asked_h3_got_h2_is_invalid(monkeypatch):
    """Chromium with QUIC off (as if UDP 443 were blocked: it falls back to TCP) loads the page
    over h2: invalid, saying so."""
    monkeypatch.setattr(chromium.flags, "quic_args", lambda hosts, discovery="forced": [])
    (r,) = _runs()
    assert not r["valid"]
    assert r["invalid_reason"].startswith("asked for h3, got h2: protocol: https://"), r["invalid_reason"]
    assert r["server_tls"]["quic_connections"] == 0
