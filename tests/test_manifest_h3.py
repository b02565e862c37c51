"""The replay manifest with HTTP/3 (issue 26 step 2): udp listen entries beside TCP on the
addresses that offer h3, the `quic` object from the QUIC knobs, Alt-Svc edited per address; and
manifests and plans of h1/h2 byte for byte those of before HTTP/3 was a row."""

import dataclasses
import hashlib
import json

import pytest
from test_h2 import _page

from pltlab import protocols
from pltlab.archive import bundled
from pltlab.loaders import plan as plans
from pltlab.loaders.validity import expected_protocol
from pltlab.replay import hosts, manifest

TLS = {"cert": "/c.pem", "key": "/c.key"}


def _udp(ip: str) -> dict:
    return {"ip": ip, "port": 443, "tls": True, "transport": "udp", "alpn": ["h3"]}


def test_h3_addresses_listen_on_udp_beside_tcp(tmp_path):
    p = _page([("https://www.a.test/", "h2", ""), ("http://plain.b.test/y.css", "http/1.1", "")])
    ips = {"www.a.test": "198.19.0.1", "plain.b.test": "198.19.0.2"}
    m = manifest.build([p], ips, str(tmp_path), TLS, protocol="h3", quic_cc="bbr", quic_icw=32)
    assert m["listen"] == [
        {"ip": "198.19.0.1", "port": 443, "tls": True, "alpn": ["h2", "http/1.1"]},  # TCP keeps h2, h1
        _udp("198.19.0.1"),
        {"ip": "198.19.0.2", "port": 80, "tls": False},  # (plain http: TCP only)
        {"ip": "198.19.0.2", "port": 443, "tls": True, "alpn": ["h2", "http/1.1"]},
        _udp("198.19.0.2"),
    ]
    assert m["quic"] == {"cc": "bbr", "initial_window_packets": 32}
    h3 = protocols.get("h3")
    assert manifest.offered(m) == {"198.19.0.1": h3, "198.19.0.2": h3}
    # a request to an h3 address is expected over h3 (https), HTTP/1.1 (http)
    assert expected_protocol("https://www.a.test/", ips, manifest.offered(m)) == "h3"
    assert expected_protocol("http://plain.b.test/y.css", ips, manifest.offered(m)) == "http/1.1"
    # the plan's objects on h3 addresses say h3 (the built-in loader's step 8 loads them)
    plan = plans.build(p, ips, tfo=False, ca="/ca.pem", offered=manifest.offered(m))
    assert [o.get("protocol") for o in plan["objects"]] == ["h3", None]


def test_recorded_h3_where_the_loader_speaks_it(tmp_path):
    """Under "recorded" an address whose hosts recorded h3 offers h3 (the later row of those
    recorded), the others what they recorded; a loader without HTTP/3 gets h2 there instead."""
    p = _page([("https://www.a.test/", "h3", ""), ("https://cdn.b.test/x.css", "h2", "")])
    ips = {"www.a.test": "198.19.0.1", "cdn.b.test": "198.19.0.2"}
    m = manifest.build([p], ips, str(tmp_path), TLS)
    assert [e for e in m["listen"] if e.get("transport")] == [_udp("198.19.0.1")]
    assert m["quic"] == {"cc": "cubic", "initial_window_packets": 10}
    assert {ip: x.name for ip, x in manifest.offered(m).items()} == {"198.19.0.1": "h3", "198.19.0.2": "h2"}
    m = manifest.build([p], ips, str(tmp_path), TLS, spoken=("h1", "h2"))
    assert not any("transport" in e for e in m["listen"]) and "quic" not in m
    assert {x.name for x in manifest.offered(m).values()} == {"h2"}


def _alt_svc_page():
    p = _page(
        [
            ("https://www.a.test/", "h3", ""),
            ("https://www.a.test/plain.css", "h3", ""),
            ("https://cdn.b.test/x.css", "h2", ""),
        ]
    )
    rec = 'h3=":443"; ma=86400, h3-29=":443"; ma=86400'
    objs = [
        dataclasses.replace(p.objects[0], headers=[("Alt-Svc", rec)]),
        p.objects[1],
        dataclasses.replace(p.objects[2], headers=[("alt-svc", rec)]),
    ]
    return dataclasses.replace(p, objects=objs), {"www.a.test": "198.19.0.1", "cdn.b.test": "198.19.0.2"}, rec


def _alt_svc(m) -> dict:
    return {r["path"] + r["host"]: [v for k, v in r["headers"] if k.lower() == "alt-svc"] for r in m["responses"]}


@pytest.mark.parametrize("discovery", ["forced", "alt-svc"])
def test_alt_svc_is_kept_only_where_h3_is_offered(tmp_path, discovery):
    p, ips, rec = _alt_svc_page()
    m = manifest.build([p], ips, str(tmp_path), TLS, h3_discovery=discovery)  # recorded: a.test h3, b.test h2
    added = [manifest.ALT_SVC_H3] if discovery == "alt-svc" else []
    assert _alt_svc(m) == {
        "/www.a.test": [rec],  # as recorded (an h3 address)
        "/plain.csswww.a.test": added,  # none recorded: discovery alt-svc adds one
        "/x.csscdn.b.test": [],  # no h3 here: a browser must not try QUIC (the header goes)
    }
    m = manifest.build([p], ips, str(tmp_path), TLS, protocol="h2", h3_discovery=discovery)
    assert all(v == [] for v in _alt_svc(m).values())


# ---- h1/h2 unchanged ---------------------------------------------------------------------------
# sha256 (first 16 hex digits) of manifest.build's JSON (workdir written WORK) and of the bodies
# file, computed with the code of commit 41119cf (before HTTP/3 was a row: git archive of that
# commit's src/, PYTHONPATH to it). A change of the bundled pages changes them too: recompute
# from that commit then.
MANIFESTS_BEFORE_H3 = {
    ("linkedin", "recorded"): ("aa086a4114a51f13", "47509c1cdcee2b90"),
    ("linkedin", "h1"): ("1fd5754e2e40d283", "47509c1cdcee2b90"),
    ("linkedin", "h2"): ("94a1e384a68acf89", "47509c1cdcee2b90"),
    ("arcelormittal", "recorded"): ("73eb5f8b66920f02", "cbd6b4d3a237eb42"),
    ("arcelormittal", "h1"): ("2dba6fc2821cfb20", "cbd6b4d3a237eb42"),
    ("arcelormittal", "h2"): ("987833fec5002820", "cbd6b4d3a237eb42"),
    ("nytimes", "recorded"): ("d13aeed060a794bb", "ba3bb83fffa4e3f5"),
    ("nytimes", "h1"): ("d13aeed060a794bb", "ba3bb83fffa4e3f5"),
    ("nytimes", "h2"): ("ed459072c614c1a3", "ba3bb83fffa4e3f5"),
}
# the built-in loader's plans (tfo, ca "/ca.pem", offered from those manifests), same commit
PLANS_BEFORE_H3 = {
    ("linkedin", "recorded"): "6cd35182e61d4014",
    ("linkedin", "h1"): "af7d0414bab07a28",
    ("linkedin", "h2"): "39ff6c5ce1fc1fba",
    ("arcelormittal", "recorded"): "479b581487ccdf32",
    ("arcelormittal", "h1"): "84594ed122f029ae",
    ("arcelormittal", "h2"): "339eba6a5899c352",
}


def _sha(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()[:16]


@pytest.mark.parametrize("name,protocol", sorted(MANIFESTS_BEFORE_H3))
def test_h1_h2_manifests_and_plans_are_unchanged(tmp_path, name, protocol):
    page = bundled.load(name)
    ips = {h: f"198.19.0.{i + 1}" for h, i in hosts.assign([page]).items()}
    m = manifest.build([page], ips, str(tmp_path), TLS, protocol=protocol)
    assert not any("transport" in e for e in m["listen"]) and "quic" not in m
    text = json.dumps(m).replace(str(tmp_path), "WORK")
    assert (_sha(text.encode()), _sha((tmp_path / "bodies.bin").read_bytes())) == MANIFESTS_BEFORE_H3[name, protocol]
    if (name, protocol) in PLANS_BEFORE_H3:
        plan = plans.build(page, ips, tfo=True, ca="/ca.pem", offered=manifest.offered(m))
        assert _sha(json.dumps(plan).encode()) == PLANS_BEFORE_H3[name, protocol]
