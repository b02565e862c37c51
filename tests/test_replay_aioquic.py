"""An independent HTTP/3 client against `pltlab-dp replay` (issue 26 step 6): aioquic (PyPI, not
the quinn + h3 stack the data plane is built on) loads a bundled page's URLs over h3 and gets
what curl (nghttp2) gets over h2 from the same server: status, headers (less hop-by-hop and
framing ones) and body bytes; a second connection resumes from the first's session ticket with
0-RTT and the server's `quic_early_data` count rises. No root: the server listens on 127.0.0.1."""

import asyncio
import json
import os
import select
import shutil
import ssl
import subprocess
import tempfile

import pytest

from pltlab import dataplane
from pltlab.archive import bundled
from pltlab.replay import manifest
from pltlab.replay.server import make_ca

aioquic = pytest.importorskip("aioquic")
from aioquic.asyncio.client import connect  # noqa: E402
from aioquic.asyncio.protocol import QuicConnectionProtocol  # noqa: E402
from aioquic.h3.connection import H3_ALPN, H3Connection  # noqa: E402
from aioquic.h3.events import DataReceived, HeadersReceived  # noqa: E402
from aioquic.quic.configuration import QuicConfiguration  # noqa: E402

pytestmark = pytest.mark.skipif(not shutil.which("curl"), reason="needs curl (the h2 reference client)")
# not part of the answer: framing and connection headers (HTTP/2 and HTTP/3 have neither)
HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "date"}


class H3Client(QuicConnectionProtocol):
    """GET requests over one QUIC connection: each a stream, answered with (status, headers,
    body)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.h3 = H3Connection(self._quic)
        self.answers: dict[int, dict] = {}
        self.waiting: dict[int, asyncio.Future] = {}

    def quic_event_received(self, event) -> None:
        for ev in self.h3.handle_event(event):
            if not isinstance(ev, (HeadersReceived, DataReceived)):
                continue
            a = self.answers.setdefault(ev.stream_id, {"headers": [], "body": b""})
            if isinstance(ev, HeadersReceived):
                a["headers"] += [(k.decode(), v.decode()) for k, v in ev.headers]
            else:
                a["body"] += ev.data
            if ev.stream_ended and ev.stream_id in self.waiting:
                self.waiting.pop(ev.stream_id).set_result(self.answers.pop(ev.stream_id))

    async def get(self, host: str, target: str) -> tuple[int, dict, bytes]:
        sid = self._quic.get_next_available_stream_id()
        fields = [(":method", "GET"), (":scheme", "https"), (":authority", host), (":path", target)]
        self.h3.send_headers(sid, [(k.encode(), v.encode()) for k, v in fields], end_stream=True)
        self.waiting[sid] = asyncio.get_running_loop().create_future()
        self.transmit()
        a = await asyncio.wait_for(self.waiting[sid], 10)
        status = next(int(v) for k, v in a["headers"] if k == ":status")
        return status, _header_map(a["headers"]), a["body"]


def _header_map(pairs) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for k, v in pairs:
        if not k.startswith(":") and k.lower() not in HOP:
            out.setdefault(k.lower(), []).append(v)
    return out


async def _load(port: int, ca: str, urls: list[tuple[str, str]], tickets: list, ticket=None, early=False):
    """One connection: ``urls`` (host, target) in turn; session tickets appended to ``tickets``.
    With ``ticket`` the connection resumes; ``early``: the first request leaves before the
    handshake completes (0-RTT)."""
    cfg = QuicConfiguration(is_client=True, alpn_protocols=H3_ALPN, server_name=urls[0][0])
    cfg.verify_mode = ssl.CERT_REQUIRED
    cfg.load_verify_locations(ca)  # the replay's generated CA, as curl and the loaders trust it
    cfg.session_ticket = ticket
    async with connect(
        "127.0.0.1",
        port,
        configuration=cfg,
        create_protocol=H3Client,
        session_ticket_handler=tickets.append,
        wait_connected=not early,
    ) as client:
        out = [await client.get(h, t) for h, t in urls]
        await asyncio.sleep(0.05)  # (the server's tickets come after the handshake)
        return out


def _curl_h2(port: int, ca: str, host: str, target: str, tmp: str) -> tuple[int, dict, bytes]:
    head, body = os.path.join(tmp, "head"), os.path.join(tmp, "body")
    url = f"https://{host}:{port}{target}"
    cmd = ["curl", "-s", "--http2", "--cacert", ca, "--resolve", f"{host}:{port}:127.0.0.1", "-D", head, "-o", body]
    cp = subprocess.run([*cmd, url], capture_output=True, text=True, timeout=20)
    assert cp.returncode == 0, cp.stderr
    lines = [ln for ln in open(head).read().splitlines() if ln.strip()]
    assert lines[0].startswith("HTTP/2 "), lines[0]  # ALPN h2
    pairs = [tuple(x.strip() for x in ln.split(":", 1)) for ln in lines[1:]]
    return int(lines[0].split()[1]), _header_map(pairs), open(body, "rb").read()


@pytest.fixture(scope="module")
def replay():
    """`pltlab-dp replay` for the bundled page over h3 (every host on 127.0.0.1, any free port):
    (tcp port, udp port, CA, the page's https (host, target) pairs, the process)."""
    tmp = tempfile.mkdtemp(prefix="pltlab-aioquic-")
    page = bundled.load("wikipedia")
    hosts = sorted({o.host for o in page.objects})
    tls = make_ca(tmp, hosts)
    m = manifest.build(
        [page],
        dict.fromkeys(hosts, "127.0.0.1"),
        tmp,
        manifest.TlsFiles(cert=tls["cert"], key=tls["key"]),
        protocol="h3",
    )
    m["listen"] = [dict(e, port=0) for e in m["listen"] if e["port"] == 443]
    path = os.path.join(tmp, "replay.json")
    with open(path, "w") as f:
        json.dump(m, f)
    p = subprocess.Popen(
        [dataplane.binary(), "replay", "--manifest", path], stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
    )
    try:
        assert select.select([p.stdout], [], [], 10)[0], "no ready line"
        listen = json.loads(p.stdout.readline())["listen"]
        port = {e.get("transport", "tcp"): int(e["addr"].rsplit(":", 1)[1]) for e in listen}
        seen, urls = set(), []
        for o in page.objects:
            target = o.url.split(o.host, 1)[1] or "/"
            if o.method == "GET" and (o.host, target) not in seen:
                seen.add((o.host, target))
                urls.append((o.host, target))
        yield port["tcp"], port["udp"], tls["ca"], urls, p, tmp
    finally:
        dataplane.terminate(p)
        shutil.rmtree(tmp, ignore_errors=True)


def test_aioquic_gets_what_h2_gets(replay):
    tcp, udp, ca, urls, p, tmp = replay
    urls = urls[:12]
    got = asyncio.run(_load(udp, ca, urls, []))
    for (host, target), (status, headers, body) in zip(urls, got, strict=True):
        want = _curl_h2(tcp, ca, host, target, tmp)
        assert (status, headers, body) == want, (host, target)
    assert sum(len(b) for _, _, b in got) > 100_000  # real bodies, not empty answers
    st = dataplane.snapshot(p)
    assert st["h3_streams"] >= len(urls) and st["quic_full_used"] >= 1, st


def test_aioquic_resumes_with_0rtt(replay):
    _tcp, udp, ca, urls, p, _tmp = replay
    host = urls[0][0]
    one = [u for u in urls if u[0] == host][:2]
    tickets: list = []
    first = asyncio.run(_load(udp, ca, one, tickets))
    assert tickets, "the server sent no session ticket"
    assert tickets[-1].max_early_data_size, "the ticket allows no early data"
    before = dataplane.snapshot(p)
    again = asyncio.run(_load(udp, ca, one, [], ticket=tickets[-1], early=True))
    after = dataplane.snapshot(p)
    assert again == first  # the same answers, the first one to a request sent as 0-RTT data
    rose = {k: after[k] - before[k] for k in ("quic_resumed", "quic_early_data", "quic_early_used", "quic_full")}
    assert rose["quic_early_data"] == 1 and rose["quic_early_used"] == 1 and rose["quic_resumed"] == 1, rose
    assert rose["quic_full"] == 0 and after["quic_early_bytes"] > before["quic_early_bytes"], rose
