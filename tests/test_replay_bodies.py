"""Replaying real recorded bodies (the cs244-2013 pages) serves byte-identical content."""

import hashlib
import json
import os
import sys
from urllib.parse import urlsplit

import pytest

from pltlab.archive import seed
from pltlab.run.runner import PageRunner, RunConfig
from tests.archive_helpers import CS244, needs_cs244

pytestmark = pytest.mark.root

FETCH = r"""
import hashlib, json, socket, sys
out = []
for ip, port, host, target in json.loads(sys.stdin.read()):
    s = socket.create_connection((ip, port), timeout=10)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
    data = b""
    while True:
        chunk = s.recv(1 << 16)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    if any(h.lower() == b"transfer-encoding: chunked" for h in lines[1:]):
        raw, body = body, b""
        while raw:
            size, _, raw = raw.partition(b"\r\n")
            n = int(size.split(b";")[0], 16)
            if n == 0:
                break
            body, raw = body + raw[:n], raw[n + 2:]
    out.append([int(lines[0].split()[1]), hashlib.sha256(body).hexdigest()])
print(json.dumps(out))
"""


@needs_cs244
def test_real_bodies_are_served_byte_identical():
    pages, _ = seed.import_pages_file(os.path.join(CS244, "Paper.pages"))
    page = next(p for p in pages if "wikipedia" in p.url)
    with PageRunner(page, RunConfig(rtt="2ms")) as pr:
        wanted, seen = [], set()
        for o in page.objects:
            parts = urlsplit(o.url)
            target = parts.path + (f"?{parts.query}" if parts.query else "")
            if o.body is None or o.scheme != "http" or (o.host, target) in seen or o.status != 200:
                continue
            seen.add((o.host, target))
            wanted.append(((pr.host_ips[o.host], o.port, o.host, target), hashlib.sha256(o.body).hexdigest()))
        cp = pr.topo.run("client", [sys.executable, "-c", FETCH], input=json.dumps([w for w, _ in wanted]))
    got = json.loads(cp.stdout)
    assert len(wanted) >= 20
    assert [g[0] for g in got] == [200] * len(wanted)
    assert [g[1] for g in got] == [h for _, h in wanted]
