"""Web Page Replay archives (.wprgo) in (pltlab import, page arguments) and out (pltlab export
--format wpr), on archives written by the documented structure by hand (tests/recordings.py)."""

import base64
import gzip
import json

import pytest
from cryptography import x509

from pltlab.archive import formats, importer, repairs, wire, wpr
from pltlab.archive import resolve as resolver
from pltlab.errors import PltError
from tests.conftest import pltlab_cmd
from tests.recordings import CSS, CSS_GZ, DOC, HTML, JSON_BODIES, site, wprgo
from tests.test_mahimahi import shape

NAV = [("Accept", "text/html"), ("Sec-Fetch-Dest", "document"), ("Sec-Fetch-Site", "none")]
OTHER = [
    dict(
        url="https://www.c.test/",
        ip="",
        headers=NAV,
        status="HTTP/2.0 200 OK",
        resp=[("content-type", "text/html"), ("content-length", "33")],
        body=b'<link rel=stylesheet href="c.css">'[:33],
    ),
    dict(
        url="https://www.c.test/c.css",
        ip="",
        headers=[("Referer", "https://www.c.test/")],
        status="HTTP/2.0 200 OK",
        resp=[("content-type", "text/css"), ("content-length", "3")],
        body=b"a{}",
    ),
    dict(url="https://www.c.test/failed.js", ip="", headers=[("Referer", "https://www.c.test/")], status=None),
    dict(
        url="https://cdn.b.test/shared.js",  # a Referer of the origin alone: the page on that origin
        ip="",
        headers=[("Referer", "https://www.c.test/")],
        status="HTTP/1.1 200 OK",  # (a host has one protocol in an archive: cdn.b.test's x.js is HTTP/1.1)
        resp=[("content-type", "application/javascript"), ("content-length", "2")],
        body=b"//",
    ),
]
CERT = b"0\x03\x02\x01\x00"  # kept as recorded (replay re-signs it)


def _archive(tmp_path, records=None, **kw):
    kw.setdefault("protocols", {"www.c.test": "h2", "www.a.test": "http/1.1"})
    kw.setdefault("certs", {"www.c.test": CERT})
    return wprgo(str(tmp_path / "rec.wprgo"), records if records is not None else site() + OTHER, **kw)


def test_an_archive_of_two_navigations_is_two_pages(tmp_path):
    path = _archive(
        tmp_path, RemoteAddresses={"www.a.test": "192.0.2.10:443"}, DeterministicTimeSeedMs=1_700_000_000_000
    )
    assert formats.archive_of(path).name == "wpr"
    (a, c), report = importer.load_inputs([path])
    assert (a.url, c.url) == (DOC, "https://www.c.test/") and (a.id, c.id) == (f"{path}#1", f"{path}#2")
    assert len(a.objects) == 7 and c.objects[0].url == "https://www.c.test/"
    assert sorted(o.url for o in c.objects[1:]) == ["https://cdn.b.test/shared.js", "https://www.c.test/c.css"]
    by = {o.url: o for o in a.objects}
    assert by["https://www.a.test/"].body == HTML and by["https://www.a.test/"].header("transfer-encoding") == "chunked"
    css = by["https://www.a.test/a.css"]
    assert (css.body, css.wire_body, css.encoding) == (CSS, CSS_GZ, "gzip") and wire.for_object(a, css).wire == CSS_GZ
    assert [o.body for o in a.objects if o.url.endswith("data.json")] == list(JSON_BODIES)
    assert {o.url: o.protocol for o in c.objects} == {
        "https://www.c.test/": "h2",  # as negotiated for the host
        "https://www.c.test/c.css": "h2",
        "https://cdn.b.test/shared.js": "http/1.1",  # none negotiated: its status line's
    }
    assert css.protocol == "http/1.1" and c.objects[0].protocol == "h2"  # as negotiated per host
    assert css.server_ip == "192.0.2.10" and a.started == c.started == "2023-11-14T22:13:20.000Z"
    assert c.extras[wpr.CERTS_KEY] == {"www.c.test": base64.b64encode(CERT).decode()}
    assert report["repairs"] == [{"file": path, "kind": repairs.NO_RESPONSE, "count": 1}]  # the failed request
    assert all(o.initiator for p in (a, c) for o in p.objects[1:])


def test_the_archive_resolves_as_it_imports(tmp_path):
    path = _archive(tmp_path)
    assert [shape(p) for p in resolver.resolve(path)] == [shape(p) for p in importer.load_inputs([path])[0]]
    assert [p.url for p in resolver.resolve(str(tmp_path))] == [DOC, "https://www.c.test/"]  # a folder lists it


def test_url_makes_the_archive_one_page(tmp_path):
    (page,), _ = importer.load_inputs([_archive(tmp_path)], url="https://www.c.test/")
    assert page.url == "https://www.c.test/" and len(page.objects) == 10


def test_round_trip_import_export_import_keeps_objects_bytes_and_headers(tmp_path):
    pages, _ = importer.load_inputs([_archive(tmp_path)])
    out = str(tmp_path / "out.wprgo")
    rep = wpr.write(pages, out)
    assert rep["pages"] == 2 and rep["files"] == 10
    assert rep["notes"] == ["2 https hosts recorded without a certificate: a template one written"]
    again, _ = importer.load_inputs([out])
    assert [shape(p) for p in again] == [shape(p) for p in pages] and [p.url for p in again] == [p.url for p in pages]
    with open(out, "rb") as f:
        doc = json.loads(gzip.decompress(f.read()))
    assert sorted(doc["Certs"]) == ["cdn.b.test", "www.a.test", "www.c.test"]
    assert doc["Certs"]["www.c.test"] == base64.b64encode(CERT).decode()
    made = x509.load_der_x509_certificate(base64.b64decode(doc["Certs"]["www.a.test"]))
    assert made.extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.DNSName
    ) == ["www.a.test"]
    assert doc["NegotiatedProtocol"] == {"www.a.test": "http/1.1", "cdn.b.test": "http/1.1", "www.c.test": "h2"}
    assert doc["ServeResponseInChronologicalSequence"] is True  # data.json twice, served in order
    entries = doc["Requests"]["www.a.test"]["https://www.a.test/data.json"]
    assert len(entries) == 2 and set(entries[0]) == {"SerializedRequest", "SerializedResponse", "LastServedSessionId"}
    resp = base64.b64decode(entries[1]["SerializedResponse"])
    assert resp.startswith(b"HTTP/1.1 200 OK\r\n") and resp.endswith(b"\r\n\r\n" + JSON_BODIES[1])


def test_bad_archives_are_one_error_line_naming_the_file(tmp_path):
    bad = tmp_path / "bad.wprgo"
    for data, says in [
        (b"not gzip at all", "not a Web Page Replay archive (gzipped JSON)"),
        (gzip.compress(b"{not json"), "not valid Web Page Replay archive (JSON error"),
        (gzip.compress(b'{"Certs": {}}'), "not a Web Page Replay archive (no Requests object)"),
        (gzip.compress(b'{"Requests": {"a.test": {"http://a.test/": [{"SerializedRequest": "%%%"}]}}}'), None),
    ]:
        bad.write_bytes(data)
        cp = pltlab_cmd("import", str(bad), "-o", str(tmp_path / "c"))
        assert cp.returncode != 0 and cp.stderr.count("\n") == 1, cp.stderr
        assert f"{bad}: " in cp.stderr and (says is None or says in cp.stderr), cp.stderr
    assert "'http://a.test/' (request 1): SerializedRequest is not base64" in cp.stderr
    truncated = gzip.compress(
        json.dumps({"Requests": {"a.test": {"http://a.test/": [{"SerializedRequest": "R0VU"}]}}}).encode()
    )
    bad.write_bytes(truncated)
    with pytest.raises(
        PltError, match=r"bad.wprgo: 'http://a.test/' \(request 1\): SerializedRequest: no end of the message head"
    ):
        importer.load_inputs([str(bad)])
    bad.write_bytes(gzip.compress(bytes(range(256)) * 40)[:300])  # a gzip stream cut short
    with pytest.raises(PltError, match="bad.wprgo: not a Web Page Replay archive"):
        importer.load_inputs([str(bad)])


def test_cli_export_wpr_from_a_bundled_page(tmp_path):
    out = tmp_path / "g.wprgo"
    cp = pltlab_cmd("export", "google", "--format", "wpr", "-o", str(out))
    assert cp.returncode == 0, cp.stderr
    assert f"{out}: 6 requests of http://www.google.com/, a Web Page Replay archive" in cp.stderr
    (page,), _ = importer.load_inputs([str(out)])
    assert page.url == "http://www.google.com/" and len(page.objects) == 6
