"""Synthetic pages and synthesized bodies (deterministic, right size and type, really referencing
the page's sub-resources), and the bundled corpus."""

import os

import pytest

from pltlab.archive import bundled, deps, synth
from pltlab.archive.generate import from_objects, generate
from pltlab.archive.refs import refs_of
from pltlab.archive.resource_kinds import kind
from tests.archive_helpers import CS244, needs_cs244


@pytest.mark.parametrize(
    "n,total,origins,depth", [(70, 2_300_000, 6, 3), (10, 50_000, 2, 1), (120, 4_000_000, 20, 6), (1, 1000, 1, 0)]
)
def test_generator_meets_its_parameters(n, total, origins, depth):
    p = generate(objects=n, total_bytes=total, origins=origins, depth=depth, seed=7)
    assert len(p.objects) == n and p.total_bytes == total
    assert len(p.origins) == origins and deps.depth(p) == depth
    assert generate(objects=n, total_bytes=total, origins=origins, depth=depth, seed=7) == p
    assert generate(objects=n, total_bytes=total, origins=origins, depth=depth, seed=8) != p or n == 1


def test_page_from_a_fixed_object_list():
    """from_objects: exactly the objects given, every one a child of the document, on its host."""
    objs = [("html", 0, 5000, "index"), ("js", 1, 20_000, "app"), ("image", 0, 43, "pixel"), ("css", 1, 3000, "site")]
    p = from_objects(
        objs, domain="fixed", hosts=("www", "cdn"), title="t", name="test", headers=(("Cache-Control", "no-store"),)
    )
    assert p.url == "http://www.fixed.test/" and p.title == "t"
    assert [(o.url, o.size) for o in p.objects] == [
        ("http://www.fixed.test/", 5000),
        ("http://cdn.fixed.test/js/app.js", 20_000),
        ("http://www.fixed.test/image/pixel.png", 43),
        ("http://cdn.fixed.test/css/site.css", 3000),
    ]
    assert all(o.initiator == p.url for o in p.objects[1:]) and deps.depth(p) == 1
    assert p.objects[1].headers == [("Content-Type", p.objects[1].mime), ("Cache-Control", "no-store")]
    assert p.extras["generator"] == {"name": "test", "objects": 4, "origins": 2, "depth": 1, "scale": 1.0}
    assert [o.size for o in from_objects(objs, hosts=("a", "b"), scale=0.5).objects] == [2500, 10_000, 22, 1500]
    assert _loaded_by_synthesized_bodies(p) == {o.url for o in p.objects}  # it replays like any page
    for bad in ([("js", 0, 1, "x")], [("html", 0, 1, "i"), ("video", 0, 1, "v")], [("html", 2, 1, "i")]):
        with pytest.raises(ValueError):
            from_objects(bad, hosts=("www", "cdn"))


def _loaded_by_synthesized_bodies(page):
    """URLs a browser would request when every body is the synthesized one (no script run:
    JS-issued requests are recognised by their literal URL in the script)."""
    bodies = {o.url: synth.body(page, o) for o in page.objects}
    found, todo = {page.url}, [page.objects[0]]
    while todo:
        o = todo.pop()
        b = bodies[o.url]
        k = kind(o.mime, o.url)
        if k in ("html", "css"):
            urls = refs_of(b, o.mime, o.url)[1]
            if k == "html":  # scripted fetches
                urls += [c.url for c in page.objects if f'fetch("{c.url}"'.encode() in b]
        elif k == "js":
            urls = [c.url for c in page.objects if f'"{c.url}"'.encode() in b]
        else:
            urls = []
        if o.redirect_url:  # the browser follows the redirect
            urls.append(o.redirect_url)
        for u in urls:
            c = page.find(u)
            if c is None and u.startswith("https://"):  # an http object referenced from https (upgraded)
                c = page.find("http://" + u[8:])
            if c is not None and c.url not in found:
                found.add(c.url)
                todo.append(c)
    return found


@pytest.mark.parametrize("seed", [1, 2])
def test_synthesized_page_references_every_object_with_exact_sizes(seed):
    p = generate(objects=70, total_bytes=2_300_000, origins=6, depth=4, seed=seed)
    assert _loaded_by_synthesized_bodies(p) == {o.url for o in p.objects}
    for o in p.objects:
        b = synth.body(p, o)
        assert len(b) == o.size and synth.body(p, o) == b
    img = next(o for o in p.objects if o.mime == "image/png")
    assert synth.body(p, img).startswith(b"\x89PNG\r\n\x1a\n")


def test_synthesized_image_formats():
    from pltlab.archive.model import Obj, Page

    p = Page(url="http://a.test/", objects=[Obj(url="http://a.test/", mime="text/html", size=500)])
    for mime, magic in (("image/gif", b"GIF89a"), ("image/jpeg", b"\xff\xd8"), ("image/png", b"\x89PNG")):
        for size in (100, 1000, 70_000):
            o = Obj(url=f"http://a.test/{size}", mime=mime, size=size)
            p.objects.append(o)
            b = synth.body(p, o)
            assert len(b) == size and b.startswith(magic)


def test_bundled_pages_are_structure_only():
    for name in bundled.names():
        p = bundled.load(name)
        assert p.objects and all(o.body is None and o.request_body is None for o in p.objects), name
        assert all(k.lower() in ("content-type", "location") for o in p.objects for k, _ in o.headers), name
    # the 2013 pages: every object has its initiator and the synthesized bodies reference it (the
    # recent pages come from browsers' HARs: some objects without initiator, and arcelormittal's
    # cookie redirect requests one URL twice, which this static walk does not follow)
    for name in bundled.SEED:
        p = bundled.load(name)
        assert all(o.initiator for o in p.objects[1:])
        assert _loaded_by_synthesized_bodies(p) == {o.url for o in p.objects}, name
    wiki = bundled.load("wikipedia")
    assert (len(wiki.objects), len(wiki.hosts)) == (29, 4)
    assert wiki.extras["log_stats"]["URLRequestCount"] == 29
    assert {n: bundled.load(n).extras["log_stats"]["URLRequestCount"] for n in bundled.PAPER} == {
        "amazon": 67,
        "nytimes": 191,
        "wsj": 125,
        "wikipedia": 29,
    }


@needs_cs244
def test_bundled_pages_match_a_fresh_derivation(tmp_path, monkeypatch):
    shipped = {name: bundled.path(name) for name in bundled.names()}
    monkeypatch.setattr(bundled, "DIR", str(tmp_path / "tfo2013"))
    monkeypatch.setattr(bundled, "PUBLIC_DIR", str(tmp_path / "public"))
    bundled.regenerate(os.path.dirname(CS244))  # both sets: cs244-2013, har/ and har-conformance/
    for name in bundled.names():
        with open(bundled.path(name), "rb") as f:
            fresh = f.read()
        with open(shipped[name], "rb") as f:
            assert f.read() == fresh, f"{name}: bundled model is stale, run python3 -m pltlab.archive.bundled"


def test_https_document_upgrades_http_references_without_csp():
    """An https document's http sub-resources load over https through scheme-relative references,
    never a CSP <meta> (Chromium's preload scanner drops what follows one); an https stylesheet
    on an http page keeps the recorded http URL of its image."""
    from pltlab.archive.model import Obj, Page

    def page(doc_url):
        p = Page(url=doc_url, objects=[Obj(url=doc_url, mime="text/html", size=3000)])
        p.objects += [
            Obj(url="http://img.test/a.png", mime="image/png", size=500, initiator=doc_url),
            Obj(url="http://js.test/a.js", mime="application/javascript", size=500, initiator=doc_url),
            Obj(url="https://css.test/s.css", mime="text/css", size=800, initiator=doc_url),
            Obj(url="http://img.test/bg.png", mime="image/png", size=500, initiator="https://css.test/s.css"),
        ]
        return p

    p = page("https://www.test/")
    html = synth.body(p, p.objects[0]).decode()
    assert "Content-Security-Policy" not in html
    assert 'src="//img.test/a.png"' in html and 'src="//js.test/a.js"' in html
    assert 'url("//img.test/bg.png")' in synth.body(p, p.objects[3]).decode()
    p = page("http://www.test/")
    assert 'url("http://img.test/bg.png")' in synth.body(p, p.objects[3]).decode()
