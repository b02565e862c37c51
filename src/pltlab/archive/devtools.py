"""DevTools logs -> pages. A DevTools log is the Chrome DevTools Protocol events of a page load
(Network.*, Page.*) as Lighthouse (`*.devtoolslog.json`) and WebPageTest (`*_devtools.json.gz`)
store them: a JSON list of {"method", "params"[, "sessionId", "targetType"]}, gzipped or not.
{"events"|"log"|"DevtoolsLog": [...]} and Lighthouse's {"devtoolsLogs": {"defaultPass": [...]}}
wrappers are accepted too.

The events become a HAR 1.2 document as Chrome's own HAR export writes it (one entry per hop of a
redirect chain, `_transferSize`, `_fromCache`, `_initiator`), which `har_to_pages` reads like any
other HAR. One page per top-level navigation (a main-frame document request with a new loader).

Hostile or damaged logs: a field of the wrong type, a time that is no time of the load, a request
whose events contradict one another, or a page whose document never got a response is one
PltError naming the file and the event or request. The file's order of events does not matter:
requests are taken in time order, and every other event of a request belongs to its chain's last
hop (a redirect's hops end with the next requestWillBeSent; only the last gets response, data and
end events), wherever the file lists it."""

from __future__ import annotations

import base64
import binascii
import gzip
import math
import os
import re
import statistics
import zlib
from bisect import bisect_right
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

from pltlab.archive import deps, urls
from pltlab.archive.har import har_to_pages, parse_json
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.units import show

SKIPPED = "DevTools events without the fields of their kind: skipped"
LIGHTRIDER = "Lightrider proxy responses: recorded encoding, length and protocol restored"
NO_DATA = "DevTools responses without data events: body size from the transfer size"
ORDER = "DevTools events listed before the request they belong to: read in timestamp order"
FAR_END = "DevTools end time more than a day from the load's requests: the request's last other event time used"
BAD_TIMING = "DevTools resource timing with absurd values: wait and receive from the event times"
EARLY = "requests started before the page's navigation (not part of its load): dropped"

WBS = "Network.requestWillBeSent"
DAY_S = 86400.0  # the events of one log lie within a day of one another
MAX_CLOCK_S = 1e10  # CDP timestamps: seconds of a monotonic clock (since boot)
WALL_RANGE = (946684800.0, 4102444800.0)  # wallTime: seconds since 1970, 2000-01-01 .. 2100-01-01

# File names read as DevTools logs without looking inside (a plain .json is sniffed).
NAME_SUFFIXES = (".devtoolslog.json", ".devtoolslog.json.gz", "_devtools.json", "_devtools.json.gz")
WRAPPER_KEYS = ("events", "log", "DevtoolsLog", "devtoolsLog", "devtoolsLogs")
# Lightrider (Lighthouse behind Google's proxy) decodes bodies and reports the original wire
# facts in these headers, which the origin never sent.
LR_HEADERS = (
    "x-totalfetchedsize",
    "x-protocolish2",
    "x-original-content-encoding",
    "x-original-content-length",
    "x-tcpms",
    "x-sslms",
    "x-requestms",
    "x-responsems",
    "x-totalms",
)

# CDP ResourceTiming phases (ms from its requestTime; -1: the phase did not happen)
TIMING_KEYS = (
    "dnsStart",
    "dnsEnd",
    "connectStart",
    "connectEnd",
    "sslStart",
    "sslEnd",
    "sendStart",
    "sendEnd",
    "receiveHeadersEnd",
)


def is_log_name(path: str) -> bool:
    """A name that says DevTools log (a directory listing picks these up)."""
    return path.lower().endswith(NAME_SUFFIXES)


def claims(path: str, parse: Callable[[], object] | None = None) -> bool:
    """Whether `path` is to be read as a DevTools log: by its name, any `.json.gz`, or a `.json`
    whose content is a list of CDP events (a HAR, even named .json, stays a HAR). ``parse``: what
    reads the file's JSON (the caller's, so that the reader after this one need not parse it
    again); by default `read_json(path)`."""
    low = path.lower()
    if is_log_name(low) or low.endswith(".json.gz"):
        return True
    if not low.endswith(".json") or not os.path.isfile(path):
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(4096).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        return False
    if head.startswith(b"\x1f\x8b") or head.startswith(b"["):
        return True  # a HAR is never gzipped-as-.json nor a list: let load_pages say what is wrong
    if not head.startswith(b"{"):
        return False
    try:
        doc = parse() if parse is not None else read_json(path)
    except PltError:
        return False  # not JSON at all: the HAR reader reports it
    return _unwrap(doc) is not None


def load_pages(path: str, doc=None) -> list[Page]:
    """Every page of a DevTools log file (``doc``: its JSON if already parsed), initiators
    completed as the HAR importer does."""
    events = _unwrap(read_json(path) if doc is None else doc)
    if events is None:
        raise PltError(f'{path}: not a DevTools log (expected a JSON list of events with "method" and "params")')
    doc = to_har(events, path)
    try:
        pages = har_to_pages(doc, path)
    except PltError as e:  # it names an entry of `doc` by its index: name the request instead
        m = re.match(re.escape(path) + r": entry (\d+)", str(e))
        if m is None:
            raise
        rid = doc["log"]["entries"][int(m.group(1))]["_requestId"]
        raise PltError(f"{path}: request {show(rid)}{str(e)[m.end() :]}") from None
    for p in pages:
        deps.complete(p)
    return pages


def read_json(path: str):
    """A file's JSON document, gzip-compressed or not; any problem is one PltError naming it."""
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except OSError as e:
        raise PltError(f"{path}: cannot read: {e.strerror}") from None
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise PltError(f"{path}: corrupt gzip data ({e})") from None
    elif path.lower().endswith(".gz"):
        raise PltError(f"{path}: not gzip data (the name ends in .gz)")
    return parse_json(raw, path, "JSON")


def _is_event(e) -> bool:
    return isinstance(e, dict) and isinstance(e.get("method"), str) and "params" in e


def _unwrap(doc) -> list | None:
    """The event list of a log (or of a known wrapper); None if `doc` is something else."""
    if isinstance(doc, dict):
        for key in WRAPPER_KEYS:
            v = doc.get(key)
            if isinstance(v, dict):
                v = v.get("defaultPass")
            if isinstance(v, list):
                doc = v
                break
    if isinstance(doc, list) and any(_is_event(e) for e in doc):
        return doc
    return None


# ---- events -> requests ----------------------------------------------------------------------


def _isnum(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _num(x) -> bool:
    return _isnum(x) and math.isfinite(x)


def _wrong(kind: str, v) -> str:
    """What is wrong with a present field of `kind` ("" if nothing)."""
    if kind == "str":
        return "" if isinstance(v, str) else "is not a string"
    if kind == "obj":
        return "" if isinstance(v, dict) else "is not an object"
    if kind == "headers":
        return "" if isinstance(v, (dict, list)) else "is not an object of headers"
    if not _isnum(v):
        return "is not a number"
    if kind == "end":
        return ""  # a far or infinite end time is repaired (_check_times)
    if not math.isfinite(v):
        return "is not finite"
    if kind == "time" and not 0 <= v <= MAX_CLOCK_S:
        return "is negative" if v < 0 else f"is beyond any monotonic clock (at most {MAX_CLOCK_S:g} s)"
    if kind == "wall" and not WALL_RANGE[0] <= v <= WALL_RANGE[1]:
        return "is not a date between 2000 and 2100 (seconds since 1970)"
    if kind == "status" and not (v == int(v) and (v == 0 or 100 <= v <= 999)):
        return "is not an HTTP status"
    if kind == "redirect" and not (v == int(v) and 300 <= v <= 399):
        return "is not a redirect status (3xx)"
    return ""


def _response_fields(key: str, status: str) -> tuple:
    timing = tuple((f"{key}.timing.{k}", "num") for k in ("requestTime", *TIMING_KEYS))
    return (
        (key, "obj"),
        (f"{key}.status", status),
        (f"{key}.headers", "headers"),
        (f"{key}.headersText", "str"),
        (f"{key}.encodedDataLength", "num"),
        (f"{key}.protocol", "str"),
        (f"{key}.mimeType", "str"),
        (f"{key}.timing", "obj"),
        *timing,
    )


# The fields read from each kind of event, checked where present (null counts as absent; an
# absent field skips the event, counted as SKIPPED).
_FIELDS = {
    WBS: (
        ("requestId", "str"),
        ("timestamp", "time"),
        ("wallTime", "wall"),
        ("request", "obj"),
        ("request.url", "str"),
        ("request.method", "str"),
        ("request.headers", "headers"),
        ("request.postData", "str"),
        ("type", "str"),
        ("frameId", "str"),
        ("loaderId", "str"),
        ("initiator", "obj"),
        *_response_fields("redirectResponse", "redirect"),
    ),
    "Network.responseReceived": (("requestId", "str"), ("timestamp", "time"), *_response_fields("response", "status")),
    "Network.dataReceived": (
        ("requestId", "str"),
        ("timestamp", "time"),
        ("dataLength", "num"),
        ("encodedDataLength", "num"),
    ),
    "Network.loadingFinished": (("requestId", "str"), ("timestamp", "end"), ("encodedDataLength", "num")),
    "Network.loadingFailed": (("requestId", "str"), ("timestamp", "end"), ("errorText", "str")),
    "Network.requestServedFromCache": (("requestId", "str"),),
    "Network.requestWillBeSentExtraInfo": (("requestId", "str"), ("headers", "headers")),
    "Network.responseReceivedExtraInfo": (("requestId", "str"), ("headers", "headers"), ("headersText", "str")),
    "Page.frameNavigated": (("frame", "obj"), ("frame.id", "str"), ("frame.parentId", "str")),
    "Page.loadEventFired": (("timestamp", "time"),),
    "Page.domContentEventFired": (("timestamp", "time"),),
}


def _event_name(i: int, method: str, p) -> str:
    rid = p.get("requestId") if isinstance(p, dict) else None
    return f"event {i} ({method}, request {show(rid)})" if isinstance(rid, str) else f"event {i} ({method})"


def _check_fields(i: int, e: dict, src: str) -> None:
    """One PltError for the first field of the wrong type in an event of a kind this reads."""
    method, p = e["method"], e["params"]
    if not isinstance(p, dict):
        raise PltError(f"{src}: {_event_name(i, method, p)}: params {show(p)} is not an object")
    for path, kind in _FIELDS[method]:
        v, parts = p, path.split(".")
        for k in parts:
            v = v.get(k) if isinstance(v, dict) else None
        if v is not None and (why := _wrong(kind, v)):
            raise PltError(f"{src}: {_event_name(i, method, p)}: {path} {show(v)} {why}")


def _who(hop) -> str:
    return f"request {show(hop.rid)} ({show(hop.url, 100)})"


@dataclass
class _Hop:
    """One request/response exchange; a redirect chain (one requestId) is several hops."""

    rid: str
    url: str
    method: str
    req_headers: object
    post: bytes | None
    start: float  # monotonic seconds (CDP timestamp)
    initiator: dict
    rtype: str
    frame: str
    loader: str
    target: str | None  # session target type: page, iframe, worker, ...
    priority: str
    first: bool  # the chain's first hop (not a redirect target)
    idx: int  # index of its requestWillBeSent in the file
    response: dict | None = None
    resp_ts: float | None = None
    end: float | None = None
    end_ev: str = ""  # the event that gave `end`, for messages
    finished: bool = False
    has_extra: bool | None = None  # (redirect)hasExtraInfo: a responseReceivedExtraInfo exists
    transfer: int | None = None  # loadingFinished encodedDataLength (head + body)
    enc_sum: int = 0  # encodedDataLength accumulated from response and data events
    decoded: int = 0
    data_events: int = 0
    data_ts: list = field(default_factory=list)  # (timestamp, event index) of dataReceived
    from_cache: bool = False
    error: str = ""
    redirect_to: str = ""
    req_extra: dict | None = None
    resp_extra: dict | None = None
    repairs: dict = field(default_factory=dict)


class _Log:
    def __init__(self, src: str):
        self.src = src
        self.hops: list[_Hop] = []
        self.cur: dict[str, _Hop] = {}  # requestId -> its latest hop
        self.chains: dict[str, list[_Hop]] = {}
        self.req_extra: dict[str, list[dict]] = {}
        self.resp_extra: dict[str, list[dict]] = {}
        self.nav_frame: str | None = None  # from Page.frameNavigated without parentId
        self.loads: list[tuple[float, int]] = []  # (timestamp, event index)
        self.dcls: list[tuple[float, int]] = []
        self.wall_base: float | None = None  # wallTime - timestamp
        self.skipped = 0
        self.lost: dict[str, str] = {}  # requestId -> why its requestWillBeSent was skipped
        self.headless: set[str] = set()  # requestIds whose earliest hop came with a redirectResponse
        self.at = 0  # index of the event being read

    def feed(self, i: int, e: dict) -> None:
        self.at = i
        if _HANDLERS[e["method"]](self, e["params"], e.get("targetType")) is False:
            self.skipped += 1

    def _hop(self, p) -> _Hop | None | bool:
        """The current hop of the event's request; False: no requestId (a malformed event)."""
        rid = p.get("requestId")
        if not isinstance(rid, str):
            return False
        hop = self.cur.get(rid)
        if hop is not None and self.at < hop.idx:  # file order would have lost it or misplaced it
            self.chains[rid][0].repairs[ORDER] = 1
        return hop

    def will_be_sent(self, p, target):
        rid, req, ts = p.get("requestId"), p.get("request"), p.get("timestamp")
        missing = next(
            (
                name
                for name, ok in (
                    ("requestId", isinstance(rid, str)),
                    ("request", isinstance(req, dict)),
                    ("request.url", isinstance(req, dict) and bool(req.get("url"))),
                    ("timestamp", _num(ts)),
                )
                if not ok
            ),
            None,
        )
        if missing is not None:
            if isinstance(rid, str):
                self.lost.setdefault(rid, f"its {WBS} (event {self.at}) has no {missing}")
            return False
        if self.wall_base is None and _num(p.get("wallTime")):
            self.wall_base = p["wallTime"] - ts
        prev = self.cur.get(rid)
        rr = p.get("redirectResponse")
        if prev is not None:
            if rr is None:
                if rid in self.headless:
                    raise PltError(
                        f"{self.src}: {_who(prev)}: event {self.at} ({WBS}) is later than the redirect "
                        "that ends it: the log's times contradict its redirects"
                    )
                return None  # announced twice: the first one stands (as in Lighthouse)
            prev.response, prev.resp_ts, prev.end, prev.finished = rr, ts, ts, True
            prev.has_extra = p.get("redirectHasExtraInfo")
            prev.redirect_to = req["url"]
            if _num(rr.get("encodedDataLength")) and rr["encodedDataLength"] >= 0:
                prev.transfer = int(rr["encodedDataLength"])
            prev.from_cache = prev.from_cache or _cached(rr)
        elif rr is not None:
            self.headless.add(rid)
        init = p.get("initiator") or {"type": "other"}
        hop = _Hop(
            rid=rid,
            url=req["url"],
            method=req.get("method") or "GET",
            req_headers=req.get("headers"),
            post=_post_data(req),
            start=float(ts),
            initiator=init,
            rtype=p.get("type") or "",
            frame=p.get("frameId") or "",
            loader=p.get("loaderId") or "",
            target=target,
            priority=str(req.get("initialPriority") or ""),
            first=prev is None,
            idx=self.at,
        )
        self.cur[rid] = hop
        self.chains.setdefault(rid, []).append(hop)
        self.hops.append(hop)
        return None

    def response_received(self, p, target):
        hop, resp = self._hop(p), p.get("response")
        if hop is False or not isinstance(resp, dict) or resp.get("status") is None:
            return False
        if hop is None:
            return None
        hop.response = resp
        hop.resp_ts = p["timestamp"] if _num(p.get("timestamp")) else hop.start
        hop.has_extra = p.get("hasExtraInfo")
        if _num(resp.get("encodedDataLength")) and resp["encodedDataLength"] > 0:
            hop.enc_sum = int(resp["encodedDataLength"])
        hop.from_cache = hop.from_cache or _cached(resp)
        return None

    def data_received(self, p, target):
        hop = self._hop(p)
        if hop is False or not _num(p.get("dataLength")):
            return False
        if hop is not None:
            hop.decoded += max(0, int(p["dataLength"]))
            hop.data_events += 1
            if _num(p.get("timestamp")):
                hop.data_ts.append((float(p["timestamp"]), self.at))
            if _num(p.get("encodedDataLength")) and p["encodedDataLength"] > 0:
                hop.enc_sum += int(p["encodedDataLength"])
        return None

    def loading_finished(self, p, target):
        hop = self._hop(p)
        if hop is False or not _isnum(p.get("timestamp")):
            return False
        if hop is not None and not hop.finished:  # duplicates happen: the first one stands
            hop.finished, hop.end = True, float(p["timestamp"])
            hop.end_ev = f"Network.loadingFinished (event {self.at})"
            if _num(p.get("encodedDataLength")) and p["encodedDataLength"] >= 0:
                hop.transfer = int(p["encodedDataLength"])
        return None

    def loading_failed(self, p, target):
        hop = self._hop(p)
        if hop is False:
            return False
        if hop is not None and not hop.finished:
            hop.finished = True
            hop.end = float(p["timestamp"]) if _isnum(p.get("timestamp")) else None
            hop.end_ev = f"Network.loadingFailed (event {self.at})"
            hop.error = p.get("errorText") or "failed"
        return None

    def served_from_cache(self, p, target):
        hop = self._hop(p)
        if hop is False:
            return False
        if hop is not None:
            hop.from_cache = True
        return None

    def request_extra(self, p, target):
        return self._keep_extra(self.req_extra, p)

    def response_extra(self, p, target):
        return self._keep_extra(self.resp_extra, p)

    @staticmethod
    def _keep_extra(store: dict, p):
        rid = p.get("requestId")
        if not isinstance(rid, str):
            return False
        store.setdefault(rid, []).append(p)  # may come before requestWillBeSent: kept by id
        return None

    def frame_navigated(self, p, target):
        frame = p.get("frame")
        if not isinstance(frame, dict) or not isinstance(frame.get("id"), str):
            return False
        if self.nav_frame is None and not frame.get("parentId") and target in (None, "page"):
            self.nav_frame = frame["id"]
        return None

    def load_event(self, p, target):
        return self._keep_mark(self.loads, p, target)

    def dcl_event(self, p, target):
        return self._keep_mark(self.dcls, p, target)

    def _keep_mark(self, store: list, p, target):
        if not _num(p.get("timestamp")):
            return False
        if target in (None, "page"):  # not an out-of-process iframe's own load
            store.append((float(p["timestamp"]), self.at))
        return None


# method -> _Log handler(params, targetType); a handler returns False for a malformed event.
_HANDLERS = {
    WBS: _Log.will_be_sent,
    "Network.responseReceived": _Log.response_received,
    "Network.dataReceived": _Log.data_received,
    "Network.loadingFinished": _Log.loading_finished,
    "Network.loadingFailed": _Log.loading_failed,
    "Network.requestServedFromCache": _Log.served_from_cache,
    "Network.requestWillBeSentExtraInfo": _Log.request_extra,
    "Network.responseReceivedExtraInfo": _Log.response_extra,
    "Page.frameNavigated": _Log.frame_navigated,
    "Page.loadEventFired": _Log.load_event,
    "Page.domContentEventFired": _Log.dcl_event,
}


def _read_events(events: list, src: str) -> _Log:
    """The requests of a log. Its requestWillBeSent events are read first, in time order (stable:
    ties keep the file's order), so that a redirect's hop follows the hop it redirects; then every
    other event in the file's order (the untimed ones, ExtraInfo and requestServedFromCache, are
    matched by requestId; the others go to their chain's last hop)."""
    log = _Log(src)
    sends, rest = [], []
    for i, e in enumerate(events):
        if not _is_event(e) or (e["method"] not in _HANDLERS and not isinstance(e["params"], dict)):
            log.skipped += 1
        elif e["method"] in _HANDLERS:
            _check_fields(i, e, src)
            (sends if e["method"] == WBS else rest).append((i, e))
    sends.sort(key=lambda x: x[1]["params"]["timestamp"] if _num(x[1]["params"].get("timestamp")) else math.inf)
    for i, e in sends + rest:
        log.feed(i, e)
    for chain in log.chains.values():
        if any(a.idx > b.idx for a, b in zip(chain, chain[1:])):  # redirects listed out of order
            chain[0].repairs[ORDER] = 1
    return log


def _cached(resp: dict) -> bool:
    return any(resp.get(k) for k in ("fromDiskCache", "fromServiceWorker", "fromPrefetchCache"))


def _post_data(req: dict) -> bytes | None:
    if isinstance(req.get("postData"), str):
        return req["postData"].encode("utf-8")
    entries = req.get("postDataEntries")
    if isinstance(entries, list) and entries:
        try:
            return b"".join(base64.b64decode(str(x.get("bytes", ""))) for x in entries if isinstance(x, dict))
        except (binascii.Error, ValueError):
            return None
    return None


def _match_extras(log: _Log) -> None:
    """Pair each hop with its ExtraInfo events: responses in order, skipping hops that announced
    none (Chrome's internal HSTS redirect) and statuses that differ; requests from the chain's end
    (hops that never went to the network, e.g. the HSTS redirect, come first)."""
    for rid, chain in log.chains.items():
        resp_x, j = log.resp_extra.get(rid, []), 0
        for hop in chain:
            if hop.response is None or hop.has_extra is False:
                continue
            k = next(
                (k for k in range(j, len(resp_x)) if resp_x[k].get("statusCode") in (None, hop.response.get("status"))),
                None,
            )
            if k is not None:
                hop.resp_extra, j = resp_x[k], k + 1
        for hop, x in zip(reversed(chain), reversed(log.req_extra.get(rid, []))):
            hop.req_extra = x


# ---- requests -> HAR -------------------------------------------------------------------------


def _headers(h) -> list[dict]:
    """CDP headers ({name: value}, repeated headers joined by newlines) as HAR headers."""
    if isinstance(h, dict):
        return [{"name": str(k), "value": v} for k, val in h.items() for v in str(val).split("\n")]
    if isinstance(h, list):
        return [{"name": str(x.get("name", "")), "value": str(x.get("value", ""))} for x in h if isinstance(x, dict)]
    return []


def _iso(seconds: float) -> str:
    t = datetime.fromtimestamp(seconds, UTC)
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _timings(hop: _Hop, end: float) -> dict:
    """HAR timings in ms, as Chrome's HAR export derives them from the resource timing."""
    t = (hop.response or {}).get("timing")
    out = {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": 0, "receive": 0}
    if (
        isinstance(t, dict)
        and _num(t.get("requestTime"))
        and t["requestTime"] > 0
        and _num(t.get("receiveHeadersEnd"))
        and t["receiveHeadersEnd"] >= 0
        and _sane_timing(t, hop)
    ):
        g = {k: (t[k] if _num(t.get(k)) else -1) for k in TIMING_KEYS}
        first = min((g[k] for k in ("dnsStart", "connectStart", "sendStart") if g[k] >= 0), default=0)
        out["blocked"] = max(0.0, (t["requestTime"] - hop.start) * 1000) + first
        for name, a, b in (
            ("dns", "dnsStart", "dnsEnd"),
            ("connect", "connectStart", "connectEnd"),
            ("ssl", "sslStart", "sslEnd"),
        ):
            if g[a] >= 0 and g[b] >= g[a]:
                out[name] = g[b] - g[a]
        if g["sendStart"] >= 0 and g["sendEnd"] >= g["sendStart"]:
            out["send"] = g["sendEnd"] - g["sendStart"]
        sent = max(g["sendEnd"], g["connectEnd"], g["dnsEnd"], first, 0)
        out["wait"] = max(0.0, g["receiveHeadersEnd"] - sent)
        out["receive"] = max(0.0, (end - t["requestTime"]) * 1000 - g["receiveHeadersEnd"])
    else:
        got = hop.resp_ts if hop.resp_ts is not None else end
        out["wait"] = max(0.0, (got - hop.start) * 1000)
        out["receive"] = max(0.0, (end - got) * 1000)
    return out


def _sane_timing(t: dict, hop: _Hop) -> bool:
    """A resource timing within a day of its request (its phases: ms from requestTime); else
    counted and not used."""
    ok = abs(t["requestTime"] - hop.start) <= DAY_S and all(
        -1 <= t[k] <= DAY_S * 1000 for k in TIMING_KEYS if _num(t.get(k))
    )
    if not ok:
        hop.repairs[BAD_TIMING] = 1
    return ok


def _lightrider(headers: list[dict], hop: _Hop) -> tuple[list[dict], int | None, int, str]:
    """Lightrider's proxy decodes bodies: restore the recorded Content-Encoding/-Length and
    protocol from its X- headers and drop them. Returns (headers, transfer size or None, header
    size or -1, protocol or "")."""
    x = {h["name"].lower(): h["value"] for h in headers if h["name"].lower() in LR_HEADERS}
    if "x-totalfetchedsize" not in x:
        return headers, None, -1, ""
    enc, length = x.get("x-original-content-encoding"), x.get("x-original-content-length")
    out = [
        h
        for h in headers
        if h["name"].lower() not in LR_HEADERS
        and not (enc and h["name"].lower() in ("content-length", "content-encoding"))
    ]
    if enc:
        out.append({"name": "Content-Encoding", "value": enc})
        if length:
            out.append({"name": "Content-Length", "value": length})
    body = length or next((h["value"] for h in out if h["name"].lower() == "content-length"), None)
    try:
        transfer = int(x["x-totalfetchedsize"])
        head = transfer - int(body) if body is not None else -1
    except ValueError:
        transfer, head = None, -1
    hop.repairs[LIGHTRIDER] = 1
    return out, transfer, max(-1, head), "h2" if x.get("x-protocolish2", "").lower() == "true" else ""


def _sizes(hop: _Hop, resp: dict, transfer: int, head_size: int) -> tuple[int, int, int]:
    """(content.size, headersSize, bodySize) of a hop; head_size -1 when no source knew it."""
    if head_size < 0:  # the bytes received up to the response head (Lighthouse's header transfer
        # size; under HTTP/2 the HPACK-coded head), when it is part of what was transferred
        head = resp.get("encodedDataLength")
        if _num(head) and 0 < head <= transfer and not hop.from_cache:
            head_size = int(head)
    size = hop.decoded
    status = int(resp.get("status") or 0) if hop.response is not None else 0
    if (
        not hop.data_events
        and transfer > 0
        and status >= 200
        and status not in (204, 304)
        and not hop.redirect_to
        and not hop.error
        and hop.method != "HEAD"
    ):
        size = max(0, transfer - max(0, head_size))  # a trimmed log: what came after the head
        if size:
            hop.repairs[NO_DATA] = 1
    if hop.from_cache or status == 304:
        return size, head_size, 0
    return size, head_size, max(0, transfer - head_size) if head_size >= 0 else -1


def _status(hop: _Hop) -> int | None:
    """The hop's HTTP status; 0: failed in the browser; None: no response recorded (the HAR
    reader says which of the two it dropped)."""
    if hop.response is not None:
        return int(hop.response.get("status") or 0)
    return 0 if hop.error else None


def _entry(hop: _Hop, wall_base: float, pageref: str) -> dict:
    resp = hop.response or {}
    end = hop.end if hop.end is not None else (hop.resp_ts if hop.resp_ts is not None else hop.start)
    headers = _headers(
        hop.resp_extra["headers"] if hop.resp_extra and hop.resp_extra.get("headers") else resp.get("headers")
    )
    headers, lr_transfer, head_size, lr_protocol = _lightrider(headers, hop)
    protocol = lr_protocol or str(resp.get("protocol") or "")
    transfer = lr_transfer if lr_transfer is not None else hop.transfer if hop.transfer is not None else hop.enc_sum
    text = (hop.resp_extra or {}).get("headersText") or resp.get("headersText")
    if isinstance(text, str) and text:
        head_size = len(text.encode("utf-8"))
    size, head_size, body_size = _sizes(hop, resp, transfer, head_size)
    status = _status(hop)
    redirect = hop.redirect_to
    if not redirect and status is not None and 300 <= status <= 399:  # a Location elsewhere is no redirect
        redirect = next((h["value"] for h in headers if h["name"].lower() == "location"), "")
    req_headers = _headers(
        hop.req_extra["headers"] if hop.req_extra and hop.req_extra.get("headers") else hop.req_headers
    )
    request = {
        "method": hop.method,
        "url": hop.url,
        "httpVersion": protocol,
        "headers": req_headers,
        "queryString": [],
        "cookies": [],
        "headersSize": -1,
        "bodySize": len(hop.post) if hop.post is not None else 0,
    }
    if hop.post is not None:
        ctype = next((h["value"] for h in req_headers if h["name"].lower() == "content-type"), "")
        request["postData"] = {"mimeType": ctype, "text": hop.post.decode("utf-8", "replace")}
    e = {
        "pageref": pageref,
        "startedDateTime": _iso(wall_base + hop.start),
        "time": max(0.0, (end - hop.start) * 1000),
        "request": request,
        "response": {
            "status": status,
            "statusText": str(resp.get("statusText") or ""),
            "httpVersion": protocol,
            "headers": headers,
            "cookies": [],
            "content": {"size": size, "mimeType": str(resp.get("mimeType") or "")},
            "redirectURL": redirect,
            "headersSize": head_size,
            "bodySize": body_size,
            "_transferSize": transfer,
        },
        "cache": {},
        "timings": _timings(hop, end),
        "serverIPAddress": str(resp.get("remoteIPAddress") or "").strip("[]"),
        "_initiator": hop.initiator,
        "_resourceType": hop.rtype.lower(),
        "_priority": hop.priority,
        "_fromCache": hop.from_cache,
        "_requestId": hop.rid,
    }
    if _num(resp.get("connectionId")):
        e["connection"] = str(resp["connectionId"])
    if hop.error:
        e["response"]["_error"] = hop.error
    return e


def _check_times(log: _Log) -> None:
    """Every time within a day of the log's requests (the median requestWillBeSent) and every
    request's in order: sent <= response, data; sent <= end. An end (loadingFinished/Failed)
    that is no time of the load (1e308, inf, 0) becomes the request's last other event time,
    counted; any other time out of place refuses the log. A response after the end is Chrome's
    (its events reach the log through different processes, up to ~0.3 s late): the response
    time is taken as the end, as Lighthouse does."""
    src, anchor = log.src, statistics.median_low(h.start for h in log.hops)

    def far(t: float) -> bool:
        return not math.isfinite(t) or abs(t - anchor) > DAY_S

    def refuse(what: str, t: float, why: str):
        raise PltError(f"{src}: {what} at {show(t)} s {why}")

    away = f"is more than a day from the log's requests (median {show(anchor)} s)"
    for h in log.hops:
        if far(h.start):
            refuse(f"{_who(h)}: {WBS}", h.start, away)
    for h in log.hops:  # a redirect's response time is the next hop's start: in order already
        times = [(h.resp_ts, "Network.responseReceived")] if h.resp_ts is not None else []
        times += [(t, f"Network.dataReceived (event {i})") for t, i in h.data_ts]
        for t, what in times:
            if far(t):
                refuse(f"{_who(h)}: {what}", t, away)
            if t < h.start:
                refuse(f"{_who(h)}: {what}", t, f"is before the request was sent ({show(h.start)} s)")
        if h.end is not None and far(h.end):
            h.end = max(t for t in (h.start, h.resp_ts, *(t for t, _ in h.data_ts)) if t is not None)
            h.repairs[FAR_END] = 1
        elif h.end is not None and h.end < h.start:
            refuse(
                f"{_who(h)}: {h.end_ev or 'its redirect'}", h.end, f"is before the request was sent ({show(h.start)} s)"
            )
        if h.end is not None and h.resp_ts is not None and h.resp_ts > h.end:
            h.resp_ts = h.end
    for marks, method in ((log.loads, "Page.loadEventFired"), (log.dcls, "Page.domContentEventFired")):
        for t, i in marks:
            if far(t):
                refuse(f"event {i} ({method})", t, away)


def _navigations(log: _Log) -> list[_Hop]:
    """First hops of top-level navigations, in time order: main-frame document requests with a
    new loader. A navigation the browser reports failed starts no page (aborted); one whose
    document never got a response refuses the log, as does a main-frame request whose document
    is not in the log: no page is replayed with another object as its document."""
    docs = [
        h
        for h in log.hops  # a navigation's requestId is its loaderId
        if h.first and (h.rtype == "Document" or (h.loader and h.rid == h.loader))
    ]
    main = log.nav_frame or next((h.frame for h in docs if h.frame), None)
    lost = next((h for h in log.hops if h.loader and h.loader not in log.chains and main in (None, h.frame)), None)
    if lost is not None:
        why = log.lost.get(lost.loader, f"no {WBS} with that requestId")
        raise PltError(
            f"{log.src}: request {show(lost.loader)}, the document of {_who(lost)}, is not in the log ({why})"
        )
    navs, loaders, aborted = [], set(), None
    for h in docs:
        if h.frame != (main or "") or (h.loader and h.loader in loaders):
            continue
        last = log.chains[h.rid][-1]
        if last.response is None and last.error:
            aborted = aborted or last
            continue
        _check_document(log.chains[h.rid], log.src)
        loaders.add(h.loader)
        navs.append(h)
    if not navs and aborted is not None:
        raise PltError(f"{log.src}: {_who(aborted)}: the page's document failed in the browser ({aborted.error})")
    if not navs:  # no document request at all (a trimmed log): its first request is the page's
        navs = [log.hops[0]]
        _check_document(log.chains[navs[0].rid], log.src)
    return navs


def _check_document(chain: list[_Hop], src: str) -> None:
    """Every hop of a page's document chain is http(s) and got a response with an HTTP status."""
    for hop in chain:
        if urls.scheme(hop.url) not in urls.HTTP:
            raise PltError(f"{src}: {_who(hop)}: the page's document is not an http(s) URL: nothing to replay")
        if hop.response is None:
            raise PltError(
                f"{src}: {_who(hop)}: the page's document never got a response (no Network.responseReceived)"
            )
        if not hop.response.get("status"):
            raise PltError(
                f"{src}: {_who(hop)}: the page's document has status {show(hop.response.get('status'))}, "
                "not an HTTP status (failed in the browser)"
            )


def to_har(events: list, src: str) -> dict:
    """The HAR 1.2 document of a DevTools log's events."""
    log = _read_events(events, src)
    if not log.hops:
        rid, why = next(iter(log.lost.items()), (None, ""))
        cause = f" (request {show(rid)}: {why})" if rid is not None else ""
        raise PltError(f"{src}: DevTools log has no {WBS} event with the fields it needs{cause}")
    _check_times(log)
    _match_extras(log)
    wall_base = log.wall_base or 0.0
    navs = _navigations(log)
    starts = [n.start for n in navs]
    by_loader = {n.loader: i for i, n in enumerate(navs) if n.loader}
    entries, repairs, early = [], [dict() for _ in navs], 0
    for chain in log.chains.values():
        first = chain[0]
        i = by_loader.get(first.loader)
        if i is not None and first.start < navs[i].start:
            raise PltError(
                f"{src}: {_who(first)}: sent at {show(first.start)} s, before the document that made it "
                f"({_who(navs[i])}, sent at {show(navs[i].start)} s)"
            )
        if i is None:
            if first.start < starts[0]:
                early += len(chain)
                continue
            i = bisect_right(starts, first.start) - 1  # iframes, workers: by time
        for hop in chain:
            e = _entry(hop, wall_base, f"page_{i + 1}")
            if hop is navs[i]:  # it starts the page (a reload names the previous page's script)
                e["_initiator"] = {"type": "other"}
            entries.append((hop.start, first is not navs[i], e))  # the document first among equals
            for k, n in hop.repairs.items():
                repairs[i][k] = repairs[i].get(k, 0) + n
    if log.skipped:
        repairs[0][SKIPPED] = log.skipped
    if early:
        repairs[0][EARLY] = early
    pages = []
    for i, nav in enumerate(navs):
        until = starts[i + 1] if i + 1 < len(starts) else float("inf")
        meta = {"url": nav.url}
        if repairs[i]:
            meta["repairs"] = repairs[i]
        if i == 0 and early:
            meta["unreplayable"] = early
        pages.append(
            {
                "startedDateTime": _iso(wall_base + nav.start),
                "id": f"page_{i + 1}",
                "title": nav.url,
                "_pltlab": meta,
                "pageTimings": {
                    "onContentLoad": _mark(log.dcls, nav.start, until),
                    "onLoad": _mark(log.loads, nav.start, until),
                },
            }
        )
    entries.sort(key=lambda x: x[:2])
    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "pltlab devtools-log import", "version": "1"},
            "pages": pages,
            "entries": [e for _, _, e in entries],
        }
    }


def _mark(marks: list[tuple[float, int]], start: float, until: float) -> float:
    """ms from `start` to the first of `marks` before the next page starts; -1 if none."""
    t = min((t for t, _ in marks if start <= t < until), default=None)
    return (t - start) * 1000 if t is not None else -1
