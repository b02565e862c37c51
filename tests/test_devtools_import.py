"""DevTools logs (Lighthouse / WebPageTest CDP event lists) import as pages."""

import gzip
import json
import os

import pytest

from pltlab.archive import devtools, importer
from pltlab.archive import resolve as resolver
from pltlab.errors import PltError
from tests.archive_helpers import SHARED
from tests.conftest import pltlab_cmd

DEVTOOLS = os.path.join(SHARED, "har-conformance", "devtools")
T0, WALL = 1000.0, 1_700_000_000.0  # monotonic seconds of the navigation; its wall time
FRAME, LOADER = "F1", "L1"


def ev(method, **params):
    return {"method": method, "params": params, "sessionId": "S", "targetType": "page"}


def sent(rid, url, t, rtype, **kw):
    return ev(
        "Network.requestWillBeSent",
        requestId=rid,
        loaderId=kw.pop("loader", LOADER),
        frameId=FRAME,
        documentURL="https://a.test/",
        type=rtype,
        timestamp=T0 + t,
        wallTime=WALL + t,
        initiator=kw.pop("initiator", {"type": "other"}),
        request={"url": url, "method": "GET", "headers": {"User-Agent": "t"}},
        **kw,
    )


def response(url, status, protocol, head, **kw):
    return {
        "url": url,
        "status": status,
        "statusText": kw.pop("text", ""),
        "protocol": protocol,
        "headers": kw.pop("headers", {}),
        "mimeType": kw.pop("mime", "text/html"),
        "remoteIPAddress": "192.0.2.1",
        "connectionId": 7,
        "encodedDataLength": head,
        "fromDiskCache": False,
        "fromServiceWorker": False,
        **kw,
    }


def page_log() -> list:
    """http://a.test/ -301-> https://a.test/ (gzip, h2), a script, an image from the disk cache,
    a failed stylesheet; plus one malformed event and one item that is no event."""
    r301 = response(
        "http://a.test/",
        301,
        "http/1.1",
        120,
        text="Moved Permanently",
        headers={"Location": "https://a.test/", "Content-Length": "0"},
    )
    doc = response(
        "https://a.test/",
        200,
        "h2",
        150,
        headers={
            "content-type": "text/html",
            "content-encoding": "gzip",
            "content-length": "1200",
            "set-cookie": "a=1\nb=2",
        },
    )
    js = response("https://a.test/app.js", 200, "h2", 100, mime="application/javascript")
    img = response("https://cdn.test/i.png", 200, "h2", 0, mime="image/png", fromDiskCache=True)
    return [
        ev("Page.frameStartedLoading", frameId=FRAME),
        sent("L1", "http://a.test/", 0.0, "Document"),
        ev(
            "Network.responseReceivedExtraInfo",
            requestId="L1",
            statusCode=301,
            headers={"Location": "https://a.test/", "Content-Length": "0"},
            headersText="HTTP/1.1 301 Moved Permanently\r\nLocation: https://a.test/\r\nContent-Length: 0\r\n\r\n",
        ),
        sent("L1", "https://a.test/", 0.05, "Document", redirectResponse=r301, redirectHasExtraInfo=True),
        ev(
            "Network.responseReceived",
            requestId="L1",
            loaderId=LOADER,
            timestamp=T0 + 0.15,
            type="Document",
            response=doc,
            frameId=FRAME,
        ),
        ev("Page.frameNavigated", frame={"id": FRAME, "loaderId": LOADER, "url": "https://a.test/"}),
        ev("Network.dataReceived", requestId="L1", timestamp=T0 + 0.16, dataLength=3000, encodedDataLength=700),
        ev("Network.dataReceived", requestId="L1", timestamp=T0 + 0.17, dataLength=2000, encodedDataLength=500),
        ev("Network.loadingFinished", requestId="L1", timestamp=T0 + 0.18, encodedDataLength=1350),
        sent("2.1", "https://a.test/app.js", 0.2, "Script", initiator={"type": "parser", "url": "https://a.test/"}),
        sent(
            "2.2",
            "https://cdn.test/i.png",
            0.21,
            "Image",
            initiator={
                "type": "script",
                "stack": {"callFrames": [{"url": "", "functionName": "f"}, {"url": "https://a.test/app.js"}]},
            },
        ),
        sent(
            "2.3",
            "https://a.test/missing.css",
            0.22,
            "Stylesheet",
            initiator={"type": "parser", "url": "https://a.test/"},
        ),
        ev("Network.responseReceived", requestId="2.1", timestamp=T0 + 0.3, type="Script", response=js),
        ev("Network.dataReceived", requestId="2.1", timestamp=T0 + 0.31, dataLength=3000, encodedDataLength=3040),
        ev("Network.loadingFinished", requestId="2.1", timestamp=T0 + 0.32, encodedDataLength=3140),
        ev("Network.requestServedFromCache", requestId="2.2"),
        ev("Network.responseReceived", requestId="2.2", timestamp=T0 + 0.33, type="Image", response=img),
        ev("Network.dataReceived", requestId="2.2", timestamp=T0 + 0.33, dataLength=800, encodedDataLength=0),
        ev("Network.loadingFinished", requestId="2.2", timestamp=T0 + 0.34, encodedDataLength=0),
        ev(
            "Network.loadingFailed",
            requestId="2.3",
            timestamp=T0 + 0.35,
            type="Stylesheet",
            errorText="net::ERR_CONNECTION_REFUSED",
            canceled=False,
        ),
        ev("Network.dataReceived", requestId="2.1", timestamp=T0 + 0.36),  # no dataLength
        {"startTime": 12},  # no event at all
        ev("Page.loadEventFired", timestamp=T0 + 0.5),
    ]


def write_log(path, events, gz=False):
    raw = json.dumps(events).encode()
    path.write_bytes(gzip.compress(raw) if gz else raw)
    return str(path)


def entries_by_url(events):
    doc = devtools.to_har(events, "t.json")
    return doc, {e["request"]["url"]: e for e in doc["log"]["entries"]}


def test_har_entries_sizes_protocol_cache_and_redirect_hop():
    doc, by = entries_by_url(page_log())
    assert len(doc["log"]["entries"]) == 5  # two hops of the document, script, image, failed css
    hop = by["http://a.test/"]["response"]
    assert (hop["status"], hop["redirectURL"], hop["httpVersion"]) == (301, "https://a.test/", "http/1.1")
    assert hop["_transferSize"] == 120
    head = len("HTTP/1.1 301 Moved Permanently\r\nLocation: https://a.test/\r\nContent-Length: 0\r\n\r\n")
    assert hop["headersSize"] == head and hop["bodySize"] == 120 - head
    main = by["https://a.test/"]
    r = main["response"]
    assert r["status"] == 200 and r["httpVersion"] == "h2" and main["request"]["httpVersion"] == "h2"
    assert r["content"]["size"] == 5000 and r["_transferSize"] == 1350  # decoded > on the wire
    # h2 has no head text: the head is what had arrived with the response (HPACK-coded)
    assert r["headersSize"] == 150 and r["bodySize"] == 1200
    assert {"name": "set-cookie", "value": "b=2"} in r["headers"]  # CDP joins repeats with \n
    assert main["serverIPAddress"] == "192.0.2.1" and main["connection"] == "7"
    assert main["startedDateTime"] == "2023-11-14T22:13:20.050000Z"
    assert main["time"] == pytest.approx(130.0)
    js = by["https://a.test/app.js"]
    assert js["_initiator"] == {"type": "parser", "url": "https://a.test/"}
    assert js["response"]["content"]["size"] == 3000 and js["response"]["_transferSize"] == 3140
    assert js["response"]["bodySize"] == 3040
    assert js["_fromCache"] is False
    img = by["https://cdn.test/i.png"]
    assert img["_fromCache"] is True and img["response"]["bodySize"] == 0
    assert img["response"]["content"]["size"] == 800 and img["response"]["_transferSize"] == 0
    css = by["https://a.test/missing.css"]["response"]
    assert css["status"] == 0 and css["_error"] == "net::ERR_CONNECTION_REFUSED"
    (pm,) = doc["log"]["pages"]
    assert pm["title"] == "http://a.test/" and pm["pageTimings"]["onLoad"] == pytest.approx(500.0)
    assert pm["_pltlab"]["repairs"] == {devtools.SKIPPED: 2}


@pytest.mark.parametrize("name,gz", [("site.devtoolslog.json", False), ("site.json.gz", True), ("plain.json", False)])
def test_log_imports_as_a_page(tmp_path, name, gz):
    path = write_log(tmp_path / name, page_log(), gz=gz)
    assert devtools.claims(path)
    (page,), report = importer.load_inputs([path])
    assert report["inputs"] == {path: 1}
    assert page.url == "http://a.test/"
    urls = [o.url for o in page.objects]
    assert urls[0] == "http://a.test/" and "https://a.test/missing.css" not in urls
    assert sorted(urls) == sorted(
        ["http://a.test/", "https://a.test/", "https://a.test/app.js", "https://cdn.test/i.png"]
    )
    first, doc = page.find("http://a.test/"), page.find("https://a.test/")
    assert first.status == 301 and first.redirect_url == "https://a.test/"
    assert doc.status == 200 and (doc.initiator, doc.initiator_type) == ("http://a.test/", "redirect")
    assert doc.size == 5000 and doc.start_ms == pytest.approx(50.0)
    # on the wire: the gzip body as sent, over h2 (the redirect over HTTP/1.1)
    assert (doc.encoding, doc.transfer_size, doc.protocol) == ("gzip", 1200, "h2")
    assert first.protocol == "http/1.1" and doc.server_ip == "192.0.2.1"
    img = page.find("https://cdn.test/i.png")
    assert img.from_cache and not page.find("https://a.test/app.js").from_cache
    assert (img.initiator, img.initiator_type) == ("https://a.test/app.js", "script")
    assert page.on_load_ms == pytest.approx(500.0)
    assert page.extras["repairs"][devtools.SKIPPED] == 2


def test_har_named_json_stays_a_har(tmp_path):
    har = {
        "log": {
            "version": "1.2",
            "entries": [
                {
                    "startedDateTime": "2024-01-01T00:00:00.000Z",
                    "time": 5,
                    "request": {"method": "GET", "url": "https://h.test/"},
                    "response": {"status": 200, "headers": [], "content": {"size": 10, "mimeType": "text/html"}},
                }
            ],
        }
    }
    path = tmp_path / "capture.json"
    path.write_text(json.dumps(har))
    assert not devtools.claims(str(path))
    (page,), _ = importer.load_inputs([str(path)])
    assert page.url == "https://h.test/"


def test_wrapped_log_and_directory_listing(tmp_path):
    write_log(tmp_path / "a.devtoolslog.json", {"events": page_log()})
    (tmp_path / "notes.json").write_text("[]")  # neither a HAR nor named as a log: not listed
    (page,), report = importer.load_inputs([str(tmp_path)])
    assert list(report["inputs"]) == [str(tmp_path / "a.devtoolslog.json")]
    assert page.url == "http://a.test/"


def test_reload_is_a_second_page(tmp_path):
    events = page_log() + [
        sent(
            "L2",
            "https://a.test/",
            1.0,
            "Document",
            loader="L2",
            initiator={"type": "script", "url": "https://a.test/app.js"},
        ),
        ev(
            "Network.responseReceived",
            requestId="L2",
            timestamp=T0 + 1.1,
            type="Document",
            response=response("https://a.test/", 200, "h2", 90),
        ),
        ev("Network.loadingFinished", requestId="L2", timestamp=T0 + 1.2, encodedDataLength=900),
        sent(
            "3.1",
            "https://a.test/late.js",
            1.3,
            "Script",
            loader="L2",
            initiator={"type": "parser", "url": "https://a.test/"},
        ),
        ev(
            "Network.responseReceived",
            requestId="3.1",
            timestamp=T0 + 1.4,
            type="Script",
            response=response("https://a.test/late.js", 200, "h2", 80),
        ),
        ev("Network.loadingFinished", requestId="3.1", timestamp=T0 + 1.5, encodedDataLength=400),
        ev("Page.loadEventFired", timestamp=T0 + 1.6),
    ]
    first, second = devtools.load_pages(write_log(tmp_path / "r.devtoolslog.json", events))
    assert len(first.objects) == 4 and first.on_load_ms == pytest.approx(500.0)
    assert [o.url for o in second.objects] == ["https://a.test/", "https://a.test/late.js"]
    assert second.objects[0].initiator is None  # the navigation starts the page
    assert second.on_load_ms == pytest.approx(600.0)
    # no data events: the body is what crossed the wire after the response head
    assert [o.size for o in second.objects] == [900 - 90, 400 - 80]
    assert second.extras["repairs"][devtools.NO_DATA] == 2
    assert devtools.SKIPPED not in second.extras["repairs"]  # log-wide counts: first page only


def test_run_resolves_a_log(tmp_path):
    path = write_log(tmp_path / "x.devtoolslog.json.gz", page_log(), gz=True)
    (page,) = resolver.resolve(path)
    assert page.url == "http://a.test/" and len(page.objects) == 4


@pytest.mark.parametrize(
    "content,needle",
    [
        (b"\x1f\x8b\x08\x00garbage-not-deflate", "corrupt gzip data"),
        (gzip.compress(b"{not json"), "not valid JSON"),
        (gzip.compress(b'{"log": {"entries": []}}'), "not a DevTools log"),
        (gzip.compress(b"[]"), "not a DevTools log"),
        (gzip.compress(json.dumps([ev("Page.loadEventFired", timestamp=1)]).encode()), "no Network.requestWillBeSent"),
    ],
)
def test_bad_logs_are_one_error(tmp_path, content, needle):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(content)
    with pytest.raises(PltError) as e:
        devtools.load_pages(str(path))
    assert str(path) in str(e.value) and needle in str(e.value)


def test_cli_import_pages_and_corrupt_gzip(tmp_path):
    good = write_log(tmp_path / "ok.devtoolslog.json", page_log())
    out = tmp_path / "arc"
    r = pltlab_cmd("import", good, "-o", str(out))
    assert r.returncode == 0, r.stderr
    r = pltlab_cmd("pages", str(out), "--json")
    assert r.returncode == 0, r.stderr
    (row,) = json.loads(r.stdout)
    assert row["page"] == "http://a.test/" and row["objects"] == 4
    bad = tmp_path / "broken.json.gz"
    bad.write_bytes(gzip.compress(json.dumps(page_log()).encode())[:-30])  # truncated
    r = pltlab_cmd("import", str(bad), "-o", str(tmp_path / "arc2"))
    assert r.returncode != 0
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(bad) in lines[0] and "corrupt gzip" in lines[0]
    assert "Traceback" not in r.stderr and not (tmp_path / "arc2").exists()


def _corpus_logs():
    return sorted(os.listdir(DEVTOOLS)) if os.path.isdir(DEVTOOLS) else []


@pytest.mark.skipif(not os.path.isdir(DEVTOOLS), reason=f"{DEVTOOLS} absent")
@pytest.mark.parametrize("name", _corpus_logs())
def test_corpus_logs_import(name):
    path = os.path.join(DEVTOOLS, name)
    events = devtools._unwrap(devtools.read_json(path))
    sent_n = sum(1 for e in events if e["method"] == "Network.requestWillBeSent")
    doc = devtools.to_har(events, path)
    entries = doc["log"]["entries"]
    assert len(entries) == sent_n  # one entry per request and per redirect hop
    decoded = sum(e["params"]["dataLength"] for e in events if e["method"] == "Network.dataReceived")
    assert sum(e["response"]["content"]["size"] for e in entries) == decoded
    lightrider = any(devtools.LIGHTRIDER in p["_pltlab"].get("repairs", {}) for p in doc["log"]["pages"])
    if not lightrider:  # Lightrider's own sizes replace the proxy's
        wire = sum(e["params"].get("encodedDataLength", 0) for e in events if e["method"] == "Network.loadingFinished")
        wire += sum(
            e["params"]["redirectResponse"]["encodedDataLength"]
            for e in events
            if e["method"] == "Network.requestWillBeSent" and "redirectResponse" in e["params"]
        )
        assert sum(e["response"]["_transferSize"] for e in entries if "_error" not in e["response"]) == wire
    pages, _ = importer.load_inputs([path])
    assert pages and all(p.objects and p.objects[0].url == p.url for p in pages)
    assert all(p.on_load_ms is None or p.on_load_ms > 0 for p in pages)


@pytest.mark.skipif(not os.path.isdir(DEVTOOLS), reason=f"{DEVTOOLS} absent")
def test_corpus_redirect_chain():
    first, reload = devtools.load_pages(os.path.join(DEVTOOLS, "redirect.devtoolslog.json"))
    chain = [(o.status, o.url, o.redirect_url) for o in first.objects if o.redirect_url]
    assert chain == [
        (307, "http://www.vkontakte.ru/", "https://www.vkontakte.ru/"),
        (301, "https://www.vkontakte.ru/", "https://vk.com/"),
        (302, "https://vk.com/", "https://m.vk.com/"),
    ]
    assert first.find("https://m.vk.com/").initiator == "https://vk.com/"
    assert reload.url == "https://m.vk.com/" and len(reload.objects) > 100
    assert reload.on_load_ms is not None and first.on_load_ms is None
