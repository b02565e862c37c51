"""`pltlab record` against a three-origin test site that the test serves itself from namespaces.

a.test (http)  : index.html -> CSS + image from b.test, JS from c.test, own image
b.test (http)  : style.css -> a font from c.test and a background image (loaded by CSS)
c.test (https) : app.js -> fetch() of data.json and an script on a.test (loaded by JS)
"""

import base64
import datetime
import json
import os
import signal
import subprocess
import sys
import time

import pytest
from conftest import pltlab_cmd

from pltlab.archive.corpus import read_corpus
from pltlab.loaders.browser import spki_hash
from pltlab.loaders.browser.headless import PROFILE_PREFIX
from pltlab.loaders.browser.procs import pids_with_arg
from pltlab.net import names
from pltlab.net.topology import Topology
from pltlab.net.wan import LinkSpec, TopologySpec

pytestmark = pytest.mark.skipif(
    not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium (apt-get install chromium)"
)

HOSTS = ["a.test", "b.test", "c.test"]  # origin i serves HOSTS[i]
SCHEME = {"a.test": "http", "b.test": "http", "c.test": "https"}
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)

SITE = {
    "a.test": {
        "index.html": b"""<!doctype html><html><head><title>test site</title>
<link rel="stylesheet" href="http://b.test/style.css">
<script src="https://c.test/app.js"></script>
</head><body><p>Hello, fonts.</p><img src="/logo.png"><img src="http://b.test/photo.png">
</body></html>""",
        "logo.png": PNG,
        "late.js": b"document.title += ' (late)';",
        "hang.html": None,  # the server never answers /hang* (Ctrl-C test)
        "poll.html": b"<!doctype html><script>fetch('/hang-poll')</script><img src='/logo.png'>",
    },
    "b.test": {
        "style.css": b"""@font-face { font-family: T; src: url(https://c.test/font.woff2) format("woff2"); }
body { font-family: T, sans-serif; background: url(/bg.png); }""",
        "photo.png": PNG + b"photo",
        "bg.png": PNG + b"bg",
        "other.html": b"<!doctype html><title>other</title><img src='/photo.png'>",
        "sub/index.html": b"<!doctype html><title>sub</title>",  # /sub redirects to /sub/
    },
    "c.test": {
        "app.js": b"""fetch("https://c.test/data.json").then(r => r.json()).then(d => {
  const s = document.createElement("script"); s.src = d.next; document.head.appendChild(s);
});""",
        "data.json": b'{"next": "http://a.test/late.js"}',
        "font.woff2": b"wOF2" + bytes(range(256)) * 4,  # not a real font: Chromium fetches it anyway
    },
}

# (url, initiator url, how) for every object of index.html
EXPECTED = [
    ("http://a.test/index.html", None, None),
    ("http://b.test/style.css", "http://a.test/index.html", "parser"),
    ("https://c.test/app.js", "http://a.test/index.html", "parser"),
    ("http://a.test/logo.png", "http://a.test/index.html", "parser"),
    ("http://b.test/photo.png", "http://a.test/index.html", "parser"),
    ("http://b.test/bg.png", "http://b.test/style.css", "css"),
    ("https://c.test/font.woff2", "http://b.test/style.css", "css"),
    ("https://c.test/data.json", "https://c.test/app.js", "script"),
    ("http://a.test/late.js", "https://c.test/app.js", "script"),
]

SERVER = r"""
import http.server, os, ssl, sys, time
ip, port, root, log = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
class H(http.server.SimpleHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".woff2": "font/woff2",
                      ".json": "application/json", ".js": "text/javascript"}
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=root, **kw)
    def do_GET(self):
        with open(log, "a") as f:  # who asked: proves the client's namespace
            f.write(f"{self.client_address[0]} {self.headers.get('Host')} {self.path}\n")
        if self.path.startswith("/hang"):
            time.sleep(3600)
        super().do_GET()
    def end_headers(self):
        self.send_header("Access-Control-Allow-Origin", "*")
        self.send_header("X-Test-Origin", os.path.basename(root))
        self.send_header("Set-Cookie", "a=1")
        self.send_header("Set-Cookie", "b=2")
        super().end_headers()
    def log_message(self, *a):
        pass
srv = http.server.ThreadingHTTPServer((ip, port), H)
srv.daemon_threads = True
if len(sys.argv) > 5:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(sys.argv[5], sys.argv[6])
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
print("ready", flush=True)
srv.serve_forever()
"""


def make_cert(d, host: str) -> tuple[str, str, str]:
    """A throwaway CA and a leaf for ``host``: (chain.pem, key.pem, leaf SPKI hash)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)

    def cert(subject, issuer, key, sign_key, ca):
        b = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=30))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if not ca:
            b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        return b.sign(sign_key, hashes.SHA256())

    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "pltlab test CA")])
    ca = cert(ca_name, ca_name, ca_key, ca_key, True)
    leaf = cert(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)]), ca_name, key, ca_key, False)
    leaf_pem = leaf.public_bytes(serialization.Encoding.PEM)
    chain, keyf = os.path.join(d, "chain.pem"), os.path.join(d, "key.pem")
    with open(chain, "wb") as f:
        f.write(leaf_pem + ca.public_bytes(serialization.Encoding.PEM))
    with open(keyf, "wb") as f:
        f.write(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
    return chain, keyf, spki_hash(leaf_pem)


class Site:
    """The test site's files, certificate and servers (one per origin) inside a topology."""

    def __init__(self, topo: Topology, tmp):
        self.topo, self.tmp = topo, str(tmp)
        script = os.path.join(self.tmp, "server.py")
        with open(script, "w") as f:
            f.write(SERVER)
        chain, key, self.spki = make_cert(self.tmp, "c.test")
        self.logs = []
        for i, host in enumerate(HOSTS):
            root = os.path.join(self.tmp, "www", host)
            os.makedirs(root)
            for name, body in SITE[host].items():
                if body is not None:
                    os.makedirs(os.path.dirname(os.path.join(root, name)), exist_ok=True)
                    with open(os.path.join(root, name), "wb") as f:
                        f.write(body)
            log = os.path.join(self.tmp, f"{host}.log")
            self.logs.append(log)
            https = SCHEME[host] == "https"
            argv = [sys.executable, script, topo.origin_ips[i], "443" if https else "80", root, log]
            p = topo.popen(i, argv + ([chain, key] if https else []), stdout=subprocess.PIPE, text=True)
            assert p.stdout.readline().strip() == "ready"
        self.rules = {h: topo.origin_ips[i] for i, h in enumerate(HOSTS)}

    def cli_args(self) -> list[str]:
        args = ["--netns", self.topo.client_ns, "--spki", self.spki]
        for h, ip in self.rules.items():
            args += ["--host-rule", f"{h}={ip}"]
        return args

    def chromium_opts(self) -> dict:
        return {"netns": self.topo.client_ns, "host_rules": self.rules, "spki": [self.spki]}

    def requests_seen(self) -> list[tuple[str, str, str]]:
        """(client address, Host header, path) of every request the servers got."""
        out = []
        for log in self.logs:
            if os.path.exists(log):
                with open(log) as f:
                    out += [tuple(ln.split()) for ln in f if ln.strip()]
        return out


@pytest.fixture
def site(tmp_path):
    with Topology(TopologySpec(origins=3, link=LinkSpec.build(rtt="10ms"))) as topo:
        yield Site(topo, tmp_path)


def body_of(url: str) -> bytes:
    scheme, _, rest = url.partition("://")
    host, _, path = rest.partition("/")
    return SITE[host][path]


def leftover_browsers() -> list:
    tmp = "/tmp"
    dirs = [d for d in os.listdir(tmp) if d.startswith(PROFILE_PREFIX)]
    return dirs + pids_with_arg(os.path.join(tmp, PROFILE_PREFIX))


@pytest.mark.root
def test_record_multi_origin_site(site, tmp_path):
    before = leftover_browsers()
    pages = tmp_path / "site.pages"
    pages.write_text("# test site\nhttp://a.test/index.html\n\nhttp://b.test/other.html\n")
    out = tmp_path / "archive"
    cp = pltlab_cmd("record", str(pages), "-o", str(out), *site.cli_args())
    assert cp.returncode == 0, cp.stderr
    assert "http://a.test/index.html: 9 objects, 3 origins" in cp.stdout
    assert f"wrote 2 pages to {out}" in cp.stdout
    assert leftover_browsers() == before  # browser killed, temp profile gone

    got = {p.url: p for _, p in read_corpus(str(out))}
    assert set(got) == {"http://a.test/index.html", "http://b.test/other.html"}
    page = got["http://a.test/index.html"]
    assert page.title == "test site (late)" and page.on_load_ms and page.on_load_ms > 0
    assert page.extras["source"] == "record" and page.extras["recorder"].startswith("chromium ")
    assert page.origins == ["http://a.test", "http://b.test", "https://c.test"]
    assert page.main.url == "http://a.test/index.html"
    assert sorted(o.url for o in page.objects) == sorted(u for u, _, _ in EXPECTED)
    for url, init, how in EXPECTED:
        o = page.find(url)
        assert o.initiator == init, (url, o.initiator, o.initiator_type)
        assert o.initiator_type == how, (url, o.initiator_type)
        assert o.status == 200 and o.body == body_of(url), url
        host = url.split("/")[2]
        assert o.header("X-Test-Origin") == host  # recorded response headers, as sent
        assert [v for k, v in o.headers if k == "Set-Cookie"] == ["a=1", "b=2"]
        assert o.headers[0][0] == "Server" and o.header("Content-Length") == str(len(o.body))
        assert o.extras["remote"].split(":")[0] == site.rules[host]
        assert o.start_ms is not None and o.end_ms >= o.start_ms
    assert page.find("https://c.test/font.woff2").mime == "font/woff2"
    assert page.find("https://c.test/data.json").extras["resource_type"] == "Fetch"
    assert page.find("https://c.test/app.js").extras["timing"]["sslEnd"] > 0  # really TLS
    # Everything came from the client namespace (the host cannot even route to the origins).
    seen = site.requests_seen()
    assert {c for c, _, _ in seen} == {names.CLIENT_IP}
    assert len(seen) == len(EXPECTED) + 2  # other.html + its image; no favicon, no retries
    assert "inferred_initiators" not in page.extras  # all recorded by Chromium
    other = got["http://b.test/other.html"]
    assert [o.url for o in other.objects] == ["http://b.test/other.html", "http://b.test/photo.png"]


@pytest.mark.root
def test_record_json_report_har_fields_and_redirect(site, tmp_path):
    out = tmp_path / "a"
    cp = pltlab_cmd(
        "record",
        "http://a.test/index.html",
        "http://b.test/sub",
        "-o",
        str(out),
        "--json",
        "--quiet-ms",
        "200",
        *site.cli_args(),
    )
    assert cp.returncode == 0, cp.stderr
    rep = json.loads(cp.stdout)
    assert rep["pages"][0]["objects"] == len(EXPECTED) and rep["pages"][0]["failed"] == 0
    redirect = {p.url: p for _, p in read_corpus(str(out))}["http://b.test/sub"]
    hop, target = redirect.objects
    assert (hop.url, hop.status, hop.redirect_url) == ("http://b.test/sub", 301, "http://b.test/sub/")
    assert hop.header("Location") == "/sub/" and hop.body == b""
    assert (target.initiator, target.initiator_type) == ("http://b.test/sub", "redirect")
    assert target.body == SITE["b.test"]["sub/index.html"] and redirect.title == "sub"
    with open(rep["files"][0]) as f:
        har = json.load(f)
    entries = {e["request"]["url"]: e for e in har["log"]["entries"]}
    font = entries["https://c.test/font.woff2"]
    assert font["_initiator"] == {"type": "css", "url": "http://b.test/style.css"}
    assert font["response"]["content"]["encoding"] == "base64"
    assert entries["https://c.test/data.json"]["_initiator"] == {"type": "script", "url": "https://c.test/app.js"}
    assert har["log"]["pages"][0]["pageTimings"]["onLoad"] > 0


@pytest.mark.root
def test_record_request_that_never_ends(site, tmp_path):
    out = tmp_path / "a"
    t0 = time.monotonic()
    cp = pltlab_cmd("record", "http://a.test/poll.html", "-o", str(out), "--quiet-ms", "200", *site.cli_args())
    assert cp.returncode == 0, cp.stderr
    assert time.monotonic() - t0 < 20  # 10 quiet periods of silence end the wait, not --timeout
    ((_, page),) = read_corpus(str(out))
    assert [o.url for o in page.objects] == ["http://a.test/poll.html", "http://a.test/logo.png"]
    assert page.extras["unfinished"] == ["http://a.test/hang-poll"]


@pytest.mark.root
def test_record_failure_writes_nothing(site, tmp_path):
    out = tmp_path / "archive"
    # d.test: no rule -> unresolvable, even though b.test's page loaded first.
    cp = pltlab_cmd("record", "http://b.test/other.html", "http://d.test/", "-o", str(out), *site.cli_args())
    assert cp.returncode != 0
    assert "http://d.test/" in cp.stderr and "ERR_NAME_NOT_RESOLVED" in cp.stderr
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.startswith(".pltlab")]
    assert "Traceback" not in cp.stderr


@pytest.mark.root
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_record_interrupted_kills_browser(site, tmp_path, sig):
    before = leftover_browsers()
    out = tmp_path / "archive"
    p = subprocess.Popen(
        [sys.executable, "-m", "pltlab", "record", "http://a.test/hang.html", "-o", str(out), *site.cli_args()],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while not any("/hang.html" in r[2] for r in site.requests_seen()):
            assert time.monotonic() < deadline and p.poll() is None, p.communicate()
            time.sleep(0.1)
        assert len(leftover_browsers()) > len(before)  # the browser is up, mid-load
        if sig == signal.SIGINT:
            os.killpg(p.pid, sig)  # as a terminal's Ctrl-C: the whole process group
        else:
            p.send_signal(sig)  # as `kill`: the recorder alone
        _, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 128 + sig, err
    assert leftover_browsers() == before
    assert not out.exists()


def test_record_rejects_bad_input(tmp_path):
    empty = tmp_path / "x.pages"
    empty.write_text("# nothing\n")
    cp = pltlab_cmd("record", str(empty), "-o", str(tmp_path / "o"))
    assert cp.returncode != 0 and "no page URL" in cp.stderr
    cp = pltlab_cmd("record", "ftp://x/", "-o", str(tmp_path / "o"))
    assert cp.returncode != 0 and "not an http(s) URL" in cp.stderr
    # Safety: the emulated network's addresses are only reachable from its namespaces.
    cp = pltlab_cmd("record", "http://a.test/", "-o", str(tmp_path / "o"), "--host-rule", "a.test=198.19.0.1")
    assert cp.returncode != 0 and "namespace" in cp.stderr
    assert not (tmp_path / "o").exists()
