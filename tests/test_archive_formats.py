"""The archive-format registry: one reader per format for `pltlab import` and page arguments
alike, so a seed .pages list (and a folder of them) resolves as it imports."""

import json
import os

import pytest

from pltlab.archive import bundled, formats, importer
from pltlab.archive import resolve as resolver
from pltlab.archive.har import write_page
from pltlab.errors import PltError
from pltlab.run.batch import named_pages
from tests.archive_helpers import CS244, needs_cs244
from tests.test_devtools_import import page_log
from tests.test_seed_redirects import HTML, _mini_seed


def _seed(tmp_path):
    return _mini_seed(
        tmp_path,
        [(1.0, 40.0, "http://a.test/"), (41.0, 90.0, "http://a.test/x.css")],
        [
            ("OK", "text/html", "utf-8", "http://a.test/", "nil"),
            ("OK", "text/css", "utf-8", "http://a.test/x.css", "nil"),
        ],
        {"a.test/index.html": HTML, "a.test/x.css": b"body{}", "a.test/orphan.gif": b"GIF89a"},
    )


def _shape(pages):
    return [(p.url, [(o.url, o.status, o.body, o.size) for o in p.objects]) for p in pages]


def test_each_input_is_claimed_by_its_format(tmp_path):
    har, log, gz, pages_file = tmp_path / "a.har", tmp_path / "b.json", tmp_path / "c.json.gz", _seed(tmp_path)
    write_page(bundled.load("google"), str(har))
    log.write_text(json.dumps(page_log()))
    gz.write_bytes(b"")
    renamed_har = tmp_path / "d.json"
    renamed_har.write_text(har.read_text())
    got = {p.name: formats.archive_of(str(p)).name for p in (har, log, gz, pages_file, renamed_har)}
    assert got == {"a.har": "har", "b.json": "devtools", "c.json.gz": "devtools", "S.pages": "seed", "d.json": "har"}
    assert formats.archive_of(str(tmp_path)) is None  # a folder of archives
    (tmp_path / "logs.devtoolslog.json").mkdir()  # even named like one
    assert formats.archive_of(str(tmp_path / "logs.devtoolslog.json")) is None


def test_unknown_input_is_refused_by_import_and_read_as_har_by_a_run(tmp_path):
    odd = tmp_path / "page.txt"
    write_page(bundled.load("google"), str(odd))
    with pytest.raises(PltError, match=r"page.txt: unknown input \(expected a DevTools log .*a HAR file"):
        importer.load_inputs([str(odd)])
    assert [p.url for p in resolver.resolve(str(odd))] == [bundled.load("google").url]
    (tmp_path / "empty").mkdir()
    with pytest.raises(PltError, match=r"empty: no archive in this folder \(expected a DevTools log"):
        resolver.resolve(str(tmp_path / "empty"))


def test_a_pages_file_resolves_as_it_imports(tmp_path):
    pages_file = str(_seed(tmp_path))
    imported, report = importer.load_inputs([pages_file])
    resolved = resolver.resolve(pages_file)
    assert _shape(resolved) == _shape(imported) and len(resolved) == 1
    assert [o.url for o in resolved[0].objects] == ["http://a.test/", "http://a.test/x.css"]
    assert report["inputs"] == {pages_file: 1} and report["orphans"] == ["S/a.test/orphan.gif"]


def test_a_seed_folder_and_a_mixed_folder_resolve_as_they_import(tmp_path):
    folder = os.path.dirname(_seed(tmp_path))
    assert _shape(resolver.resolve(folder)) == _shape(importer.load_inputs([folder])[0])
    write_page(bundled.load("google"), os.path.join(folder, "g.har"))
    (tmp_path / "seed" / "w.devtoolslog.json").write_text(json.dumps(page_log()))
    imported = importer.load_inputs([folder])[0]
    resolved = resolver.resolve(folder)
    assert sorted(p.url for p in resolved) == sorted(p.url for p in imported)
    assert len(resolved) == 3 and bundled.load("google").url in {p.url for p in resolved}
    assert sum(p.extras.get("source") == "seed:S.pages" for p in resolved) == 1
    # `pltlab run FOLDER` reads the same archives, one by one
    assert sorted(p.url for _, p, _ in named_pages(folder)) == sorted(p.url for p in resolved)


def test_a_har_imports_with_initiators_completed_and_runs_as_recorded(tmp_path):
    page = bundled.load("google")
    for o in page.objects[1:]:
        o.initiator = None
    path = str(tmp_path / "g.har")
    write_page(page, path)
    (imported,), _ = importer.load_inputs([path])
    (resolved,) = resolver.resolve(path)
    assert all(o.initiator for o in imported.objects[1:])
    assert not any(o.initiator for o in resolved.objects[1:])


@needs_cs244
@pytest.mark.parametrize("name", ["Google.pages", "Paper.pages"])
def test_cs244_pages_lists_resolve_as_they_import(name):
    path = os.path.join(CS244, name)
    assert _shape(resolver.resolve(path)) == _shape(importer.load_inputs([path])[0])


@needs_cs244
def test_the_cs244_folder_resolves_to_every_page_of_its_lists():
    urls = [p.url for p in resolver.resolve(CS244)]
    assert urls == [p.url for p in importer.load_inputs([CS244])[0]] and len(urls) == 5


def test_experiment_files_read_seed_lists_through_the_registry(tmp_path):
    """An experiment file's pages (a .pages list, a seed folder) are read as `pltlab import`
    reads them: no reader of its own."""
    from pltlab.experiments import spec

    pages_file = str(_seed(tmp_path))
    want = _shape(importer.load_inputs([pages_file])[0])
    assert _shape([e.page for e in spec.resolve_pages([pages_file])]) == want
    assert _shape([e.page for e in spec.resolve_pages([os.path.dirname(pages_file)])]) == want


@needs_cs244
def test_the_tfo_corpus_is_its_paper_list_read_by_the_registry():
    from pltlab.studies import tfo

    want = [p.url for p in importer.load_inputs([os.path.join(CS244, "Paper.pages")])[0]]
    assert [e.page.url for e in tfo._corpus_pages(CS244)] == want
    assert [e.label for e in tfo._corpus_pages(os.path.join(CS244, "Paper.pages"))] == [
        "amazon",
        "nytimes",
        "wsj",
        "wikipedia",
    ]
    with pytest.raises(PltError, match="no Paper.pages there"):
        tfo._corpus_pages(os.path.dirname(CS244) + "/none")


def test_a_json_har_is_parsed_once(tmp_path, monkeypatch):
    """The DevTools claim parses a .json to see whether it is a DevTools log; the HAR reader that
    follows takes that document instead of parsing the file again (a 20,000-entry .json: twice
    the JSON work). Another look at the file (a new archives() call) reads it again; in a folder
    of archives each is parsed when claimed and when loaded (no folder's documents held)."""
    from pltlab.archive import devtools as _devtools
    from pltlab.archive import har as _har
    from pltlab.archive.generate import browser_har, generate

    path = tmp_path / "page.json"
    path.write_text(json.dumps(browser_har(generate(objects=5, total_bytes=5000, origins=2, depth=2, seed=1))))
    parses = []
    real = _har.parse_json
    monkeypatch.setattr(_devtools, "parse_json", lambda *a, **k: parses.append(a[1]) or real(*a, **k))
    monkeypatch.setattr(_har, "parse_json", lambda *a, **k: parses.append(a[1]) or real(*a, **k))
    [(a, fmt)] = formats.archives(str(path))
    assert fmt.name == "har" and a.path == str(path)
    assert len(formats.load(a, fmt).pages[0].objects) == 5
    assert parses == [str(path)]
    assert _devtools.claims(str(path)) is False
    assert len(parses) == 2
    path.write_text(path.read_text() + " ")  # changed: a new look reads it as it is now
    [(a, fmt)] = formats.archives(str(path))
    assert len(formats.load(a, fmt).pages[0].objects) == 5
    assert len(parses) == 3
    (tmp_path / "other.har").write_text(path.read_text())
    found = formats.archives(str(tmp_path))
    assert [(os.path.basename(a.path), f.name) for a, f in found] == [("other.har", "har")]  # a .json is not listed
    assert all(a.parsed() is None for a, _ in found)
