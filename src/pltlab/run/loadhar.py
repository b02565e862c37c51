"""A HAR 1.2 of one measured load (docs/loaders.md "The HAR of a load"), built from the page
archive and the load's record (the dict run.runner.PageRunner.load returns).

What each entry holds: the request and response header fields as they went over the wire (the
built-in loader's own record; Chromium's from CDP; for an older record without them, the
response headers the archive recorded, which the replay serves byte for byte), the protocol
(httpVersion), sizes (content.size = the body decoded, bodySize = the body as it came,
headersSize, `_transferSize` = everything received), no bodies, the server's address, the
timings split blocked/dns/connect/ssl/send/wait/receive (connect includes ssl, as HAR 1.2 has
it) and `_connection_id`. Per connection, on the entry that opened it and in `log._connections`:
whether its SYN carried data that the server acked (`_tfo_syn_data`), the kernel's
tcpi_fastopen_client_fail (`_tfo_client_fail`), whether the SYN asked for a TFO cookie
(`_tfo_cookie_requested`), its TLS handshake (`_tls_handshake`: full or resumed: a session
ticket offered and taken) and early data (`_early_data`); over HTTP/3 (httpVersion "h3", as
Chrome writes it) the TFO fields are null, connect is the QUIC handshake with ssl the same span
(as Chrome's HAR), and the connection's QUIC stats are `_quic_rtt_ms`, `_quic_lost_packets`,
`_quic_datagrams_out`/`_in`, `_quic_udp_bytes_out`/`_in`. `_tfo` on an entry: this request rode
in that SYN. Chromium gives no per-connection TCP facts: those fields are null there (the
load's TFO counters are in the page's `_pltlab_load`).

The log's creator is pltlab and every entry's `_pltlab` says its body is not kept, so the file
reads back as a page (pltlab.archive.har) with the URLs, statuses, headers, sizes and protocols
of the load.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from http import HTTPStatus
from urllib.parse import parse_qsl, urlsplit

from pltlab import __version__
from pltlab.archive import rename
from pltlab.archive.entries import HTTP_VERSION, protocol_name
from pltlab.archive.har import CREATOR
from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.archive.sizes import content_encoding
from pltlab.loaders.registry import DEFAULT as DEFAULT_LOADER
from pltlab.loaders.registry import get as loader_of

# the load's figures kept on the page (`_pltlab_load`)
LOAD_KEYS = (
    "page_id",
    "client",
    "tfo",
    "tls",
    "protocol",
    "rtt_ms",
    "rate_mbit",
    "loss",
    "icw",
    "cc",
    "rep",
    "plt_ms",
    "network_plt_ms",
    "tail_ms",
    "valid",
    "invalid_reason",
    "tfo_counters",
    "server_tfo",
    "server_connections",
    "server_tls",
    "tls_warmup_ms",
    "hosts_renamed",
)


# a built-in loader QUIC connection's stats (its record's, flattened) kept as `_quic_*`
QUIC_FACTS = ("rtt_ms", "lost_packets", "datagrams_out", "datagrams_in", "udp_bytes_out", "udp_bytes_in")


def _iso(epoch_s: float) -> str:
    return datetime.fromtimestamp(epoch_s, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _num(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _dur(a, b) -> float:
    """b - a in ms (3 decimals), -1 when either end is unknown (HAR: does not apply)."""
    a, b = _num(a), _num(b)
    if a is None or b is None:
        return -1
    return round(max(0.0, b - a), 3)


def _fields(pairs) -> list[dict]:
    return [{"name": str(k), "value": str(v)} for k, v in pairs or []]


def _header(pairs, name: str) -> str | None:
    name = name.lower()
    return next((str(v) for k, v in pairs or [] if str(k).lower() == name), None)


def _archive_index(page: Page) -> dict[str, list[Obj]]:
    """URL as requested -> the archive's objects with it, in recorded order (repeated URLs are
    served in that order); an https URL also under its http twin (HSTS upgrades)."""
    out: dict[str, list[Obj]] = {}
    for o in page.objects:
        out.setdefault(strip_fragment(o.url), []).append(o)
    return out


def _recorded(index: dict[str, list[Obj]], used: dict[str, int], url: str) -> Obj | None:
    key = strip_fragment(url)
    objs = index.get(key)
    if not objs and key.startswith("https://"):
        key = "http://" + key[len("https://") :]
        objs = index.get(key)
    if not objs:
        return None
    n = used.get(key, 0)
    used[key] = n + 1
    return objs[min(n, len(objs) - 1)]


def _quic(r: dict, conn: dict | None) -> bool:
    """Whether a request (or its connection) went over QUIC (h3): no TCP connect phase."""
    return protocol_name(str((conn or {}).get("protocol") or r.get("protocol") or "")) == "h3"


def _phases(r: dict, conn: dict | None, client: str) -> tuple[float | None, dict]:
    """(start ms, HAR timings) of a request record. Built-in loader: from ready_ms (the request
    could go) to its last byte; connect = TCP connect + TLS handshake (ssl; over h3 the QUIC
    handshake, ssl the same span, as Chrome's HAR has it), dns = the pool's
    DNS delay where this request's connection waited for it, blocked = the rest before the
    request was written (waits for a connection or the priority limits). Chromium: CDP's
    ResourceTiming (sendStart..sendEnd is send)."""
    t = {"blocked": -1, "dns": -1, "connect": -1, "ssl": -1, "send": 0, "wait": -1, "receive": -1}
    if loader_of(client).timings == "cdp":
        start = _num(r.get("start_ms"))
        t["dns"] = _dur(r.get("dns_start_ms"), r.get("dns_end_ms"))
        t["connect"] = _dur(r.get("connect_start_ms"), r.get("connect_end_ms"))
        t["ssl"] = _dur(r.get("tls_start_ms"), r.get("tls_end_ms"))
        send_end = r.get("send_end_ms", r.get("request_ms"))
        t["send"] = max(0, _dur(r.get("request_ms"), send_end))
        t["wait"] = _dur(send_end, r.get("first_byte_ms"))
    else:
        start = _num(r.get("ready_ms"))
        if r.get("new_conn") and conn is not None and _num(r.get("connect_start_ms")) is not None:
            since = max(start or 0.0, _num(r.get("released_ms")) or 0.0)
            dns_end = _num(conn.get("dns_end_ms")) or 0.0
            t["dns"] = _dur(since, min(dns_end, r["connect_start_ms"])) if dns_end > since else 0
            t["connect"] = _dur(max(r["connect_start_ms"], start or 0.0), r.get("tls_end_ms") or r["connect_end_ms"])
            if _quic(r, conn):  # the QUIC handshake is the connect, TLS in it (Chrome's HAR: ssl = connect)
                t["ssl"] = t["connect"]
            elif r.get("tls_end_ms") is not None:
                t["ssl"] = _dur(max(r["connect_end_ms"], start or 0.0), r["tls_end_ms"])
        t["wait"] = _dur(r.get("request_ms"), r.get("first_byte_ms"))
    t["receive"] = _dur(r.get("first_byte_ms"), r.get("last_byte_ms"))
    if start is not None:
        before = _num(r.get("request_ms"))
        if before is None:  # no timing (a failed request): all of it blocked
            before = _num(r.get("last_byte_ms"))
        spent = sum(max(0, t[k]) for k in ("dns", "connect"))
        t["blocked"] = round(max(0.0, (before or start) - start - spent), 3)
    return start, t


def _conn_facts(c: dict | None, tfo_requested: bool) -> dict:
    """A built-in loader connection's TCP and TLS facts (null: not known: Chromium)."""
    if c is None:
        return {
            "_tfo_syn_data": None,
            "_tfo_client_fail": None,
            "_tfo_cookie_requested": None,
            "_tls_handshake": None,
            "_early_data": None,
        }
    if _quic({}, c):  # QUIC: no TCP, no TFO
        return {
            "_tfo_syn_data": None,
            "_tfo_client_fail": None,
            "_tfo_cookie_requested": None,
            "_tls_handshake": c.get("tls_handshake"),
            "_early_data": c.get("early_data"),
            **{f"_quic_{k}": c.get(k) for k in QUIC_FACTS if c.get(k) is not None},
        }
    fail = c.get("tfo_client_fail")
    return {
        "_tfo_syn_data": bool(c.get("tfo")),
        "_tfo_client_fail": fail,
        # no cookie cached: the SYN carried an empty TFO option, asking for one (no data)
        "_tfo_cookie_requested": bool(tfo_requested and fail == 1),
        "_tls_handshake": c.get("tls_handshake"),
        "_early_data": c.get("early_data"),
    }


def _entry(r: dict, o: Obj | None, conn: dict | None, rec: dict, t0: float) -> dict:
    client = rec.get("client") or DEFAULT_LOADER
    start, timings = _phases(r, conn, client)
    url = r.get("url") or ""
    proto = protocol_name(r.get("protocol") or "") or (o.protocol if o is not None else "")
    version = HTTP_VERSION.get(proto, r.get("protocol") or "")
    status = int(r.get("status") or 0)
    resp_headers = r.get("response_headers")
    ext: dict = {}
    if resp_headers is None and o is not None and o.status == status:
        resp_headers, ext["_response_headers_from"] = o.headers, "archive"
    req_headers = r.get("request_headers") or []
    if status and r.get("status_text"):
        status_text = r["status_text"]
    elif o is not None and o.status == status and o.status_text:
        status_text = o.status_text
    else:
        status_text = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else ""
    mime = _header(resp_headers, "content-type") or (o.mime if o is not None else "")
    body = r.get("bytes")  # as it came (still content-encoded)
    decoded = r.get("body_bytes") if r.get("body_bytes") is not None else body
    content = {"size": int(decoded or 0), "mimeType": mime}
    if body is not None and decoded is not None and decoded >= body:
        content["compression"] = int(decoded - body)
    if loader_of(client).timings == "cdp":  # CDP: data_bytes are decoded; the body on the wire = transfer - head
        tb, hb = r.get("transfer_bytes"), r.get("header_bytes")
        body = tb - hb if tb is not None and hb is not None and tb >= hb else None
        content.pop("compression", None)
        if body is not None and decoded is not None and decoded >= body:
            content["compression"] = int(decoded - body)
    redirect = _header(resp_headers, "location") if 300 <= status < 400 else ""
    end = _num(r.get("last_byte_ms"))
    e = {
        "pageref": "page_1",
        "startedDateTime": _iso(t0 + (start or 0.0) / 1000),
        "time": round(sum(max(0, v) for k, v in timings.items() if k != "ssl"), 3),
        "request": {
            "method": r.get("method") or (o.method if o is not None else "GET"),
            "url": url,
            "httpVersion": version,
            "headers": _fields(req_headers),
            "queryString": [{"name": k, "value": v} for k, v in parse_qsl(urlsplit(url).query, keep_blank_values=True)],
            "cookies": [],
            "headersSize": int(r["request_header_bytes"]) if r.get("request_header_bytes") is not None else -1,
            "bodySize": 0,
        },
        "response": {
            "status": status,
            "statusText": status_text,
            "httpVersion": version,
            "headers": _fields(resp_headers),
            "cookies": [],
            "content": content,
            "redirectURL": redirect or "",
            "headersSize": int(r["header_bytes"]) if r.get("header_bytes") is not None else -1,
            "bodySize": int(body) if body is not None else -1,
            "_transferSize": int(r["transfer_bytes"]) if r.get("transfer_bytes") is not None else -1,
        },
        "cache": {},
        "timings": timings,
        "_pltlab": {"body": "size-only", "start_ms": start, "end_ms": end},
        "_connection_id": r.get("conn_id"),
        "_new_connection": bool(r.get("new_conn")),
        "_tfo": bool(r.get("tfo")),
        "_load": {
            k: r.get(k)
            for k in ("index", "ready_ms", "released_ms", "request_ms", "first_byte_ms", "last_byte_ms")
            if r.get(k) is not None
        },
        **ext,
    }
    if r.get("conn_id") is not None:
        e["connection"] = str(r["conn_id"])
    enc = r.get("encoding")
    if enc is not None and enc != content_encoding([(k, v) for k, v in resp_headers or []], {}):
        e["_pltlab"]["encoding"] = enc
    ip = (conn or {}).get("ip") or r.get("remote_ip")
    if ip:
        e["serverIPAddress"] = ip
    if o is not None and o.initiator:
        e["_initiator"] = {"type": o.initiator_type or "parser", "url": o.initiator}
    elif r.get("initiator_url"):
        e["_initiator"] = {"type": r.get("initiator_type") or "parser", "url": r["initiator_url"]}
    if r.get("error"):
        e["response"]["_error"] = r["error"]
    if r.get("new_conn"):
        e.update(_conn_facts(conn, bool(rec.get("tfo"))))
    return e


def build(page: Page, record: dict) -> dict:
    """The HAR 1.2 document of one load (see the module's doc). A load of a renamed page (knob
    hosts, ``hosts_renamed`` in the record) is described with the page's names as loaded."""
    renamed = record.get("hosts_renamed")
    if renamed:
        page = rename.Renaming(tuple(sorted(renamed.items()))).page(page)
    conns = {c.get("id"): c for c in record.get("connections") or []}
    client = record.get("client") or DEFAULT_LOADER
    t0 = _num(record.get("load_started_at")) or _num(record.get("started_at")) or time.time()
    index, used = _archive_index(page), {}
    reqs = sorted(
        record.get("requests") or [],
        key=lambda r: (_num(r.get("ready_ms", r.get("start_ms"))) or 0.0, r.get("index") or 0),
    )
    entries = [
        _entry(r, _recorded(index, used, r.get("url") or ""), conns.get(r.get("conn_id")), record, t0) for r in reqs
    ]
    nav = record.get("nav_timing") or {}
    load = {k: record.get(k) for k in LOAD_KEYS if k in record}
    connections = [
        {
            "id": c.get("id"),
            "host": c.get("host"),
            "hosts": c.get("hosts"),
            "ip": c.get("ip"),
            "port": c.get("port"),
            "tls": c.get("tls"),
            "protocol": c.get("protocol"),
            "requests": c.get("requests"),
            **{k.lstrip("_"): v for k, v in _conn_facts(c, bool(record.get("tfo"))).items()},
        }
        for c in conns.values()
    ]
    log = {
        "version": "1.2",
        "creator": {"name": CREATOR, "version": __version__},
        "browser": {
            "name": loader_of(client).browser,
            "version": record.get("browser") or "",
        },
        "pages": [
            {
                "startedDateTime": _iso(t0),
                "id": "page_1",
                "title": page.title or page.url,
                "pageTimings": {
                    "onContentLoad": nav.get("domContentLoadedEventEnd") or -1,
                    "onLoad": record.get("plt_ms") if record.get("plt_ms") is not None else -1,
                },
                "_pltlab": {"url": page.url, "source": "load"},
                "_pltlab_load": load,
            }
        ],
        "entries": entries,
    }
    if loader_of(client).connections:  # (Chromium tells nothing per connection beyond its id)
        log["_connections"] = connections
    return {"log": log}
