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
        body = None if text is None else (base64.b64decode(text) if c.get("encoding") == "base64"
                                          else text.encode())
        out.append((e["request"]["url"], e["response"]["status"], c.get("mimeType"), body))
    return sorted(out, key=repr)


@needs_hars
@pytest.mark.parametrize("name", ["safari-with-bodies.har", "chrome-small.har", "github.com-home.har",
                                  "http1.1-chrome.har", "aftonbladet.se.har"])
def test_round_trip_preserves_url_status_mime_body(tmp_path, name):
    src = os.path.join(HARS, name)
    importer.import_paths([src], str(tmp_path / "arc"))
    back = [har.page_to_har(p) for _, p in read_corpus(str(tmp_path / "arc"))]
    merged = {"log": {"entries": [e for d in back for e in d["log"]["entries"]]}}
    assert _entry_facts(merged) == _entry_facts(har.load(src))


def test_own_format_round_trip_is_stable(tmp_path):
    p = Page(url="https://a.test/", title="t", objects=[
        Obj(url="https://a.test/", mime="text/html", body="<img src=x.png>é".encode()),
        Obj(url="https://a.test/x.png", mime="image/png", body=bytes(range(256)), start_ms=5.5,
            end_ms=9.0, initiator="https://a.test/", initiator_type="parser"),
        Obj(url="https://b.test/y.js", mime="application/javascript", size=1234, status=200)])
    har.write_page(p, tmp_path / "p.har")
    q = har.read_page(str(tmp_path / "p.har"))
    assert q == p
    assert q.objects[2].body is None and q.objects[2].size == 1234
    doc = json.loads((tmp_path / "p.har").read_text())
    assert doc["log"]["version"] == "1.2"
    assert doc["log"]["entries"][1]["response"]["content"]["encoding"] == "base64"
    assert doc["log"]["entries"][1]["_initiator"] == {"type": "parser", "url": "https://a.test/"}


@needs_hars
def test_pageref_without_page_record_and_failed_entries():
    pages = har.har_to_pages(har.load(os.path.join(HARS, "chrome-small.har")), "chrome-small.har")
    assert [len(p.objects) for p in pages] == [1, 1]  # the status-0 entry is dropped
    assert pages[0].extras["skipped_failed"] == 1
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
@pytest.mark.parametrize("name,needle", [("broken.har", "not valid HAR"),
                                         ("missing-page.har", "entry 0: entry has no request URL")])
def test_corrupt_har_is_one_clear_error_and_writes_nothing(tmp_path, name, needle):
    src = os.path.join(HARS, name)
    with pytest.raises(PltError, match=needle):
        importer.import_paths([src], str(tmp_path / "arc"))
    cp = pltlab_cmd("import", os.path.join(HARS, "safari-with-bodies.har"), src, "-o",
                    str(tmp_path / "arc"))
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2 and len(lines) == 1, cp.stderr
    assert lines[0].startswith("pltlab: error:") and name in lines[0] and needle in lines[0]
    assert os.listdir(tmp_path) == []  # neither the archive nor a temporary directory


def test_invalid_base64_and_not_a_har(tmp_path):
    bad = {"log": {"entries": [{"request": {"url": "http://a/"}, "response": {
        "status": 200, "content": {"text": "!!!", "encoding": "base64", "mimeType": "x"}}}]}}
    (tmp_path / "b.har").write_text(json.dumps(bad))
    with pytest.raises(PltError, match=r"b\.har: entry 0: invalid base64"):
        importer.load_inputs([str(tmp_path / "b.har")])
    (tmp_path / "c.har").write_text(json.dumps({"log": {}}))
    with pytest.raises(PltError, match=r"c\.har: not valid HAR"):
        importer.load_inputs([str(tmp_path / "c.har")])


@needs_hars
def test_cli_import_and_pages(tmp_path):
    out = tmp_path / "arc"
    cp = pltlab_cmd("import", os.path.join(HARS, "safari-with-bodies.har"),
                    os.path.join(HARS, "github.com-home.har"), "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    cp = pltlab_cmd("pages", str(out), "--json")
    rows = sorted(json.loads(cp.stdout), key=lambda r: r["page"])
    assert [r["page"] for r in rows] == ["https://github.com/", "https://mitmproxy.org/"]
    gh, mp = rows
    assert (gh["objects"], gh["with_body"], gh["size_only"], gh["origins"]) == (20, 9, 11, 5)
    assert (mp["objects"], mp["with_body"], mp["size_only"], mp["origins"]) == (19, 19, 0, 2)
    cp = pltlab_cmd("pages", str(out))
    assert cp.returncode == 0 and "mitmproxy" in cp.stdout
