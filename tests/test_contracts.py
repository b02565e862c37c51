"""The documents between the control plane and pltlab-dp (issue 25, point 3): the data plane owns
their contracts. `pltlab-dp schema` prints the JSON Schema of each, generated from the Rust types;
what Python writes (link config, replay manifest, loader plan), built the way the runner builds
it, must validate against it; Python's typed documents name only keys the data plane knows; the
counters Python reads are the ones Rust writes; limits both sides check agree. No root."""

import dataclasses
import json
import subprocess
import sys

import jsonschema
import pytest

from pltlab import dataplane, protocols, units
from pltlab.archive import bundled
from pltlab.dataplane import ABSENT
from pltlab.errors import PltError
from pltlab.loaders import loader
from pltlab.loaders import plan as plans
from pltlab.net import emulator, lateness
from pltlab.net.topology import Topology
from pltlab.net.wan import TcpKnobs
from pltlab.replay import hosts, manifest
from pltlab.run import knobs, runner
from pltlab.run.config import RunConfig
from pltlab.run.traced import check_icw

PAGES = ("nytimes", "wikipedia", "linkedin")  # http and https, http only, https only


@pytest.fixture(scope="module")
def schemas() -> dict:
    return dataplane.schemas()


def _errors(schema: dict, doc) -> list[str]:
    v = jsonschema.Draft202012Validator(schema)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in v.iter_errors(doc)]


def _valid(schemas: dict, name: str, doc) -> None:
    doc = json.loads(json.dumps(doc))  # as written to the file
    assert _errors(schemas[name], doc) == []


def test_schema_lists_every_document(schemas):
    assert set(schemas) >= {
        "link-config",
        "manifest",
        "plan",
        "link-stats",
        "link-snapshot",
        "replay-stats",
        "load-report",
        "schedule-step",
        "schedule-reply",
        "schedule-end",
    }
    for name, s in schemas.items():
        jsonschema.Draft202012Validator.check_schema(s)
        assert s["x-pltlab-way"] in ("input", "output"), name
    one = subprocess.run([dataplane.binary(), "schema", "plan"], capture_output=True, text=True, check=True)
    assert json.loads(one.stdout) == schemas["plan"]
    bad = subprocess.run([dataplane.binary(), "schema", "nope"], capture_output=True, text=True)
    assert bad.returncode == 1 and "one of link-config, manifest, plan" in bad.stderr


# ---- what Python writes validates --------------------------------------------------------------


def _ips(page) -> dict[str, str]:
    return {h: f"198.19.{i // 250}.{i % 250 + 1}" for h, i in hosts.assign([page]).items()}


@pytest.mark.parametrize("name", PAGES)
def test_plans_validate(schemas, name):
    """Plans as the runner builds them: both models, https upgrades, h2, TLS session modes."""
    page = bundled.load(name)
    ips = _ips(page)
    some = sorted(ips)[::2]
    h2 = {ip: protocols.get("h2") for ip in ips.values()}
    for kw in (
        {},
        {"model": "chromium"},
        {"model": "chromium", "https_hosts": some, "offered": h2, "ca": "/ca.pem", "tls_mode": "0rtt"},
        {"https_hosts": sorted(ips), "offered": h2, "ca": "/ca.pem", "tls_mode": "resume", "max_conns_per_host": 2},
        {"compute_delays": True, "dns_delay_ms": 5.0, "timeout_s": 30.0},
    ):
        plan = plans.build(page, ips, tfo=True, **kw)
        _valid(schemas, "plan", plan)


@pytest.mark.parametrize("name", PAGES)
def test_manifests_validate(schemas, name, tmp_path):
    page = bundled.load(name)
    ips = _ips(page)
    tls = manifest.TlsFiles(cert="/c.pem", key="/c.key")
    for i, kw in enumerate(
        (
            {"tls": tls},
            {"tls": tls, "protocol": "h2", "think_time": True, "h2_priority": "round-robin"},
            {"tls": {"cert": "/c.pem", "key": "/c.key"}, "protocol": "h1", "request_timeout_s": 7},
        )
    ):
        work = tmp_path / str(i)
        work.mkdir()
        m = manifest.build([page], ips, str(work), **kw)
        _valid(schemas, "manifest", m)
        offered = any(e.get("alpn") == ["h2", "http/1.1"] for e in m["listen"])
        assert offered or kw.get("protocol") != "h2"
        assert not offered or kw.get("protocol") != "h1"


def test_manifest_without_tls_validates(schemas, tmp_path):
    page = bundled.load("wikipedia")  # http only
    m = manifest.build([page], _ips(page), str(tmp_path), None)
    assert m["tls"] is None and not any(e["tls"] for e in m["listen"])
    _valid(schemas, "manifest", m)


def test_link_configs_validate(schemas, tmp_path):
    """Link configs as a runner's topology writes them: rates, loss, queues in packets or bytes,
    delivery traces, per-origin RTT and loss, a pcap, the emulator's settings."""
    trace = tmp_path / "t.trace"
    trace.write_text("1\n2\n5\n")
    page = bundled.load("nytimes")
    names = hosts.assign([page])
    host = sorted(names)[0]
    for values in (
        {},
        {"rtt": "100ms", "rate": "4mbit", "rate_up": "256kbit", "loss": "1%", "queue": "64KB", "seed": 7},
        {"rtt": "40ms", "trace_down": str(trace), "trace_up": str(trace), "origin_rtt": {host: "5ms/2%", "0": "300ms"}},
        {"rtt": "0ms", "queue": 50, "pcap": str(tmp_path / "x.pcap"), "sched_fifo": False, "idle_poll": False},
    ):
        cfg = RunConfig.from_knobs(values)
        topo = Topology(cfg.topology(max(names.values()) + 1, names))
        doc = dataplane.document(topo.link_config())
        _valid(schemas, "link-config", doc)
    assert doc["uplink"]["queue_packets"] == 50 and doc["pcap"] == str(tmp_path / "x.pcap")


def test_schedule_conversation_validates(schemas, monkeypatch):
    """What `pltlab predict` writes to `pltlab-dp schedule` (the plan, then one step per line)
    and every line it reads back are what their schemas say: predictions of pages over
    HTTP/1.1 and h2, the archive and Chromium models."""
    from pltlab.predict import simulate

    told, heard = [], []

    class Recording(dataplane.Conversation):
        def tell(self, doc):
            told.append(json.loads(json.dumps(doc)))
            super().tell(doc)

        def _line(self):
            heard.append(super()._line())
            return heard[-1]

    monkeypatch.setattr(dataplane, "Conversation", Recording)
    events = set()
    for name in PAGES:
        page = bundled.load(name)
        for kw in ({}, {"model": "chromium", "schemes": "https", "protocol": "h2", "tls": "0rtt"}):
            told.clear()
            heard.clear()
            simulate.predict(page, RunConfig(rtt="50ms", **kw), True)
            _valid(schemas, "plan", told[0])
            for step in told[1:]:
                _valid(schemas, "schedule-step", step)
                events |= set(step.get("event", {}))
            assert len(heard) == len(told)  # a reply per step, the end for the plan's (unanswered) line
            for reply in heard[:-1]:
                _valid(schemas, "schedule-reply", reply)
            _valid(schemas, "schedule-end", heard[-1])
    assert events >= {"connected", "connected_h2", "first_byte", "done", "stream_done"}, events
    # timers (no bundled page has compute delays): the DNS delay's, handed back as set
    obj = {"url": "http://a/", "host": "a", "ip": "10.0.0.1", "port": 80}
    told.clear()
    with simulate.Scheduler({"objects": [obj], "dns_delay_ms": 5.0}) as s:
        ((kind, timer),) = s.start(0.0)[0].items()
        assert kind == "timer" and timer == {"at": 5.0, "timer": {"dns": 0}}
        assert s.handle(timer["at"], {"timer": timer["timer"]})[0]["open"]["dns_end_ms"] == 5.0
    for step in told[1:]:
        _valid(schemas, "schedule-step", step)


# ---- Python's typed documents know only the data plane's keys ----------------------------------


def _def(schema: dict, name: str | None) -> dict:
    return schema if name is None else schema["$defs"][name]


TYPES = [
    ("link-config", None, emulator.LinkConfig),
    ("link-config", "Side", emulator.LinkSide),
    ("link-config", "DirCfg", emulator.LinkDirection),
    ("link-config", "Override", emulator.LinkOverride),
    ("link-config", "GilbertCfg", emulator.LinkGilbert),
    ("manifest", None, manifest.Manifest),
    ("manifest", "Listen", manifest.Listen),
    ("manifest", "TlsFiles", manifest.TlsFiles),
    ("manifest", "ResponseSpec", manifest.Response),
    ("plan", None, plans.Plan),
    ("plan", "Object", plans.PlanObject),
    ("plan", "TightPhase", plans.TightPhase),
]


# Fields Python has before the data plane reads them (none now); each leaves this table when the
# schema has it (checked below).
PENDING: dict = {}


@pytest.mark.parametrize("doc,part,cls", TYPES, ids=[f"{d}:{p or 'top'}" for d, p, _ in TYPES])
def test_python_types_match_the_schema(schemas, doc, part, cls):
    """Every field of a Python document type is a key of the Rust type (a misspelt or new one
    would be refused); every key Rust requires is a field Python always writes."""
    s = _def(schemas[doc], part)
    assert s["additionalProperties"] is False
    fields = {f.name: f for f in dataclasses.fields(cls)}
    pending = PENDING.get((doc, part), set())
    assert not pending & set(s["properties"]), f"the data plane has {pending & set(s['properties'])}: not pending"
    assert all(fields[f].default is ABSENT for f in pending)  # (never written unless asked for)
    assert set(fields) - pending <= set(s["properties"]), set(fields) - pending - set(s["properties"])
    for key in s.get("required", []):
        assert key in fields and fields[key].default is not ABSENT, key


def test_file_body_is_one_of_the_body_forms(schemas):
    body = schemas["manifest"]["$defs"]["BodySpec"]["anyOf"]
    forms = [set(b["properties"]) for b in body]
    assert {f.name for f in dataclasses.fields(manifest.FileBody)} in forms


def test_absent_fields_are_left_out():
    o = plans.PlanObject(url="u", method="GET", host="h", ip="1.2.3.4", port=80, tls=False, parent=None, delay_ms=0)
    assert dataplane.document(o) == {
        "url": "u",
        "method": "GET",
        "host": "h",
        "ip": "1.2.3.4",
        "port": 80,
        "tls": False,
        "parent": None,
        "delay_ms": 0,
    }
    with pytest.raises(TypeError):
        plans.PlanObject(url="u", metod="GET")  # a misspelt key is an error where it is written


def test_unknown_keys_fail_validation_and_the_data_plane(schemas, tmp_path):
    """A key the data plane does not know fails the schema and pltlab-dp itself, which names it
    (before touching a namespace or socket)."""
    page = bundled.load("wikipedia")
    plan = plans.build(page, _ips(page), tfo=False)
    plan["objects"][0]["delayble"] = True
    assert any("delayble" in e for e in _errors(schemas["plan"], plan))
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    cp = subprocess.run([dataplane.binary(), "load", "--plan", str(path)], capture_output=True, text=True, timeout=30)
    assert cp.returncode == 1 and "unknown field `delayble`" in cp.stderr
    m = {"listen": [{"ip": "127.0.0.1", "port": 0}], "responses": [], "thinktime": True}
    assert any("thinktime" in e for e in _errors(schemas["manifest"], m))
    path = tmp_path / "m.json"
    path.write_text(json.dumps(m))
    cp = subprocess.run(
        [dataplane.binary(), "replay", "--manifest", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
        stdin=subprocess.DEVNULL,
    )
    assert cp.returncode == 1 and "unknown field `thinktime`" in cp.stderr
    cfg = {"client": {"netns": "/x", "tun": "t"}, "server": {"netns": "/y", "tun": "t"}, "lingr_us": 5}
    cp = subprocess.run(
        [dataplane.binary(), "link", "--config", "-"], input=json.dumps(cfg), capture_output=True, text=True
    )
    assert cp.returncode == 1 and "unknown field `lingr_us`" in cp.stderr


# ---- what the data plane prints validates (no root: loopback; the emulator: root) ---------------


def test_replay_and_loader_outputs_validate(schemas, tmp_path):
    """A replay server on 127.0.0.1 (any port) and one load of a small page from it: the server's
    snapshot and final statistics, and the load report, are what their schemas say."""
    page = bundled.load("google")  # http only, 6 objects
    ips = {h: "127.0.0.1" for h in page.hosts}
    m = manifest.build([page], ips, str(tmp_path), None)
    m["listen"] = [dict(e, port=0) for e in m["listen"]]
    path = tmp_path / "replay.json"
    path.write_text(json.dumps(m))
    p = subprocess.Popen(
        [dataplane.binary(), "replay", "--manifest", str(path)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )
    try:
        ready = json.loads(p.stdout.readline())
        port = int(ready["listen"][0]["addr"].rsplit(":", 1)[1])
        plan = plans.build(page, ips, tfo=False, timeout_s=20.0)
        for o in plan["objects"]:
            o["port"] = port
        (tmp_path / "plan.json").write_text(json.dumps(plan))
        cp = subprocess.run(
            [dataplane.binary(), "load", "--plan", str(tmp_path / "plan.json")],
            capture_output=True,
            text=True,
            timeout=60,
        )
        report = dataplane.result(cp, "load")
        _valid(schemas, "load-report", report)
        assert len(report["requests"]) == len(plan["objects"])
        snap = dataplane.snapshot(p)
        assert snap["event"] == "snapshot" and snap["requests"] == len(plan["objects"])
        _valid(schemas, "replay-stats", snap)
    finally:
        dataplane.terminate(p)
    final = json.loads(open(m["stats"]).read())
    assert final["event"] == "stats"
    _valid(schemas, "replay-stats", final)


@pytest.mark.root
def test_link_outputs_validate(schemas):
    with Topology() as topo:
        knock = f"import socket; socket.socket().connect_ex(({topo.origin_ips[0]!r}, 9))"  # SYN, RST
        topo.run("client", [sys.executable, "-c", knock], check=False, timeout=10)
        snap = topo.link_snapshot()
    _valid(schemas, "link-snapshot", snap)
    _valid(schemas, "link-stats", topo.link_stats)
    assert topo.link_stats["uplink"]["packets_in"] >= 1


# ---- counters: the names Python reads are the ones Rust writes -----------------------------------


def _props(schema: dict, part: str | None = None) -> dict:
    return _def(schema, part)["properties"]


def test_replay_counters_are_the_servers(schemas):
    stats = _props(schemas["replay-stats"])
    keys = runner.SERVER_CONN_KEYS + runner.SERVER_TFO_KEYS + runner.SERVER_TLS_KEYS
    for k in keys + ("tfo_tls_hello_max", "tfo_syn_bytes_max"):
        assert k in stats, k
        assert stats[k]["type"] == "integer", k


def test_link_snapshot_and_request_keys_are_the_data_planes(schemas):
    snap = schemas["link-snapshot"]
    interval = _props(snap, "DirInterval")
    for k in lateness._KEYS + ("packets_out",):
        assert k in interval, k
    for k in runner.LINK_DROP_KEYS:  # (a load's link drops: runner.link_drops)
        assert interval[k]["type"] == "integer", k
    assert {"p50", "p99", "max", "count"} <= set(_props(snap, "Lateness"))
    assert {"uplink", "downlink"} <= set(_props(snap))
    rec = _props(schemas["load-report"], "Rec")
    assert set(loader.REQUEST_BYTES) <= set(rec)


def test_link_aid_keys_are_the_data_planes(schemas):
    """The precision aids' keys emulator.aids_missing reads (the final statistics; the ready line
    prints the same ``Aids``)."""
    stats = _props(schemas["link-stats"])
    for name in emulator.AIDS:
        assert f"{name}_error" in stats, name
    for name in ("sched_fifo", "idle_poll"):
        assert {f"{name}_requested", f"{name}_applied"} <= set(stats), name


# ---- limits declared once, agreeing with the data plane's ---------------------------------------


def test_limits_agree_with_the_data_plane(schemas):
    link = _props(schemas["link-config"])
    for k in ("busy_wait_us", "linger_us", "standby_us", "stall_us"):
        assert link[k]["maximum"] == units.MAX_EMULATOR_WAIT_US, k
    timeout = _props(schemas["manifest"])["request_timeout_ms"]
    assert timeout["maximum"] == units.MAX_SERVER_TIMEOUT_S * 1000
    # the knobs hold users to the same limits
    assert knobs.KNOBS["server_timeout_s"].parse(units.MAX_SERVER_TIMEOUT_S, "x") == units.MAX_SERVER_TIMEOUT_S
    assert knobs.KNOBS["busy_wait_us"].parse(units.MAX_EMULATOR_WAIT_US, "x") == units.MAX_EMULATOR_WAIT_US
    for k, v in (
        ("server_timeout_s", units.MAX_SERVER_TIMEOUT_S + 1),
        ("busy_wait_us", units.MAX_EMULATOR_WAIT_US + 1),
    ):
        with pytest.raises(PltError, match="invalid"):
            knobs.KNOBS[k].parse(v, "x")


def test_choices_agree_with_the_data_plane(schemas):
    """The knobs' choices that go into a document are the data plane's."""
    assert set(knobs.TLS_MODES) == set(_props(schemas["plan"])["tls_mode"]["enum"])
    scheme = schemas["manifest"]["$defs"]["Scheme"]["oneOf"]
    assert set(knobs.SERVER_PRIORITIES) == {c["const"] for c in scheme}


def test_one_icw_range_everywhere():
    """The icw knob, the topology's TCP knobs and the ICW study's ICWs take one range (units)."""
    for v in (units.MIN_ICW, units.MAX_ICW):
        assert check_icw(v) == v
        assert RunConfig(icw=v).icw == v
        assert TcpKnobs(initcwnd=v).initcwnd == v
    for v in (units.MIN_ICW - 1, units.MAX_ICW + 1):
        with pytest.raises(PltError, match=f"from {units.MIN_ICW} to {units.MAX_ICW} segments"):
            check_icw(v)
        with pytest.raises(PltError, match=f"from {units.MIN_ICW} to {units.MAX_ICW} segments"):
            RunConfig(icw=v)
        with pytest.raises(PltError, match=f"from {units.MIN_ICW} to {units.MAX_ICW} segments"):
            TcpKnobs(initcwnd=v)
