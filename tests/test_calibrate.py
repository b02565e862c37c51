"""Chromium's compute, measured (pltlab.loaders.compute_model): derivation from a timeline, storage
in the archive (HAR `_pltlab_compute_ms` / `_pltlab_calibration`), use by the built-in plan
(model="chromium"), errors."""

import json
import os

import pytest

from pltlab.archive import calibration, har
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.loaders import compute_model as cal
from pltlab.loaders import plan as plans

H = "http://a.test"
IPS = {"a.test": "198.19.0.1"}


def _plan() -> dict:
    """0 document; 1 script at the document's first byte; 2 image at the document's first byte;
    3 image requested by script 1 after stylesheet 4 arrived; 4 stylesheet at the document's
    first byte; 5 never requested by Chromium."""
    o = [
        {"url": f"{H}/", "parent": None},
        {"url": f"{H}/s.js", "parent": 0, "at_first_byte": True, "after": []},
        {"url": f"{H}/i.png", "parent": 0, "at_first_byte": True, "after": []},
        {"url": f"{H}/x.png", "parent": 1, "at_first_byte": False, "after": [4]},
        {"url": f"{H}/c.css", "parent": 0, "at_first_byte": True, "after": []},
        {"url": f"{H}/gone.png", "parent": 0, "at_first_byte": True, "after": []},
    ]
    return {"objects": o}


def _req(url, start, fb, lb, **kw):
    return {"url": url, "start_ms": start, "first_byte_ms": fb, "last_byte_ms": lb, "status": 200, "error": None, **kw}


def _load(shift=0.0, plt=200.0) -> dict:
    """navigationStart is 3 ms before the first request (responseStart 13 = document first byte
    10 + 3)."""
    return {
        "plt_ms": plt,
        "nav_timing": {"responseStart": 13.0},
        "requests": [
            _req(f"{H}/", 0.0, 10.0, 40.0),
            _req(f"{H}/s.js#frag", 25.0 + shift, 50.0, 60.0),
            _req(f"{H}/i.png", 8.0, 30.0, 35.0),  # before the first byte: 0
            _req(f"{H}/c.css", 26.0, 70.0, 90.0),
            _req(f"{H}/x.png", 120.0, 130.0, 150.0),
            _req("http://elsewhere.test/", 1.0, 2.0, 180.0),
        ],
    }  # not in the plan


def test_derivation_known_answer():
    d = cal.derive_one(_plan(), _load())
    # 0: start 0 - navigationStart (-3); 1: 25 - first byte 10; 2: clamped; 3: 120 - max(60, 90);
    # 4: 26 - 10; 5: not requested
    assert d["compute_ms"] == [3.0, 15.0, 0.0, 30.0, 16.0, None]
    # loadEventEnd on the requests' clock = 200 - 3; last response of the plan's objects: 150
    assert d["tail_ms"] == pytest.approx(47.0)
    assert d["matched"] == 5


def test_derivation_counts_the_hand_over_to_the_network_stack():
    """With ResourceTiming's requestTime (released_ms): a request's delay runs to its hand-over;
    a delayable one (tight mode may hold it) gets requestWillBeSent + the typical hand-over."""
    plan = _plan()
    plan["objects"][2]["delayable"] = plan["objects"][3]["delayable"] = True
    ld = _load()
    # by request: s.js handed over 4 ms after requestWillBeSent, c.css 3; i.png held until 300
    rel = {0: 0.5, 1: 29.0, 2: 300.0, 3: 29.0, 4: 125.0}
    for k, v in rel.items():
        ld["requests"][k]["released_ms"] = v
    d = cal.derive_one(plan, ld)
    # 1: 29 - 10; 2 (delayable): 8 + median(4, 3) = 11.5 - 10; 3 (delayable): 120 + 3.5 - 90;
    # 4: 29 - 10; 0: the navigation, as before
    assert d["compute_ms"] == [3.0, 19.0, 1.5, 33.5, 19.0, None]


def test_derivation_median_over_loads():
    d = cal.derive(_plan(), [_load(0.0, 200.0), _load(10.0, 220.0), _load(4.0, 190.0)])
    assert d["compute_ms"][1] == 19.0  # 15, 25, 19
    assert d["tail_ms"] == pytest.approx(47.0)  # 47, 67, 37
    assert d["loads"] == 3


def test_derivation_without_navigation_timing_uses_the_request_clock():
    ld = _load()
    ld["nav_timing"] = {}
    assert cal.derive_one(_plan(), ld)["compute_ms"][0] == 0.0


def test_derivation_errors():
    with pytest.raises(PltError, match="no load event"):
        cal.derive_one(_plan(), dict(_load(), plt_ms=None))
    with pytest.raises(PltError, match="did not request the main document"):
        cal.derive_one(_plan(), dict(_load(), requests=_load()["requests"][1:]))
    bad = _load()
    bad["requests"][0] = dict(bad["requests"][0], status=0, error="net::ERR_CONNECTION_REFUSED")
    with pytest.raises(PltError, match="main document failed"):
        cal.derive_one(_plan(), bad)
    with pytest.raises(PltError, match="at least one"):
        cal.derive(_plan(), [])


def _tight_plan() -> dict:
    """0 document, 1 head script (tight until it arrived), images 2-5 (delayable) of the main
    frame, images 6, 7, 10 of an iframe document 8 whose tight phase lasts until its script 9."""
    o = [{"url": f"{H}/", "parent": None}, {"url": f"{H}/s.js", "parent": 0}]
    o += [{"url": f"{H}/i{k}.png", "parent": 0, "delayable": True} for k in range(2, 6)]
    o += [{"url": f"{H}/f{k}.png", "parent": 8, "delayable": True, "tight_phase": 0} for k in (6, 7)]
    o += [
        {"url": f"{H}/f.html", "parent": 0},
        {"url": f"{H}/fs.js", "parent": 8},
        {"url": f"{H}/f10.png", "parent": 8, "delayable": True, "tight_phase": 0},
    ]
    return {
        "objects": o,
        "tight_limit": 2,
        "tight_until": [1],
        "tight_phases": [{"until": [9], "delay_ms": 0.0, "doc": 8}],
    }


def _tight_load(released: dict[int, float]) -> dict:
    """Request k released at released[k] (default 16), out for 50 ms; the script at 100."""
    reqs = [_req(f"{H}/", 0.0, 10.0, 20.0, released_ms=0.0), _req(f"{H}/s.js", 15.0, 90.0, 100.0, released_ms=15.0)]
    plan = _tight_plan()["objects"]
    for k in range(2, len(plan)):
        rel = released.get(k, 16.0)
        reqs.append(_req(plan[k]["url"], 15.0, rel + 40.0, rel + 50.0, released_ms=rel))
    return {"plt_ms": 400.0, "nav_timing": {"responseStart": 10.0}, "requests": reqs}


def test_tight_mode_end_known_answer():
    # each image is out for 50 ms after its release; the head script arrives at 100
    ld = _tight_load({2: 16.0, 3: 17.0, 4: 18.0, 5: 19.0, 6: 200.0, 7: 201.0, 8: 150.0, 9: 160.0})
    # 4 released at 18 while 2 and 3 are out: tight mode had ended at 18
    assert cal.tight_end(_tight_plan(), cal._match(_tight_plan()["objects"], ld["requests"])) == 18.0
    assert cal.derive_one(_tight_plan(), ld)["tight_delay_ms"] == 0.0  # 18 - 100, clamped
    # 4 at 130 (2 and 3 arrived at 66/67), 5 at 131 with only 4 out: never 2 out at a release
    ld = _tight_load({2: 16.0, 3: 17.0, 4: 130.0, 5: 131.0, 6: 240.0, 7: 300.0, 8: 150.0, 9: 160.0})
    assert cal.derive_one(_tight_plan(), ld)["tight_delay_ms"] is None
    # the iframe's images: 7 released at 241 while only 6 is out: not measurable either
    assert cal.derive_one(_tight_plan(), ld)["frame_tight_delay_ms"] == {8: None}


def test_tight_mode_delay_known_answer():
    # main frame: 2 and 3 out from 16/17 to 300; 4 released at 130 with both out: ended at 130,
    # 30 ms after the head script's last byte (100)
    rel = {2: 16.0, 3: 17.0, 4: 130.0, 5: 131.0, 8: 150.0, 9: 150.0, 6: 210.0, 7: 212.0, 10: 255.0}
    ld = _tight_load(rel)
    for k in (2, 3):
        ld["requests"][k]["last_byte_ms"] = 300.0
    # iframe: its script 9 arrives at 200; images 6 and 7 out from 210/212 to 262/264; 10
    # released at 255 with both out: its tight mode ended 55 ms after its script
    d = cal.derive_one(_tight_plan(), ld)
    assert d["tight_delay_ms"] == 30.0 and d["frame_tight_delay_ms"] == {8: 55.0}
    ld2 = _tight_load({**rel, 4: 110.0, 10: 250.0})
    for k in (2, 3):
        ld2["requests"][k]["last_byte_ms"] = 300.0
    # the last load: every request released at once (16): never measurable
    agg = cal.derive(_tight_plan(), [ld, ld2, _tight_load({})])
    assert agg["tight_delay_ms"] == 20.0  # median of 30, 10
    assert agg["frame_tight_delay_ms"] == {8: 52.5}  # median of 55, 50 (the third: none)


def test_navigation_offset_uses_the_final_document():
    """A main URL that redirects: Navigation Timing's responseStart is the final document's;
    the main request's delay must not include the redirect chain."""
    plan = {"objects": [{"url": f"{H}/", "parent": None}, {"url": f"{H}/home", "parent": 0}]}
    ld = {
        "plt_ms": 500.0,
        "nav_timing": {"responseStart": 305.0},
        "requests": [_req(f"{H}/", 0.0, 100.0, 101.0), _req(f"{H}/home", 102.0, 300.0, 310.0)],
    }
    assert cal.derive_one(plan, ld, doc=1)["compute_ms"][0] == 5.0  # navigationStart at -5
    assert cal.derive_one(plan, ld, doc=0)["compute_ms"][0] == 205.0  # the old error


def _page() -> Page:
    return Page(
        url=f"{H}/",
        objects=[
            Obj(f"{H}/", mime="text/html", size=5000),
            Obj(f"{H}/s.js", mime="application/javascript", size=2000, initiator=f"{H}/", initiator_type="parser"),
            Obj(f"{H}/i.png", mime="image/png", size=3000, initiator=f"{H}/", initiator_type="parser"),
        ],
    )


def _calibrated() -> Page:
    page = _page()
    calibration.attach(
        page,
        plans.plan_objects(page, IPS),
        {"compute_ms": [2.5, 17.25, None], "tail_ms": 40.0, "matched": 3, "loads": 3},
        {"browser": "chromium 156", "machine": "test", "rtt_ms": 0.0},
    )
    return page


def test_har_round_trip(tmp_path):
    page = _calibrated()
    path = str(tmp_path / "p.har")
    har.write_page(page, path)
    doc = json.load(open(path))
    assert [e.get("_pltlab_compute_ms") for e in doc["log"]["entries"]] == [2.5, 17.25, None]
    assert "compute_ms" not in doc["log"]["entries"][0]["_pltlab"]
    pm = doc["log"]["pages"][0]
    assert pm["_pltlab_calibration"]["tail_ms"] == 40.0 and pm["_pltlab_calibration"]["browser"] == "chromium 156"
    back = har.read_page(path)
    assert [o.extras.get("compute_ms") for o in back.objects] == [2.5, 17.25, None]
    assert back.extras["calibration"] == page.extras["calibration"]
    har.write_page(back, str(tmp_path / "q.har"))
    assert json.load(open(tmp_path / "q.har"))["log"] == doc["log"]


def test_plan_uses_the_calibration():
    page = _calibrated()
    p = plans.build(page, IPS, tfo=False, model="chromium")
    assert [o["delay_ms"] for o in p["objects"]] == [2.5, 17.25, 0.0]
    assert plans.tail_ms(page, "chromium") == 40.0
    off = plans.build(page, IPS, tfo=False, model="chromium", calibrated=False)
    assert [o["delay_ms"] for o in off["objects"]] == [0.0, 0.0, 0.0]
    assert plans.tail_ms(page, "chromium", calibrated=False) is None
    arch = plans.build(page, IPS, tfo=False)  # the archive model: no Chromium compute
    assert [o["delay_ms"] for o in arch["objects"]] == [0.0, 0.0, 0.0]
    assert plans.tail_ms(page, "archive") is None
    assert plans.tail_ms(_page(), "chromium") is None  # not calibrated


@pytest.mark.parametrize("bad", [-1.0, "12", None, float("nan"), True])
def test_plan_refuses_bad_stored_delays(bad):
    page = _calibrated()
    page.objects[1].extras["compute_ms"] = bad
    if bad is None:  # no value: no delay
        assert plans.build(page, IPS, tfo=False, model="chromium")["objects"][1]["delay_ms"] == 0.0
        return
    with pytest.raises(PltError, match="invalid compute delay"):
        plans.build(page, IPS, tfo=False, model="chromium")


def _write_bad(tmp_path, entry_value=None, tail=None) -> str:
    page = _calibrated()
    path = str(tmp_path / "bad.har")
    har.write_page(page, path)
    doc = json.load(open(path))
    if entry_value is not None:
        doc["log"]["entries"][1]["_pltlab_compute_ms"] = entry_value
    if tail is not None:
        doc["log"]["pages"][0]["_pltlab_calibration"]["tail_ms"] = tail
    json.dump(doc, open(path, "w"))
    return path


@pytest.mark.parametrize("value", [-5, "abc", [1], {"a": 1}])
def test_har_refuses_bad_stored_delays(tmp_path, value):
    with pytest.raises(PltError, match=r"entry 1: _pltlab_compute_ms(: invalid compute delay| .* is not a number)"):
        har.read_page(_write_bad(tmp_path, entry_value=value))


def test_calibration_keeps_and_checks_tight_delays(tmp_path):
    page = _calibrated()
    page.extras["calibration"].update(tight_delay_ms=12.5, frame_tight_delay_ms={f"{H}/f.html": 7.0})
    path = str(tmp_path / "t.har")
    har.write_page(page, path)
    assert har.read_page(path).extras["calibration"]["frame_tight_delay_ms"] == {f"{H}/f.html": 7.0}
    assert plans.build(page, IPS, tfo=False, model="chromium")["tight_delay_ms"] == 12.5
    assert "tight_delay_ms" not in plans.build(page, IPS, tfo=False, model="chromium", calibrated=False)
    for bad in ({"tight_delay_ms": -1}, {"frame_tight_delay_ms": {"x": "y"}}, {"frame_tight_delay_ms": [1]}):
        c = dict(page.extras["calibration"], **bad)
        with pytest.raises(PltError, match="tight_delay_ms"):
            calibration.check_calibration(c, "p")


@pytest.mark.parametrize("tail", [-0.5, "x"])
def test_har_refuses_bad_tail(tmp_path, tail):
    with pytest.raises(PltError, match="calibration tail_ms: invalid compute delay"):
        har.read_page(_write_bad(tmp_path, tail=tail))


def test_cli_run_refuses_bad_stored_delay(tmp_path):
    from conftest import pltlab_cmd

    cp = pltlab_cmd("run", _write_bad(tmp_path, entry_value=-3), "--model", "chromium", "--tfo", "off", "--reps", "1")
    assert cp.returncode != 0
    assert "invalid compute delay -3" in cp.stderr and "Traceback" not in cp.stderr


@pytest.mark.root
@pytest.mark.parametrize("calibrated", [False, True])
def test_run_notes_a_missing_or_foreign_calibration(tmp_path, calibrated):
    """`pltlab run --model chromium` says when Chromium's compute is not modelled, or was
    measured on another machine (here: "test")."""
    from conftest import pltlab_cmd

    path = str(tmp_path / "p.har")
    har.write_page(_calibrated() if calibrated else _page(), path)
    cp = pltlab_cmd("run", path, "--rtt", "2ms", "--model", "chromium", "--tfo", "off", "--reps", "1")
    assert cp.returncode == 0, cp.stderr
    want = "calibrated on another machine (test)" if calibrated else "has no calibration"
    assert want in cp.stdout + cp.stderr
    cp = pltlab_cmd("run", path, "--rtt", "2ms", "--tfo", "off", "--reps", "1")  # the archive model
    assert "note:" not in cp.stdout + cp.stderr


def _stored_on(machine: str) -> Page:
    page = _page()
    calibration.attach(
        page,
        plans.plan_objects(page, IPS),
        {"compute_ms": [1.0, 2.0, None], "tail_ms": 5.0, "matched": 3, "loads": 1},
        {"browser": "chromium 156", "machine": machine, "rtt_ms": 0.0},
    )
    return page


def test_the_machine_string_names_no_host_and_older_ones_still_match(tmp_path):
    """A calibration stores the CPU model, CPU count and kernel it was measured with (the browser
    in `browser`), not the host name; one stored before, host name first, still loads and still
    counts as this machine's, and a machine that differs is still named."""
    import platform

    from pltlab.run.batch import calibration_note
    from pltlab.run.config import RunConfig

    here = calibration.machine()
    assert not here.startswith(f"{platform.node()}:")
    assert f"{os.cpu_count()} CPUs" in here and here.endswith(f"Linux {platform.release()}")
    cfg = RunConfig(model="chromium", client="builtin")
    old = f"{platform.node() or 'lab-host'}: {here}"  # as calibrate wrote it before
    path = str(tmp_path / "old.har")
    har.write_page(_stored_on(old), path)
    page = har.read_page(path)
    assert calibration.stored(page)["machine"] == old  # (kept as written)
    assert calibration_note(page, cfg) is None
    assert calibration_note(_stored_on(here), cfg) is None
    other = "lab-host: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz, 56 CPUs, Linux 2.6.39"
    note = calibration_note(_stored_on(other), cfg)
    assert note is not None and f"calibrated on another machine ({other})" in note
    assert calibration.machine_of(other) == "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz, 56 CPUs, Linux 2.6.39"
    assert calibration.machine_of("test") == "test"  # (not of that form: as it is)


needs_chromium = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")


@needs_chromium
def test_calibrating_a_page_that_fails_to_load(tmp_path):
    """A main document redirecting to itself: refused before any load, in one line."""
    page = Page(
        url=f"{H}/",
        objects=[Obj(f"{H}/", status=302, headers=[("Location", f"{H}/")], redirect_url=f"{H}/", mime="text/html")],
    )
    path = str(tmp_path / "loop.har")
    har.write_page(page, path)
    from conftest import pltlab_cmd

    cp = pltlab_cmd("calibrate", path, "-o", str(tmp_path / "out"), "--loads", "1", timeout=180)
    assert cp.returncode != 0, cp.stdout
    assert "redirects in a loop" in cp.stderr and "loop.har#" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1 and "Traceback" not in cp.stderr
    assert not os.path.exists(tmp_path / "out" / "loop.har")


@pytest.mark.root
@needs_chromium
def test_calibrate_and_run_a_small_page(tmp_path):
    """End to end: `pltlab calibrate` writes the archive with the calibration; `pltlab run --model
    chromium` on it reports tail_ms and network_plt_ms."""
    from conftest import pltlab_cmd

    from pltlab.archive.generate import generate

    src = str(tmp_path / "g.har")
    har.write_page(generate(objects=6, total_bytes=20000, origins=2, depth=2, seed=1), src)
    cp = pltlab_cmd("calibrate", src, "-o", str(tmp_path / "out"), "--loads", "2", "--json", timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)["pages"][0]
    assert res["loads"] == 2 and res["matched"] == res["objects"] == 6
    assert res["browser"].startswith("chromium ") and res["machine"]
    page = har.read_page(res["file"])
    assert page.extras["calibration"]["tail_ms"] >= 0
    assert page.objects[1].extras["compute_ms"] >= 0
    cp = pltlab_cmd(
        "run",
        res["file"],
        "--rtt",
        "20ms",
        "--model",
        "chromium",
        "--schemes",
        "chromium",
        "--tfo",
        "off",
        "--reps",
        "1",
        "--json",
        timeout=300,
    )
    assert cp.returncode == 0, cp.stderr
    r = json.loads(cp.stdout)["runs"][0]
    assert "note:" not in cp.stderr  # calibrated here
    assert r["tail_ms"] == page.extras["calibration"]["tail_ms"]
    assert r["plt_ms"] == pytest.approx(r["network_plt_ms"] + r["tail_ms"])


def test_network_stack_known_answer():
    """Chromium's network stack beyond the link: each new connection's connectStart -> connectEnd
    less its round trips (2 over TLS, 1 over plain http and QUIC), each request's sendStart ->
    head less one; medians, clamped at 0, stored with the calibration and checked on reading."""
    https, http = "https://a.test", "http://b.test"
    reqs = [  # at RTT 20 ms
        {
            "url": f"{https}/",
            "connect_start_ms": 0.0,
            "connect_end_ms": 70.0,
            "request_ms": 70.0,
            "first_byte_ms": 95.0,
        },
        {
            "url": f"{http}/x",
            "connect_start_ms": 5.0,
            "connect_end_ms": 35.0,
            "request_ms": 40.0,
            "first_byte_ms": 62.0,
        },
        {"url": f"{https}/q", "protocol": "h3", "connect_start_ms": 1.0, "connect_end_ms": 31.0},
        {"url": f"{https}/y", "request_ms": 100.0, "first_byte_ms": 110.0},  # reused: 10 - 20 -> 0
        {"url": f"{https}/z", "request_ms": 100.0, "first_byte_ms": None},  # no head: no sample
    ]
    got = cal.network_stack({"requests": reqs}, rtt_ms=20.0)
    # set-ups 70 - 40, 30 - 20, 30 - 20 = 30, 10, 10; first bytes 25 - 20, 22 - 20, 0 = 5, 2, 0
    assert got == {"setup_ms": 10.0, "ttfb_ms": 2.0, "connections": 3, "requests": 3}
    assert cal.network_stack({"requests": []}) == {"setup_ms": None, "ttfb_ms": None, "connections": 0, "requests": 0}
    slow = [dict(r, connect_end_ms=r["connect_end_ms"] + 30) if "connect_end_ms" in r else r for r in reqs]
    d = cal.derive(
        _plan(),
        [dict(_load(), requests=_load()["requests"] + reqs), dict(_load(), requests=_load()["requests"] + slow)],
        rtt_ms=20.0,
    )
    assert (d["net_setup_ms"], d["net_ttfb_ms"]) == (25.0, 2.0)  # medians of (10, 40) and (2, 2)
    page = Page(url=f"{H}/", objects=[Obj(u["url"]) for u in _plan()["objects"]])
    calibration.attach(page, page.objects, d, {"browser": "test"})
    assert calibration.stored(page)["net_setup_ms"] == 25.0
    page.extras[calibration.PAGE_KEY]["net_ttfb_ms"] = -1
    with pytest.raises(PltError, match="net_ttfb_ms"):
        calibration.stored(page)


@pytest.mark.root
def test_network_stack_times_in_an_emulated_load():
    """Knob network_stack calibrated: the built-in loader dials its connection the calibration's
    set-up later and sends each request its first-byte delay later (one document, 2 RTT + both)."""
    from pltlab.archive.generate import from_objects
    from pltlab.run.runner import RunConfig, run_page

    page = from_objects([("html", 0, 3_000, "index")])
    derived = {"compute_ms": [0.0], "tail_ms": 0.0, "tight_delay_ms": 0.0, "frame_tight_delay_ms": {}}
    derived.update(loads=1, matched=1, net_setup_ms=50.0, net_ttfb_ms=10.0)
    calibration.attach(page, page.objects, derived, {"browser": "test"})
    cfg = dict(rtt="40ms", reps=1, tfo_modes=(False,), model="chromium")
    (off,) = run_page(page, RunConfig(**cfg))
    (on,) = run_page(page, RunConfig(**cfg, network_stack="calibrated"))
    assert off["valid"] and on["valid"], (off["invalid_reason"], on["invalid_reason"])
    assert 80 <= off["plt_ms"] < 90 and 140 <= on["plt_ms"] < 150, (off["plt_ms"], on["plt_ms"])
    (q,) = on["requests"]
    assert q["connect_start_ms"] >= 50, q
