"""Per-request records built from the CDP Network domain's events."""

from __future__ import annotations

import base64
import re
import time
from dataclasses import dataclass, field


@dataclass
class Request:
    """One request of a load (a redirect hop is a request of its own)."""

    url: str
    method: str = "GET"
    resource_type: str = ""  # CDP type: Document, Stylesheet, Script, Image, Font, Fetch, ...
    initiator_type: str | None = None  # CDP initiator type (parser, script, preload, ...) or redirect
    initiator_url: str | None = None  # the document, stylesheet or script that caused the request
    start_ms: float = 0.0  # requestWillBeSent, relative to the first request of the load
    end_ms: float | None = None  # loadingFinished / loadingFailed
    status: int = 0  # 0: no response
    status_text: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    # the request's header fields as sent (requestWillBeSentExtraInfo; else as the page asked)
    request_headers: list[tuple[str, str]] = field(default_factory=list)
    mime: str = ""
    protocol: str = ""
    remote: str = ""  # ip:port
    connection_id: int | None = None
    connection_reused: bool | None = None
    timing: dict | None = None  # CDP ResourceTiming (ms offsets from its requestTime)
    timing_base_ms: float | None = None  # timing's requestTime, on start_ms's clock
    encoded_bytes: int = 0  # bytes on the wire, headers included (loadingFinished)
    head_bytes: int | None = None  # bytes received with the response head (its encodedDataLength)
    data_bytes: int = 0  # decoded body bytes received
    body: bytes | None = None
    redirect_url: str = ""
    error: str = ""  # loadingFailed errorText
    blocked: bool = False  # by the driver's block list (never sent)
    request_id: str = ""
    finished: bool = False


def _initiator(init: dict) -> tuple[str | None, str | None]:
    """(type, url): script initiators give the innermost stack frame that has a URL."""
    url = init.get("url")
    stack = init.get("stack")
    while not url and isinstance(stack, dict):
        url = next((f["url"] for f in stack.get("callFrames", []) if f.get("url")), None)
        stack = stack.get("parent")
    return init.get("type"), url or None


def _headers(h: dict) -> list[tuple[str, str]]:
    # CDP joins repeated headers (Set-Cookie, ...) with newlines.
    return [(k, v) for k, vs in h.items() for v in str(vs).split("\n")]


class Collector:
    """Subscribes to a CDP session's Network events; every handler only records."""

    EVENTS = (
        "requestWillBeSent",
        "requestWillBeSentExtraInfo",
        "responseReceived",
        "responseReceivedExtraInfo",
        "dataReceived",
        "loadingFinished",
        "loadingFailed",
    )

    def __init__(self, cdp):
        self.requests: list[Request] = []
        self._live: dict[str, Request] = {}
        self._t0: float | None = None
        self.wall_start: float | None = None  # epoch seconds of the first request
        self.last_activity = time.monotonic()
        self._raw: dict[str, list[list[tuple[str, str]]]] = {}  # wire headers per hop
        self._sent: dict[str, list[list[tuple[str, str]]]] = {}  # request headers as sent, per hop
        for ev in self.EVENTS:
            cdp.on(f"Network.{ev}", getattr(self, f"_on_{ev}"))

    def inflight(self) -> int:
        return len(self._live)

    def _ms(self, ts: float) -> float:
        return (ts - self._t0) * 1000.0

    def _touch(self) -> None:
        self.last_activity = time.monotonic()

    def _on_requestWillBeSent(self, p: dict) -> None:
        self._touch()
        rid, req = p["requestId"], p["request"]
        if self._t0 is None:
            self._t0, self.wall_start = p["timestamp"], p.get("wallTime")
        prev = self._live.pop(rid, None)
        itype, iurl = _initiator(p.get("initiator") or {})
        if prev is not None and p.get("redirectResponse"):
            self._response(prev, p["redirectResponse"])
            prev.redirect_url, prev.end_ms, prev.finished = req["url"], self._ms(p["timestamp"]), True
            prev.body = b""  # Chromium does not keep redirect bodies
            itype, iurl = "redirect", prev.url
        r = Request(
            url=req["url"],
            method=req.get("method", "GET"),
            resource_type=p.get("type", ""),
            initiator_type=itype,
            initiator_url=iurl,
            start_ms=self._ms(p["timestamp"]),
            request_id=rid,
            request_headers=_headers(req.get("headers") or {}),
        )
        self.requests.append(r)
        self._live[rid] = r

    def _response(self, r: Request, resp: dict) -> None:
        r.status, r.status_text = resp.get("status", 0), resp.get("statusText", "")
        r.headers = _headers(resp.get("headers") or {})
        r.mime = resp.get("mimeType", "")
        r.protocol = resp.get("protocol", "")
        ip = resp.get("remoteIPAddress")
        r.remote = f"{ip}:{resp.get('remotePort')}" if ip else ""
        cid = resp.get("connectionId")
        r.connection_id = int(cid) if cid is not None else None
        r.connection_reused = resp.get("connectionReused")
        r.timing = resp.get("timing")
        if resp.get("encodedDataLength") is not None:
            r.head_bytes = int(resp["encodedDataLength"])
        if r.timing and r.timing.get("requestTime") and self._t0 is not None:
            r.timing_base_ms = self._ms(r.timing["requestTime"])

    def _on_responseReceived(self, p: dict) -> None:
        self._touch()
        r = self._live.get(p["requestId"])
        if r is not None:
            self._response(r, p["response"])

    def _on_requestWillBeSentExtraInfo(self, p: dict) -> None:
        # The headers as sent on the wire (pseudo-headers, Cookie ...), one event per hop; it may
        # arrive before or after requestWillBeSent: kept and applied by wire_headers().
        self._sent.setdefault(p["requestId"], []).append(_headers(p.get("headers") or {}))

    def _on_responseReceivedExtraInfo(self, p: dict) -> None:
        # The headers as received (Set-Cookie included); one event per hop, in hop order.
        text = p.get("headersText")
        hdrs = _parse_head(text) if text else _headers(p.get("headers") or {})
        self._raw.setdefault(p["requestId"], []).append(hdrs)

    def wire_headers(self) -> None:
        """Replace each response's headers with the ones received on the wire, and each request's
        with the ones sent, where known."""
        sent: dict[str, list[Request]] = {}
        for r in self.requests:
            sent.setdefault(r.request_id, []).append(r)
        for rid, rs in sent.items():
            got = self._sent.get(rid, [])
            if len(got) == len(rs):  # else (a hop never sent, served from memory) keep the page's
                for r, h in zip(rs, got):
                    if h:
                        r.request_headers = h
        hops: dict[str, list[Request]] = {}
        for r in self.requests:
            if r.status:
                hops.setdefault(r.request_id, []).append(r)
        for rid, rs in hops.items():
            raw = self._raw.get(rid, [])
            if len(raw) == len(rs):  # else (served from memory, ...) keep the parsed headers
                for r, h in zip(rs, raw):
                    if h:
                        r.headers = h

    def _on_dataReceived(self, p: dict) -> None:
        self._touch()
        r = self._live.get(p["requestId"])
        if r is not None:
            r.data_bytes += p.get("dataLength", 0)

    def _on_loadingFinished(self, p: dict) -> None:
        self._touch()
        r = self._live.pop(p["requestId"], None)
        if r is not None:
            r.end_ms, r.finished = self._ms(p["timestamp"]), True
            r.encoded_bytes = int(p.get("encodedDataLength", 0))

    def _on_loadingFailed(self, p: dict) -> None:
        self._touch()
        r = self._live.pop(p["requestId"], None)
        if r is not None:
            r.end_ms, r.blocked = self._ms(p["timestamp"]), bool(p.get("blockedReason"))
            r.error = p.get("errorText") or p.get("blockedReason") or "failed"

    def fetch_bodies(self, cdp) -> int:
        """Bodies of finished responses (decoded, as the page saw them); returns how many failed."""
        missing = 0
        for r in self.requests:
            if not r.finished or r.body is not None or not r.url.startswith(("http:", "https:")):
                continue
            try:
                res = cdp.send("Network.getResponseBody", {"requestId": r.request_id})
            except Exception:  # evicted, or a response without body (204, HEAD)
                missing += r.status not in (204, 304) and r.method != "HEAD"
                continue
            b = res.get("body", "")
            r.body = base64.b64decode(b) if res.get("base64Encoded") else _encode(b, r)
        return missing


def transfer_bytes(r: Request) -> int | None:
    """Bytes the response took on the wire, head and (still content-encoded) body, as the
    built-in loader counts them: loadingFinished's encodedDataLength; for a redirect hop the
    head it got (Chromium reads no redirect body). None when nothing complete arrived."""
    if r.redirect_url:
        return r.head_bytes
    if not r.finished or r.error:
        return None
    return r.encoded_bytes


def content_encoding(r: Request) -> str:
    """The response's Content-Encoding, lower-case ("" for identity)."""
    v = next((v for k, v in r.headers if k.lower() == "content-encoding"), "")
    return "" if v.strip().lower() == "identity" else v.strip().lower()


def _parse_head(text: str) -> list[tuple[str, str]]:
    """HTTP/1.x response head -> header list (status line skipped)."""
    out = []
    for line in text.split("\r\n")[1:]:
        name, sep, value = line.partition(":")
        if sep and name.strip():
            out.append((name.strip(), value.strip()))
    return out


def _encode(text: str, r: Request) -> bytes:
    """CDP hands text bodies over decoded; encode them back with the declared charset."""
    ctype = next((v for k, v in r.headers if k.lower() == "content-type"), "")
    m = re.search(r"charset=[\"']?([\w.:-]+)", ctype, re.I)
    try:
        return text.encode(m.group(1) if m else "utf-8")
    except (LookupError, UnicodeEncodeError):
        return text.encode("utf-8")
