"""HAR in and out: round trip, the browsers' and tools' variants, corrupt input."""

import base64
import json
import os

import pytest

from pltlab.archive import har, importer
from pltlab.archive.corpus import read_corpus
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from tests.archive_helpers import HARS, needs_hars
from tests.conftest import pltlab_cmd


def _entry_facts(doc):
    out = []
    for e in doc["log"]["entries"]:
        if e["response"]["status"] == 0:
            continue
        c = e["response"]["content"]
        text = c.get("text")
        body = None if text is None else (base64.b64decode(text) if c.get("encoding") == "base64" else text.encode())
        status = 200 if e["response"]["status"] == 304 else e["response"]["status"]  # cold load
        out.append((e["request"]["url"], status, c.get("mimeType"), body))
    return sorted(out, key=repr)


@needs_hars
@pytest.mark.parametrize(
    "name",
    ["safari-with-bodies.har", "chrome-small.har", "github.com-home.har", "http1.1-chrome.har", "aftonbladet.se.har"],
)
def test_round_trip_preserves_url_status_mime_body(tmp_path, name):
    src = os.path.join(HARS, name)
    importer.import_paths([src], str(tmp_path / "arc"))
    back = [har.page_to_har(p) for _, p in read_corpus(str(tmp_path / "arc"))]
    merged = {"log": {"entries": [e for d in back for e in d["log"]["entries"]]}}
    assert _entry_facts(merged) == _entry_facts(har.load(src))


def test_own_format_round_trip_is_stable(tmp_path):
    p = Page(
        url="https://a.test/",
        title="t",
        id=str(tmp_path / "p.har#page_1"),
        objects=[
            Obj(
                url="https://a.test/",
                mime="text/html",
                body="<img src=x.png>é".encode(),
                protocol="h2",
                server_ip="2001:db8::1",
                encoding="gzip",
                transfer_size=9,
            ),
            Obj(
                url="https://a.test/x.png",
                mime="image/png",
                body=bytes(range(256)),
                start_ms=5.5,
                end_ms=9.0,
                initiator="https://a.test/",
                initiator_type="parser",
                from_cache=True,
            ),
            Obj(url="https://a.test/l.txt", mime="text/plain; charset=iso-8859-1", body="café".encode("latin-1")),
            Obj(
                url="https://b.test/y.js",
                mime="application/javascript",
                size=1234,
                status=200,
                encoding="br",
                transfer_size=1500,
                protocol="http/1.1",
            ),
            Obj(url="https://b.test/z.js", mime="application/javascript", size=99, encoding="gzip", transfer_size=99),
            Obj(url="https://b.test/post", method="POST", size=2, request_body=b"\xff\x00binary"),
            Obj(url="https://b.test/form", method="POST", size=0, request_body=b"a=1&b=2"),
        ],
    )
    har.write_page(p, tmp_path / "p.har")
    q = har.read_page(str(tmp_path / "p.har"))
    assert q == p
    assert q.objects[2].body == "café".encode("latin-1")
    assert q.objects[4].transfer_size == 99 and q.objects[5].transfer_size is None
    assert q.objects[3].body is None and q.objects[3].size == 1234
    doc = json.loads((tmp_path / "p.har").read_text())
    assert doc["log"]["version"] == "1.2"
    es = doc["log"]["entries"]
    assert es[1]["response"]["content"]["encoding"] == "base64"
    assert es[1]["_initiator"] == {"type": "parser", "url": "https://a.test/"}
    assert es[1]["_pltlab"]["from_cache"] is True
    assert es[2]["response"]["content"]["text"] == "café"  # in the declared charset, not base64
    assert (es[0]["response"]["bodySize"], es[0]["response"]["content"]["compression"]) == (9, 8)
    assert (es[0]["response"]["httpVersion"], es[0]["serverIPAddress"]) == ("h2", "2001:db8::1")
    assert es[3]["response"]["bodySize"] == 1500 and "compression" not in es[3]["response"]["content"]
    assert es[5]["response"]["bodySize"] == -1 and es[5]["response"]["httpVersion"] == ""
    assert es[5]["request"]["postData"]["encoding"] == "base64" and es[6]["request"]["postData"]["text"] == "a=1&b=2"
    assert "id" not in doc["log"]["pages"][0]["_pltlab"]  # a corpus keeps ids (test_har_repairs)


@needs_hars
def test_pageref_without_page_record_and_failed_entries():
    pages = har.har_to_pages(har.load(os.path.join(HARS, "chrome-small.har")), "chrome-small.har")
    assert [len(p.objects) for p in pages] == [1, 1]  # the status-0 entry is dropped
    assert pages[0].extras["unreplayable"] == 1 and pages[1].extras["unreplayable"] == 0
    assert [p.id for p in pages] == ["chrome-small.har#page_1", "chrome-small.har#page_2"]
    assert pages[1].objects[0].initiator == "https://www.google.com/"
    assert pages[1].objects[0].initiator_type == "parser"


@needs_hars
def test_missing_pages_section_gives_one_page():
    doc = har.load(os.path.join(HARS, "http1.1-chrome.har"))
    doc["log"].pop("pages")
    for e in doc["log"]["entries"]:
        e.pop("pageref", None)
    (page,) = har.har_to_pages(doc, "x.har")
    assert page.url == "https://www.sitespeed.io/" and len(page.objects) == 13
    assert page.objects[0].start_ms == 0


@needs_hars
def test_webpagetest_duplicates_redirects_size_only():
    (page,) = importer.load_inputs([os.path.join(HARS, "aftonbladet.se.har")])[0]
    assert len(page.objects) == 175
    urls = [o.url for o in page.objects]
    assert len(urls) - len(set(urls)) == 2  # duplicate requests are kept as requests
    assert all(o.body is None and o.size >= 0 for o in page.objects)
    redirects = [o for o in page.objects if 300 <= o.status < 400 and o.redirect_url]
    assert redirects
    for r in redirects:
        target = page.find(r.redirect_url if "://" in r.redirect_url else r.url)
        if target is not None and target is not r:
            assert target.initiator == r.url and target.initiator_type == "redirect"
    assert all(o.initiator for o in page.objects[1:])  # every object has a dependency


@needs_hars
def test_corrupt_har_is_one_clear_error_and_writes_nothing(tmp_path):
    src = os.path.join(HARS, "broken.har")
    with pytest.raises(PltError, match="not valid HAR"):
        importer.import_paths([src], str(tmp_path / "arc"))
    cp = pltlab_cmd("import", os.path.join(HARS, "safari-with-bodies.har"), src, "-o", str(tmp_path / "arc"))
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode != 0 and len(lines) == 1, cp.stderr
    assert lines[0].startswith("pltlab: error:") and "broken.har" in lines[0] and "not valid HAR" in lines[0]
    assert os.listdir(tmp_path) == []  # neither the archive nor a temporary directory


@needs_hars
def test_missing_page_record_and_request_nested_in_post_data():
    (page,) = har.har_to_pages(har.load(os.path.join(HARS, "missing-page.har")), "m.har")
    (o,) = page.objects
    assert (o.url, o.method, o.size, o.server_ip, o.protocol) == (
        "https://test.com/stuff",
        "POST",
        44,
        "1.1.1.1",
        "http/1.1",
    )
    assert page.id == "m.har#1"
    assert page.extras["repairs"] == {"request fields recorded inside postData: read from there": 1}


def test_not_a_har(tmp_path):
    (tmp_path / "c.har").write_text(json.dumps({"log": {}}))
    with pytest.raises(PltError, match=r"c\.har: not valid HAR"):
        importer.load_inputs([str(tmp_path / "c.har")])
    (tmp_path / "d.har").write_text(
        json.dumps({"log": {"entries": [{"request": {"url": "/rel"}, "response": {"status": 200}}]}})
    )
    with pytest.raises(PltError, match=r"d\.har: entry 0: request URL '/rel' is not absolute"):
        importer.load_inputs([str(tmp_path / "d.har")])


@needs_hars
def test_cli_import_and_pages(tmp_path):
    out = tmp_path / "arc"
    cp = pltlab_cmd(
        "import",
        os.path.join(HARS, "safari-with-bodies.har"),
        os.path.join(HARS, "github.com-home.har"),
        "-o",
        str(out),
    )
    assert cp.returncode == 0, cp.stderr
    cp = pltlab_cmd("pages", str(out), "--json")
    rows = sorted(json.loads(cp.stdout), key=lambda r: r["page"])
    assert [r["page"] for r in rows] == ["https://github.com/", "https://mitmproxy.org/"]
    gh, mp = rows
    assert (gh["objects"], gh["with_body"], gh["size_only"], gh["origins"]) == (20, 9, 11, 5)
    assert (mp["objects"], mp["with_body"], mp["size_only"], mp["origins"]) == (19, 19, 0, 2)
    cp = pltlab_cmd("pages", str(out))
    assert cp.returncode == 0 and "mitmproxy" in cp.stdout
