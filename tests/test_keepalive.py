"""Knob keepalive (issue 29): HTTP/1.1 without connection reuse, as the 2011 TFO paper's HTTP/1.0
server served its pages. Parsed and refused like every knob (HTTP/1.1's alone: refused under h2
and h3 through the protocols table), carried by the manifest, passed on by the runner; (root) the
built-in loader and Chromium then open a connection per request, by the replay server's counts."""

import json
import os

import pytest
from conftest import pltlab_cmd
from test_replay_timeouts import _page, _Replay, _Topology

from pltlab import protocols
from pltlab.errors import PltError
from pltlab.experiments import spec
from pltlab.replay import manifest
from pltlab.run import knobs, runner
from pltlab.run.config import RunConfig

PAGE = "wikipedia"  # 29 requests on 4 origins, recorded over http
chromium_missing = pytest.mark.skipif(not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium")


def test_the_knob_parses_on_and_off():
    assert RunConfig().keepalive == "on"  # reuse, as every browser does
    assert RunConfig(keepalive="off").keepalive == "off"
    assert RunConfig.from_knobs({"keepalive": False}).keepalive == "off"  # (a TOML boolean)
    assert RunConfig(keepalive="off").columns()["keepalive"] == "off"
    for bad in ("close", "", None, 0):
        with pytest.raises(PltError) as e:
            RunConfig.from_knobs({"keepalive": bad})
        assert "\n" not in str(e.value) and str(e.value).startswith("invalid keepalive") and "on or off" in str(e.value)
    cp = pltlab_cmd("run", PAGE, "--keepalive", "sometimes")
    assert cp.returncode != 0 and "invalid --keepalive 'sometimes': on or off" in cp.stderr


@pytest.mark.parametrize("protocol", ["h2", "h3"])
def test_off_is_refused_where_requests_share_a_multiplexed_connection(protocol):
    with pytest.raises(PltError) as e:
        RunConfig(protocol=protocol, keepalive="off")
    assert str(e.value).startswith(f"keepalive does not apply to protocol {protocol}: ") and "\n" not in str(e.value)
    assert "HTTP/1.1" in str(e.value)
    cfg = RunConfig(protocol=protocol, tfo="off")  # its default: fine, and its column says so
    assert cfg.keepalive == "on" and cfg.columns()["keepalive"] == protocols.NA
    cp = pltlab_cmd("run", PAGE, "--protocol", protocol, "--tfo", "off", "--keepalive", "off")
    assert cp.returncode != 0 and f"keepalive does not apply to protocol {protocol}" in cp.stderr
    assert len(cp.stderr.strip().splitlines()) == 1, cp.stderr


def test_off_applies_to_http1_and_to_recorded_protocols():
    assert protocols.applies("h1", "keepalive") and protocols.applies("recorded", "keepalive")
    assert not protocols.applies("h2", "keepalive") and not protocols.applies("h3", "keepalive")
    assert RunConfig(protocol="h1", keepalive="off").columns()["keepalive"] == "off"
    assert RunConfig(protocol="recorded", keepalive="off").keepalive == "off"  # (its HTTP/1.1 origins)


def test_experiments_sweep_it_and_refuse_it_beside_h2():
    exp = spec.from_dict({"pages": [PAGE], "keepalive": ["on", "off"], "compare": "keepalive"}, "e.toml")
    assert [exp.run_config(c).keepalive for c in range(2)] == ["on", "off"] and exp.axis() == "keepalive"
    assert knobs.KNOBS["keepalive"].words("off") == "keep-alive off"
    with pytest.raises(PltError, match="^e.toml: keepalive does not apply to protocol h2"):
        spec.from_dict({"pages": [PAGE], "protocol": "h2", "keepalive": "off"}, "e.toml")
    with pytest.raises(PltError, match="^e.toml: the point protocol h2, keepalive off: keepalive does not apply"):
        spec.from_dict({"pages": [PAGE], "protocol": ["h1", "h2"], "keepalive": ["on", "off"]}, "e.toml")
    with pytest.raises(PltError, match="^e.toml: keepalive does not apply to protocol h2"):
        spec.from_dict(
            {"pages": [PAGE], "protocol": "h2", "keepalive": ["on", "off"], "compare": "keepalive"}, "e.toml"
        )


def test_the_manifest_and_the_runner_carry_it(monkeypatch, tmp_path):
    ips = {"a.test": "198.19.0.1"}
    # on (the default) is absent: the manifest of every earlier run is the document it was
    assert "keep_alive" not in manifest.build([_page()], ips, str(tmp_path), None)
    assert manifest.build([_page()], ips, str(tmp_path), None, keep_alive=False)["keep_alive"] is False
    monkeypatch.setattr(_Topology, "workdir", str(tmp_path))
    monkeypatch.setattr(runner, "Topology", _Topology)
    monkeypatch.setattr(runner, "ReplayServer", _Replay)
    for value, want in (("on", True), ("off", False)):
        with runner.PageRunner(_page(), RunConfig(keepalive=value)):
            pass
        assert _Replay.made.pop().manifest.get("keep_alive", True) is want


def _run(*args: str) -> dict:
    opts = ["--rtt", "20ms", "--reps", "1", "--protocol", "h1", "--json"]
    cp = pltlab_cmd("run", PAGE, *opts, *args, timeout=240)
    assert cp.returncode == 0, cp.stderr[-2000:]
    return json.loads(cp.stdout)["runs"][0]


@pytest.mark.root
def test_builtin_loader_opens_a_connection_per_request_without_keepalive():
    """By the replay server's counts: under off as many HTTP/1.1 connections as requests, each
    request (TFO on) in a SYN of its own; under on fewer connections than requests."""
    off = _run("--client", "builtin", "--tfo", "on", "--keepalive", "off")
    assert off["valid"], off["invalid_reason"]
    conns = off["server_connections"]
    assert conns["h1_requests"] == len(off["requests"]) == 29 and off["not_found"] == 0
    assert conns["h1_connections"] == conns["h1_requests"]
    assert all(q["new_conn"] and q["tfo"] for q in off["requests"])  # TFO saves a round trip on each
    assert off["server_tfo"]["tfo_connections"] == 29
    on = _run("--client", "builtin", "--tfo", "on")
    assert on["valid"], on["invalid_reason"]
    conns = on["server_connections"]
    assert conns["h1_requests"] == len(on["requests"]) == 29
    assert conns["h1_connections"] < conns["h1_requests"]
    assert sum(q["tfo"] for q in on["requests"]) == on["server_tfo"]["tfo_connections"] < 29


@pytest.mark.root
@pytest.mark.slow
@chromium_missing
def test_chromium_opens_a_connection_per_request_without_keepalive():
    """Chromium honours Connection: close itself. It may open spare connections that carry
    nothing: the server's TLS connections that carried a request (Chromium upgrades the page's
    origins to https by HSTS) are the count."""
    off = _run("--client", "chromium", "--tfo", "off", "--keepalive", "off")
    assert off["valid"], off["invalid_reason"]
    conns, tls = off["server_connections"], off["server_tls"]
    assert conns["h1_requests"] >= len(off["requests"]) >= 29 and conns["h2_connections"] == 0
    assert tls["tls_full_used"] + tls["tls_resumed_used"] == conns["h1_requests"]
    assert all(q["new_conn"] for q in off["requests"])
    on = _run("--client", "chromium", "--tfo", "off")
    assert on["valid"], on["invalid_reason"]
    conns, tls = on["server_connections"], on["server_tls"]
    assert tls["tls_full_used"] + tls["tls_resumed_used"] < conns["h1_requests"]


@pytest.mark.root
def test_shell_origins_close_each_connection_without_keepalive():
    """`pltlab shell --keepalive off`: the origin server's HTTP responses say Connection: close
    (curl then connects again for its second URL); by default they keep alive."""
    script = 'o=${PLTLAB_ORIGINS%% *}; curl -sS -v -o /dev/null -o /dev/null "http://$o/" "http://$o/bytes/9" 2>&1'
    for value, want in (("off", "close"), ("on", "keep-alive")):
        cp = pltlab_cmd("shell", "--keepalive", value, "--", "sh", "-c", script, timeout=60)
        assert cp.returncode == 0, cp.stderr[-2000:]
        said = [ln.split(":", 1)[1].strip() for ln in cp.stdout.splitlines() if ln.lower().startswith("< connection:")]
        assert said == [want, want], cp.stdout
        reused = "Re-using existing connection" in cp.stdout or "Reusing existing" in cp.stdout
        assert reused == (value == "on"), cp.stdout
