"""A page imported from a Mahimahi record folder or a Web Page Replay archive loads with every
object, and the recorded bytes go on the wire (the encoded bodies byte for byte)."""

import pytest

from pltlab.archive import importer
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig
from tests.recordings import CSS_GZ, HTML, JS, PNG, mm_folder, site, wprgo

pytestmark = pytest.mark.root


@pytest.mark.parametrize("fmt", ["mahimahi", "wpr"])
def test_an_imported_page_loads_with_every_object_and_its_recorded_bytes(tmp_path, fmt):
    src = mm_folder(str(tmp_path / "rec")) if fmt == "mahimahi" else wprgo(str(tmp_path / "r.wprgo"), site())
    (page,), _ = importer.load_inputs([src])
    with PageRunner(page, RunConfig(rtt="10ms")) as pr:
        r = pr.load(Point(), 1)
    reqs = r["requests"]
    assert r["valid"], r["invalid_reason"]
    assert r["not_found"] == 0 and all(q["status"] in (200, 301) for q in reqs)
    assert sorted(q["url"] for q in reqs) == sorted(o.url for o in page.objects)  # every object, data.json twice
    got = {q["url"]: q for q in reqs}
    assert got["https://www.a.test/a.css"]["bytes"] == len(CSS_GZ)  # the recorded gzip stream as it is
    assert got["https://www.a.test/a.css"]["encoding"] == "gzip"
    for url, body in [
        ("https://www.a.test/", HTML),
        ("https://cdn.b.test/x.js", JS),
        ("https://www.a.test/logo.png", PNG),
    ]:
        assert got[url]["body_bytes"] == len(body), url
