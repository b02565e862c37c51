"""Chromium as a page loader over the emulated link: every archived object fetched, TFO per the
kernel counters, https origins, and the built-in loader's model of Chromium's schemes."""

import os
import statistics
from urllib.parse import urlsplit

import pytest

from pltlab.archive import bundled
from pltlab.archive.generate import generate
from pltlab.loaders import plan as plans
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig, run_page

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(
        not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium (apt-get install chromium)"
    ),
]


def _key(url: str):
    s = urlsplit(url.split("#", 1)[0])
    return (s.hostname or "").lower(), s.path or "/", s.query


def _archived(page):
    return {_key(o.url) for o in page.objects if o.scheme in ("http", "https")}


def test_bundled_page_fetches_every_archived_object_hsts_upgraded():
    """wikipedia (recorded http) is HSTS-preloaded: Chromium loads it and every sub-resource over
    https (no mixed content blocked), one request per archived object, all answered 200."""
    page = bundled.load("wikipedia")
    runs = run_page(page, RunConfig(rtt="20ms", reps=1, tfo_modes=(False,), client="chromium"))
    r = runs[0]
    assert r["valid"], r["invalid_reason"]
    got = [q for q in r["requests"] if not q.get("error")]
    assert {_key(q["url"]) for q in got} == _archived(page)
    assert all(q["status"] == 200 for q in got) and r["not_found"] == 0
    assert all(q["url"].startswith("https://") for q in got)
    assert len(got) == len(_archived(page)) == 29
    assert r["plt_ms"] > 3 * 20  # TLS + request + sub-resources: several round trips


def test_built_in_plan_models_chromium_schemes():
    """The built-in loader's plan with Chromium's HSTS upgrades uses the schemes Chromium used."""
    from pltlab.loaders.browser import hsts

    page = bundled.load("amazon")
    with PageRunner(page, RunConfig(rtt="5ms", client="chromium")) as pr:
        up = hsts.upgraded_hosts(pr.hosts, netns=pr.topo.client_ns)
        r = pr.load(Point(), 1)
    assert "www.amazon.com" in up
    chromium = {_key(q["url"]): q["url"].split(":", 1)[0] for q in r["requests"] if q["status"]}
    plan = plans.build(page, {h: "198.19.0.1" for h in page.hosts}, tfo=False, https_hosts=up)
    model = {_key(o["url"]): o["url"].split(":", 1)[0] for o in plan["objects"]}
    assert chromium == {k: model[k] for k in chromium} and set(chromium) == _archived(page)
    # Recorded schemes without the upgrade list.
    plain = plans.build(page, {h: "198.19.0.1" for h in page.hosts}, tfo=False)
    assert all(not o["tls"] and o["port"] == 80 for o in plain["objects"])


@pytest.mark.slow
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_chromium_tfo_per_counters(scheme):
    """With the shim (warm cookies) Chromium's connections carry data in the SYN
    (TCPFastOpenActive rises, the server accepts them as TFO); without it nothing does. Over http
    TFO saves the handshake's round trip; over https it cannot with this Chromium: its TLS 1.3
    ClientHello (X25519MLKEM768 key share, ~2 KB) does not fit in the SYN, so the server waits for
    the rest until the handshake completes (docs/loaders.md)."""
    page = generate(objects=4, total_bytes=4 * 2000, origins=1, depth=3, seed=3, scheme=scheme, domain="tfo")
    rtt = 100
    runs = run_page(page, RunConfig(rtt=f"{rtt}ms", reps=3, client="chromium"))
    assert all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    for r in runs:
        c = r["tfo_counters"]
        if r["tfo"]:
            assert c["client"]["TCPFastOpenActive"] >= 1 and c["server"]["TCPFastOpenPassive"] >= 1
        else:
            assert c["client"]["TCPFastOpenActive"] == 0 and c["server"]["TCPFastOpenPassive"] == 0
        assert {_key(q["url"]) for q in r["requests"] if q["status"] == 200} == _archived(page)

    # what TFO saves shows on the document's time to its first byte (its connection's handshake);
    # the PLT adds Chromium's own variation (+-50 ms here) on top
    def doc_ttfb(r):
        doc = next(q for q in r["requests"] if _key(q["url"]) == _key(page.objects[0].url))
        return doc["first_byte_ms"] - doc["start_ms"]

    med = {t: statistics.median(doc_ttfb(r) for r in runs if r["tfo"] == t) for t in (False, True)}
    saved = med[False] - med[True]
    tfo_runs = [r for r in runs if r["tfo"]]
    split = [r["server_tfo"]["tfo_tls_hello_split"] for r in tfo_runs]
    if scheme == "http":
        assert all(r["server_tfo"]["tfo_tls_connections"] == 0 for r in tfo_runs)
        assert 0.5 * rtt <= saved <= 1.5 * rtt, med
    elif all(split):
        # the replay server saw the ClientHello overflow the SYN: no saving, and each run says so
        assert all(
            r["tfo_note"] and r["server_tfo"]["tfo_tls_hello_max"] > r["server_tfo"]["tfo_syn_bytes_max"]
            for r in tfo_runs
        )
        assert abs(saved) <= 0.5 * rtt, med
    else:  # a Chromium whose ClientHello fits in the SYN saves the round trip
        assert not any(split), split
        assert 0.5 * rtt <= saved <= 1.5 * rtt, med


def test_https_origin_loads_in_chromium():
    """An origin recorded over https loads with the per-corpus CA (no certificate error)."""
    page = generate(objects=6, total_bytes=6 * 3000, origins=2, depth=2, seed=4, scheme="https", domain="secure")
    runs = run_page(page, RunConfig(rtt="10ms", reps=1, tfo_modes=(False,), client="chromium"))
    r = runs[0]
    assert r["valid"] and not [q for q in r["requests"] if q.get("error")]
    assert {_key(q["url"]) for q in r["requests"]} == _archived(page)
    assert all(q["status"] == 200 and q["url"].startswith("https://") for q in r["requests"])
