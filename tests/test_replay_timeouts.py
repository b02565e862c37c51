"""The replay server's bound on connections that never finish their TLS handshake or first request
(issue 24, knob server_timeout_s): parsed and refused like every knob, carried by the manifest,
passed on by the runner, honoured by `pltlab-dp replay`. No root needed: the server listens on
127.0.0.1, the runner's topology is a stand-in."""

import json
import os
import select
import socket
import subprocess
import time

import pytest
from conftest import pltlab_cmd

from pltlab import dataplane
from pltlab.archive.model import Obj, Page
from pltlab.errors import PltError
from pltlab.replay import manifest
from pltlab.replay import server as replay_server
from pltlab.run import runner
from pltlab.run.config import RunConfig


def _page() -> Page:
    url = "http://a.test/"
    return Page(url=url, objects=[Obj(url=url, size=100, mime="text/html")])


def test_the_knob_has_a_generous_default_and_refuses_nonsense():
    assert RunConfig().server_timeout_s == 120  # over Chromium's 60 s for an unused socket
    assert RunConfig(server_timeout_s=30).server_timeout_s == 30
    assert RunConfig.from_knobs({"server_timeout_s": 86_400}).server_timeout_s == 86_400
    for bad in (0, -5, 1.5, "30s", True, None, 86_401, float("nan")):
        with pytest.raises(PltError) as e:
            RunConfig.from_knobs({"server_timeout_s": bad})
        msg = str(e.value)
        assert "\n" not in msg and msg.startswith("invalid server_timeout_s") and "from 1 to 86400 seconds" in msg
    cp = pltlab_cmd("run", "wikipedia", "--server-timeout", "0")
    assert cp.returncode != 0 and "invalid --server-timeout 0: must be an integer from 1 to 86400" in cp.stderr


def test_the_manifest_carries_the_bound(tmp_path):
    ips = {"a.test": "198.19.0.1"}
    assert manifest.build([_page()], ips, str(tmp_path), None)["request_timeout_ms"] == 120_000
    assert manifest.build([_page()], ips, str(tmp_path), None, request_timeout_s=7)["request_timeout_ms"] == 7_000


class _Topology:
    """What PageRunner asks of its topology until the replay has started, without namespaces."""

    workdir = ""

    def __init__(self, spec, run_id=None):
        self.origin_ips = [f"198.19.0.{i + 1}" for i in range(spec.origins)]
        self.client_ns, self.run_id = None, "test"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def watch(self, *args):
        pass


class _Replay(replay_server.ReplayServer):
    made: list = []

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.made.append(self)

    def start(self, timeout: float = 10.0) -> None:  # (no namespace to start it in)
        pass


def test_the_runner_passes_the_knob_to_the_replay(monkeypatch, tmp_path):
    monkeypatch.setattr(_Topology, "workdir", str(tmp_path))
    monkeypatch.setattr(runner, "Topology", _Topology)
    monkeypatch.setattr(runner, "ReplayServer", _Replay)
    for cfg, want in ((RunConfig(), 120_000), (RunConfig(server_timeout_s=9), 9_000)):
        with runner.PageRunner(_page(), cfg):
            pass
        assert _Replay.made.pop().manifest["request_timeout_ms"] == want


def test_the_replay_closes_a_silent_connection_at_the_bound(tmp_path):
    m = manifest.build([_page()], {"a.test": "127.0.0.1"}, str(tmp_path), None, request_timeout_s=1)
    m["listen"] = [dict(e, port=0) for e in m["listen"]]  # any free port, no privilege needed
    path = os.path.join(tmp_path, "replay.json")
    with open(path, "w") as f:
        json.dump(m, f)
    p = subprocess.Popen(
        [dataplane.binary(), "replay", "--manifest", path], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert select.select([p.stdout], [], [], 10)[0], "no ready line"
        host, port = json.loads(p.stdout.readline())["listen"][0]["addr"].rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as silent:
            t0 = time.monotonic()
            assert silent.recv(1) == b""  # closed by the server, not by this 5 s timeout
            took = time.monotonic() - t0
        assert 0.9 <= took < 4, took
        with socket.create_connection((host, int(port)), timeout=5) as s:
            s.sendall(b"GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n")
            assert s.recv(4096).startswith(b"HTTP/1.1 200 OK\r\n")
        st = dataplane.snapshot(p)
        assert st and (st["request_timeouts"], st["handshake_timeouts"], st["requests"]) == (1, 0, 1), st
    finally:
        dataplane.terminate(p)
