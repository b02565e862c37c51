"""The seed fetch format stores what the recorder finally got under the URL it asked for: the
body of a redirect's file belongs to the end of its redirect chain, never to the redirect."""

import os

import pytest

from pltlab.archive import seed
from pltlab.archive.corpus import read_corpus
from tests.archive_helpers import CS244, needs_cs244
from tests.conftest import pltlab_cmd

HTML = b"<!DOCTYPE html><html><head><title>a</title></head><body>" + b"<p>x</p>" * 200 + b"</body></html>"
GIF = (
    b"GIF89a\x01\x00\x01\x00\x80\x00\x00\x00\x00\x00\xff\xff\xff,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;"
)


def _mini_seed(tmp_path, transactions, responses, files):
    """A seed folder S.pages / S.fetchlog/<page> / S/<host>/<path> for the page http://a.test."""
    root = tmp_path / "seed"
    (root / "S.fetchlog").mkdir(parents=True)
    (root / "S.pages").write_text("http://a.test\n")
    lines = [
        "<stats>",
        f"c:URLRequestCount:\t{len(transactions)}",
        "</stats>",
        "<transactions>",
        "strt (ms) | end (ms)  | len (ms)  | url",
    ]
    lines += [f"{s:9.3f} | {e:9.3f} | {e - s:9.3f} | {u}" for s, e, u in transactions]
    lines += ["</transactions>", "<responses>", "status       | mime_type       | charset | url -> redirect_url"]
    lines += [f"{st} | {mime} | {cs} | {u} -> {to}" for st, mime, cs, u, to in responses]
    lines += ["</responses>"]
    (root / "S.fetchlog" / seed.log_name("http://a.test")).write_text("\n".join(lines) + "\n")
    for rel, data in files.items():
        path = root / "S" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    return root / "S.pages"


def test_301_is_empty_and_the_200_gets_the_stored_document(tmp_path):
    pages_file = _mini_seed(
        tmp_path,
        [(1.0, 40.0, "http://a.test/"), (41.0, 90.0, "http://www.a.test/")],
        [
            ("Moved Permanently", "text/html", "iso-8859-1", "http://a.test/", "http://www.a.test/"),
            ("OK", "text/html", "utf-8", "http://www.a.test/", "nil"),
        ],
        {"a.test/index.html": HTML},
    )  # stored under the URL asked for, as the recorder did
    (page,), report = seed.import_pages_file(str(pages_file))
    hop, doc = page.objects[0], page.find("http://www.a.test/")
    assert (hop.url, hop.status, hop.redirect_url) == ("http://a.test/", 301, "http://www.a.test/")
    assert hop.body == b"" and hop.size == 0 and "seed_file" not in hop.extras
    assert doc.status == 200 and doc.body == HTML and doc.extras["seed_file"] == "S/a.test/index.html"
    assert "size_source" not in doc.extras and doc.initiator == hop.url
    assert [o.body for o in page.objects].count(HTML) == 1  # the document is served once
    assert report["orphans"] == [] and len(page.objects) == 2
    # and so it is written: the 301 entry without content, the 200 with the whole document
    out = tmp_path / "arc"
    cp = pltlab_cmd("import", str(pages_file), "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    ((_, back),) = read_corpus(str(out))
    assert back.objects[0].status == 301 and back.objects[0].size == 0
    assert back.find("http://www.a.test/").body == HTML


def test_redirect_to_an_unlogged_url_gives_that_url_the_file(tmp_path):
    """A 302 whose target the log does not name (the recorder followed it internally): the
    target becomes an object with the stored body, typed by its content."""
    pages_file = _mini_seed(
        tmp_path,
        [(1.0, 40.0, "http://a.test/"), (41.0, 60.0, "http://ads.test/click?id=1")],
        [("Moved Temporarily", "text/html", "utf-8", "http://ads.test/click?id=1", "http://cdn.test/pixel.gif")],
        {"a.test/index.html": HTML, "ads.test/click?id=1": GIF},
    )
    (page,), _ = seed.import_pages_file(str(pages_file))
    hop, target = page.find("http://ads.test/click?id=1"), page.find("http://cdn.test/pixel.gif")
    assert hop.status == 302 and hop.body == b"" and "seed_file" not in hop.extras
    assert target is not None and target.status == 200 and target.body == GIF
    assert target.mime == "image/gif" and target.initiator == hop.url
    assert target.initiator_type == "redirect" and target.extras["attached"] == "redirect target"
    assert page.objects[0].body == HTML  # the document's own file stays its own


def test_a_redirect_loop_keeps_no_body(tmp_path):
    pages_file = _mini_seed(
        tmp_path,
        [(1.0, 40.0, "http://a.test/"), (41.0, 50.0, "http://b.test/x"), (51.0, 60.0, "http://b.test/y")],
        [
            ("Found", "text/html", "", "http://b.test/x", "http://b.test/y"),
            ("Found", "text/html", "", "http://b.test/y", "http://b.test/x"),
        ],
        {"a.test/index.html": HTML, "b.test/x": b"loop body"},
    )
    (page,), _ = seed.import_pages_file(str(pages_file))
    for u in ("http://b.test/x", "http://b.test/y"):
        assert page.find(u).body == b"" and "seed_file" not in page.find(u).extras
    assert len(page.objects) == 3


@needs_cs244
def test_cs244_redirect_bodies_move_to_their_targets():
    pages = {p.url: p for p in seed.import_pages_file(os.path.join(CS244, "Paper.pages"))[0]}
    # object counts as before the fix, except nytimes' two redirect targets the log does not name
    assert {u: len(p.objects) for u, p in pages.items()} == {
        "http://www.amazon.com/": 71,
        "http://www.nytimes.com/": 166,
        "http://www.wsj.com/": 133,
        "http://en.wikipedia.org/wiki/Transmission_Control_Protocol": 29,
    }
    for p in pages.values():
        for o in p.objects:
            if o.redirect_url and 300 <= o.status < 400:
                assert o.size == 0 and "seed_file" not in o.extras, o.url
    wsj = pages["http://www.wsj.com/"]
    home = wsj.find("http://online.wsj.com/home-page")
    assert wsj.objects[0].status == 301 and wsj.objects[0].size == 0
    assert home.extras["seed_file"] == "Paper/www.wsj.com/index.html" and home.size == 216017
    with open(os.path.join(CS244, "Paper/www.wsj.com/index.html"), "rb") as f:
        assert f.read() == home.body
    ny = pages["http://www.nytimes.com/"]
    added = [o for o in ny.objects if o.extras.get("attached") == "redirect target"]
    assert sorted(o.url for o in added) == [
        "http://s0.2mdn.net/viewad/690333/55-1x1pixelfinal.gif",
        "http://s0.2mdn.net/viewad/807725/360logo_final_88x31.gif",
    ]
    assert all(o.mime == "image/gif" and o.body.startswith(b"GIF89a") for o in added)


@pytest.mark.parametrize("status,code", [("Moved Permanently", 301), ("Found", 302)])
def test_redirect_without_file_stays_as_it_was(tmp_path, status, code):
    pages_file = _mini_seed(
        tmp_path,
        [(1.0, 40.0, "http://a.test/"), (41.0, 50.0, "http://b.test/x"), (51.0, 60.0, "http://b.test/y")],
        [(status, "text/html", "", "http://b.test/x", "http://b.test/y")],
        {"a.test/index.html": HTML},
    )
    (page,), _ = seed.import_pages_file(str(pages_file))
    hop, target = page.find("http://b.test/x"), page.find("http://b.test/y")
    assert hop.status == code and hop.body == b""
    assert target.body is None and target.extras["size_source"] == "estimate"
