"""Property-based tests (Hypothesis) of every parser of outside input: HAR files, DevTools logs,
the seed fetch format and experiment files. Whatever the input, the outcome is a valid result or
one PltError naming the file, never another exception, and an import that fails writes nothing.

Deterministic (derandomize: the same examples in every run) and bounded (< 30 s in all)."""

import copy
import json
import os
import re
import tempfile
from datetime import datetime
from urllib.parse import urljoin

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from pltlab import units
from pltlab.archive import corpus, devtools, importer, seed, urls
from pltlab.errors import PltError
from pltlab.experiments import spec
from tests.test_devtools_import import DEVTOOLS, page_log

FAST = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    report_multiple_bugs=False,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

# ---- values of any JSON type (the wrong type at any level) ---------------------------------------

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([10**30, -1, 2**31, 2**63]),
    st.text(max_size=12),
)
anything = st.recursive(
    scalars, lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3), max_leaves=6
)


def maybe(good, bad=anything, odds: int = 7):
    """Mostly the right shape (`odds` to 1), sometimes anything at all."""
    return st.sampled_from([True] * odds + [False]).flatmap(lambda ok: good if ok else bad)


URLS = maybe(
    maybe(
        st.sampled_from(
            [
                "http://a.test/",
                "https://a.test/x.js",
                "http://a.test/img.png?q=1#f",
                "https://b.test:8443/s.css",
                "http://[::1]/v6",
                "HTTP://A.TEST/UP",
                "http://xn--bcher-kva.test/",
                "http://a.test/y.css",
            ]
        ),
        st.sampled_from(["data:text/plain,hi", "gopher://g/"]),
    ),
    st.sampled_from(
        [
            "http://a.test:99999/",
            "http://a.test:0/",
            "ftp://a.test/f",
            "http:///nohost",
            "http://[zz/",
            "relative/x",
            "",
            "http://a b/",
            "http://a.test/\n",
            "about:blank",
            "http://%41.test/",
            "https://" + "a" * 300 + "/",
        ]
    ),
)
SIZES = maybe(
    st.sampled_from([None, -1, 0, 1, 100, 5000, 2.0, "123", 1 << 30]),
    st.sampled_from([-5, 1.5, True, "abc", "-1", "²", 2**31, 10**15, 2e9, 1e300, "9" * 5000]),
)
STATUS = maybe(
    st.sampled_from([200, 200, 200, 0, 204, 301, 304, 404, "200"]),
    st.sampled_from([999, -1, 1000, "abc", None, True, 200.5, 1e300]),
)
TIMES = maybe(
    st.sampled_from(
        [
            "2024-01-01T00:00:00.000Z",
            "2024-01-01T00:00:01.5+02:00",
            "0001-01-01T00:00:00Z",
            "9999-12-31T23:59:59Z",
            "",
            None,
        ]
    ),
    st.sampled_from(["garbage", 5, "2024-13-01T00:00:00Z"]),
)
NUMS = maybe(st.sampled_from([-1, 0, 5, 12.5, None]), st.sampled_from([1e12, 1e300, True, "3", float("nan")]))

header = st.fixed_dictionaries(
    {
        "name": maybe(
            st.sampled_from(
                ["Content-Type", "content-encoding", "Location", ":status", "Content-Length", "status", "bad name"]
            )
        ),
        "value": maybe(
            st.sampled_from(["text/html", "gzip", "br", "/next", "12", "200", "a\nb", "x" * 10, "99999999999999999999"])
        ),
    }
)
content = st.fixed_dictionaries(
    {},
    optional={
        "size": SIZES,
        "compression": SIZES,
        "mimeType": maybe(st.sampled_from(["text/html", "image/png", "text/css; charset=latin-1"])),
        "text": maybe(st.sampled_from(["<html>hi</html>", "aGk=", "!!notbase64", "x[...truncated]", ""])),
        "encoding": maybe(st.just("base64")),
    },
)
response = st.fixed_dictionaries(
    {"status": STATUS},
    optional={
        "statusText": maybe(st.sampled_from(["OK", "", "OK", "Moved\r\nX: y"])),
        "httpVersion": maybe(st.sampled_from(["HTTP/1.1", "h2", "h3", "2 2"])),
        "headers": maybe(st.lists(maybe(header, scalars), max_size=4)),
        "content": maybe(content),
        "redirectURL": URLS,
        "bodySize": SIZES,
        "headersSize": SIZES,
        "_transferSize": SIZES,
    },
)
request = st.fixed_dictionaries(
    {"url": URLS},
    optional={
        "method": maybe(st.sampled_from(["GET", "POST", "HEAD", "G E T", "GET\r\n"])),
        "headers": maybe(st.lists(maybe(header, scalars), max_size=3)),
        "postData": maybe(
            st.fixed_dictionaries(
                {}, optional={"text": maybe(st.text(max_size=8)), "url": URLS, "encoding": maybe(st.just("base64"))}
            )
        ),
    },
)
initiator = st.one_of(
    URLS,
    st.fixed_dictionaries(
        {},
        optional={
            "type": maybe(st.sampled_from(["parser", "script", "other"])),
            "url": URLS,
            "stack": maybe(
                st.fixed_dictionaries(
                    {},
                    optional={
                        "callFrames": maybe(st.lists(maybe(st.fixed_dictionaries({"url": URLS})), max_size=2)),
                        "parent": anything,
                    },
                )
            ),
        },
    ),
)
entry = st.fixed_dictionaries(
    {"request": maybe(request, odds=30), "response": maybe(response, odds=15)},
    optional={
        "startedDateTime": TIMES,
        "time": NUMS,
        "pageref": maybe(st.sampled_from(["p1", "p2", 3]), odds=15),
        "timings": maybe(st.fixed_dictionaries({"wait": NUMS})),
        "_initiator": maybe(initiator),
        "_initiator_type": anything,
        "_objectSize": SIZES,
        "_objectSizeUncompressed": SIZES,
        "_bytesIn": SIZES,
        "_fromCache": anything,
        "_pltlab_compute_ms": maybe(NUMS),
        "_pltlab": maybe(
            st.fixed_dictionaries({}, optional={"start_ms": NUMS, "end_ms": NUMS, "body": st.just("size-only")})
        ),
        "serverIPAddress": maybe(st.just("[2001:db8::1]")),
    },
)
page_meta = st.fixed_dictionaries(
    {"id": maybe(st.sampled_from(["p1", "p2", 3]), odds=15)},
    optional={
        "startedDateTime": TIMES,
        "title": anything,
        "pageTimings": maybe(st.fixed_dictionaries({"onLoad": NUMS})),
        "_pltlab": maybe(
            st.fixed_dictionaries({}, optional={"url": URLS, "repairs": anything, "unreplayable": anything})
        ),
        "_pltlab_calibration": anything,
        "_cached": anything,
    },
)
log = st.fixed_dictionaries(
    {"entries": maybe(st.lists(maybe(entry, odds=30), min_size=1, max_size=4), odds=30)},
    optional={
        "creator": maybe(st.fixed_dictionaries({"name": st.sampled_from(["pltlab", "WebInspector", "Firefox"])})),
        "pages": maybe(st.lists(maybe(page_meta), max_size=2)),
        "version": anything,
    },
)
har_docs = maybe(st.fixed_dictionaries({"log": maybe(log, odds=30)}), odds=30)


def _tree(d: str) -> list[str]:
    return sorted(os.path.join(r, n) for r, ds, fs in os.walk(d) for n in ds + fs)


def _import_or_one_error(paths: list[str], out: str, named: str) -> dict | None:
    """The import's report, or None after one PltError that names `named`; nothing written then
    (not `out`, nor its parents, nor a temporary folder). What it wrote reads back."""
    top = os.path.dirname(os.path.dirname(out))
    before = _tree(top)
    try:
        rep = importer.import_paths(paths, out)
    except PltError as e:
        msg = str(e)
        assert "\n" not in msg and named in msg, msg
        assert _tree(top) == before
        return None
    back = corpus.read_corpus(out)
    assert len(back) == len(rep["files"])
    for (_, p), row in zip(back, rep["pages"]):
        assert urls.scheme(p.url) in urls.HTTP and row["bytes"] <= units.MAX_PAGE_BYTES
        for o in p.objects:
            assert 0 <= o.size <= units.MAX_OBJECT_BYTES and o.port > 0 and o.scheme in ("http", "https")
    return rep


@FAST
@given(doc=har_docs)
def test_har_import_is_a_corpus_or_one_error(doc):
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.har")
        with open(path, "w") as f:
            f.write(json.dumps(doc))  # NaN and Infinity too, which no HAR may hold
        _import_or_one_error([path], os.path.join(d, "out", "arc"), path)


# ---- DevTools logs: the import tests' generated log and a real one of ../shared (if there), mutated -

INF = "__inf__"  # written as 1e400: JSON's way to an infinite float
FACTORS = [0.0, 0.5, 0.999, 1.001, 2.0, 1e3, -1.0]  # every time of the log scaled
OFFSETS = [-100.0, -1.0, -0.01, 0.01, 1.0, 3600.0, 1e5]  # one time moved (s)


def _devtools_bases() -> list[list]:
    real = os.path.join(DEVTOOLS, "progressive-app.devtoolslog.json")
    return [page_log()] + ([devtools._unwrap(devtools.read_json(real))] if os.path.isfile(real) else [])


DEVTOOLS_BASES = _devtools_bases()


def _paths(v, depth=4):
    """Every (container, key) pair below `v`, a few levels and items deep."""
    items = v.items() if isinstance(v, dict) else enumerate(v[:3]) if isinstance(v, list) else ()
    for k, x in items:
        yield v, k
        if depth:
            yield from _paths(x, depth - 1)


def _timed(events) -> list[dict]:
    return [e["params"] for e in events if isinstance(e.get("params"), dict) and "timestamp" in e["params"]]


def _mutate(events: list, data) -> None:
    kind = data.draw(st.sampled_from(["shuffle", "drop", "dup", "time", "all-times", "delete", "retype", "doc"]))
    i = data.draw(st.integers(0, len(events) - 1)) if events else 0
    if kind == "shuffle":
        data.draw(st.randoms(use_true_random=False)).shuffle(events)
    elif kind in ("drop", "dup") and events:
        e = events.pop(i)
        if kind == "dup":
            events[i:i] = [e, copy.deepcopy(e)]
    elif kind in ("time", "all-times") and _timed(events):
        change = data.draw(st.sampled_from(["by", "by", "neg", "str", INF, 1e308, None, True, 0]))
        k = data.draw(st.sampled_from(FACTORS if kind == "all-times" else OFFSETS))
        targets = _timed(events) if kind == "all-times" else [data.draw(st.sampled_from(_timed(events)))]
        for p in targets:
            t = p["timestamp"]
            if not isinstance(t, (int, float)) or isinstance(t, bool):
                continue
            by = t * k if kind == "all-times" else t + k
            p["timestamp"] = {"by": by, "neg": -t, "str": str(t)}.get(change, change)
    elif kind in ("delete", "retype") and events:
        paths = list(_paths(events[i]))
        if paths:
            parent, key = data.draw(st.sampled_from(paths))
            if kind == "delete":
                del parent[key]
            else:
                v = parent[key]
                parent[key] = data.draw(st.sampled_from([str(v), 5, -1, 0, 1e300, [], {}, True, None, "", INF]))
    elif kind == "doc":  # one event of the document's request (the first requestId sent)
        rids = [e["params"].get("requestId") if isinstance(e.get("params"), dict) else None for e in events]
        rid = next((r for e, r in zip(events, rids) if r and e.get("method") == devtools.WBS), None)
        mine = [j for j, r in enumerate(rids) if r is not None and r == rid]
        if mine:
            events.pop(data.draw(st.sampled_from(mine)))


def check_devtools_page(page) -> None:
    """What any imported page satisfies: its document first, a chain of 3xx redirects ending in
    an HTTP response; every object's times finite, non-negative and in order; a sane date."""
    assert page.objects and page.objects[0].url == page.url, page.url
    o, seen = page.objects[0], set()
    while o.redirect_url and o.url not in seen:
        seen.add(o.url)
        assert 300 <= o.status <= 399, (o.url, o.status)
        o = page.find(urljoin(o.url, o.redirect_url))
        assert o is not None, "the document's redirect chain is broken"
    assert 100 <= o.status <= 999, (o.url, o.status)
    assert 1970 <= datetime.fromisoformat(page.started.replace("Z", "+00:00")).year <= 2500, page.started
    assert page.on_load_ms is None or 0 <= page.on_load_ms < 1e12, page.on_load_ms
    for x in page.objects:
        assert x.start_ms is not None and x.end_ms is not None, x.url
        assert 0 <= x.start_ms <= x.end_ms < 1e12, (x.url, x.start_ms, x.end_ms)
        assert 0 <= x.extras.get("wait_ms", 0) < 1e12, (x.url, x.extras["wait_ms"])


def _import_events(events: list) -> tuple[list, str]:
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "in.devtoolslog.json")
        with open(path, "w") as f:
            f.write(json.dumps(events).replace(json.dumps(INF), "1e400"))
        try:
            return importer.load_inputs([path])[0], path
        except PltError as e:
            msg = str(e)
            assert "\n" not in msg and msg.startswith(f"{path}: "), msg
            return [], path


def test_unmutated_devtools_logs_pass_the_page_checks():
    for events in DEVTOOLS_BASES:
        pages, path = _import_events(events)
        assert pages, f"{path}: the unmutated log was refused"
        for page in pages:
            check_devtools_page(page)


@settings(FAST, max_examples=120, deadline=10_000)
@given(data=st.data())
def test_devtools_import_is_a_page_or_one_error(data):
    events = copy.deepcopy(data.draw(st.sampled_from(DEVTOOLS_BASES)))
    for _ in range(data.draw(st.integers(1, 3))):
        _mutate(events, data)
    pages, _ = _import_events(events)
    for page in pages:
        check_devtools_page(page)


# ---- the seed fetch format ----------------------------------------------------------------------

SEED_URLS = maybe(
    st.sampled_from(
        ["http://a.test/", "http://a.test/x.js", "http://b.test/i.png", "http://a.test/r", "https://a.test/"]
    ),
    st.sampled_from(["http://a.test:99999/", "ftp://a.test/", "not a url", "http://[zz/"]),
    odds=10,
)
T_FIELD = maybe(
    st.sampled_from(["1.5", "0", "12", "250.25"]),
    st.sampled_from(["-3", "nan", "inf", "1e400", "abc", "", "99999999999"]),
    odds=10,
)
txn = st.tuples(T_FIELD, T_FIELD, SEED_URLS).map(lambda t: f"{t[0]} | {t[1]} | 1 | {t[2]}")
resp_line = st.tuples(
    st.sampled_from(["OK", "Found", "No Content", "weird", "Not Modified"]),
    st.sampled_from(["text/html", "image/png", "text/css", ""]),
    SEED_URLS,
    maybe(
        st.sampled_from(["nil", "nil", "/next", "http://b.test/i.png", "http://a.test/"]),
        st.sampled_from(["ftp://x/", "http://[zz/", "", "http://a.test:0/"]),
    ),
).map(lambda t: f"{t[0]} | {t[1]} | utf-8 | {t[2]} -> {t[3]}")
noise = st.text(max_size=10)


def _section(name: str, lines: list[str], closed: bool) -> str:
    return f"<{name}>\nheader\n" + "\n".join(lines) + (f"\n</{name}>" if closed else "")


def fetchlog_text(page_url: str):
    """A fetch log of `page_url`: mostly well-formed, the page's own transaction first."""
    return st.tuples(
        st.lists(
            st.sampled_from(["*** Renamed /x.js?a=1 to /abc123 ***", "c:URLRequestCount: 3", "t:Total: -4", "noise"]),
            max_size=3,
        ),
        maybe(st.just(True), st.just(False)),  # the page itself logged
        st.lists(maybe(txn, noise, odds=10), max_size=4),
        maybe(st.just(True), st.just(False), odds=10),
        st.one_of(st.none(), st.lists(maybe(resp_line, noise, odds=10), max_size=3)),
        maybe(st.just(True), st.just(False), odds=10),
    ).map(
        lambda t: (
            "\n".join(
                t[0]
                + [_section("transactions", ([f"0 | 10 | 10 | {page_url}"] if t[1] else []) + t[2], t[3])]
                + ([_section("responses", t[4], t[5])] if t[4] is not None else [])
            )
            + "\n"
        )
    )


files = st.dictionaries(
    st.sampled_from(
        [
            "a.test/index.html",
            "a.test/x.js",
            "b.test/i.png",
            "a.test/abc123",
            "a.test/orphan.css",
            "a.test/r",
            "../escape",
        ]
    ),
    st.sampled_from([b"<html><script src=x.js></script></html>", b"\x89PNG", b"", b"url(orphan.css)"]),
    max_size=4,
)


@FAST
@given(
    data=st.data(),
    page_urls=maybe(st.lists(SEED_URLS, min_size=1, max_size=2), st.just([]), odds=10),
    bodies=files,
    folders=maybe(st.just(True), st.just(False), odds=10),
)
def test_seed_import_is_a_corpus_or_one_error(data, page_urls, bodies, folders):
    with tempfile.TemporaryDirectory() as d:
        pages_file = os.path.join(d, "S.pages")
        with open(pages_file, "w") as f:
            f.write("# pages\n" + "".join(u + "\n" for u in page_urls))
        if folders:
            os.makedirs(os.path.join(d, "S", "a.test"))
            os.makedirs(os.path.join(d, "S.fetchlog"))
            for rel, body in bodies.items():
                p = os.path.normpath(os.path.join(d, "S", rel))
                os.makedirs(os.path.dirname(p), exist_ok=True)
                with open(p, "wb") as f:
                    f.write(body)
            for u in page_urls:
                name = seed.log_name(u)
                if name and " " not in name and name not in (".", ".."):
                    with open(os.path.join(d, "S.fetchlog", name), "w") as f:
                        f.write(data.draw(fetchlog_text(u)))
        _import_or_one_error([pages_file], os.path.join(d, "out", "arc"), d)


# ---- experiment files -----------------------------------------------------------------------------

knob = st.one_of(
    st.sampled_from(
        [
            "100ms",
            "0",
            "10s",
            "1000000000s",
            "-5ms",
            "1e400s",
            "4mbit",
            "500bit",
            "200gbit",
            "unlimited",
            "1%",
            "150%",
            "1000",
            "0",
            "64KB",
            "10b",
            "on",
            "off",
            "default",
            "cubic",
            "vegas",
            "builtin",
            "warm",
            "cold",
            "kernel",
            "1MiB",
        ]
    ),
    st.integers(-5, 10**12),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=6),
)
toml_value = st.recursive(
    knob,
    lambda c: (
        st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(["0", "1", "a.test", "٣", "²", "x"]), c, max_size=2)
    ),
    max_leaves=5,
)
GOOD = {
    "rtt": ["10ms", "100ms", 0, "10s", 50],
    "rate": ["4mbit", "unlimited", 10, "1kbit", "100gbit"],
    "rate_up": ["256kbit", "1mbit"],
    "loss": ["0%", "1%", 0.5, 0],
    "queue": [1000, "64KB", "100p"],
    "tfo": ["on", "off", True],
    "initcwnd": ["default", 10, 1024],
    "cc": ["cubic", "reno", "bbr"],
    "client": ["builtin", "chromium"],
    "warmup": ["warm", "cold"],
    "origin_rtt": [{}, {"0": "10ms"}, {"a.test": "5ms/1%"}],
    "repetitions": [1, 5, 10_000],
    "seed": [0, 1, 2**32 - 1],
    "max_conns_per_host": [1, 6],
    "client_rmem": ["default", "kernel", "1MiB", 4096],
    "model": ["archive", "chromium"],
    "schemes": ["recorded", "chromium"],
    "calibrated": [True, False],
    "corpus": ["."],
}


def _key(k: str):
    good = st.sampled_from(GOOD[k])
    if k in spec.LIST_KEYS:
        good = good | st.lists(good, min_size=1, max_size=3, unique_by=repr)
    return maybe(good, toml_value, odds=12)


experiment_docs = st.tuples(
    st.fixed_dictionaries({}, optional={k: _key(k) for k in GOOD}),
    maybe(
        st.just({}),
        st.sampled_from(["bogus", "icw"]).flatmap(lambda k: st.fixed_dictionaries({k: toml_value})),
        odds=12,
    ),
).map(lambda t: {**t[0], **t[1]})


@FAST
@given(
    doc=experiment_docs,
    name=maybe(
        st.sampled_from([None, "ok-1", "A.b_c"]),
        st.one_of(st.sampled_from(["../../../x", ".hidden", "a/b", "", "x" * 101, "né", "a b"]), toml_value),
    ),
    pages=maybe(
        st.sampled_from([["p.har"], "p.har"]), st.sampled_from([None, ["missing.har"], [], [3], ["p.har", "/"]])
    ),
)
def test_experiment_file_is_a_spec_or_one_error(doc, name, pages):
    with tempfile.TemporaryDirectory() as d:
        _small_har(os.path.join(d, "p.har"))
        doc = dict(doc)
        if name is not None:
            doc["name"] = name
        if pages is not None:
            doc["pages"] = pages
        try:
            exp = spec.from_dict(doc, "exp.toml", d)
        except PltError as e:
            assert str(e).startswith("exp.toml") and "\n" not in str(e), str(e)
            return
        assert spec.NAME_RE.fullmatch(exp.name) and os.path.join("results", exp.name).startswith("results/")
        assert "/" not in exp.name and not exp.name.startswith(".")
        assert 1 <= exp.repetitions <= units.MAX_REPETITIONS and 0 <= exp.seed <= units.MAX_SEED
        for i, c in enumerate(exp.configs):  # every point builds its network: nothing left to fail later
            cfg = exp.run_config(i)
            cfg.tcp()
            link = cfg.link()
            assert link.rtt_us <= units.MAX_RTT_US
            for r in (link.rate_down_bps, link.rate_up_bps):
                assert r is None or units.MIN_RATE_BPS <= r <= units.MAX_RATE_BPS
            for _, rtt_us, loss in c.overrides:
                assert 0 <= rtt_us <= units.MAX_RTT_US and (loss is None or 0 <= loss <= 1)


def _small_har(path: str) -> None:
    doc = {
        "log": {
            "entries": [
                {
                    "request": {"url": "http://a.test/"},
                    "response": {"status": 200, "content": {"size": 10, "mimeType": "text/html"}},
                }
            ]
        }
    }
    with open(path, "w") as f:
        json.dump(doc, f)


# ---- the units themselves ------------------------------------------------------------------------


@FAST
@given(
    v=st.one_of(knob, st.from_regex(r"\s*-?[0-9]{0,30}\.?[0-9]{0,5}(e[-+]?[0-9]{1,4})?\s*[a-zµ%]{0,4}", fullmatch=True))
)
def test_units_give_a_value_in_range_or_one_error(v):
    for parse, ok in (
        (units.duration_us, lambda x: 0 <= x <= units.MAX_RTT_US),
        (units.rate_bps, lambda x: x is None or units.MIN_RATE_BPS <= x <= units.MAX_RATE_BPS),
        (units.loss_fraction, lambda x: 0 <= x <= 1),
        (
            units.queue_spec,
            lambda x: (
                (x[0] is None or 1 <= x[0] <= units.MAX_QUEUE_PACKETS)
                and (x[1] is None or units.MIN_QUEUE_BYTES <= x[1] <= units.MAX_QUEUE_BYTES)
            ),
        ),
    ):
        try:
            assert ok(parse(v)), (parse.__name__, v)
        except PltError as e:
            assert "\n" not in str(e) and re.match(r"invalid ", str(e)), str(e)


# ---- URLs split as urlsplit splits them --------------------------------------------------------


@FAST
@given(
    st.one_of(
        st.text(alphabet="hHtTpPsS:/?#[]@%.-+1aé \t\n\x00\x7f", max_size=24),
        st.builds(
            lambda s, rest: s + rest,
            st.sampled_from(["http://", "HTTPS://", "x+y.z-1:", "1a:", "//", ":"]),
            st.text(max_size=20),
        ),
    )
)
def test_url_split_is_urlsplits(url):
    from urllib.parse import SplitResult, urlsplit

    try:
        want = urlsplit(url)
        want = (want.scheme, want.netloc)
    except ValueError as e:
        want = str(e)
    try:
        got = urls.split(url)
    except ValueError as e:
        got = str(e)
    assert got == want
    if isinstance(want, tuple):
        s = SplitResult("", want[1], "", "", "")
        try:
            port = s.port
        except ValueError:
            port = -1
        assert urls.host_port(want[1]) == ((s.hostname or "").lower(), port)
