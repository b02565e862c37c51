"""The recorded network inferred from HAR timings (pltlab.archive.netinfer) and `--network recorded`
(pltlab.run.recorded): synthetic HARs written from chosen RTTs, think times and rates are read
back to them; bad timings are counted, not fatal; a page without timings is refused in one line."""

import json
import os
import random
from datetime import UTC, datetime, timedelta

import pytest

from pltlab.archive import netinfer
from pltlab.archive.har import har_to_pages
from pltlab.errors import PltError
from pltlab.run import recorded
from pltlab.run.config import RunConfig

SHARED = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "corpus")
RECORDED_BODIES = os.path.join(SHARED, "har", "github.com-home.har")  # bodies for 9 of 20 entries, timings


T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _entry(url, t0, timings, size=1000, conn=None, ip=None):
    e = {
        "pageref": "p",
        "startedDateTime": (T0 + timedelta(milliseconds=t0)).isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "time": sum(v for v in timings.values() if v > 0),
        "request": {"method": "GET", "url": url, "httpVersion": "HTTP/1.1", "headers": []},
        "response": {
            "status": 200,
            "statusText": "OK",
            "httpVersion": "HTTP/1.1",
            "headers": [{"name": "Content-Type", "value": "image/png"}],
            "content": {"size": size, "mimeType": "image/png"},
            "bodySize": size,
            "headersSize": -1,
        },
        "timings": timings,
    }
    if conn is not None:
        e["connection"] = conn
    if ip:
        e["serverIPAddress"] = ip
    return e


def synthetic_har(hosts: dict, rate_bps: float, think: dict | None = None, seed=1, tls_rtts=1.0, jitter=0.02):
    """A HAR of a page whose hosts have the RTTs ``hosts`` (host -> ms), each response the server
    time ``think[url]`` and a body received at ``rate_bps``, one request after another; every host opens 2 connections
    (connect = TCP's RTT + TLS's ``tls_rtts`` RTTs, with a little jitter), later requests reuse
    them (connect -1)."""
    rng = random.Random(seed)
    entries, t = [], 0.0
    for n, (host, rtt) in enumerate(hosts.items()):
        for i in range(6):
            url = f"https://{host}/o{i}.png"
            size = 200_000 if i == 0 else 3000
            new = i < 2
            j = rng.uniform(1 - jitter, 1 + jitter)
            ssl = rtt * tls_rtts * j if new else -1
            timings = {
                "blocked": 1.0,
                "dns": 20.0 + n if i == 0 else -1,
                "connect": rtt * j + ssl if new else -1,
                "ssl": ssl,
                "send": 0.1,
                "wait": rtt + (think or {}).get(url, 0.0),
                "receive": size * 8 / rate_bps * 1000,
            }
            entries.append(_entry(url, t, timings, size=size, conn=f"{host}-{i % 2}", ip=f"10.0.0.{n + 1}"))
            t += sum(v for v in timings.values() if v > 0) + 1  # one at a time: each receive alone on the link
    doc = {
        "log": {
            "version": "1.2",
            "creator": {"name": "synthetic", "version": "1"},
            "pages": [
                {
                    "id": "p",
                    "startedDateTime": "2024-01-01T00:00:00.000Z",
                    "title": "t",
                    "pageTimings": {"onContentLoad": 600.0, "onLoad": 900.0},
                }
            ],
            "entries": entries,
        }
    }
    return doc


def _page(doc, src="synthetic.har"):
    return har_to_pages(json.loads(json.dumps(doc)), src)[0]


HOSTS = {"www.example.com": 80.0, "cdn.example.net": 12.0, "ads.example.org": 150.0}


@pytest.mark.parametrize("rate_mbit,tls_rtts", [(4, 1.0), (50, 2.0)])
def test_recovers_rtts_think_times_and_rate(rate_mbit, tls_rtts):
    rng = random.Random(7)
    think = {f"https://{h}/o{i}.png": rng.choice([0.0, 3.0, 40.0, 250.0]) for h in HOSTS for i in range(6)}
    page = _page(synthetic_har(HOSTS, rate_mbit * 1e6, think, tls_rtts=tls_rtts))
    inf = netinfer.infer(page)
    for host, rtt in HOSTS.items():
        assert inf.hosts[host].rtt_ms == pytest.approx(rtt, rel=0.03)
        assert inf.hosts[host].connections == 2
        assert inf.hosts[host].tls_rtts == pytest.approx(tls_rtts, rel=0.06)  # the cross-check
    assert inf.rtt_ms == pytest.approx(80.0, rel=0.03)  # the median connection
    for o, got in zip(page.objects, inf.think_ms):
        assert got == pytest.approx(think[o.url], abs=0.03 * HOSTS[o.host] + 0.01)
    assert inf.rate_bps == pytest.approx(rate_mbit * 1e6, rel=0.01)
    assert inf.rate_samples == 18
    assert inf.dns_ms == pytest.approx(21.0)
    assert (inf.on_load_ms, inf.on_content_load_ms) == (900.0, 600.0)
    assert any("12 requests on connections already open" in n for n in inf.notes)


def test_recorded_network_sets_the_knobs_and_others_apply_on_top():
    think = {f"https://{h}/o{i}.png": 5.0 for h in HOSTS for i in range(6)}
    page = _page(synthetic_har(HOSTS, 8e6, think, jitter=0))
    got, cfg, inf = recorded.apply(page, RunConfig(network="recorded", tfo="on"))
    assert cfg.rtt_us == 80_000 and cfg.rate_bps == 8_000_000 and cfg.dns_us == 21_000 and cfg.think_time
    assert cfg.tfo_modes == (True,)
    # one override per origin (hosts at distinct recorded addresses: origins 0, 1, 2 by host name)
    assert sorted(us for _, us, _ in cfg.overrides) == [12_000, 80_000, 150_000]
    assert [o.extras["wait_ms"] for o in got.objects] == pytest.approx([5.0] * len(got.objects))
    assert page.objects[0].extras["wait_ms"] == pytest.approx(85.0)  # the page read stays as recorded
    # knobs given apply on top: the user's RTT, rate and one origin's RTT win
    _, cfg2, _ = recorded.apply(
        page, RunConfig(network="recorded", rtt="30ms", rate="2mbit", origin_rtt=["cdn.example.net=1ms"])
    )
    assert (cfg2.rtt_us, cfg2.rate_bps) == (30_000, 2_000_000)
    assert ("cdn.example.net", 1000, None) in cfg2.overrides
    assert sorted(us for _, us, _ in cfg2.overrides) == [1000, 80_000, 150_000]
    # Chromium resolves names itself: no DNS delay
    _, cfg3, _ = recorded.apply(page, RunConfig(network="recorded", client="chromium"))
    assert cfg3.dns_us == 0 and cfg3.rtt_us == 80_000


def test_bad_timings_are_counted_once_per_kind():
    think = {f"https://{h}/o{i}.png": 5.0 for h in HOSTS for i in range(6)}
    doc = synthetic_har(HOSTS, 8e6, think, jitter=0)
    es = doc["log"]["entries"]
    del es[2]["timings"]  # no timings at all
    es[3]["timings"] = {"wait": "soon", "receive": -7, "connect": None}  # nothing usable
    es[4]["timings"]["wait"] = -1
    es[5]["timings"]["receive"] = -1
    es[6]["timings"]["wait"] = 1.0  # shorter than the host's RTT
    es[7]["timings"].update(connect=12.0, ssl=12.0)  # ssl outside connect (as some exporters write it)
    page = _page(doc)
    inf = netinfer.infer(page)
    text = "\n".join(inf.notes)
    assert "2 entries without recorded timings" in text
    assert "2 entries with wait or receive -1" in text
    assert "1 responses whose wait is shorter" in text
    assert "1 new connections whose ssl is not inside connect" in text
    assert len(inf.notes) == len({n.split(" ", 1)[1] for n in inf.notes})  # one line per kind
    assert inf.think_ms[2] is None and inf.think_ms[4] is None and inf.think_ms[6] == 0.0
    assert inf.hosts["cdn.example.net"].rtt_ms == pytest.approx(12.0)  # the others still tell it


def test_a_page_without_timings_is_refused_naming_the_file():
    think = {f"https://{h}/o{i}.png": 0.0 for h in HOSTS for i in range(6)}
    doc = synthetic_har(HOSTS, 8e6, think)
    for e in doc["log"]["entries"]:
        e["timings"] = {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": 5, "receive": 1}
    page = _page(doc, "flat.har")
    with pytest.raises(PltError, match=r"^flat.har#p: cannot replay the recorded network: no entry records a new"):
        netinfer.infer(page)
    for e in doc["log"]["entries"]:
        del e["timings"]
    with pytest.raises(PltError, match=r"^flat.har#p: .*no entry has timings") as ei:
        recorded.apply(_page(doc, "flat.har"), RunConfig(network="recorded"))
    assert "\n" not in str(ei.value)


def test_timings_survive_pltlab_import(tmp_path):
    """`pltlab import` writes our own HAR: the recorded timings and onContentLoad go with it."""
    from pltlab.archive.har import read_page, write_page

    think = {f"https://{h}/o{i}.png": 10.0 for h in HOSTS for i in range(6)}
    page = _page(synthetic_har(HOSTS, 8e6, think))
    write_page(page, str(tmp_path / "p.har"))
    again = read_page(str(tmp_path / "p.har"))
    a, b = netinfer.infer(page).summary(), netinfer.infer(again).summary()
    assert a == b and netinfer.infer(again).on_content_load_ms == 600.0


@pytest.mark.skipif(not os.path.exists(RECORDED_BODIES), reason="no shared corpus")
def test_a_corpus_recording_is_inferred():
    from pltlab.archive.har import read_page

    page = read_page(RECORDED_BODIES)
    inf = netinfer.infer(page)
    assert len(inf.hosts) == len(page.hosts) and inf.timed == len(page.objects)
    # every RTT from the recording's own connect/ssl times, within what a browser can measure
    assert all(h.rtt_ms is None or 0 < h.rtt_ms < 1000 for h in inf.hosts.values())
    assert inf.on_load_ms > inf.on_content_load_ms > 0


def test_dns_knob_is_the_built_in_loaders():
    assert RunConfig(dns="20ms").dns_us == 20_000 and RunConfig().dns_us == 0
    with pytest.raises(PltError, match=r"^dns is for the built-in loader \(Chromium resolves names itself\)$"):
        RunConfig(dns="20ms", client="chromium")
    with pytest.raises(
        PltError, match=r"invalid network 'replayed': unknown network \(choose from emulated, recorded\)"
    ):
        RunConfig(network="replayed")


def test_an_experiment_compares_the_recorded_network_with_the_emulated_one(tmp_path):
    """`network` is a list knob of experiment files: the axis of "as recorded vs as emulated"."""
    from pltlab.experiments import spec, sweep

    (tmp_path / "p.har").write_text(json.dumps(synthetic_har(HOSTS, 8e6, {})))
    (tmp_path / "exp.toml").write_text(
        'name = "rec"\npages = ["p.har"]\nnetwork = ["emulated", "recorded"]\ncompare = "network"\n'
        'tfo = "off"\nrepetitions = 2\n'
    )
    exp = spec.load(str(tmp_path / "exp.toml"))
    assert exp.axis() == "network" and exp.n_runs == 4
    items = sweep.schedule(exp)
    assert sorted(exp.configs[i.config].network for i in items) == ["emulated"] * 2 + ["recorded"] * 2
    assert sum('"network":"recorded"' in i.key for i in items) == 2  # off its default: in the key
    assert not any('"network"' in i.key for i in items if exp.configs[i.config].network == "emulated")


def test_pltlab_run_says_what_it_inferred_in_one_line():
    from pltlab.run.batch import network_note

    page = _page(synthetic_har(HOSTS, 8e6, {}, jitter=0))
    note = network_note(page, RunConfig(network="recorded"))
    assert note.startswith("https://www.example.com/o0.png: recorded network: RTT 80 ms (3 hosts, 6 new connections)")
    assert "rate 8 Mbit/s, DNS 21 ms" in note and "12 requests on connections already open" in note
    assert "\n" not in note and network_note(page, RunConfig()) is None
