"""A load is valid only when its document arrived: every hop of the main URL's redirect chain
answered as recorded, the document itself 2xx. Pages without such a document in the recording
are refused before anything is built."""

import json
import os

import pytest

from pltlab.archive.har import har_to_pages
from pltlab.errors import PltError
from pltlab.loaders.validity import document_chain, document_problem, judge
from pltlab.replay import server as replay_server
from pltlab.run import runner
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig
from tests.conftest import pltlab_cmd

HTML = '<!DOCTYPE html><html><head><title>v</title></head><body><img src="/i.png"></body></html>'


def entry(url, status, *, location=None, mime="text/html", text=None, size=0):
    headers = [{"name": "Content-Type", "value": mime}]
    if location:
        headers.append({"name": "Location", "value": location})
    content = {"size": len(text) if text is not None else size, "mimeType": mime}
    if text is not None:
        content["text"] = text
    return {
        "pageref": "page_1",
        "startedDateTime": "2024-01-01T00:00:00.000Z",
        "time": 10,
        "request": {
            "method": "GET",
            "url": url,
            "httpVersion": "HTTP/1.1",
            "headers": [],
            "queryString": [],
            "cookies": [],
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": status,
            "statusText": "",
            "httpVersion": "HTTP/1.1",
            "headers": headers,
            "cookies": [],
            "content": content,
            "redirectURL": location or "",
            "headersSize": -1,
            "bodySize": -1,
        },
        "cache": {},
        "timings": {"send": 0, "wait": 5, "receive": 1},
    }


def har(*entries):
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "test", "version": "1"},
            "pages": [
                {
                    "id": "page_1",
                    "startedDateTime": "2024-01-01T00:00:00.000Z",
                    "title": "v",
                    "pageTimings": {"onLoad": 50},
                }
            ],
            "entries": list(entries),
        }
    }


def img(base):
    return entry(base + "i.png", 200, mime="image/png", size=300)


def to_https():
    """http://x.test/ 301 -> https://x.test/ 200 (the same host and path on the other scheme)."""
    return har(
        entry("http://x.test/", 301, location="https://x.test/"),
        entry("https://x.test/", 200, text=HTML),
        img("https://x.test/"),
    )


def page_of(doc, tmp_path, name="p.har"):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path), har_to_pages(doc, str(path))[0]


def run_json(path, *extra):
    cp = pltlab_cmd("run", path, "--rtt", "20ms", "--reps", "1", "--tfo", "off", "--json", *extra, timeout=180)
    return cp, (json.loads(cp.stdout) if cp.stdout.strip() else None)


# ---- the rule, on records ----------------------------------------------------------------------


def test_document_problem_names_the_hop_and_what_came_back(tmp_path):
    _, page = page_of(to_https(), tmp_path)
    chain = document_chain(page, {"x.test": "198.19.0.1"})
    assert [(i, o.status) for i, o in chain] == [(0, 301), (1, 200)]
    ok = [{"index": 0, "status": 301}, {"index": 1, "status": 200}, {"index": 2, "status": 200}]
    assert document_problem(chain, ok) is None
    looped = [{"index": 0, "status": 301}, {"index": 1, "status": 301}]
    assert (
        document_problem(chain, looped)
        == "document https://x.test/ answered 301 (recorded 200): replay served the wrong response"
    )
    assert (
        document_problem(chain, [{"index": 0, "status": 404}])
        == "document http://x.test/ answered 404 (recorded 301): no recorded response matched"
    )
    assert document_problem(chain, [{"index": 0, "status": 301}]) == "document https://x.test/ never arrived"
    assert "never arrived: connection reset" in document_problem(
        chain, [{"index": 0, "status": 301}, {"index": 1, "status": 0, "error": "connection reset"}]
    )
    # the document comes first, then the TFO rules
    assert judge(False, {"client": {}, "server": {}}, [], "document x never arrived") == "document x never arrived"
    assert judge(False, {"client": {"TCPFastOpenActive": 1}, "server": {}}, ok, None).startswith("TFO off")


@pytest.mark.parametrize(
    "entries,needle",
    [
        ((entry("http://x.test/", 404, text="gone"),), "document http://x.test/ answered 404: no document to load"),
        (
            (entry("http://x.test/", 301, location="http://x.test/a"), entry("http://x.test/a", 302, location="/")),
            "redirects in a loop (http://x.test/ -> http://x.test/a -> http://x.test/)",
        ),
        ((entry("http://x.test/", 302, location="http://y.test/"),), "-> http://y.test/, which was not recorded"),
    ],
)
def test_a_recording_without_a_document_is_refused_in_one_line(tmp_path, entries, needle):
    path, page = page_of(har(*entries), tmp_path)
    with pytest.raises(PltError, match="no document to load"):
        document_chain(page, {"x.test": "198.19.0.1", "y.test": "198.19.0.2"})
    cp, res = run_json(path)
    lines = [ln for ln in cp.stderr.splitlines() if ln.strip()]
    assert cp.returncode == 2 and len(lines) == 1, cp.stderr
    assert lines[0].startswith(f"pltlab: error: {page.id or page.url}: ") and needle in lines[0], lines[0]
    assert res["runs"] == [] and res["pages"][0]["status"] == "failed"


# ---- loads over the emulated link (root, namespaces) ------------------------------------------


@pytest.mark.root
def test_redirect_to_https_is_a_valid_load(tmp_path):
    """Needs the scheme-aware replay: https://x.test/ is answered by its own 200, not by the
    http 301 recorded for the same host and path (which would loop)."""
    path, _ = page_of(to_https(), tmp_path)
    cp, res = run_json(path)
    assert cp.returncode == 0, cp.stderr
    (r,) = res["runs"]
    assert r["valid"], r["invalid_reason"]
    by_url = {q["url"]: q for q in r["requests"]}
    assert by_url["http://x.test/"]["status"] == 301 and by_url["https://x.test/"]["status"] == 200
    assert all(q["protocol"] == "http/1.1" for q in r["requests"])
    assert {"transfer_bytes", "body_bytes", "encoding"} <= set(r["requests"][0])
    assert r["page_id"] and res["summary"][0]["n"] == 1


class _Serving(replay_server.ReplayServer):
    """A replay server for what the test says the origin answers, not for the recording."""

    pages = None

    def __init__(self, topo, pages, host_ips, workdir, **kw):
        super().__init__(topo, self.pages, host_ips, workdir, **kw)


def _load_serving(monkeypatch, tmp_path, recorded, served, client="builtin"):
    _, page = page_of(recorded, tmp_path, "recorded.har")
    _, other = page_of(served, tmp_path, "served.har")
    monkeypatch.setattr(_Serving, "pages", [other])
    monkeypatch.setattr(runner, "ReplayServer", _Serving)
    with PageRunner(page, RunConfig(rtt="20ms", reps=1, tfo_modes=(False,), client=client)) as pr:
        return pr.load(Point(), 1)


@pytest.mark.root
def test_document_the_replay_cannot_match_is_invalid(monkeypatch, tmp_path):
    r = _load_serving(
        monkeypatch,
        tmp_path,
        har(entry("http://x.test/", 200, text=HTML), img("http://x.test/")),
        har(entry("http://x.test/other", 200, text=HTML), img("http://x.test/")),
    )
    assert not r["valid"]
    assert r["invalid_reason"] == "document http://x.test/ answered 404 (recorded 200): no recorded response matched"
    assert r["not_found"] == 1


@pytest.mark.root
def test_replay_that_redirects_in_a_loop_is_invalid(monkeypatch, tmp_path):
    """The origin answers the https URL with a redirect back to http: the loader's https hop gets
    a 301 where the recording has the document."""
    r = _load_serving(
        monkeypatch,
        tmp_path,
        to_https(),
        har(
            entry("http://x.test/", 301, location="https://x.test/"),
            entry("https://x.test/", 301, location="http://x.test/"),
            img("https://x.test/"),
        ),
    )
    assert not r["valid"]
    assert (
        r["invalid_reason"] == "document https://x.test/ answered 301 (recorded 200): replay served the wrong response"
    )


# ---- Chromium: onload fired and the navigation's final response was 2xx ----------------------

needs_chromium = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")


@pytest.mark.root
@needs_chromium
def test_chromium_redirect_to_https_is_valid_with_byte_counts(tmp_path):
    path, _ = page_of(to_https(), tmp_path)
    cp, res = run_json(path, "--client", "chromium")
    assert cp.returncode == 0, cp.stderr
    (r,) = res["runs"]
    assert r["valid"], r["invalid_reason"]
    by_url = {q["url"]: q for q in r["requests"]}
    hop, doc, png = by_url["http://x.test/"], by_url["https://x.test/"], by_url["https://x.test/i.png"]
    assert (hop["status"], doc["status"], png["status"]) == (301, 200, 200)
    assert doc["body_bytes"] == len(HTML) and png["body_bytes"] == 300
    # heads + body as on the wire (CDP encodedDataLength); the redirect: its head only
    assert doc["transfer_bytes"] > len(HTML) and png["transfer_bytes"] > 300 and hop["transfer_bytes"] > 0
    assert all(q["protocol"] == "http/1.1" and q["encoding"] == "" for q in r["requests"])


@pytest.mark.root
@needs_chromium
def test_chromium_document_the_replay_cannot_match_is_invalid(monkeypatch, tmp_path):
    r = _load_serving(
        monkeypatch,
        tmp_path,
        har(entry("http://x.test/", 200, text=HTML), img("http://x.test/")),
        har(entry("http://x.test/other", 200, text=HTML), img("http://x.test/")),
        "chromium",
    )
    assert not r["valid"]
    assert r["invalid_reason"] == "document http://x.test/ answered 404: no recorded response matched"


@pytest.mark.root
@needs_chromium
def test_chromium_cannot_navigate_to_a_post_and_says_so(tmp_path):
    post = entry("http://x.test/api", 200, mime="application/json", text='{"ok": 1}')
    post["request"]["method"] = "POST"
    path, _ = page_of(har(post), tmp_path)
    cp, res = run_json(path, "--client", "chromium")
    assert cp.returncode == 0, cp.stderr
    (r,) = res["runs"]
    assert not r["valid"]
    assert r["invalid_reason"] == (
        "document http://x.test/api answered 404: no recorded response matched (the recording has "
        "http://x.test/api as a POST only; a browser navigates with GET)"
    )
    # the built-in loader sends the recorded POST, which the replay answers (a GET would get a 404)
    cp, res = run_json(path)
    assert res["runs"][0]["valid"] and res["runs"][0]["requests"][0]["status"] == 200


# ---- a browser's own upgrade to https: the self-redirect hop is never on the wire -----------------


def _upgrade_chain():
    """http://www.v.test/ 307 -> https://www.v.test/ (HSTS's internal redirect, as Chrome's HARs
    record it) 301 -> https://m.v.test/ 200, whose image is an http self-upgrade hop too, and an
    http origin on another port (no https one in the replay)."""
    return har(
        entry("http://www.v.test/", 307, location="https://www.v.test/"),
        entry("https://www.v.test/", 301, location="https://m.v.test/"),
        entry("https://m.v.test/", 200, text=HTML),
        entry("http://img.v.test/a.png", 301, mime="image/png", location="https://img.v.test/a.png"),
        entry("https://img.v.test/a.png", 200, mime="image/png", size=300),
        entry("http://local.v.test:8080/b.png", 200, mime="image/png", size=200),
    )


def test_upgraded_self_redirect_hops_are_not_fetched(tmp_path):
    from pltlab.loaders import plan

    _, page = page_of(_upgrade_chain(), tmp_path)
    ips = {h: f"198.19.0.{i + 1}" for i, h in enumerate(sorted({o.host for o in page.objects}))}
    urls = lambda p: [o["url"] for o in p["objects"]]  # noqa: E731
    # recorded schemes: every hop fetched, as recorded
    assert len(urls(plan.build(page, ips, tfo=False))) == 6
    built = plan.build(page, ips, tfo=False, https_hosts=set(ips))
    objs = {o["url"]: o for o in built["objects"]}
    assert urls(built)[0] == "https://www.v.test/" and "http://www.v.test/" not in objs
    assert "https://img.v.test/a.png" in objs and "http://img.v.test/a.png" not in objs
    assert len(built["objects"]) == 4
    # the port-8080 origin stays plain http on its port
    assert (objs["http://local.v.test:8080/b.png"]["tls"], objs["http://local.v.test:8080/b.png"]["port"]) == (
        False,
        8080,
    )
    # the document chain starts at the https hop
    chain = document_chain(page, ips, set(ips))
    assert [(i, o.url, o.status) for i, o in chain] == [(0, "https://www.v.test/", 301), (1, "https://m.v.test/", 200)]
    assert len(document_chain(page, ips)) == 3


@pytest.mark.root
def test_a_load_over_https_skips_the_upgrade_hop_and_is_valid(tmp_path):
    path, _ = page_of(_upgrade_chain(), tmp_path)
    cp, res = run_json(path, "--schemes", "https")
    assert cp.returncode == 0, cp.stderr
    (r,) = res["runs"]
    assert r["valid"], r["invalid_reason"]
    got = [(q["url"], q["status"]) for q in r["requests"]]
    assert sorted(got) == sorted(
        [
            ("https://www.v.test/", 301),
            ("https://m.v.test/", 200),
            ("https://img.v.test/a.png", 200),
            ("http://local.v.test:8080/b.png", 200),
        ]
    ), got
