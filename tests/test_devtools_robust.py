"""DevTools logs that are damaged or hostile (issue 24): times that are no times of the load,
events out of order in the file, a document without a response, fields of the wrong type. Each
either imports as the page it records, its repairs said once per kind, or is one PltError line
naming the file and the event or request."""

import json
import os

import pytest

from pltlab.archive import devtools, importer
from pltlab.errors import PltError
from tests.conftest import pltlab_cmd
from tests.test_devtools_import import DEVTOOLS, T0, ev, page_log, sent, write_log


def load(tmp_path, events, name="t.devtoolslog.json"):
    pages, _ = importer.load_inputs([write_log(tmp_path / name, events)])
    return pages


def refused(tmp_path, events, *needles, name="t.devtoolslog.json"):
    path = write_log(tmp_path / name, events)
    with pytest.raises(PltError) as e:
        importer.load_inputs([path])
    msg = str(e.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg, msg
    for n in needles:
        assert n in msg, msg
    return msg


def where(events, method, rid):
    """Index of the first `method` event of request `rid`."""
    return next(i for i, e in enumerate(events) if e.get("method") == method and e["params"].get("requestId") == rid)


def params(events, method, rid):
    return events[where(events, method, rid)]["params"]


def objects(page):
    return [
        (o.url, o.status, round(o.start_ms, 3), round(o.end_ms, 3), o.size, o.transfer_size, o.from_cache, o.initiator)
        for o in page.objects
    ]


# ---- times: finite, non-negative, within the load, in order per request -----------------------


def test_negative_timestamps_are_refused(tmp_path):
    events = page_log()
    for e in events:
        if "timestamp" in e.get("params", {}):
            e["params"]["timestamp"] = -e["params"]["timestamp"]
    refused(tmp_path, events, "event 1 (Network.requestWillBeSent, request 'L1')", "timestamp -1000.0 is negative")


def test_far_loading_finished_is_the_requests_last_event(tmp_path):
    events = page_log()
    params(events, "Network.loadingFinished", "2.1")["timestamp"] = 1e308
    (page,) = load(tmp_path, events)
    js = page.find("https://a.test/app.js")
    # sent at +0.2 s, its last data event at +0.31 s (loadingFinished was at +0.32 s)
    assert js.start_ms == pytest.approx(200.0) and js.end_ms == pytest.approx(310.0)
    assert js.size == 3000  # the sizes still from its events
    assert page.extras["repairs"][devtools.FAR_END] == 1


def test_every_far_end_is_repaired_and_said_once(tmp_path):
    events = page_log()
    for e in events:
        if e.get("method") in ("Network.loadingFinished", "Network.loadingFailed"):
            e["params"]["timestamp"] = 1e308
    path = write_log(tmp_path / "far.devtoolslog.json", events)
    text = open(path).read().replace("1e+308", "1e400", 1)  # JSON's infinity: a float of Python
    with open(path, "w") as f:
        f.write(text)
    r = pltlab_cmd("import", path, "-o", str(tmp_path / "arc"))
    assert r.returncode == 0, r.stderr
    # the document, the script, the image and the failed stylesheet: one line for the four
    assert r.stdout.count("DevTools end time") == 1
    assert f"{path}: 4 entries: {devtools.FAR_END}" in r.stdout.splitlines()
    (page,) = load(tmp_path, json.loads(text.replace("1e400", "1e308")))
    assert all(o.end_ms >= o.start_ms >= 0 for o in page.objects)
    assert page.find("https://a.test/").end_ms == pytest.approx(170.0)  # its last data event


@pytest.mark.parametrize(
    "method,rid,value,needle",
    [
        ("Network.responseReceived", "2.1", T0 + 2e5, "Network.responseReceived at 201000.0 s is more than a day"),
        ("Network.requestWillBeSent", "2.1", T0 + 2e5, "Network.requestWillBeSent at 201000.0 s is more than a day"),
        ("Network.responseReceived", "2.1", 1e308, "timestamp 1e+308 is beyond any monotonic clock (at most 1e+10 s)"),
        ("Network.responseReceived", "2.1", T0 + 0.1, "Network.responseReceived at 1000.1 s is before the request"),
        ("Network.loadingFinished", "2.1", T0 + 0.1, "Network.loadingFinished (event 14) at 1000.1 s is before"),
        ("Network.dataReceived", "2.1", T0 + 0.1, "Network.dataReceived (event 13) at 1000.1 s is before"),
        ("Network.requestWillBeSent", "2.1", 2e10, "timestamp 20000000000.0 is beyond any monotonic clock"),
    ],
)
def test_times_out_of_place_are_refused(tmp_path, method, rid, value, needle):
    events = page_log()
    params(events, method, rid)["timestamp"] = value
    msg = refused(tmp_path, events, needle)
    assert "request '2.1'" in msg


def test_far_page_mark_is_refused(tmp_path):
    events = page_log()
    events[-1]["params"]["timestamp"] = T0 + 2e5
    refused(tmp_path, events, f"event {len(events) - 1} (Page.loadEventFired) at 201000.0 s is more than a day")


def test_response_after_the_end_is_chromes_and_kept(tmp_path):
    """Chrome's responseReceived may reach the log after loadingFinished (~0.3 s in real logs):
    not refused, and the wait is then no longer than the whole request."""
    events = page_log()
    params(events, "Network.responseReceived", "2.1")["timestamp"] = T0 + 0.4
    (page,) = load(tmp_path, events)
    js = page.find("https://a.test/app.js")
    assert js.end_ms == pytest.approx(320.0)
    assert js.extras["wait_ms"] == pytest.approx(120.0)  # sent +0.2, ended +0.32
    assert devtools.FAR_END not in page.extras["repairs"]


def test_absurd_resource_timing_is_not_used(tmp_path):
    events = page_log()
    params(events, "Network.responseReceived", "2.1")["response"]["timing"] = {
        "requestTime": T0 + 0.2,
        "sendStart": 1.0,
        "sendEnd": 2.0,
        "receiveHeadersEnd": 1e300,
    }
    (page,) = load(tmp_path, events)
    assert page.find("https://a.test/app.js").extras["wait_ms"] == pytest.approx(100.0)  # +0.2 -> +0.3
    assert page.extras["repairs"][devtools.BAD_TIMING] == 1


def test_wall_time_out_of_range_is_refused(tmp_path):
    events = page_log()
    events[1]["params"]["wallTime"] = -1_700_000_000.0
    refused(tmp_path, events, "event 1 (", "wallTime -1700000000.0 is not a date between 2000 and 2100")


# ---- the file's order ---------------------------------------------------------------------------


def test_events_in_reverse_file_order_give_the_same_page(tmp_path):
    (ordered,) = load(tmp_path, page_log(), name="a.devtoolslog.json")
    (reversed_,) = load(tmp_path, page_log()[::-1], name="b.devtoolslog.json")
    assert objects(reversed_) == objects(ordered)
    assert reversed_.on_load_ms == ordered.on_load_ms and reversed_.started == ordered.started
    # the document (both hops), the script, the image, the stylesheet: their events came first
    assert reversed_.extras["repairs"][devtools.ORDER] == 4
    assert devtools.ORDER not in ordered.extras["repairs"]


def test_untimed_cache_event_before_its_request_still_counts(tmp_path):
    events = page_log()
    cached = events.pop(where(events, "Network.requestServedFromCache", "2.2"))
    (page,) = load(tmp_path, [cached, *events])
    assert page.find("https://cdn.test/i.png").from_cache
    assert page.extras["repairs"][devtools.ORDER] == 1


def test_redirect_listed_before_its_request_is_read_in_time_order(tmp_path):
    events = page_log()
    hop2 = events.pop(3)  # the https hop of L1 (redirectResponse 301), now first in the file
    assert hop2["params"].get("redirectResponse")
    (page,) = load(tmp_path, [hop2, *events])
    first, doc = page.objects[0], page.find("https://a.test/")
    assert (first.url, first.status, first.redirect_url) == ("http://a.test/", 301, "https://a.test/")
    assert doc.status == 200 and doc.start_ms == pytest.approx(50.0)


def test_redirect_earlier_than_its_request_is_refused(tmp_path):
    events = page_log()
    events[3]["params"]["timestamp"] = T0 - 0.05  # the redirect that ends the first hop, before it
    refused(tmp_path, events, "request 'L1'", "the log's times contradict its redirects")


# ---- the document ---------------------------------------------------------------------------------


def test_document_without_response_is_refused(tmp_path):
    events = page_log()
    del events[where(events, "Network.responseReceived", "L1")]
    refused(
        tmp_path,
        events,
        "request 'L1' ('https://a.test/')",
        "the page's document never got a response (no Network.responseReceived)",
    )


def test_document_with_status_zero_is_refused(tmp_path):
    events = page_log()
    params(events, "Network.responseReceived", "L1")["response"]["status"] = 0
    refused(tmp_path, events, "request 'L1' ('https://a.test/')", "the page's document has status 0")


def test_document_request_missing_is_refused(tmp_path):
    events = [e for e in page_log() if not (e.get("method") == devtools.WBS and e["params"]["requestId"] == "L1")]
    refused(tmp_path, events, "request 'L1', the document of request", "is not in the log")


def test_document_request_without_timestamp_names_the_cause(tmp_path):
    events = page_log()
    for e in events[1], events[3]:
        del e["params"]["timestamp"]
    refused(tmp_path, events, "request 'L1'", "its Network.requestWillBeSent (event 1) has no timestamp")


def test_aborted_only_navigation_is_refused(tmp_path):
    events = [
        sent("L1", "https://a.test/", 0.0, "Document"),
        ev("Network.loadingFailed", requestId="L1", timestamp=T0 + 0.1, errorText="net::ERR_ABORTED"),
    ]
    refused(tmp_path, events, "request 'L1'", "failed in the browser (net::ERR_ABORTED)")


def test_aborted_navigation_then_a_page(tmp_path):
    events = [
        sent("L0", "https://a.test/old", 0.0, "Document", loader="L0"),
        ev("Network.loadingFailed", requestId="L0", timestamp=T0 + 0.01, errorText="net::ERR_ABORTED"),
    ] + page_log()
    for e in events[2:]:
        if "timestamp" in e.get("params", {}):
            e["params"]["timestamp"] += 0.02
    (page,) = load(tmp_path, events)
    assert page.url == "http://a.test/" and page.objects[0].url == "http://a.test/"
    assert "https://a.test/old" not in [o.url for o in page.objects]  # before the page: dropped
    assert page.extras["repairs"][devtools.EARLY] == 1
    assert page.extras["unreplayable"] == 2  # it and the failed stylesheet


def test_request_of_the_document_before_the_document_is_refused(tmp_path):
    events = page_log()
    params(events, devtools.WBS, "2.1")["timestamp"] = T0 - 1
    refused(tmp_path, events, "request '2.1'", "before the document that made it (request 'L1'")


def test_redirect_to_a_non_http_document_is_refused(tmp_path):
    events = page_log()
    events[3]["params"]["request"]["url"] = "ftp://a.test/"
    refused(tmp_path, events, "request 'L1' ('ftp://a.test/')", "the page's document is not an http(s) URL")


# ---- wrong types ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "method,rid,path,value,needle",
    [
        (devtools.WBS, "2.1", "timestamp", "1000.2", "timestamp '1000.2' is not a number"),
        ("Network.responseReceived", "2.1", "response.status", "200", "response.status '200' is not a number"),
        ("Network.responseReceived", "2.1", "response.status", 42, "response.status 42 is not an HTTP status"),
        ("Network.responseReceived", "2.1", "response", [], "response a list is not an object"),
        ("Network.dataReceived", "2.1", "dataLength", True, "dataLength True is not a number"),
        (devtools.WBS, "2.1", "request.url", 7, "request.url 7 is not a string"),
        (devtools.WBS, "2.1", "loaderId", {}, "loaderId a table is not a string"),
        ("Network.loadingFailed", "2.3", "errorText", 5, "errorText 5 is not a string"),
        ("Network.loadingFinished", "2.1", "timestamp", "x", "timestamp 'x' is not a number"),
    ],
)
def test_wrong_types_name_event_field_and_value(tmp_path, method, rid, path, value, needle):
    events = page_log()
    i = where(events, method, rid)
    p = events[i]["params"]
    *parents, key = path.split(".")
    for k in parents:
        p = p[k]
    p[key] = value
    refused(tmp_path, events, f"event {i} ({method}, request '{rid}'): {needle}")


def test_params_not_an_object_is_refused(tmp_path):
    events = page_log()
    i = where(events, "Network.dataReceived", "L1")
    events[i]["params"] = ["L1"]
    refused(tmp_path, events, f"event {i} (Network.dataReceived): params a list is not an object")


def test_infinite_size_is_refused(tmp_path):
    events = page_log()
    i = where(events, "Network.dataReceived", "2.1")
    events[i]["params"]["dataLength"] = 1e308
    path = write_log(tmp_path / "inf.devtoolslog.json", events)
    text = open(path).read().replace("1e+308", "1e400")
    with open(path, "w") as f:
        f.write(text)
    r = pltlab_cmd("import", path, "-o", str(tmp_path / "arc"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    (line,) = r.stderr.strip().splitlines()
    assert line.endswith(f"{path}: event {i} (Network.dataReceived, request '2.1'): dataLength inf is not finite")
    assert not (tmp_path / "arc").exists()


def test_redirect_response_that_is_no_redirect_is_refused(tmp_path):
    events = page_log()
    events[3]["params"]["redirectResponse"]["status"] = 200
    refused(tmp_path, events, "event 3 (", "redirectResponse.status 200 is not a redirect status (3xx)")


def test_har_reader_errors_name_the_request(tmp_path):
    events = page_log()
    params(events, devtools.WBS, "2.1")["request"]["url"] = "https://a.test:99999/app.js"
    msg = refused(tmp_path, events, "request '2.1': ")
    assert "entry" not in msg and "99999" in msg


def test_location_header_of_a_200_is_no_redirect(tmp_path):
    events = page_log()
    params(events, "Network.responseReceived", "2.1")["response"]["headers"] = {"Location": "https://a.test/x"}
    (page,) = load(tmp_path, events)
    assert page.find("https://a.test/app.js").redirect_url == ""


# ---- real logs --------------------------------------------------------------------------------------

needs_corpus = pytest.mark.skipif(not os.path.isdir(DEVTOOLS), reason=f"{DEVTOOLS} absent")
SQUOOSH = os.path.join(DEVTOOLS, "progressive-app.devtoolslog.json")


def _real():
    return devtools._unwrap(devtools.read_json(SQUOOSH))


@needs_corpus
def test_real_log_without_its_documents_response_is_refused(tmp_path):
    events = _real()
    doc = next(e["params"]["requestId"] for e in events if e["method"] == devtools.WBS)
    events = [e for e in events if not (e["method"] == "Network.responseReceived" and e["params"]["requestId"] == doc)]
    refused(tmp_path, events, f"request '{doc}' ('https://squoosh.app/')", "never got a response")


@needs_corpus
def test_real_log_in_reverse_order_is_the_same_page(tmp_path):
    (ordered,) = devtools.load_pages(SQUOOSH)
    (page,) = load(tmp_path, _real()[::-1])
    assert objects(page) == objects(ordered) and len(page.objects) == 23
    assert page.on_load_ms == ordered.on_load_ms
    assert devtools.ORDER in page.extras["repairs"] and devtools.ORDER not in ordered.extras["repairs"]
