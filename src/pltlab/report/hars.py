"""The HAR of a load for the report's waterfalls: the one stored with its run (Results.load_har,
written by pltlab.run.loadhar) when the results database has it, else one built from the run's
rows of the requests table (URL, host, connection and phase times; no headers), with the same
extension fields where it can (`_load.index`, `_new_connection`, `_tfo`)."""

import datetime
import mimetypes
import urllib.parse

from pltlab.experiments.results import Results
from pltlab.report import statistics as an

EPOCH = datetime.datetime(2000, 1, 1, tzinfo=datetime.UTC)  # a run without started_at


def _iso(t: datetime.datetime) -> str:
    return t.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _mime(url: str) -> str:
    path = urllib.parse.urlsplit(url).path
    if path.endswith("/") or "." not in path.rsplit("/", 1)[-1]:
        return "text/html"
    return mimetypes.guess_type(path)[0] or "application/octet-stream"


def _span(a, b) -> float:
    return max(b - a, 0.0) if a is not None and b is not None else -1


def _entry(req: dict, base: datetime.datetime, page_id: str) -> dict | None:
    ready, sent = req.get("ready_ms"), req.get("request_ms")
    last = req.get("last_byte_ms")
    if sent is None:
        sent = req.get("start_ms")
    if sent is None or last is None:
        return None  # never sent, or no answer: nothing to draw
    first = req.get("first_byte_ms") if req.get("first_byte_ms") is not None else last
    new = bool(req.get("new_conn")) and req.get("connect_start_ms") is not None
    c0, c1, t1 = req.get("connect_start_ms"), req.get("connect_end_ms"), req.get("tls_end_ms")
    start = ready if ready is not None else (c0 if new else sent)
    setup_start = c0 if new else sent
    ssl = _span(c1, t1) if new and t1 is not None else -1
    timings = {
        "blocked": _span(start, setup_start),
        "dns": -1,
        # HAR 1.2: connect includes ssl
        "connect": _span(c0, t1 if ssl >= 0 else c1) if new else -1,
        "ssl": ssl,
        "send": 0.0,
        "wait": _span(sent, first),
        "receive": _span(first, last),
    }
    if new and c1 is None:
        timings["connect"] = _span(c0, sent)
    proto = req.get("protocol") or "http/1.1"
    body = req.get("body_bytes") if req.get("body_bytes") is not None else (req.get("bytes") or 0)
    return {
        "pageref": page_id,
        "startedDateTime": _iso(base + datetime.timedelta(milliseconds=start)),
        "time": max(last - start, 0.0),
        "request": {
            "method": "GET",
            "url": req["url"],
            "httpVersion": proto,
            "cookies": [],
            "headers": [{"name": "Host", "value": req.get("host") or urllib.parse.urlsplit(req["url"]).netloc}],
            "queryString": [],
            "headersSize": -1,
            "bodySize": 0,
        },
        "response": {
            "status": req.get("status") or 0,
            "statusText": "",
            "httpVersion": proto,
            "cookies": [],
            "headers": [],
            "content": {"size": body, "mimeType": _mime(req["url"])},
            "redirectURL": "",
            "headersSize": req.get("header_bytes") if req.get("header_bytes") is not None else -1,
            "bodySize": req.get("transfer_bytes") if req.get("transfer_bytes") is not None else body,
        },
        "cache": {},
        "timings": timings,
        "connection": str(req.get("conn_id")) if req.get("conn_id") is not None else "",
        "_load": {"index": req.get("idx", req.get("index"))},
        "_new_connection": bool(req.get("new_conn")),
        # (requests.tfo: whether its connection used TFO; the waterfall marks the openers)
        "_tfo": bool(req.get("tfo")),
        "_tls_handshake": req.get("tls_handshake"),
        "_early_data": req.get("early_data"),
    }


def from_requests(run: dict, requests: list[dict]) -> dict:
    """A HAR 1.2 of one load from its requests rows (times in ms since navigation start)."""
    base = (
        datetime.datetime.fromtimestamp(run["started_at"], datetime.UTC) if run.get("started_at") is not None else EPOCH
    )
    page_id = f"run_{run['id']}"
    entries = [e for r in requests if (e := _entry(r, base, page_id))]
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "pltlab (from the requests table)", "version": "1"},
            "pages": [
                {
                    "id": page_id,
                    "title": run.get("page_url") or run.get("page") or page_id,
                    "startedDateTime": _iso(base),
                    "pageTimings": {"onLoad": run.get("plt_ms") if run.get("plt_ms") is not None else -1},
                }
            ],
            "entries": entries,
        }
    }


def for_runs(out_dir: str, runs: list[dict]) -> dict[int, dict]:
    """run id -> its HAR (the stored one where there is one)."""
    stored: dict[int, dict] = {}
    res = Results(out_dir)  # (an older folder gains the hars table, empty)
    try:
        for r in runs:
            har = res.load_har(r["id"])
            if har:
                stored[r["id"]] = har
    finally:
        res.close()
    missing = [r for r in runs if r["id"] not in stored]
    reqs = an.load_requests(out_dir, [r["id"] for r in missing]) if missing else {}
    return {r["id"]: stored.get(r["id"]) or from_requests(r, reqs.get(r["id"], [])) for r in runs}


def slim(har: dict) -> dict:
    """The HAR without response bodies (content.text): the report shows timings and headers."""
    log = har.get("log", har)
    entries = []
    for e in log.get("entries", []):
        content = {k: v for k, v in (e.get("response", {}).get("content") or {}).items() if k != "text"}
        entries.append({**e, "response": {**e.get("response", {}), "content": content}})
    return {"log": {**log, "entries": entries}}
