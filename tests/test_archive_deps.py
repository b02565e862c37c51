"""Dependency structure: parsed references, start-time inference, no cycles."""

from pltlab.archive import deps
from pltlab.archive.model import Obj, Page
from pltlab.archive.refs import css_refs, html_refs


def test_html_references():
    html = """<html><head><base href="http://a.test/d/"><link rel="stylesheet" href="s.css">
    <link rel="canonical" href="http://a.test/no"><script src="//cdn.test/j.js"></script>
    <style>body{background:url('bg.png')}</style></head><body>
    <img src="i.png" srcset="i2.png 2x, http://b.test/i3.png 3x"><iframe src="f.html"></iframe>
    <picture><source srcset="p.webp"></picture><img src="data:image/png;base64,AA">
    <div style="background-image:url(&quot;x.gif&quot;)"></div></body></html>"""
    assert html_refs(html, "http://a.test/") == [
        "http://a.test/d/s.css",
        "http://cdn.test/j.js",
        "http://a.test/d/bg.png",
        "http://a.test/d/i.png",
        "http://a.test/d/i2.png",
        "http://b.test/i3.png",
        "http://a.test/d/f.html",
        "http://a.test/d/p.webp",
        "http://a.test/d/x.gif",
    ]


def test_css_references():
    css = """@import "a.css"; @import url('b.css'); .x{background:url(img/c.png)}
    @font-face{src:url("../f.woff2") format("woff2")} .y{background:url(data:image/gif;base64,R0)}"""
    assert css_refs(css, "http://a.test/s/main.css") == [
        "http://a.test/s/a.css",
        "http://a.test/s/b.css",
        "http://a.test/s/img/c.png",
        "http://a.test/f.woff2",
    ]


def _page():
    main = Obj(
        url="http://a.test/", mime="text/html", body=b'<link rel=stylesheet href="s.css">', start_ms=0, end_ms=100
    )
    css = Obj(url="http://a.test/s.css", mime="text/css", body=b"x{background:url(i.png)}", start_ms=110, end_ms=150)
    img = Obj(url="http://a.test/i.png", mime="image/png", size=10, start_ms=160, end_ms=170)
    js = Obj(url="http://a.test/j.js", mime="application/javascript", size=10, start_ms=120, end_ms=200)
    late = Obj(url="http://b.test/beacon", mime="image/gif", size=43, start_ms=210, end_ms=220)
    rec = Obj(url="http://b.test/r", mime="image/gif", size=43, initiator="http://a.test/j.js", initiator_type="script")
    return Page(url=main.url, objects=[main, css, img, js, late, rec])


def test_complete_prefers_recorded_then_parsed_then_timing():
    p = _page()
    assert deps.complete(p) == {"recorded": 1, "parsed": 2, "timing": 2}
    got = {o.url: (o.initiator, o.initiator_type) for o in p.objects[1:]}
    assert got == {
        "http://a.test/s.css": ("http://a.test/", "parser"),
        "http://a.test/i.png": ("http://a.test/s.css", "css"),
        "http://a.test/j.js": ("http://a.test/", "timing"),  # nothing finished before 120 but main
        "http://b.test/beacon": ("http://a.test/j.js", "timing"),  # j.js ended last before 210
        "http://b.test/r": ("http://a.test/j.js", "script"),
    }
    assert deps.depth(p) == 2


def test_no_cycles_from_mutual_references():
    a = Obj(url="http://a.test/", mime="text/html", body=b'<iframe src="f.html">')
    f = Obj(url="http://a.test/f.html", mime="text/html", body=b'<iframe src="g.html">')
    g = Obj(url="http://a.test/g.html", mime="text/html", body=b'<iframe src="f.html">')
    p = Page(url=a.url, objects=[a, f, g])
    deps.complete(p)
    assert (f.initiator, g.initiator) == ("http://a.test/", "http://a.test/f.html")
    assert deps.depth(p) == 2
