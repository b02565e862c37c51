"""The seed fetch format (cs244-2013): every logged URL an object, renamed paths mapped back,
stored bodies byte-identical, orphans attached or reported, broken input rejected."""

import json
import os
from urllib.parse import urlsplit

import pytest

from pltlab.archive import fetchlog, importer, seed
from pltlab.archive.corpus import read_corpus
from pltlab.errors import PltError
from tests.archive_helpers import CS244, copy_writable, needs_cs244
from tests.conftest import pltlab_cmd

pytestmark = needs_cs244
WIKI = "http://en.wikipedia.org/wiki/Transmission_Control_Protocol"
# page: (URLRequestCount from <stats>, distinct URLs in the log, hosts in the log,
#        stored-file coverage of the logged URLs as in the corpus README, at least)
EXPECTED = {
    WIKI: (29, 29, 4, 1.00),
    "http://www.amazon.com/": (67, 68, 10, 0.98),
    "http://www.nytimes.com/": (191, 54, 28, 0.81),
    "http://www.wsj.com/": (125, 133, 45, 0.88),
}


@pytest.fixture(scope="module")
def paper():
    pages, report = seed.import_pages_file(os.path.join(CS244, "Paper.pages"))
    return {p.url: p for p in pages}, report


def _log(url):
    return fetchlog.parse(os.path.join(CS244, "Paper.fetchlog", seed.log_name(url.rstrip("/"))))


def _chain_end(page, o):
    seen = {o.url}
    while o.redirect_url and page.find(o.redirect_url) is not None and o.redirect_url not in seen:
        seen.add(o.redirect_url)
        o = page.find(o.redirect_url)
    return o


@pytest.mark.parametrize("url", list(EXPECTED))
def test_every_logged_url_is_an_object(paper, url):
    pages, _ = paper
    requests, n_urls, n_hosts, coverage = EXPECTED[url]
    page, log = pages[url], _log(url)
    assert page.extras["log_stats"]["URLRequestCount"] == requests
    assert len(log.urls()) == n_urls
    logged = set(log.urls())
    objs = {o.url: o for o in page.objects}
    assert logged <= objs.keys()
    assert len({urlsplit(u).hostname for u in logged}) == n_hosts
    assert {urlsplit(u).hostname for u in logged} <= set(page.hosts)
    # a redirect's stored file is its chain end's body (the redirect itself has none)
    stored = sum(1 for u in logged if "seed_file" in _chain_end(page, objs[u]).extras)
    assert stored / len(logged) >= coverage
    for t in log.transactions:  # start/end times from <transactions>
        assert (objs[t.url].start_ms, objs[t.url].end_ms) == (t.start_ms, t.end_ms)
    assert page.objects[0].url == url and page.objects[0].mime.startswith("text/html")


def test_stored_bodies_are_byte_identical_incl_renamed(paper):
    pages, _ = paper
    for page in pages.values():
        for o in page.objects:
            if "seed_file" in o.extras:
                with open(os.path.join(CS244, o.extras["seed_file"]), "rb") as f:
                    assert f.read() == o.body, o.url
    css = pages[WIKI].find(
        "http://bits.wikimedia.org/en.wikipedia.org/load.php?debug=false&lang=en&modules=site&only=styles&skin=vector&*"
    )
    assert css.extras["seed_file"] == "Paper/bits.wikimedia.org/6277ee2d4800bd7803de6085348ef0ff"
    assert css.mime == "text/css" and css.initiator == WIKI and css.initiator_type == "parser"


def test_statuses_redirects_and_estimates(paper):
    pages, _ = paper
    ny = pages["http://www.nytimes.com/"]
    r = ny.find(
        "http://view.atdmt.com/AVE/view/430366737/direct;at.HDA_US_BellybandHomepage_"
        "Awareness_Pixel;ct.1/01/608711048495024400"
    )
    assert r.status == 302 and r.redirect_url == "http://cdn.atdmt.com/images/pixel.gif"
    assert ny.find(r.redirect_url).initiator == r.url
    nm = ny.find("http://typeface.nytimes.com/miq8eej.js")
    assert nm.status == 200 and nm.extras["recorded_status"] == 304
    est = [o for o in ny.objects if o.body is None]
    assert est and all(o.extras["size_source"] == "estimate" and (o.size > 0) == (o.status != 204) for o in est)


def test_unlogged_files_attached_or_reported(paper):
    pages, report = paper
    ny = pages["http://www.nytimes.com/"]
    attached = [o for o in ny.objects if o.extras.get("attached") == "referenced"]
    assert any(o.host == "i1.nyt.com" for o in attached)
    for o in attached:  # attached because the page's HTML or CSS references it
        assert o.initiator and ny.find(o.initiator).mime.split(";")[0] in ("text/html", "text/css")
    assert "Paper/geoiplookup.wikimedia.org/index.html" in report["orphans"]  # loaded by JS only
    used = {o.extras.get("seed_file") for p in pages.values() for o in p.objects}
    assert not used & set(report["orphans"])


def test_cli_import_all_five_and_pages_json(tmp_path):
    out = tmp_path / "arc"
    cp = pltlab_cmd("import", os.path.join(CS244, "Paper.pages"), os.path.join(CS244, "Google.pages"), "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    rows = {r["page"]: r for r in json.loads(pltlab_cmd("pages", str(out), "--json").stdout)}
    assert len(rows) == 5 and rows[WIKI]["with_body"] == 29 and rows[WIKI]["size_only"] == 0
    assert rows[WIKI]["origins"] == 4 and rows["http://www.amazon.com/"]["origins"] == 11
    for _url, page in read_corpus(str(out)):
        assert rows[page.url]["objects"] == len(page.objects)
        assert rows[page.url]["bytes"] == sum(o.size for o in page.objects)


def _mini_copy(tmp_path):
    """A copy of the wikipedia part of the corpus that a test may break."""
    root = tmp_path / "corpus"
    (root / "W.fetchlog").mkdir(parents=True)
    (root / "W.pages").write_text(WIKI + "\n")
    name = seed.log_name(WIKI)
    copy_writable(os.path.join(CS244, "Paper.fetchlog", name), root / "W.fetchlog" / name)
    for host in ("en.wikipedia.org", "bits.wikimedia.org", "upload.wikimedia.org", "meta.wikimedia.org"):
        copy_writable(os.path.join(CS244, "Paper", host), root / "W" / host)
    return root, root / "W.fetchlog" / name


def test_mini_copy_imports(tmp_path):
    root, _ = _mini_copy(tmp_path)
    (page,), _ = seed.import_pages_file(str(root / "W.pages"))
    assert len(page.objects) == 29 and all(o.body is not None for o in page.objects)


@pytest.mark.parametrize(
    "breakage,needle",
    [
        ("truncate", "truncated fetchlog: <transactions> section is not closed"),
        ("badline", "malformed transaction line"),
        ("escape", "escapes the folder"),
        ("nolog", "no fetchlog for"),
    ],
)
def test_broken_seed_input_is_rejected_without_output(tmp_path, breakage, needle):
    root, log = _mini_copy(tmp_path)
    text = log.read_text(errors="replace")
    if breakage == "truncate":
        log.write_text(text[: text.index("</transactions>") - 300])
    elif breakage == "badline":
        log.write_text(text.replace(" 754.198 |", " 754.198 ", 1))
    elif breakage == "escape":
        log.write_text(
            text.replace(
                "http://en.wikipedia.org/w/index.php?title=MediaWiki",
                "http://en.wikipedia.org/../../../etc/passwd?title=MediaWiki",
            )
        )
    else:
        log.unlink()
    out = tmp_path / "out"
    with pytest.raises(PltError, match=needle):
        importer.import_paths([str(root / "W.pages")], str(out))
    cp = pltlab_cmd("import", str(root / "W.pages"), "-o", str(out))
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2 and len(lines) == 1 and needle in lines[0], cp.stderr
    assert "W.fetchlog" in lines[0] or "W.pages" in lines[0]
    assert sorted(os.listdir(tmp_path)) == ["corpus"]  # no archive, no temporary directory


def test_symlink_out_of_the_folder_is_rejected(tmp_path):
    root, _ = _mini_copy(tmp_path)
    target = root / "W" / "en.wikipedia.org" / "wiki" / "Transmission_Control_Protocol"
    target.unlink()
    target.symlink_to("/etc/hostname")
    with pytest.raises(PltError, match="points outside the folder"):
        seed.import_pages_file(str(root / "W.pages"))
