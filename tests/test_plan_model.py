"""The built-in loader's model of Chromium (plan.build(model="chromium"), docs/loaders.md
"Built-in vs Chromium"): dependencies as Chromium sees them in the synthesized page, preload
scanning at the document's first byte, script execution order, <body> reached, and the
tight-mode limit on low-priority (image) requests."""

import pytest

from pltlab.archive import synth
from pltlab.archive.model import Obj, Page
from pltlab.loaders import plan as plans
from pltlab.run.runner import RunConfig, run_page

H = "http://a.test"


def _page() -> Page:
    """main document; head: stylesheet c1, script s1, script s2, stylesheet c2 (after the last
    script: does not hold <body>); body: images i0..i5; i6 recorded as initiated by image i0 (a
    timing guess: no image loads anything); s2 loads image x; c1 styles an element with image ci;
    an iframe f."""
    o = [
        Obj(f"{H}/", mime="text/html", size=20000),
        Obj(f"{H}/c1.css", mime="text/css", size=30000, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/s1.js", mime="application/javascript", size=40000, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/s2.js", mime="application/javascript", size=2000, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/c2.css", mime="text/css", size=1000, initiator=f"{H}/", initiator_type="parser"),
    ]
    o += [
        Obj(f"{H}/i{k}.png", mime="image/png", size=3000, initiator=f"{H}/", initiator_type="parser") for k in range(6)
    ]
    o += [
        Obj(f"{H}/i6.png", mime="image/png", size=500, initiator=f"{H}/i0.png", initiator_type="timing"),
        Obj(f"{H}/x.png", mime="image/png", size=500, initiator=f"{H}/s2.js", initiator_type="script"),
        Obj(f"{H}/ci.png", mime="image/png", size=500, initiator=f"{H}/c1.css", initiator_type="css"),
        Obj(f"{H}/f.html", mime="text/html", size=800, initiator=f"{H}/", initiator_type="parser"),
    ]
    return Page(url=f"{H}/", objects=o)


def _idx(page: Page) -> dict[str, int]:
    return {o.url.rsplit("/", 1)[1] or "/": i for i, o in enumerate(page.objects)}


def test_chromium_model_dependencies():
    page = _page()
    i = _idx(page)
    plan = plans.build(page, {"a.test": "198.19.0.1"}, tfo=False, model="chromium")
    ob = plan["objects"]
    # markup references: at the document's first byte; images are the delayable ones
    for name in ("c1.css", "s1.js", "s2.js", "c2.css", "i0.png", "i5.png"):
        assert ob[i[name]]["parent"] == 0 and ob[i[name]]["at_first_byte"], name
        assert ob[i[name]]["delayable"] == name.endswith(".png"), name
    # an image cannot load anything: i6 is referenced by the document (synth.loader)
    assert ob[i["i6.png"]]["parent"] == 0 and ob[i["i6.png"]]["at_first_byte"]
    # s2's image: after s2 arrived and ran, i.e. after s1 and c1 (execution order)
    x = ob[i["x.png"]]
    assert x["parent"] == i["s2.js"] and not x["at_first_byte"]
    assert x["after"] == sorted([i["c1.css"], i["s1.js"]]) and x["delayable"]
    # the stylesheet's image needs the element in <body>: every head script (+ earlier CSS)
    ci = ob[i["ci.png"]]
    assert ci["parent"] == i["c1.css"] and ci["after"] == sorted([i["s1.js"], i["s2.js"]])
    # the iframe is inserted when the parser reaches it in <body>
    assert ob[i["f.html"]]["after"] == sorted([i["c1.css"], i["s1.js"], i["s2.js"]])
    assert not ob[i["f.html"]]["delayable"]
    # tight mode until <body>: c2 (after the last script) does not hold the parser
    assert plan["tight_until"] == sorted([i["c1.css"], i["s1.js"], i["s2.js"]])
    assert plan["tight_limit"] == plans.TIGHT_LIMIT == 2 and plan["delayable_limit"] is None
    # ... and that is the order of the synthesized document's head
    html = synth.body(page, page.objects[0]).decode()
    pos = [html.index(f'"//a.test/{n}"') for n in ("c1.css", "s1.js", "s2.js", "c2.css")]
    assert pos == sorted(pos) and html.index("<body>") < html.index('"//a.test/i0.png"')


def test_archive_model_unchanged():
    page = _page()
    i = _idx(page)
    plan = plans.build(page, {"a.test": "198.19.0.1"}, tfo=False)
    ob = plan["objects"]
    assert ob[i["i6.png"]]["parent"] == i["i0.png"]  # the recorded initiator
    assert all(set(o) == {"url", "method", "host", "ip", "port", "tls", "parent", "delay_ms"} for o in ob)
    assert "tight_until" not in plan
    with pytest.raises(ValueError, match="model"):
        plans.build(page, {"a.test": "198.19.0.1"}, tfo=False, model="firefox")


def test_tfo_over_tls_follows_the_clienthello_and_judges_the_load():
    """A plan says tfo_tls false only for a ClientHello larger than a SYN carries; the loader
    must then show TFO use only where some object goes over plain http."""
    from pltlab.loaders.builtin import LOADER
    from pltlab.loaders.validity import judge

    page = _page()
    ips = {"a.test": "198.19.0.1"}
    assert "tfo_tls" not in plans.build(page, ips, tfo=True)
    assert plans.build(page, ips, tfo=True, tfo_tls=False)["tfo_tls"] is False
    assert plans.tfo_over_tls(None) and plans.tfo_over_tls(600) and not plans.tfo_over_tls(2000)
    plain = plans.build(page, ips, tfo=True, tfo_tls=False)
    tls = dict(plain, objects=[dict(o, tls=True) for o in plain["objects"]])
    assert LOADER.tfo_expected(plain, True) and not LOADER.tfo_expected(tls, True)
    assert not LOADER.tfo_expected(plain, False)
    idle = {"client": {"TCPFastOpenActive": 0}, "server": {}}
    used = {"client": {"TCPFastOpenActive": 2}, "server": {}}
    assert judge(True, idle, [], expected=LOADER.tfo_expected(tls, True)) is None
    assert "did not rise" in judge(True, idle, [], expected=LOADER.tfo_expected(plain, True))
    assert "plain-http connections only" in judge(True, used, [], expected=LOADER.tfo_expected(tls, True))


@pytest.mark.root
def test_chromium_model_load_over_the_link():
    """Over the emulated link (50 ms): images wait in tight mode (at most 2 in flight until the
    head scripts arrived), sub-resources start at the document's first byte, s2's image only
    after s1 and c1 arrived."""
    page = _page()
    i = _idx(page)
    r = run_page(page, RunConfig(rtt="50ms", reps=1, tfo_modes=(False,), model="chromium", max_conns_per_host=6))[0]
    rq = r["requests"]
    assert all(q["status"] == 200 for q in rq)
    main = rq[0]
    assert rq[i["c1.css"]]["ready_ms"] < main["last_byte_ms"] or rq[i["c1.css"]]["ready_ms"] == pytest.approx(
        main["first_byte_ms"], abs=2
    )
    body = max(rq[i[n]]["last_byte_ms"] for n in ("c1.css", "s1.js", "s2.js"))
    imgs = [rq[i[f"i{k}.png"]] for k in range(7)]
    for t in sorted({q["released_ms"] for q in imgs}):
        if t < body:
            live = sum(q["released_ms"] <= t < q["last_byte_ms"] for q in imgs)
            assert live <= 2, (t, imgs)
    assert any(q["released_ms"] > q["ready_ms"] + 20 for q in imgs)  # some were held
    x = rq[i["x.png"]]
    assert x["ready_ms"] >= max(rq[i[n]]["last_byte_ms"] for n in ("c1.css", "s1.js", "s2.js"))


def _frames_page() -> Page:
    """main document (head script s1) with an iframe f.html (head script fs.js, images fi0..fi2)
    and a script y.js inserted by s1 (async: low priority)."""
    o = [
        Obj(f"{H}/", mime="text/html", size=5000),
        Obj(f"{H}/s1.js", mime="application/javascript", size=4000, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/y.js", mime="application/javascript", size=1000, initiator=f"{H}/s1.js", initiator_type="script"),
        Obj(f"{H}/i0.png", mime="image/png", size=900, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/f.html", mime="text/html", size=2000, initiator=f"{H}/", initiator_type="parser"),
        Obj(f"{H}/fs.js", mime="application/javascript", size=3000, initiator=f"{H}/f.html", initiator_type="parser"),
    ]
    o += [
        Obj(f"{H}/fi{k}.png", mime="image/png", size=700, initiator=f"{H}/f.html", initiator_type="parser")
        for k in range(3)
    ]
    return Page(url=f"{H}/", objects=o)


def test_chromium_model_async_scripts_and_frames():
    page = _frames_page()
    i = _idx(page)
    plan = plans.build(page, {"a.test": "198.19.0.1"}, tfo=False, model="chromium")
    ob = plan["objects"]
    # a script inserted by a script is async in Chromium: low priority, like images
    assert ob[i["y.js"]]["delayable"] and not ob[i["s1.js"]]["delayable"] and not ob[i["fs.js"]]["delayable"]
    # the main frame's tight mode: until its head script; the iframe has its own, until fs.js
    assert plan["tight_until"] == [i["s1.js"]]
    assert plan["tight_phases"] == [{"until": [i["fs.js"]], "delay_ms": 0.0, "doc": i["f.html"]}]
    assert all(ob[i[f"fi{k}.png"]]["tight_phase"] == 0 for k in range(3))
    assert "tight_phase" not in ob[i["i0.png"]] and "tight_phase" not in ob[i["y.js"]]
    assert plans.frame_of(page, page.objects[i["fi1.png"]]) is page.objects[i["f.html"]]
    assert plans.frame_of(page, page.objects[i["y.js"]]) is page.objects[0]
    # a calibrated frame delay goes to its phase
    page.extras["calibration"] = {"tail_ms": 0.0, "tight_delay_ms": 5.0, "frame_tight_delay_ms": {f"{H}/f.html": 33.0}}
    cal = plans.build(page, {"a.test": "198.19.0.1"}, tfo=False, model="chromium")
    assert cal["tight_delay_ms"] == 5.0 and cal["tight_phases"][0]["delay_ms"] == 33.0
