"""The paper's http in Chromium: a page whose names are on Chromium's HSTS preload list loads over
http once they are renamed out of it (knob hosts "unpreloaded"), and a load that went over https
anyway is invalid (pltlab.run.schemes)."""

import os

import pytest

from pltlab.archive import bundled
from pltlab.archive.model import Obj, Page
from pltlab.archive.rename import Renaming
from pltlab.errors import PltError
from pltlab.run import runner, schemes
from pltlab.run.runner import RunConfig, run_page

needs_chromium = pytest.mark.skipif(
    not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium (apt-get install chromium)"
)


def test_the_schemes_a_page_loads_on_and_a_fall_back_to_https():
    """An http page with an https iframe: the iframe's http image follows it to https (synthesized
    references are scheme-relative), the rest is http; a request over https for an http object, or
    an HSTS upgrade, is named."""
    page = Page(
        url="http://a.test/",
        objects=[
            Obj(url="http://a.test/", mime="text/html", size=500),
            Obj(url="http://a.test/i.png", mime="image/png", size=100, initiator="http://a.test/"),
            Obj(url="https://b.test/f.html", mime="text/html", size=300, initiator="http://a.test/"),
            Obj(url="http://c.test/j.png", mime="image/png", size=100, initiator="https://b.test/f.html"),
        ],
    )
    http = schemes.http_urls(page)
    assert http == {"//a.test/", "//a.test/i.png"}
    ok = [{"url": "http://a.test/"}, {"url": "http://a.test/i.png"}, {"url": "https://b.test/f.html"}]
    assert schemes.problem(ok + [{"url": "https://c.test/j.png"}], http) is None
    bad = ok + [{"url": "https://a.test/i.png"}]
    assert schemes.problem(bad, http) == (
        "fell back to https: https://a.test/i.png went over https where the page is loaded over http"
    )
    assert schemes.problem(ok, http, ["http://a.test/", "http://a.test/i.png"]) == (
        "fell back to https: Chromium upgraded http://a.test/ to https itself (HSTS) (and 1 more)"
    )
    assert schemes.http_urls(page, {"a.test"}) == set()  # upgraded: all of it over https


@pytest.mark.root
@needs_chromium
def test_chromium_loads_a_renamed_preloaded_page_over_http_with_tfo():
    """wikipedia (wikipedia.org and wikimedia.org are preloaded): every archived object over
    http under the renamed names, no TLS at all, TFO on the connections of the TFO load."""
    page = bundled.load("wikipedia")
    runs = run_page(page, RunConfig(rtt="20ms", reps=1, client="chromium", hosts="unpreloaded"))
    assert [r["tfo"] for r in runs] == [False, True]
    for r in runs:
        assert r["valid"], r["invalid_reason"]
        assert r["hosts_renamed"] == {"wikipedia.org": "xikipedia.org", "wikimedia.org": "xikimedia.org"}
        got = [q for q in r["requests"] if not q.get("error")]
        assert len(got) == 29 and all(q["status"] == 200 for q in got)
        assert {q["url"].split("/")[2] for q in got} == {
            "en.xikipedia.org",
            "bits.xikimedia.org",
            "meta.xikimedia.org",
            "upload.xikimedia.org",
        }
        assert all(q["url"].startswith("http://") for q in got)
        assert r["server_tfo"]["tls_connections"] == 0
    assert runs[1]["tfo_counters"]["client"]["TCPFastOpenActive"] >= 1
    assert runs[1]["server_tfo"]["tfo_connections"] >= 1


@pytest.mark.root
@needs_chromium
def test_a_load_that_fell_back_to_https_is_invalid(monkeypatch):
    """A renaming that leaves wikipedia.org on the list: Chromium upgrades the document to https
    itself, and the load says so."""
    monkeypatch.setattr(
        runner.hsts, "unpreloaded", lambda hosts, netns=None: Renaming((("wikimedia.org", "xikimedia.org"),))
    )
    (r,) = run_page(
        bundled.load("wikipedia"),
        RunConfig(rtt="5ms", reps=1, tfo_modes=(False,), client="chromium", hosts="unpreloaded"),
    )
    assert not r["valid"]
    assert r["invalid_reason"].startswith(
        "fell back to https: Chromium upgraded http://en.wikipedia.org/wiki/Transmission_Control_Protocol "
        "to https itself (HSTS)"
    )


def test_reproduce_tfo_in_chromium_is_the_paper_http_and_today_is_its_own_experiment():
    from pltlab.studies import tfo

    paper = tfo.experiment(client="chromium", pages="amazon")
    assert paper.name == "reproduce-tfo" and {c.values()["hosts"] for c in paper.configs} == {"unpreloaded"}
    assert 'hosts = "unpreloaded"' in paper.source
    today = tfo.experiment(client="chromium", pages="amazon", schemes="https")
    assert today.name == "reproduce-tfo-today" and {c.values()["hosts"] for c in today.configs} == {"recorded"}
    assert today.source.splitlines()[1].startswith("# today's conditions, not the paper's")
    assert tfo.experiment(pages="amazon", schemes="https").settings == {
        "schemes": "chromium"
    }  # built-in: same upgrades
    assert {c.values()["hosts"] for c in tfo.experiment(pages="amazon").configs} == {"recorded"}  # built-in: http as is
    with pytest.raises(PltError, match="both choose https"):
        tfo.experiment(schemes="https", protocol="h1")

    def rows(**run):
        return {"rows": [{"runs": {False: [dict(run, tfo=0)], True: [dict(run, tfo=1)]}}]}

    assert (
        tfo.condition(rows(client="chromium", hosts="unpreloaded", schemes="recorded"))
        == tfo.CONDITIONS["paper-renamed"]
    )
    assert tfo.condition(rows(client="chromium", hosts="recorded", schemes="recorded")) == tfo.CONDITIONS["today"]
    assert tfo.condition(rows(client="builtin", hosts="recorded", schemes="chromium")) == tfo.CONDITIONS["today"]
    assert tfo.condition(rows(client="builtin", hosts="recorded", schemes="recorded")) == tfo.CONDITIONS["paper"]


def test_a_fall_with_rtt_within_the_ci_is_no_difference():
    from pltlab.studies import tfo

    def row(rtt, imp, ci):
        return {"page": "p", "rtt_ms": rtt, "improvement": imp, "improvement_ci": ci}

    within = [row(20, 0.20, [0.15, 0.25]), row(100, 0.18, [0.12, 0.24]), row(200, 0.30, [0.25, 0.35])]
    assert not any("grow" in d for d in tfo.differences(within))
    beyond = [row(20, 0.20, [0.18, 0.22]), row(100, 0.12, [0.10, 0.15]), row(200, 0.30, [0.25, 0.35])]
    assert "p: the improvement does not grow with RTT (20.0% -> 12.0% -> 30.0%)" in tfo.differences(beyond)
