"""Renaming a page's names out of an HSTS preload list (pltlab.archive.rename): pure, with a
preload list of our own standing in for Chromium's."""

import pytest

from pltlab.archive import bundled, synth, wire
from pltlab.archive.model import Obj, Page
from pltlab.archive.rename import Renaming, choose, entries
from pltlab.errors import PltError

# A preload list as Chromium's has them: name -> include_subdomains.
PRELOADED = {"wikipedia.org": True, "wikimedia.org": True, "www.amazon.com": False, "dev": True}


def upgraded_by(preloaded: dict[str, bool]):
    def upgraded(hosts: set[str]) -> set[str]:
        return {h for h in hosts if any(h == e or (sub and h.endswith("." + e)) for e, sub in preloaded.items())}

    return upgraded


UPGRADED = upgraded_by(PRELOADED)


def _page() -> Page:
    html = (
        b'<html><a href="http://en.wikipedia.org/wiki/X">x</a><img src="//upload.wikimedia.org/a.png">'
        b'<script>document.domain="wikipedia.org"; var cdn="EN.WIKIPEDIA.ORG", other="images-amazon.com",'
        b' aussie="en.wikipedia.org.au", shop="http://www.amazon.com/";</script></html>'
    )
    png = b"\x89PNG\r\n\x1a\n" + b"upload.wikimedia.org" + bytes(range(256))
    return Page(
        url="http://en.wikipedia.org/wiki/X",
        objects=[
            Obj(url="http://en.wikipedia.org/wiki/X", mime="text/html", body=html, encoding="gzip", transfer_size=150),
            Obj(
                url="http://upload.wikimedia.org/a.png",
                mime="image/png",
                body=png,
                initiator="http://en.wikipedia.org/wiki/X",
            ),
            Obj(
                url="http://www.amazon.com/",
                status=302,
                redirect_url="http://www.amazon.com/home?ref=en.wikipedia.org",
                headers=[
                    ("Location", "http://www.amazon.com/home?ref=en.wikipedia.org"),
                    ("Set-Cookie", "a=1; Domain=.wikipedia.org"),
                ],
                initiator="http://en.wikipedia.org/wiki/X",
            ),
            Obj(url="http://www.amazon.com/home?ref=en.wikipedia.org", mime="text/css", size=300),
            Obj(url="http://images-amazon.com/i.gif", mime="image/gif", size=43),
            Obj(url="http://fls-na.amazon.com/p", mime="image/gif", size=43),
        ],
        extras={"calibration": {"frame_tight_delay_ms": {"http://en.wikipedia.org/frame": 12.0}}},
    )


def test_entries_are_the_shortest_upgraded_suffixes():
    hosts = {"en.wikipedia.org", "upload.wikimedia.org", "www.amazon.com", "fls-na.amazon.com", "images-amazon.com"}
    assert entries(hosts, UPGRADED) == {"wikipedia.org", "wikimedia.org", "www.amazon.com"}
    assert entries({"a.b.dev", "b.dev"}, UPGRADED) == {"dev"}  # a whole TLD preloaded
    assert entries({"example.org"}, UPGRADED) == set()


def test_every_length_and_size_is_kept():
    page = _page()
    r = choose(page.hosts, UPGRADED)
    new = r.page(page)
    assert len(new.url) == len(page.url)
    for a, b in zip(page.objects, new.objects, strict=True):
        assert len(a.url) == len(b.url) and len(a.redirect_url) == len(b.redirect_url)
        assert [len(v) for _, v in a.headers] == [len(v) for _, v in b.headers]
        assert (a.size, a.transfer_size, a.encoding) == (b.size, b.transfer_size, b.encoding)
        assert len(synth.body(page, a)) == len(synth.body(new, b))
    # the recorded (gzip) body is renamed decoded and served encoded as recorded: same decoded bytes
    fit = wire.for_object(new, new.objects[0])
    assert wire.decode(fit.wire, "gzip") == new.objects[0].body and fit.decoded == page.objects[0].size


def test_names_are_renamed_consistently_and_only_as_names():
    page = _page()
    r = choose(page.hosts, UPGRADED)
    assert r.mapping() == {
        "wikipedia.org": "xikipedia.org",
        "wikimedia.org": "xikimedia.org",
        "www.amazon.com": "xww.amazon.com",
    }
    new = r.page(page)
    assert page.url == "http://en.wikipedia.org/wiki/X"  # (the page itself is not changed)
    assert new.url == "http://en.xikipedia.org/wiki/X"
    assert sorted(new.hosts) == [
        "en.xikipedia.org",
        "fls-na.amazon.com",  # not under an entry: www.amazon.com is preloaded alone
        "images-amazon.com",  # another name, not under amazon.com
        "upload.xikimedia.org",
        "xww.amazon.com",
    ]
    html = new.objects[0].body.decode()
    assert 'href="http://en.xikipedia.org/wiki/X"' in html and 'src="//upload.xikimedia.org/a.png"' in html
    assert 'document.domain="xikipedia.org"' in html and 'cdn="EN.XIKIPEDIA.ORG"' in html
    assert 'other="images-amazon.com"' in html and 'aussie="en.wikipedia.org.au"' in html
    assert 'shop="http://xww.amazon.com/"' in html
    assert new.objects[1].body == page.objects[1].body  # binary: left as it is
    assert new.objects[1].initiator == new.url
    hop = new.objects[2]
    assert hop.redirect_url == "http://xww.amazon.com/home?ref=en.xikipedia.org" == hop.header("location")
    assert hop.header("set-cookie") == "a=1; Domain=.xikipedia.org"
    assert new.objects[3].url == hop.redirect_url  # the redirect still reaches its target
    assert new.extras["calibration"]["frame_tight_delay_ms"] == {"http://en.xikipedia.org/frame": 12.0}
    # synthesized bodies reference the new names (made from the renamed URLs)
    css = synth.body(new, new.objects[3]).decode("latin-1")
    assert "wikipedia.org" not in css and "www.amazon.com" not in css
    assert r.inverse().page(new).url == page.url and [o.url for o in r.inverse().page(new).objects] == [
        o.url for o in page.objects
    ]


def test_no_new_name_is_preloaded_or_under_a_preloaded_name():
    """A candidate that the list upgrades itself (or a name under it), or that is a name of the
    page, is skipped for the next one."""
    preloaded = dict(PRELOADED, **{"xikipedia.org": True, "xww.amazon.com": False})
    page_hosts = {"en.wikipedia.org", "qikipedia.org", "www.amazon.com"}  # qikipedia.org: taken by the page
    upgraded = upgraded_by(preloaded)
    r = choose(page_hosts, upgraded)
    assert r.mapping() == {"wikipedia.org": "zikipedia.org", "www.amazon.com": "qww.amazon.com"}
    new_hosts = {r.host(h) for h in page_hosts}
    assert not upgraded(new_hosts)
    assert new_hosts.isdisjoint(page_hosts - {"qikipedia.org"}) and "qikipedia.org" in new_hosts


def test_two_entries_never_get_one_name():
    """wikipedia.org and xikipedia.org (both preloaded, both on the page): xikipedia.org's own first
    candidate is taken, by the page and by wikipedia.org's."""
    r = choose({"a.wikipedia.org", "b.xikipedia.org"}, upgraded_by({"wikipedia.org": True, "xikipedia.org": True}))
    assert len(set(r.mapping().values())) == 2
    assert not {"a.wikipedia.org", "b.xikipedia.org"} & {r.host(h) for h in ("a.wikipedia.org", "b.xikipedia.org")}


def test_a_name_without_a_free_candidate_is_an_error():
    with pytest.raises(PltError, match="no new names"):
        choose({"en.wikipedia.org"}, lambda hosts: set(hosts), rounds=3)  # a list that upgrades any name


def test_a_new_name_must_keep_the_length():
    with pytest.raises(ValueError, match="length"):
        Renaming((("wikipedia.org", "wiki.org"),))


def test_bundled_paper_page_renames_into_a_replayable_page():
    """The built-in wikipedia page: every name on the (stand-in) list renamed, the same origins,
    objects and sizes."""
    page = bundled.load("wikipedia")
    new = choose(page.hosts, UPGRADED).page(page)
    assert len(new.hosts) == len(page.hosts) and not UPGRADED(set(new.hosts))
    assert [o.size for o in new.objects] == [o.size for o in page.objects]
    assert [len(o.url) for o in new.objects] == [len(o.url) for o in page.objects]
