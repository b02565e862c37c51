"""HAR import repairs and sizes: one small hand-written HAR per class of exporter quirk, each
checked in the import's printed line, its JSON report and the resulting objects; then every real
HAR of ../shared/corpus imports."""

import base64
import glob
import json
import os

import pytest

from pltlab.archive import corpus, har, importer, repairs
from pltlab.archive.entries import protocol_name
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from tests.archive_helpers import SHARED
from tests.conftest import pltlab_cmd

T0 = "2024-01-01T00:00:00.000Z"


def entry(
    url, status=200, headers=(), content=None, http="HTTP/1.1", pageref="p1", response=None, request=None, **extra
):
    resp = {
        "status": status,
        "statusText": "",
        "httpVersion": http,
        "headers": [{"name": k, "value": v} for k, v in headers],
        "content": content if content is not None else {"size": 10, "mimeType": "text/plain"},
        "redirectURL": "",
        "headersSize": -1,
        "bodySize": -1,
        **(response or {}),
    }
    req = {"method": "GET", "url": url, "httpVersion": http, "headers": [], **(request or {})}
    e = {
        "pageref": pageref,
        "startedDateTime": T0,
        "time": 10,
        "request": req,
        "response": resp,
        "timings": {"wait": 5},
        **extra,
    }
    if pageref is None:
        del e["pageref"]
    return e


def write_har(tmp_path, entries, name="t.har", pages=None, creator="Test"):
    doc = {
        "log": {
            "version": "1.2",
            "creator": {"name": creator, "version": "1"},
            "pages": pages if pages is not None else [{"id": "p1", "startedDateTime": T0, "title": "t"}],
            "entries": entries,
        }
    }
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def imported(tmp_path, entries, **kw):
    """Import through the CLI; returns (objects by URL of the first page, stdout, JSON report, page)."""
    src = write_har(tmp_path, entries, **kw)
    out = tmp_path / "arc"
    cp = pltlab_cmd("import", src, "-o", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    rep = json.loads(cp.stdout)
    cp = pltlab_cmd("import", src, "-o", str(tmp_path / "arc2"))
    assert cp.returncode == 0, cp.stderr
    page = har.read_page(rep["files"][0])
    return {o.url: o for o in page.objects}, cp.stdout, rep, page, src


def line(src, count, kind):
    return f"{src}: {count} {'entry' if count == 1 else 'entries'}: {kind}"


def assert_repaired(stdout, rep, src, count, kind):
    assert line(src, count, kind) in stdout.splitlines(), stdout
    assert {"file": src, "kind": kind, "count": count} in rep["repairs"]


# ---- sizes ---------------------------------------------------------------------------------


def test_sizes_of_every_exporter(tmp_path):
    gz = [("Content-Encoding", "gzip")]
    es = [
        entry("https://a.test/", content={"size": 1000, "mimeType": "text/html"}),  # identity
        # HAR spec / Chrome DevTools: bodySize encoded, compression, _transferSize = head + body
        entry(
            "https://a.test/spec.js",
            headers=gz,
            content={"size": 900, "compression": 600, "mimeType": "x"},
            response={"bodySize": 300, "headersSize": 100, "_transferSize": 400},
        ),
        # Chrome, bodySize unknown: _transferSize - headersSize
        entry(
            "https://a.test/chrome.js",
            headers=gz,
            content={"size": 800, "mimeType": "x"},
            response={"headersSize": 150, "_transferSize": 350},
        ),
        # Browsertime 1.0: bodySize copies the decoded size; compression tells the truth
        entry(
            "https://a.test/bt.js",
            headers=gz,
            content={"size": 700, "compression": 500, "mimeType": "x"},
            response={"bodySize": 700},
        ),
        # Content-Length wins over frame-inflated bodySizes
        entry(
            "https://a.test/cl.js",
            headers=gz + [("Content-Length", "123")],
            content={"size": 600, "mimeType": "x"},
            response={"bodySize": 160},
        ),
        # WebPageTest: content.size is the encoded size, _objectSizeUncompressed the decoded one
        entry(
            "https://a.test/wpt.js",
            headers=[("content-encoding", "BR")],
            content={"size": 210, "mimeType": "x"},
            response={"bodySize": 210, "headersSize": 300},
            _bytesIn=512,
            _objectSize=210,
            _objectSizeUncompressed=990,
        ),
        # WebPageTest agent that left every size at 0: _bytesIn - headersSize
        entry(
            "https://a.test/wpt0.png",
            content={"size": 0, "mimeType": "image/png"},
            response={"bodySize": 0, "headersSize": 200},
            _bytesIn=1200,
            _objectSize=0,
        ),
        # tiny gzip body: larger on the wire than decoded, kept as recorded
        entry(
            "https://a.test/tiny.js",
            headers=[("Content-Encoding", "gzip, br")],
            content={"size": 5, "mimeType": "x"},
            response={"bodySize": 25},
        ),
        entry(
            "https://a.test/id.css",
            headers=[("Content-Encoding", "identity")],
            content={"size": 40, "mimeType": "text/css"},
            response={"bodySize": 40},
        ),
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    got = {u.rsplit("/", 1)[1]: (o.size, o.transfer_size, o.encoding) for u, o in objs.items()}
    assert got == {
        "": (1000, 1000, ""),
        "spec.js": (900, 300, "gzip"),
        "chrome.js": (800, 200, "gzip"),
        "bt.js": (700, 200, "gzip"),
        "cl.js": (600, 123, "gzip"),
        "wpt.js": (990, 210, "br"),
        "wpt0.png": (1000, 1000, ""),
        "tiny.js": (5, 25, "gzip, br"),
        "id.css": (40, 40, ""),
    }
    assert page.extras["repairs"] == {} and page.extras["unreplayable"] == 0
    assert [r for r in rep["repairs"] if r["file"] == src] == []


def test_one_size_missing_uses_the_other(tmp_path):
    gz = [("Content-Encoding", "gzip")]
    es = [
        # Firefox: content.size -1, bodySize = the encoded body
        entry(
            "https://a.test/", headers=gz, content={"size": -1, "mimeType": "text/html"}, response={"bodySize": 4000}
        ),
        entry("https://a.test/ff.png", content={"size": -1, "mimeType": "image/png"}, response={"bodySize": 77}),
        # WebPageTest without _objectSizeUncompressed
        entry(
            "https://a.test/wpt.js",
            headers=gz,
            content={"size": 300, "mimeType": "x"},
            response={"bodySize": 300},
            _objectSize=300,
            _bytesIn=700,
        ),
        # only the decoded size
        entry("https://a.test/x.js", headers=gz, content={"size": 900, "mimeType": "x"}),
        entry("https://a.test/y.js", headers=gz, content={"size": 800, "mimeType": "x"}),
        # Chrome under HTTP/2: _transferSize holds headers of unknown size
        entry(
            "https://a.test/h.js", headers=gz, content={"size": 950, "mimeType": "x"}, response={"_transferSize": 420}
        ),
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    assert (objs["https://a.test/"].size, objs["https://a.test/"].transfer_size) == (4000, 4000)
    assert (objs["https://a.test/ff.png"].size, objs["https://a.test/ff.png"].transfer_size) == (77, 77)
    assert (objs["https://a.test/wpt.js"].size, objs["https://a.test/wpt.js"].transfer_size) == (300, 300)
    x = objs["https://a.test/x.js"]
    assert (x.size, x.transfer_size, x.wire_size) == (900, None, 900)
    assert objs["https://a.test/h.js"].transfer_size == 420
    assert_repaired(out, rep, src, 2, repairs.NO_CONTENT_SIZE)
    assert_repaired(out, rep, src, 2, repairs.NO_TRANSFER_SIZE)
    assert_repaired(out, rep, src, 1, repairs.HEADERS_IN_TRANSFER)
    assert page.extras["repairs"][repairs.NO_TRANSFER_SIZE] == 2


# ---- headers -------------------------------------------------------------------------------


def test_joined_headers_are_split_and_pseudo_headers_dropped(tmp_path):
    es = [
        entry(
            "https://a.test/",
            headers=[
                ("Set-Cookie", "a=1\nb=2"),
                ("Cache-Control", "max-age=1\r\nprivate"),
                ("Content-Type", "text/html"),
            ],
        ),
        entry(
            "https://a.test/h2.js", http="h2", headers=[(":status", "200"), ("status", "200"), ("content-type", "x")]
        ),
        entry("https://a.test/spdy.js", http="spdy/3.1", headers=[("status", "200 OK"), ("version", "HTTP/1.1")]),
        entry("https://a.test/wpt.js", http="1.1", headers=[("HTTP/1.1 200 OK", ""), ("Server", "s")]),
        entry("https://a.test/real.js", headers=[("Status", "200 OK")]),  # a real HTTP/1.1 header
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    assert objs["https://a.test/"].headers == [
        ("Set-Cookie", "a=1"),
        ("Set-Cookie", "b=2"),
        ("Cache-Control", "max-age=1"),
        ("Cache-Control", "private"),
        ("Content-Type", "text/html"),
    ]
    assert objs["https://a.test/h2.js"].headers == [("content-type", "x")]
    assert objs["https://a.test/spdy.js"].headers == []
    assert objs["https://a.test/wpt.js"].headers == [("Server", "s")]
    assert objs["https://a.test/real.js"].headers == [("Status", "200 OK")]
    assert_repaired(out, rep, src, 1, repairs.JOINED_HEADERS)
    assert_repaired(out, rep, src, 3, repairs.PSEUDO_HEADERS)


# ---- bodies --------------------------------------------------------------------------------


def test_unusable_bodies_become_size_only_at_the_recorded_size(tmp_path):
    ok = base64.b64encode(b"\x89PNG....").decode()
    es = [
        entry("https://a.test/", content={"size": 5, "mimeType": "text/html", "text": "hello"}),
        entry(
            "https://a.test/bad.png",
            content={"size": 300, "mimeType": "image/png", "encoding": "base64", "text": "MANUALLY REMOVED"},
        ),
        entry("https://a.test/cut.js", content={"size": 5000, "mimeType": "x", "text": "var a... [truncated]"}),
        entry(
            "https://a.test/cut.png",
            content={
                "size": 9000,
                "mimeType": "image/png",
                "encoding": "base64",
                "text": ok + "[truncated 8000 bytes]",
            },
        ),
        entry("https://a.test/short.js", content={"size": 4000, "mimeType": "x", "text": "only part"}),
        entry("https://a.test/long.js", content={"size": 2, "mimeType": "x", "text": "longer than two"}),
        entry("https://a.test/ok.png", content={"size": 8, "mimeType": "image/png", "encoding": "base64", "text": ok}),
        entry(
            "https://a.test/l1.txt", content={"size": 4, "mimeType": "text/plain; charset=ISO-8859-1", "text": "café"}
        ),
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    assert objs["https://a.test/"].body == b"hello"
    assert objs["https://a.test/ok.png"].body == b"\x89PNG...."
    assert objs["https://a.test/l1.txt"].body == "café".encode("latin-1")  # the charset's bytes
    for name, size in [("bad.png", 300), ("cut.js", 5000), ("cut.png", 9000), ("short.js", 4000), ("long.js", 2)]:
        o = objs[f"https://a.test/{name}"]
        assert (o.body, o.size) == (None, size), name
    assert_repaired(out, rep, src, 1, repairs.BAD_BASE64)
    assert_repaired(out, rep, src, 3, repairs.TRUNCATED)
    assert_repaired(out, rep, src, 1, repairs.LONGER)


# ---- protocols, addresses, request bodies ----------------------------------------------------


@pytest.mark.parametrize(
    "given,want",
    [
        ("HTTP/2.0", "h2"),
        ("h2", "h2"),
        ("2", "h2"),
        ("HTTP/2", "h2"),
        ("2 2", "h2"),
        ("http/2.0", "h2"),
        ("http/1.1", "http/1.1"),
        ("1.1", "http/1.1"),
        ("HTTP/1.0", "http/1.0"),
        ("1.0", "http/1.0"),
        ("h3", "h3"),
        ("http/3", "h3"),
        ("HTTP/3", "h3"),
        ("h3-29", "h3"),
        ("http/2+quic/46", "h3"),
        ("spdy/3.1", "spdy"),
        ("unknown", ""),
        ("", ""),
        (None, ""),
    ],
)
def test_protocol_names(given, want):
    assert protocol_name(given) == want


def test_multiplexed_protocols_address_and_request_body(tmp_path):
    body = base64.b64encode(b"\x00\x01bin").decode()
    es = [
        entry("https://a.test/", http="HTTP/2.0", serverIPAddress="[2001:db8::5]"),
        entry("https://a.test/2.js", http="h2", serverIPAddress="192.0.2.7"),
        entry("https://a.test/3.js", http="h3"),
        entry("https://a.test/s.js", http="spdy/3.1"),
        entry("https://a.test/w.js", http="", _protocol="HTTP/2"),  # WebPageTest
        entry("https://a.test/u.js", http="unknown", request={"headers": [{"name": ":authority", "value": "a.test"}]}),
        entry("https://a.test/old.js", http="unknown"),
        entry("https://a.test/post", request={"method": "POST", "postData": {"mimeType": "text/plain", "text": "a=1"}}),
        entry(
            "https://a.test/b64",
            request={"method": "PUT", "postData": {"mimeType": "x", "text": body, "encoding": "base64"}},
        ),
        entry("https://a.test/none", request={"method": "POST", "postData": {"mimeType": "", "text": ""}}),
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    assert objs["https://a.test/"].protocol == "h2" and objs["https://a.test/"].server_ip == "2001:db8::5"
    assert objs["https://a.test/2.js"].server_ip == "192.0.2.7"
    assert [objs[f"https://a.test/{n}"].protocol for n in ("3.js", "s.js", "w.js", "u.js", "old.js")] == [
        "h3",
        "spdy",
        "h2",
        "h2",
        "",
    ]
    assert objs["https://a.test/post"].request_body == b"a=1"
    assert objs["https://a.test/b64"].request_body == b"\x00\x01bin"
    assert objs["https://a.test/none"].request_body is None
    assert not any("recorded over h2" in x for x in out.splitlines())  # h2 is replayed as h2
    assert line(src, 1, "recorded over h3: replayed over HTTP/2 until HTTP/3 exists") in out.splitlines()
    assert_repaired(out, rep, src, 1, repairs.over("h3"))
    assert_repaired(out, rep, src, 1, repairs.over("spdy"))
    assert_repaired(out, rep, src, 1, repairs.PROTOCOL_INFERRED)


# ---- the browser's cache -------------------------------------------------------------------


def test_cached_entries_replay_as_a_cold_load(tmp_path):
    es = [
        entry("https://a.test/", content={"size": 100, "mimeType": "text/html", "text": "x" * 100}),
        entry(
            "https://a.test/304.css",
            status=304,
            content={"size": 2500, "mimeType": "text/css"},
            response={"bodySize": 0, "_transferSize": 180},
        ),
        entry(
            "https://a.test/304-unknown.js", status=304, content={"size": 0, "mimeType": "x"}, response={"bodySize": 0}
        ),
        entry("https://a.test/mem.png", content={"size": 700, "mimeType": "image/png"}, response={"_transferSize": 0}),
        entry(
            "https://a.test/disk.js",
            content={"size": 300, "mimeType": "x"},
            response={"bodySize": 300},
            _fromCache="disk",
        ),
        entry(
            "https://a.test/safari.js", content={"size": 0, "mimeType": "x", "text": "abc"}, _fetchType="Memory Cache"
        ),
        entry("https://a.test/spec.js", content={"size": 50, "mimeType": "x"}, response={"bodySize": 0}),
    ]
    objs, out, rep, page, src = imported(tmp_path, es)
    assert objs["https://a.test/"].from_cache is False
    c = objs["https://a.test/304.css"]
    assert (c.status, c.status_text, c.body, c.size, c.from_cache) == (200, "OK", None, 2500, True)
    u = objs["https://a.test/304-unknown.js"]
    assert (u.status, u.size, u.from_cache) == (200, 0, True)
    assert (objs["https://a.test/mem.png"].size, objs["https://a.test/mem.png"].transfer_size) == (700, 700)
    assert objs["https://a.test/disk.js"].from_cache and objs["https://a.test/spec.js"].from_cache
    s = objs["https://a.test/safari.js"]
    assert (s.body, s.size, s.from_cache) == (b"abc", 3, True)
    assert_repaired(out, rep, src, 6, repairs.FROM_CACHE)
    assert_repaired(out, rep, src, 1, repairs.CACHE_NO_SIZE)
    assert page.extras["unreplayable"] == 0


# ---- entries nothing can replay ------------------------------------------------------------


def test_unreplayable_entries_are_dropped_and_counted(tmp_path):
    es = [
        entry("https://a.test/"),
        entry("https://a.test/failed.js", status=0, response={"_error": "net::ERR_BLOCKED_BY_CLIENT"}),
        entry("https://a.test/failed2.js", status=0),
        entry("https://a.test/none.js", response=None),
        entry("data:image/png;base64,AAAA"),
        entry("blob:https://a.test/5f0e"),
        entry("wss://a.test/socket", status=101),
        entry("chrome-extension://abc/x.js"),
        entry("about:blank"),
        entry("https://a.test/ok.js"),
    ]
    es[3]["response"] = None
    objs, out, rep, page, src = imported(tmp_path, es)
    assert sorted(objs) == ["https://a.test/", "https://a.test/ok.js"]
    assert page.extras["unreplayable"] == 8
    assert_repaired(out, rep, src, 2, repairs.FAILED)
    assert_repaired(out, rep, src, 1, repairs.NO_RESPONSE)
    for scheme in ("data", "blob", "wss", "chrome-extension", "about"):
        assert_repaired(out, rep, src, 1, repairs.not_http(scheme))
    assert rep["pages"][0]["unreplayable"] == 8


def test_lines_of_pages():
    a = Page(url="https://a.test/", objects=[Obj(url="https://a.test/")], extras={"repairs": {repairs.FAILED: 1}})
    b = Page(
        url="https://b.test/",
        objects=[Obj(url="https://b.test/")],
        extras={"repairs": {repairs.FAILED: 2, repairs.TRUNCATED: 1}},
    )
    assert repairs.lines(a) == [f"1 entry: {repairs.FAILED}"]
    assert repairs.lines([a, b]) == [f"3 entries: {repairs.FAILED}", f"1 entry: {repairs.TRUNCATED}"]


# ---- pages: ids, order, same URL, output folder ----------------------------------------------


def test_page_ids_same_url_pages_and_listing_order(tmp_path):
    pages = [{"id": "run_2", "startedDateTime": T0, "title": "2"}, {"id": "run_1", "startedDateTime": T0, "title": "1"}]
    a = write_har(
        tmp_path,
        [
            entry("https://a.test/", pageref="run_1"),
            entry("https://a.test/", pageref="run_2"),
            entry("https://a.test/x.js", pageref="run_2"),
        ],
        name="z.har",
        pages=pages,
    )
    b = write_har(tmp_path, [entry("https://b.test/", pageref=None)], name="a.har", pages=[])
    out = tmp_path / "x" / "y" / "arc"  # missing parents are made
    cp = pltlab_cmd("import", a, b, "-o", str(out), "--json")
    assert cp.returncode == 0, cp.stderr
    rep = json.loads(cp.stdout)
    ids = [r["id"] for r in rep["pages"]]
    assert ids == [f"{a}#run_2", f"{a}#run_1", f"{b}#1"]
    assert [r["objects"] for r in rep["pages"]] == [2, 1, 1]
    assert len(set(rep["files"])) == 3 and all(os.path.isfile(f) for f in rep["files"])
    cp = pltlab_cmd("pages", str(out), "--json")
    rows = json.loads(cp.stdout)
    assert [(r["id"], r["file"]) for r in rows] == [(r["id"], r["file"]) for r in rep["pages"]]
    # a second import into the same corpus lists after the first
    c = write_har(tmp_path, [entry("https://0.test/", pageref=None)], name="0.har", pages=[])
    assert pltlab_cmd("import", c, "-o", str(out)).returncode == 0
    rows = json.loads(pltlab_cmd("pages", str(out), "--json").stdout)
    assert [r["id"] for r in rows] == ids + [f"{c}#1"]


def test_output_parents_made_and_removed_on_failure(tmp_path, monkeypatch):
    src = write_har(tmp_path, [entry("https://a.test/")])

    def broken(page, path):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(corpus, "write_page", broken)
    with pytest.raises(PltError, match="No space left"):
        importer.import_paths([src], str(tmp_path / "new" / "deeper" / "arc"))
    assert sorted(os.listdir(tmp_path)) == ["t.har"]  # no folder, no temporary directory


# ---- the real exporters --------------------------------------------------------------------

REAL = sorted(
    glob.glob(os.path.join(SHARED, "har", "*.har")) + glob.glob(os.path.join(SHARED, "har-conformance", "*.har"))
)


@pytest.mark.skipif(not REAL, reason=f"{SHARED} absent")
@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_every_real_har_imports(tmp_path, path):
    cp = pltlab_cmd("import", path, "-o", str(tmp_path / "arc"), "--json")
    if os.path.basename(path) == "broken.har":
        lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
        assert cp.returncode != 0 and len(lines) == 1 and path in lines[0], cp.stderr
        assert not os.path.exists(tmp_path / "arc")
        return
    assert cp.returncode == 0, cp.stderr
    rep = json.loads(cp.stdout)
    doc = har.load(path)
    recorded = len(doc["log"]["entries"])
    assert sum(r["objects"] + r["unreplayable"] for r in rep["pages"]) == recorded
    for row, f in zip(rep["pages"], rep["files"]):
        page = har.read_page(f)
        assert page.id == row["id"] and page.id.startswith(path + "#")
        assert page.extras["repairs"] == row["repairs"]
        for o in page.objects:
            assert o.size >= 0 and (o.transfer_size is None or o.transfer_size >= 0)
            assert o.body is None or len(o.body) == o.size
            assert o.encoding == o.encoding.lower() and o.encoding != "identity"
            assert o.scheme in ("http", "https") and o.status > 0
            assert all(k and ":" not in k and " " not in k for k, _ in o.headers)
            assert all("\n" not in v for _, v in o.headers)
