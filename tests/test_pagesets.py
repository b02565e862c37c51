"""The page sets: benches/pagesets/public.txt names every bundled page (the TFO paper's set and
the public one), each resolves by its name as `pltlab run NAME` resolves it, and no shipped page
file carries a body."""

import glob
import json
import os

import pytest

from pltlab.archive import bundled
from pltlab.archive import resolve as resolver
from pltlab.run.batch import named_pages
from tests.archive_helpers import ROOT, SHARED

PAGESET = os.path.join(ROOT, "benches", "pagesets", "public.txt")
SHIPPED = sorted(glob.glob(os.path.join(os.path.dirname(bundled.__file__), "*", "*.har")))


def listed() -> list[tuple[str, str]]:
    """(name, URL) per line of the page-set file."""
    with open(PAGESET, encoding="utf-8") as f:
        rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
    return [(r[0], r[1]) for r in rows]


def test_the_list_names_every_bundled_page_once():
    names = [n for n, _ in listed()]
    assert len(names) == len(set(names)) >= 25
    assert set(names) == set(bundled.names())
    # both sets are in it, each file shipped once
    assert set(bundled.PAPER + bundled.RECENT) < set(names) and len(SHIPPED) == len(names)


@pytest.mark.parametrize("name,url", listed())
def test_each_listed_page_resolves_by_name(name, url):
    (page,) = resolver.resolve(name)
    assert page.url == url and page.objects
    assert page.objects[0].url.split("#")[0] in {o.url for o in page.objects}
    ((_, again, why),) = list(named_pages(name))  # what `pltlab run NAME` walks
    assert why is None and again.url == url and len(again.objects) == len(page.objects)


def _keys(value, path=""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{path}/{k}", v
            yield from _keys(v, f"{path}/{k}")
    elif isinstance(value, list):
        for v in value:
            yield from _keys(v, path + "[]")


@pytest.mark.parametrize("path", SHIPPED, ids=os.path.basename)
def test_no_shipped_page_file_carries_a_body(path):
    with open(path, encoding="utf-8") as f:
        har = json.load(f)
    keys = [k.rsplit("/", 1)[-1] for k, _ in _keys(har)]
    assert "text" not in keys and "postData" not in keys and "encoding" not in keys, path
    for e in har["log"]["entries"]:
        assert e["_pltlab"]["body"] == "size-only"
        headers = e["response"]["headers"] + e["request"]["headers"]
        assert {h["name"].lower() for h in headers} <= {"content-type", "location"}, e["request"]["url"]


BODIED = ("har/safari-with-bodies.har", "har/chrome-small.har")  # the corpus files that carry bodies


@pytest.mark.skipif(not os.path.isdir(SHARED), reason=f"{SHARED} absent")
@pytest.mark.parametrize("rel", BODIED)
def test_no_body_of_the_corpus_is_in_a_shipped_file(rel):
    with open(os.path.join(SHARED, rel), encoding="utf-8") as f:
        bodies = [e["response"]["content"].get("text") or "" for e in json.load(f)["log"]["entries"]]
    pieces = [b[i : i + 80] for b in bodies if len(b) >= 200 for i in (0, len(b) // 2)]
    assert pieces  # the file does carry bodies
    for path in SHIPPED:
        with open(path, encoding="utf-8") as f:
            text = f.read()
        assert not [p for p in pieces if p in text], path


def test_a_misspelt_page_name_is_one_line_with_the_close_names():
    from pltlab.archive.resolve import resolve
    from pltlab.errors import PltError

    with pytest.raises(PltError) as e:
        resolve("wikipdia")
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith("wikipdia: ") and "did you mean wikipedia" in msg
    with pytest.raises(PltError) as e:
        resolve("zzzz")
    assert "did you mean" not in str(e.value) and "docs/formats.md" in str(e.value)
