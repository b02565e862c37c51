"""HTTP/2 as recorded (issue 14): protocols kept on import, replay addresses shared by hosts the
recording reached at one server address, ALPN per address from the `protocol` knob, per-request
protocols judged, and Chromium over h2 against the replay (one connection per origin, coalescing)."""

import json
import os
from collections import Counter

import pytest
from conftest import SHARED, pltlab_cmd
from test_validity import entry, har

from pltlab import protocols
from pltlab.archive.har import read_page
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.loaders.validity import expected_protocol, protocol_problem
from pltlab.replay import hosts, manifest
from pltlab.run.config import RunConfig

H2_HAR = os.path.join(SHARED, "har-conformance", "browsertime_h2_filamentgroup.com.har")
needs_corpus = pytest.mark.skipif(not os.path.exists(H2_HAR), reason="needs ../shared/corpus")


def _page(objs: list[tuple[str, str, str]]) -> Page:
    """A page of (url, protocol, server_ip); the first object is the document."""
    out = []
    for i, (url, proto, ip) in enumerate(objs):
        o = Obj(url=url, size=1000 + i, mime="text/html" if i == 0 else "text/css", protocol=proto, server_ip=ip)
        out.append(o)
    return Page(url=objs[0][0], objects=out)


def test_hosts_recorded_at_one_address_share_one_origin():
    p = _page(
        [
            ("https://www.a.test/", "h2", "192.0.2.1"),
            ("https://img.a.test/x.png", "h2", "192.0.2.1"),
            ("https://cdn.b.test/y.css", "h2", "192.0.2.9"),
            ("http://plain.c.test/z.js", "http/1.1", ""),
            ("https://static.a.test/z.js", "h2", "192.0.2.1"),
            ("https://other.d.test/w.js", "", ""),
        ]
    )
    assert hosts.assign([p]) == {
        "www.a.test": 0,
        "img.a.test": 0,
        "cdn.b.test": 1,
        "plain.c.test": 2,
        "static.a.test": 0,
        "other.d.test": 3,
    }
    # without recorded addresses: one origin per host, as before
    q = _page([("https://www.a.test/", "h2", ""), ("https://img.a.test/x.png", "h2", "")])
    assert hosts.assign([q]) == {"www.a.test": 0, "img.a.test": 1}


@pytest.mark.parametrize(
    "protocol,want",
    [
        ("recorded", {"198.19.0.1": True, "198.19.0.2": False, "198.19.0.3": True}),
        ("h1", {}),
        ("h2", {"198.19.0.1": True, "198.19.0.2": True, "198.19.0.3": True}),
    ],
)
def test_manifest_offers_h2_per_address(tmp_path, protocol, want):
    p = _page(
        [
            ("https://www.a.test/", "h2", ""),
            ("https://old.b.test/x.css", "http/1.1", ""),
            ("http://plain.b.test/y.css", "h3", ""),
        ]
    )
    ips = {"www.a.test": "198.19.0.1", "old.b.test": "198.19.0.2", "plain.b.test": "198.19.0.3"}
    # (a loader without HTTP/3: h3 recordings replayed as h2; with it, tests/test_manifest_h3.py)
    m = manifest.build([p], ips, str(tmp_path), {"cert": "c", "key": "k"}, protocol=protocol, spoken=("h1", "h2"))
    alpn = {(e["ip"], e["port"]): e.get("alpn") for e in m["listen"]}
    assert not any("transport" in e for e in m["listen"]) and "quic" not in m
    for ip in ips.values():
        h2 = bool(want.get(ip))
        assert alpn[(ip, 443)] == (["h2", "http/1.1"] if h2 else ["http/1.1"]), (protocol, ip)
    assert alpn[("198.19.0.3", 80)] is None  # plain http: HTTP/1.1, no ALPN (its 443: HSTS upgrades)
    # h3 recorded on an https origin: h3 where the loader speaks it, else h2
    q = _page([("https://www.a.test/", "h3", "")])
    assert manifest.address_protocols([q], {"www.a.test": "198.19.0.1"}, "recorded", ("h1", "h2")) == {
        "198.19.0.1": protocols.get("h2")
    }
    assert manifest.address_protocols([q], {"www.a.test": "198.19.0.1"}, "recorded") == {
        "198.19.0.1": protocols.get("h3")
    }


def test_requests_must_use_the_protocol_offered():
    ips = {"a.test": "198.19.0.1", "b.test": "198.19.0.2"}
    h2 = {"198.19.0.1": protocols.get("h2")}
    assert expected_protocol("https://a.test/x", ips, h2) == "h2"
    assert expected_protocol("http://a.test/x", ips, h2) == "http/1.1"
    assert expected_protocol("https://b.test/x", ips, h2) == "http/1.1"
    good = [
        {"url": "https://a.test/", "protocol": "h2"},
        {"url": "https://b.test/1", "protocol": "http/1.1"},
        {"url": "https://a.test/failed", "protocol": None},
        {"url": "data:image/png,xx", "protocol": "data"},
    ]
    assert protocol_problem(good, ips, h2) is None
    bad = good + [{"url": "https://a.test/2", "protocol": "http/1.1"}, {"url": "https://b.test/2", "protocol": "h2"}]
    why = protocol_problem(bad, ips, h2)
    assert why == "protocol: https://a.test/2 went over http/1.1 where the replay offered h2 (and 1 more)"


def test_protocol_knob():
    assert RunConfig().protocol == "recorded"
    assert RunConfig(protocol="h1").columns()["protocol"] == "h1"
    assert RunConfig(protocol="h2").protocol == "h2"
    with pytest.raises(PltError, match="invalid protocol 'h4': unknown protocol"):
        RunConfig(protocol="h4")
    assert RunConfig(protocol="h3").protocol == "h3"  # the built-in loader speaks it (step 8)


def test_server_priority_knob_reaches_the_replay(tmp_path):
    assert RunConfig().server_priority == "rfc9218"  # as CDN front ends order responses
    assert RunConfig(server_priority="round-robin").columns()["server_priority"] == "round-robin"
    with pytest.raises(PltError, match="invalid server_priority 'fifo': unknown server priority"):
        RunConfig(server_priority="fifo")
    p = _page([("https://www.a.test/", "h2", "")])
    ips = {"www.a.test": "198.19.0.1"}
    tls = {"cert": "c", "key": "k"}
    assert manifest.build([p], ips, str(tmp_path), tls)["h2_priority"] == "rfc9218"
    assert manifest.build([p], ips, str(tmp_path), tls, h2_priority="round-robin")["h2_priority"] == "round-robin"
    cp = pltlab_cmd("run", "wikipedia", "--server-priority", "fifo")
    assert cp.returncode != 0 and "invalid --server-priority 'fifo'" in cp.stderr


@needs_corpus
def test_h2_har_keeps_its_protocol(tmp_path):
    out = tmp_path / "arch"
    cp = pltlab_cmd("import", H2_HAR, "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert "recorded over h2" not in cp.stdout + cp.stderr  # h2 is replayed as h2, not a repair
    cp = pltlab_cmd("pages", str(out), "--json")
    rows = json.loads(cp.stdout)
    assert rows and all(set(r["protocols"]) == {"h2"} for r in rows)
    # the archive file (HAR 1.2) says h2 per entry, and reads back as h2
    f = os.path.join(out, rows[0]["file"]) if not os.path.isabs(rows[0]["file"]) else rows[0]["file"]
    har = json.load(open(f))
    assert {e["response"]["httpVersion"] for e in har["log"]["entries"]} == {"h2"}
    assert {o.protocol for o in read_page(f).objects} == {"h2"}


def _coalescing_har(path: str) -> str:
    """Two https hosts recorded at one server address over h2, a third at another."""

    def h2_entry(url, mime, size, ip, initiator=None):
        e = entry(url, 200, mime=mime, size=size)
        e["request"]["httpVersion"] = e["response"]["httpVersion"] = "h2"
        e["serverIPAddress"] = ip
        if initiator:
            e["_initiator"] = {"type": "parser", "url": initiator}
        return e

    doc = "https://www.a.test/"
    entries = [h2_entry(doc, "text/html", 2000, "192.0.2.1")]
    for i in range(4):
        entries.append(h2_entry(f"https://img.a.test/{i}.png", "image/png", 5000, "192.0.2.1", doc))
        entries.append(h2_entry(f"https://cdn.b.test/{i}.css", "text/css", 3000, "192.0.2.2", doc))
    with open(path, "w") as f:
        json.dump(har(*entries), f)
    return path


def _run(page: str, *args: str, client: str = "chromium") -> dict:
    opts = ["--client", client, "--rtt", "20ms", "--reps", "1", "--tfo", "off", "--json"]
    cp = pltlab_cmd("run", page, *opts, *args, timeout=180)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)["runs"][0]


@pytest.mark.root
@pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")
def test_chromium_over_h2_one_connection_per_address_and_coalescing(tmp_path):
    har = _coalescing_har(str(tmp_path / "coalesce.har"))
    arch = tmp_path / "arch"
    assert pltlab_cmd("import", har, "-o", str(arch)).returncode == 0
    page = str(next(p for p in arch.iterdir() if p.suffix == ".har"))
    r = _run(page)
    assert r["valid"], r["invalid_reason"]
    reqs = r["requests"]
    assert len(reqs) == 9 and {q["protocol"] for q in reqs} == {"h2"}
    conns = {q["host"]: set() for q in reqs}
    for q in reqs:
        conns[q["host"]].add(q["conn_id"])
    # www.a.test and img.a.test share one address: one connection carries both (coalesced);
    # cdn.b.test has its own
    assert conns["www.a.test"] == conns["img.a.test"] and len(conns["www.a.test"]) == 1
    assert len(conns["cdn.b.test"]) == 1 and conns["cdn.b.test"] != conns["www.a.test"]
    # (Chromium may open spare connections it never uses: at least these two negotiated h2)
    assert r["server_connections"]["h2_connections"] >= 2
    assert r["server_connections"]["h2_streams"] == 9
    assert r["server_connections"]["h2_errors"] == 0
    # the same page with protocol h1: HTTP/1.1 only, never h2
    r = _run(page, "--protocol", "h1")
    assert r["valid"], r["invalid_reason"]
    assert Counter(q["protocol"] for q in r["requests"]) == {"http/1.1": 9}
    assert r["server_connections"]["h2_connections"] == 0


@pytest.mark.root
def test_builtin_loader_over_h2_and_plan_protocols(tmp_path):
    har = _coalescing_har(str(tmp_path / "coalesce.har"))
    arch = tmp_path / "arch"
    assert pltlab_cmd("import", har, "-o", str(arch)).returncode == 0
    page = str(next(p for p in arch.iterdir() if p.suffix == ".har"))
    r = _run(page, client="builtin")
    assert r["valid"], r["invalid_reason"]
    assert {q["protocol"] for q in r["requests"]} == {"h2"}
    conns = {}
    for q in r["requests"]:
        conns.setdefault(q["host"], set()).add(q["conn_id"])
    # one connection per address: www and img coalesced, cdn its own; nothing else opened
    assert conns["www.a.test"] == conns["img.a.test"] and len(conns["www.a.test"]) == 1
    assert len(conns["cdn.b.test"]) == 1 and conns["cdn.b.test"] != conns["www.a.test"]
    assert r["server_connections"] == {
        "h1_connections": 0,
        "h1_requests": 0,
        "h2_connections": 2,
        "h2_streams": 9,
        "h2_errors": 0,
    }
    h1 = _run(page, "--protocol", "h1", client="builtin")
    assert h1["valid"] and {q["protocol"] for q in h1["requests"]} == {"http/1.1"}
    assert h1["server_connections"]["h2_connections"] == 0


def test_plans_say_h2_and_chromium_priorities():
    from pltlab.archive import bundled
    from pltlab.loaders import plan as plans

    page = bundled.load("wikipedia")
    ips = {h: f"198.19.0.{i + 1}" for h, i in hosts.assign([page]).items()}
    https = set(ips)  # every host over https, as Chromium's HSTS upgrades make them
    p = plans.build(
        page,
        ips,
        tfo=False,
        ca="/ca.pem",
        https_hosts=https,
        model="chromium",
        offered=dict.fromkeys(ips.values(), protocols.get("h2")),
    )
    objs = p["objects"]
    assert all(o["protocol"] == "h2" for o in objs if o["tls"])
    assert objs[0]["priority"] == "u=0, i"  # the document
    by_kind = {}
    for o in objs[1:]:
        by_kind.setdefault(o["url"].rsplit(".", 1)[-1][:3], set()).add(o.get("priority"))
    assert {"u=2, i", "i"} & set().union(*by_kind.values())  # images: the first five boosted, then "i"
    # without h2: no protocol and no priority keys (plans without h2 unchanged)
    p1 = plans.build(page, ips, tfo=False, ca="/ca.pem", https_hosts=https, model="chromium")
    assert not any("protocol" in o or "priority" in o for o in p1["objects"])
    # the archive model sends no priorities, h2 or not
    pa = plans.build(
        page, ips, tfo=False, ca="/ca.pem", https_hosts=https, offered=dict.fromkeys(ips.values(), protocols.get("h2"))
    )
    assert not any("priority" in o for o in pa["objects"])


def test_schemes_https_is_for_the_builtin_loader():
    assert RunConfig(schemes="https").schemes == "https"
    with pytest.raises(PltError, match="schemes https is for the built-in loader"):
        RunConfig(schemes="https", client="chromium")


@pytest.mark.root
def test_page_recorded_over_http_served_over_https_and_h2():
    # wikipedia as recorded in 2013 (http): every origin over https and h2, as served today
    r = _run("wikipedia", "--schemes", "https", "--protocol", "h2", client="builtin")
    assert r["valid"], r["invalid_reason"]
    assert all(q["url"].startswith("https://") and q["protocol"] == "h2" for q in r["requests"])
    assert r["server_connections"]["h1_connections"] == 0
    assert r["server_connections"]["h2_streams"] == len(r["requests"])
    # the same with the replay's responses interleaved instead of ordered by priority
    rr = _run(
        "wikipedia", "--schemes", "https", "--protocol", "h2", "--server-priority", "round-robin", client="builtin"
    )
    assert rr["valid"], rr["invalid_reason"]
    assert rr["server_connections"]["h2_streams"] == len(rr["requests"]) == len(r["requests"])
