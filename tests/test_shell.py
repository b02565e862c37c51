"""`pltlab shell`: a command behind the emulated link, with origins that answer HTTP."""

import json

import pytest

from tests.conftest import leaked, pltlab_cmd, project_state

pytestmark = pytest.mark.root

FETCH = r"""
import json, os, socket, time
ip = os.environ["PLTLAB_ORIGINS"].split()[0]
s = socket.create_connection((ip, 80), timeout=10)
t = time.monotonic()
out = []
for n in (1000, 50000):  # two requests on one keep-alive connection
    s.sendall(f"GET /bytes/{n} HTTP/1.1\r\nHost: {ip}\r\n\r\n".encode())
    buf = b""
    while b"\r\n\r\n" not in buf:
        buf += s.recv(65536)
    head, body = buf.split(b"\r\n\r\n", 1)
    length = int([h for h in head.split(b"\r\n") if h.lower().startswith(b"content-length")][0].split(b":")[1])
    while len(body) < length:
        body += s.recv(65536)
    out.append(len(body))
print(json.dumps({"sizes": out, "ms": (time.monotonic() - t) * 1000, "client": os.environ["PLTLAB_CLIENT_IP"]}))
"""


def test_shell_runs_command_behind_link_and_returns_its_exit_code():
    before = project_state()
    cp = pltlab_cmd("shell", "--rtt", "60ms", "--", "python3", "-c", FETCH)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout.strip().splitlines()[-1])
    assert res["sizes"] == [1000, 50000] and res["client"] == "198.18.0.1"
    assert 120 <= res["ms"] < 400  # two request/response exchanges of >= 1 RTT each
    assert not leaked(before)
    assert pltlab_cmd("shell", "--", "sh", "-c", "exit 7").returncode == 7
