"""`--network recorded` loads: a recorded-body HAR of the shared corpus over the network inferred
from its own timings, in the built-in loader and in Chromium (docs/fidelity.md)."""

import json
import os

import pytest

from pltlab.archive import netinfer
from pltlab.archive.har import read_page
from pltlab.replay import hosts as hostmap
from pltlab.run.runner import RunConfig, run_page
from tests.conftest import SHARED, pltlab_cmd

GITHUB = os.path.join(SHARED, "har", "github.com-home.har")  # bodies for 9 of 20 entries, connect/ssl times
NO_CONNECT = os.path.join(SHARED, "har", "chrome-small.har")  # timings, but no new connection recorded

pytestmark = [pytest.mark.root, pytest.mark.skipif(not os.path.exists(GITHUB), reason="no shared corpus")]


def _document_network(page) -> tuple[float, float, float]:
    """(DNS, RTT, think time) in ms of the document as the recording says (computed from the
    recording, not from the loader): the RTT of its origin (the median of its hosts' inferred RTTs)."""
    inf = netinfer.infer(page)
    doc = page.objects[0]
    index = hostmap.assign([page])
    rtts = sorted(inf.hosts[h].rtt_ms for h, i in index.items() if i == index[doc.host] and inf.hosts[h].rtt_ms)
    return inf.hosts[doc.host].dns_ms, rtts[len(rtts) // 2], inf.think_ms[0]


def test_builtin_loads_a_recorded_body_har_over_its_recorded_network():
    page = read_page(GITHUB)
    (run,) = run_page(page, RunConfig(network="recorded", tfo="off", reps=1))
    assert run["valid"], run["invalid_reason"]
    inf = run["metrics"]["recorded_network"]
    assert run["rtt_ms"] == pytest.approx(inf["rtt_ms"], abs=0.001) and run["rtt_ms"] != 100  # not the default
    dns, rtt, think = _document_network(page)
    floor = dns + 3 * rtt + think  # DNS, then TCP's and TLS 1.3's handshakes and the request
    doc = run["requests"][0]
    assert doc["url"] == page.url and doc["status"] == 200
    # the document's first byte: the recorded DNS, RTT and think time all delayed it (the
    # default network would answer in 3 x 100 ms)
    assert floor * 0.98 <= doc["first_byte_ms"] <= floor + rtt, (doc["first_byte_ms"], floor)
    assert sorted((r["url"], r["status"]) for r in run["requests"]) == sorted((o.url, o.status) for o in page.objects)


@pytest.mark.slow
@pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")
def test_chromium_loads_it_too_with_knobs_on_top():
    page = read_page(GITHUB)
    (run,) = run_page(page, RunConfig(network="recorded", tfo="on", reps=1, client="chromium"))
    assert run["valid"], run["invalid_reason"]
    assert run["tfo"] is True and run["tfo_counters"]["client"]["TCPFastOpenActive"] >= 1  # a knob on top
    _, rtt, think = _document_network(page)
    doc = next(r for r in run["requests"] if r["url"] == page.url)
    # Chromium resolves names itself (no DNS delay); TFO saves the TCP handshake's round trip
    assert doc["last_byte_ms"] - doc["start_ms"] >= (2 * rtt + think) * 0.98
    assert run["metrics"]["dcl_ms"] and run["plt_ms"] >= run["metrics"]["dcl_ms"]


def test_cli_refuses_a_page_without_connect_times_in_one_line_each():
    cp = pltlab_cmd("run", NO_CONNECT, "--network", "recorded", "--reps", "1", "--tfo", "off", "--json", timeout=120)
    assert cp.returncode != 0
    errors = [ln for ln in cp.stderr.splitlines() if ln.startswith("pltlab: error:")]
    assert errors and all(
        f"{NO_CONNECT}#" in ln and "no entry records a new connection's connect time" in ln for ln in errors
    )
    assert json.loads(cp.stdout)["runs"] == []
