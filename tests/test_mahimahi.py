"""Mahimahi record folders in (pltlab import, page arguments) and out (pltlab export --format
mahimahi), on folders written by Mahimahi's schema by hand (tests/recordings.py)."""

import gzip
import os

import pytest

from pltlab.archive import formats, importer, mahimahi, repairs, wire
from pltlab.archive import resolve as resolver
from pltlab.archive.corpus import read_corpus
from pltlab.archive.generate import generate
from pltlab.errors import PltError
from tests.conftest import pltlab_cmd
from tests.recordings import CSS, CSS_GZ, DOC, HTML, JSON_BODIES, UA, mm_folder, mm_record, site


def _one(folder, **kw):
    pages, report = importer.load_inputs([str(folder)], **kw)
    assert len(pages) == 1
    return pages[0], report


def shape(page):
    """What a round trip keeps: every object's request, response, headers and bytes."""
    return [
        (o.url, o.method, o.status, o.status_text, o.headers, o.body, o.wire_body, o.encoding, o.size)
        + (o.transfer_size, o.server_ip, o.protocol, o.redirect_url, o.request_body)
        for o in page.objects
    ]


def test_a_record_folder_is_one_page_with_every_request(tmp_path):
    folder = mm_folder(str(tmp_path / "rec"))
    assert formats.archive_of(folder).name == "mahimahi"
    page, report = _one(folder)
    assert page.url == DOC and page.id == f"{folder}#1"  # the typed URL, not its redirect target
    assert len(page.objects) == len(site()) == 7 and report["repairs"] == []
    by = {}
    for o in page.objects:
        by.setdefault(o.url, []).append(o)
    doc = by["https://www.a.test/"][0]
    assert doc.body == HTML and doc.header("transfer-encoding") == "chunked" and doc.wire_body is None
    css = by["https://www.a.test/a.css"][0]
    assert (css.body, css.wire_body, css.encoding, css.transfer_size) == (CSS, CSS_GZ, "gzip", len(CSS_GZ))
    assert wire.for_object(page, css).wire == CSS_GZ  # replayed byte for byte, not encoded again
    assert [o.body for o in by["https://www.a.test/data.json"]] == list(JSON_BODIES)  # both, in order
    assert {o.server_ip for o in page.objects} == {"192.0.2.10", "192.0.2.20"}
    assert by["https://cdn.b.test/x.js"][0].server_ip == "192.0.2.20"
    assert {o.protocol for o in page.objects} == {"http/1.1"}
    assert (doc.initiator, doc.initiator_type) == (DOC, "redirect")
    assert all(o.initiator for o in page.objects[1:])  # import completes initiators (parsed, Referer-less)


def test_the_folder_resolves_as_it_imports_and_a_folder_of_folders_lists_them(tmp_path):
    a = mm_folder(str(tmp_path / "sites" / "a"))
    mm_folder(str(tmp_path / "sites" / "b"), site()[1:3])
    (imported,), _ = importer.load_inputs([a])
    (resolved,) = resolver.resolve(a)
    assert shape(resolved) == shape(imported)
    pages, _ = importer.load_inputs([str(tmp_path / "sites")])
    assert [p.id for p in pages] == [f"{a}#1", f"{tmp_path / 'sites' / 'b'}#1"]
    assert pages[1].url == "https://www.a.test/"


def test_round_trip_import_export_import_keeps_objects_bytes_and_headers(tmp_path):
    page, _ = _one(mm_folder(str(tmp_path / "rec")))
    out = str(tmp_path / "out")
    rep = mahimahi.write([page], out)
    assert rep["files"] == 7 and rep["notes"] == []  # addresses and User-Agents as recorded
    assert sorted(os.listdir(out)) == [f"save.{i:06d}" for i in range(7)]
    again, _ = _one(out)
    assert shape(again) == shape(page) and again.url == page.url
    recs = [mahimahi.parse(os.path.join(out, n)) for n in sorted(os.listdir(out))]
    at = {(r.scheme, r.request.first_line): r for r in recs}
    rr = at[(mahimahi.HTTPS, b"GET / HTTP/1.1")]
    assert rr.response.body == b"%x\r\n%s\r\n0\r\n\r\n" % (len(HTML), HTML) and rr.port == 443 and rr.ip == "192.0.2.10"
    css = at[(mahimahi.HTTPS, b"GET /a.css HTTP/1.1")]
    assert css.response.body == CSS_GZ and (b"Content-Length", str(len(CSS_GZ)).encode()) in [
        (h.key, h.value) for h in css.response.header
    ]
    assert (b"User-Agent", UA.encode()) in [(h.key, h.value) for h in css.request.header]


def test_the_corpus_keeps_the_wire_bytes(tmp_path):
    """pltlab import writes HARs: the recorded encoded bytes survive them (_pltlab.wire)."""
    importer.import_paths([mm_folder(str(tmp_path / "rec"))], str(tmp_path / "corpus"))
    [(_, page)] = read_corpus(str(tmp_path / "corpus"))
    css = next(o for o in page.objects if o.url.endswith("a.css"))
    assert css.wire_body == CSS_GZ and css.body == CSS and wire.for_object(page, css).wire == CSS_GZ


def test_url_names_the_document_and_is_refused_where_it_cannot(tmp_path):
    folder = mm_folder(str(tmp_path / "rec"))
    page, _ = _one(folder, url="https://www.a.test/")
    assert page.url == "https://www.a.test/" and len(page.objects) == 7
    with pytest.raises(PltError, match=r"rec: 'https://nowhere.test/' \(--url\) is not a recorded request URL"):
        _one(folder, url="https://nowhere.test/")
    other = mm_folder(str(tmp_path / "rec2"))
    with pytest.raises(PltError, match="--url names the document of one archive; 2 archives given"):
        importer.load_inputs([folder, other], url=DOC)
    har = tmp_path / "p.har"
    from pltlab.archive.har import write_page

    write_page(page, str(har))
    with pytest.raises(PltError, match=r"p.har: --url names the document of a Mahimahi record folder .* not of a HAR"):
        importer.load_inputs([str(har)], url=DOC)


def test_other_navigations_are_objects_of_the_page_counted_once(tmp_path):
    recs = site() + [
        dict(
            url="https://elsewhere.test/",
            ip="192.0.2.30",
            headers=[("Accept", "text/html")],
            status="HTTP/1.1 200 OK",
            resp=[("Content-Type", "text/html"), ("Content-Length", "4")],
            body=b"<p/>",
        )
    ]
    page, report = _one(mm_folder(str(tmp_path / "rec"), recs))
    assert page.url == DOC and len(page.objects) == 8
    assert report["repairs"] == [{"file": str(tmp_path / "rec"), "kind": repairs.OTHER_NAVIGATIONS, "count": 1}]


def test_bodies_that_cannot_be_kept_as_recorded_are_repairs_once_per_kind(tmp_path):
    base = site()[2]
    bad = [
        dict(base, url="https://www.a.test/1.css", body=b"\x1f\x8bnot gzip", resp=[("Content-Encoding", "gzip")]),
        dict(
            base, url="https://www.a.test/2.css", body=b"\x1f\x8bnot gzip either", resp=[("Content-Encoding", "gzip")]
        ),
        dict(base, url="https://www.a.test/3.css", body=b"5\r\nab", resp=[("Transfer-Encoding", "chunked")]),
        dict(base, url="https://www.a.test/4.css", body=b"abcdef", resp=[("Content-Length", "3")]),
        dict(base, url="https://www.a.test/5.css", body=b"x", resp=[("Content-Encoding", "compress")]),
    ]
    page, report = _one(mm_folder(str(tmp_path / "rec"), site()[:2] + bad))
    kinds = {r["kind"]: r["count"] for r in report["repairs"]}
    assert kinds == {
        repairs.UNDECODABLE: 2,
        repairs.CHUNKS_BROKEN: 1,
        repairs.PAST_LENGTH: 1,
        repairs.UNKNOWN_CODING: 1,
    }
    o = {o.url: o for o in page.objects}
    assert o["https://www.a.test/1.css"].body is None and o["https://www.a.test/1.css"].wire_body == b"\x1f\x8bnot gzip"
    assert o["https://www.a.test/4.css"].body == b"abc"
    assert wire.for_object(page, o["https://www.a.test/5.css"]).wire == b"x"  # sent as recorded, header kept


def test_bad_records_are_one_error_line_naming_the_file(tmp_path):
    folder = mm_folder(str(tmp_path / "rec"))
    path = os.path.join(folder, "save.Zt9mN2")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[: len(data) // 2])  # cut inside the response body
    cp = pltlab_cmd("import", folder, "-o", str(tmp_path / "c"))
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1, cp.stderr
    assert f"{path}: not a Mahimahi record (protobuf RequestResponse): truncated" in cp.stderr
    with open(path, "wb") as f:
        f.write(data)
    notes = os.path.join(folder, "notes.txt")
    with open(notes, "w") as f:
        f.write("recorded on a Tuesday\n")
    cp = pltlab_cmd("import", folder, "-o", str(tmp_path / "c"))
    assert cp.returncode != 0 and cp.stderr.count("\n") == 1, cp.stderr
    assert f"{notes}: not a" in cp.stderr and "Mahimahi record" in cp.stderr
    assert not os.path.exists(tmp_path / "c")


def test_a_folder_of_other_files_is_not_a_record_folder(tmp_path):
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello\n")
    assert formats.archive_of(str(tmp_path / "notes")) is None
    with pytest.raises(PltError, match="no archive in this folder .*a Mahimahi record folder"):
        importer.load_inputs([str(tmp_path / "notes")])


def test_a_generated_page_exports_as_records_mahimahi_can_serve(tmp_path):
    page = generate(objects=40, total_bytes=200_000, origins=3, depth=3, seed=2, scheme="https", redirects=2)
    for o in page.objects[5:10]:
        o.headers.append(("Content-Encoding", "gzip"))
        o.encoding, o.transfer_size = "gzip", max(30, o.size // 3)
    out = str(tmp_path / "mm")
    rep = mahimahi.write([page], out, user_agent=UA)
    assert rep["files"] == 40 and rep["notes"] == [
        "3 hosts recorded without a server address: given 100.64.x.y addresses"
    ]
    again, _ = _one(out)
    assert again.url == page.url and [o.url for o in again.objects] == [o.url for o in page.objects]
    for o, rec in zip(page.objects, sorted(os.listdir(out))):
        rr = mahimahi.parse(os.path.join(out, rec))
        heads = {h.key.lower(): h.value for h in rr.response.header}
        assert int(heads.get(b"content-length", b"0")) == len(rr.response.body)
        assert {h.key: h.value for h in rr.request.header}[b"User-Agent"] == UA.encode()
        if o.encoding:  # encoded as pltlab's replay sends it
            assert heads[b"content-encoding"] == b"gzip" and len(gzip.decompress(rr.response.body)) == o.size
    assert [o.size for o in again.objects] == [o.size for o in page.objects]  # synthesized bodies at size


def test_cli_import_and_export_mahimahi(tmp_path):
    folder = mm_folder(str(tmp_path / "rec"))
    cp = pltlab_cmd("import", folder, "-o", str(tmp_path / "corpus"))
    assert cp.returncode == 0, cp.stderr
    assert f"{DOC}: 7 objects (0 size only), 3 origins" in cp.stdout
    out = tmp_path / "out"
    cp = pltlab_cmd("export", str(tmp_path / "corpus"), "--format", "mahimahi", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert f"{out}: 7 requests of {DOC}, a Mahimahi record folder" in cp.stderr
    cp = pltlab_cmd("export", str(tmp_path / "corpus"), "--format", "mahimahi", "-o", str(out))
    assert cp.returncode != 0 and f"{out}: exists and is not an empty folder" in cp.stderr
    cp = pltlab_cmd("export", str(tmp_path / "corpus"))
    assert cp.returncode != 0 and "a page, not a run: --format mahimahi, wpr or har exports a page" in cp.stderr
    cp = pltlab_cmd("export", "7", "--format", "mahimahi", "-o", str(tmp_path / "x"))
    assert cp.returncode != 0 and "7: a run, not a page: --format mahimahi exports a page" in cp.stderr
    cp = pltlab_cmd("export", "google", "--format", "mahimahi")
    assert cp.returncode != 0 and "--format mahimahi writes a Mahimahi record folder" in cp.stderr
    cp = pltlab_cmd("export", "google", "--format", "har", "--user-agent", "x", "-o", str(tmp_path / "g.har"))
    assert cp.returncode != 0 and "--user-agent: --format har writes no request headers" in cp.stderr
    cp = pltlab_cmd("export", "google", "--format", "har", "-o", str(tmp_path / "g.har"))
    assert cp.returncode == 0 and (tmp_path / "g.har").is_file(), cp.stderr
    cp = pltlab_cmd("import", folder + "/", "--url", "https://www.a.test/", "-o", str(tmp_path / "c2"))
    assert cp.returncode == 0 and "https://www.a.test/: 7 objects" in cp.stdout and f"[{folder}#1]" in cp.stdout
    cp = pltlab_cmd("export", "google", "--format", "pcap", "-o", "x")
    assert cp.returncode != 0 and "--format pcap: unknown (a run: har-load; a page: mahimahi, wpr or har)" in cp.stderr


def test_mm_record_helper_writes_what_mahimahi_reads(tmp_path):
    """The hand-made records parse with the schema's field numbers (1 ip ... 5 response)."""
    path = mm_record(str(tmp_path), "save.abcdef", site()[0])
    with open(path, "rb") as f:
        raw = f.read()
    assert raw[:1] == b"\x0a"  # field 1 (ip), length-delimited
    assert mahimahi.parse(path).request.first_line == b"GET / HTTP/1.1"


def test_a_renamed_body_is_encoded_again_and_an_unchanged_one_kept(tmp_path):
    """Renaming hosts (HSTS preload, archive/rename.py) changes text bodies: their recorded wire
    bytes no longer match and are dropped; other bodies keep theirs."""
    from pltlab.archive.model import Obj, Page
    from pltlab.archive.rename import Renaming

    named = b"a { background: url(https://www.a.test/x.png) }"
    page = Page(
        url="https://www.a.test/",
        objects=[
            Obj(url="https://www.a.test/", mime="text/html", body=b"<p>"),
            Obj(
                url="https://www.a.test/n.css",
                mime="text/css",
                body=named,
                encoding="gzip",
                wire_body=gzip.compress(named),
            ),
            Obj(url="https://www.a.test/k.css", mime="text/css", body=CSS, encoding="gzip", wire_body=CSS_GZ),
        ],
    )
    renamed = Renaming((("www.a.test", "xww.a.test"),)).page(page)
    assert renamed.objects[1].wire_body is None and b"xww.a.test" in renamed.objects[1].body
    assert renamed.objects[2].wire_body == CSS_GZ


def test_a_corpus_wire_field_that_is_not_base64_is_one_error(tmp_path):
    import json

    from pltlab.archive.har import load, page_to_har

    (page,), _ = importer.load_inputs([mm_folder(str(tmp_path / "rec"))])
    doc = page_to_har(page)
    entry = next(e for e in doc["log"]["entries"] if "wire" in e["_pltlab"])
    entry["_pltlab"]["wire"] = "%%"
    path = tmp_path / "p.har"
    path.write_text(json.dumps(doc))
    from pltlab.archive.har import har_to_pages

    with pytest.raises(PltError, match=r"p.har: entry \d+: _pltlab.wire is not base64"):
        har_to_pages(load(str(path)), str(path))
