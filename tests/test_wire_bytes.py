"""Bytes on the wire as recorded: bodies sent with their recorded Content-Encoding and transfer
size (archive/wire.py, replay/manifest.py), decoded back in the tests."""

import hashlib
import json
import os
import sys

import pytest

from pltlab.archive import synth, wire
from pltlab.archive.model import Obj, Page
from pltlab.replay import manifest
from pltlab.run.runner import PageRunner, RunConfig

CODINGS = ["gzip", "br", "deflate", "zstd", "gzip, br"]
HTML = (
    "<!DOCTYPE html><html><head><title>t</title></head><body>"
    + "".join(f"<p>paragraph {i} of a recorded page</p>" for i in range(400))
    + "</body></html>"
).encode()


def page() -> Page:
    p = Page(url="http://www.a.test/")
    p.objects = [
        Obj(
            url="http://www.a.test/",
            mime="text/html",
            body=HTML,
            encoding="gzip",
            transfer_size=2100,
            headers=[("Content-Type", "text/html"), ("Content-Encoding", "gzip")],
        ),
        Obj(
            url="http://www.a.test/app.js",
            mime="application/javascript",
            size=40_000,
            encoding="br",
            transfer_size=9_000,
            initiator="http://www.a.test/",
            headers=[("Content-Encoding", "br")],
        ),
        Obj(
            url="http://www.a.test/s.css",
            mime="text/css",
            size=30_000,
            encoding="zstd",
            transfer_size=12_000,
            initiator="http://www.a.test/",
            headers=[("Content-Encoding", "zstd")],
        ),
        Obj(
            url="http://www.a.test/d.json",
            mime="application/json",
            size=20_000,
            encoding="deflate",
            transfer_size=7_000,
            initiator="http://www.a.test/",
            headers=[("Content-Encoding", "deflate")],
        ),
        Obj(url="http://www.a.test/i.png", mime="image/png", size=15_000, initiator="http://www.a.test/"),
        Obj(
            url="http://www.a.test/odd.txt",
            mime="text/plain",
            size=5_000,
            encoding="sdch",
            transfer_size=1_000,
            initiator="http://www.a.test/",
            headers=[("Content-Encoding", "sdch")],
        ),
    ]
    return p


@pytest.mark.parametrize("coding", CODINGS)
def test_recorded_body_encodes_to_its_transfer_size_and_decodes_to_itself(coding):
    body = os.urandom(4000) + HTML
    plain = wire.encode_to(body, coding, None)
    for target in (len(plain) + 1, len(plain) + 3000):
        out = wire.encode_to(body, coding, target)
        assert wire.decode(out, coding) == body
        if not coding.endswith("br"):  # brotli has no ignorable field: the closest level only
            assert abs(len(out) - target) <= 5
    assert wire.decode(wire.encode(body, coding), coding) == body


@pytest.mark.parametrize("coding", ["gzip", "br", "deflate", "zstd"])
@pytest.mark.parametrize("mime", ["text/html", "application/javascript", "image/png", "image/gif"])
def test_synthesized_body_meets_both_recorded_sizes(coding, mime):
    p = Page(url="http://a.test/")
    o = Obj(url="http://a.test/x", mime=mime, size=50_000, encoding=coding, transfer_size=17_000)
    p.objects = [o]
    fit = wire.for_object(p, o)
    decoded = wire.decode(fit.wire, coding)
    assert len(decoded) == 50_000 and fit.decoded == 50_000
    assert abs(len(fit.wire) - 17_000) <= 0.01 * 17_000, len(fit.wire)


def test_unsynthesized_filler_is_unchanged():
    """Bodies of pages without an encoding are what they always were (the TFO table's pages)."""
    p = page()
    o = p.objects[4]
    assert synth.body(p, o) == synth.body(p, o, None)
    assert wire.for_object(p, o).wire == synth.body(p, o)
    assert len(synth.body(p, o, 0)) == len(synth.body(p, o))


def test_manifest_keeps_encoding_scheme_order_and_post_digest(tmp_path):
    p = page()
    p.objects += [
        Obj(url="http://www.a.test/poll", size=10, mime="application/json"),
        Obj(url="http://www.a.test/poll", size=20, mime="application/json"),
        Obj(url="http://www.a.test/api", method="POST", size=5, request_body=b"q=1"),
        Obj(
            url="http://b.test/", status=301, redirect_url="https://b.test/", headers=[("Location", "https://b.test/")]
        ),
        Obj(url="https://b.test/", size=1000, mime="text/html"),
    ]
    ips = {"www.a.test": "198.19.0.1", "b.test": "198.19.0.2"}
    m = manifest.build([p], ips, str(tmp_path), {"cert": "c", "key": "k"})
    blob = open(m["responses"][0]["body"]["file"], "rb").read()
    rs = m["responses"]
    assert len(rs) == len(p.objects)  # repeated URLs are all served, in recorded order
    for o, r in zip(p.objects, rs):
        data = blob[r["body"]["offset"] : r["body"]["offset"] + r["body"]["length"]]
        enc = next((v for k, v in r["headers"] if k.lower() == "content-encoding"), "")
        if o.encoding == "sdch":  # not producible: served decoded, header dropped
            assert enc == "" and len(data) == o.size
            continue
        assert enc == o.encoding
        decoded = wire.decode(data, enc)
        if o.body is not None:
            assert decoded == o.body
        else:
            assert len(decoded) == o.size
        if o.transfer_size:
            assert abs(len(data) - o.transfer_size) <= max(5, 0.01 * o.transfer_size), o.url
        assert r["scheme"] == o.scheme
    polls = [r for r in rs if r["path"] == "/poll"]
    assert [r["body"]["length"] for r in polls] == [10, 20]
    post = next(r for r in rs if r["method"] == "POST")
    assert post["body_sha256"] == hashlib.sha256(b"q=1").hexdigest()
    upgrade = next(r for r in rs if r["host"] == "b.test" and r["scheme"] == "http")
    assert upgrade["cross_scheme"] is False
    assert all(r["cross_scheme"] for r in rs if r is not upgrade)


FETCH = r"""
import json, socket, sys
out = []
for ip, port, host, target in json.loads(sys.stdin.read()):
    s = socket.create_connection((ip, port), timeout=10)
    s.sendall(f"GET {target} HTTP/1.1\r\nHost: {host}\r\nAccept-Encoding: gzip, deflate, br, zstd\r\n"
              f"Connection: close\r\n\r\n".encode())
    data = b""
    while chunk := s.recv(1 << 16):
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    hdrs = dict(l.decode().split(": ", 1) for l in head.split(b"\r\n")[1:])
    out.append([len(data), hdrs.get("Content-Encoding", ""), body.hex()])
print(json.dumps(out))
"""


@pytest.mark.root
def test_replay_sends_encoded_bytes_as_recorded():
    p = page()
    with PageRunner(p, RunConfig(rtt="2ms")) as pr:
        req = [[pr.host_ips[o.host], 80, o.host, o.url.split(o.host, 1)[1]] for o in p.objects]
        cp = pr.topo.run("client", [sys.executable, "-c", FETCH], input=json.dumps(req))
    got = json.loads(cp.stdout)
    for o, (total, enc, body_hex) in zip(p.objects, got):
        body = bytes.fromhex(body_hex)
        if o.encoding == "sdch":
            assert enc == "" and len(body) == o.size
            continue
        assert enc == o.encoding
        decoded = wire.decode(body, enc)
        assert (decoded == o.body) if o.body is not None else (len(decoded) == o.size)
        assert abs(len(body) - o.wire_size) <= max(5, 0.01 * o.wire_size), o.url
        assert total - len(body) < 600  # the head: status line and a few headers


@pytest.mark.root
def test_builtin_loader_records_transfer_and_decoded_bytes():
    """Each request record: transfer_bytes (head + encoded body as received), body_bytes (decoded);
    padded encodings (gzip comment, zstd skippable frame, stored deflate blocks) decode cleanly."""
    from pltlab.run.runner import run_page

    p = page()
    [run] = run_page(p, RunConfig(rtt="2ms", reps=1, tfo_modes=(False,)))
    assert run["valid"], run["invalid_reason"]
    by_url = {r["url"]: r for r in run["requests"]}
    for o in p.objects:
        r = by_url[o.url]
        assert not r.get("decode_error"), (o.url, r.get("decode_error"))
        size = len(o.body) if o.body is not None else o.size
        assert r["body_bytes"] == size, o.url
        if o.encoding != "sdch":
            assert abs(r["bytes"] - o.wire_size) <= max(5, 0.01 * o.wire_size), o.url
        assert r["transfer_bytes"] == r["bytes"] + r["header_bytes"]
