"""pltlab.loaders.browser: the driver itself (namespace, flags, env, cleanup, errors)."""

import os

import pytest
from test_record import EXPECTED, PROFILE_PREFIX, leftover_browsers, site  # noqa: F401 (fixture)

from pltlab.errors import PltError
from pltlab.loaders.browser import Chromium, headless, load, procs
from pltlab.net import names, nsutil

pytestmark = pytest.mark.skipif(
    not os.access("/usr/bin/chromium", os.X_OK), reason="needs Debian's chromium (apt-get install chromium)"
)


@pytest.mark.root
def test_load_in_namespace(site, monkeypatch):
    before = leftover_browsers()
    seen = {}
    orig = headless.Chromium._load

    def spy(self, ctx, url):  # look at the live browser's processes mid-load
        pids = procs.pids_with_arg("/" + PROFILE_PREFIX)
        seen["ns"] = {procs.netns_id(p) for p in pids} - {None}
        # The browser process (children overwrite their environ area with their title).
        main = [p for p in pids if b"--type=" not in open(f"/proc/{p}/cmdline", "rb").read()]
        seen["env"] = [open(f"/proc/{p}/environ", "rb").read() for p in main]
        return orig(self, ctx, url)

    monkeypatch.setattr(headless.Chromium, "_load", spy)
    with Chromium(env={"PLTLAB_TEST_MARK": "42"}, **site.chromium_opts()) as c:
        client = procs.path_netns_id(nsutil.ns_path(site.topo.client_ns))
        assert procs.netns_id(c._driver_pid) == client  # node runs in the client namespace
        r1 = c.load("http://a.test/index.html")
        r2 = c.load("http://a.test/index.html")
        driver = c._driver_pid
    assert driver and not procs._alive(
        driver
    )  # node stopped with the driver    assert seen["ns"] == {client}  # ... and so does every chromium process
    assert len(seen["env"]) == 1 and b"\0PLTLAB_TEST_MARK=42\0" in b"\0" + seen["env"][0]
    assert leftover_browsers() == before

    for r in (r1, r2):
        assert 0 < r.plt_ms == r.nav_timing["loadEventEnd"] and r.nav_timing["responseStart"] > 0
        assert r.final_url == "http://a.test/index.html" and r.title == "test site (late)"
        blocked = [q.url for q in r.requests if q.blocked]
        assert blocked in ([], ["http://a.test/favicon.ico"])  # the browser's own, never sent
        r.requests = [q for q in r.requests if not q.blocked]
        assert sorted(q.url for q in r.requests) == sorted(u for u, _, _ in EXPECTED)
        assert not r.unfinished and r.missing_bodies == 0 and r.started
        main = r.requests[0]
        assert main.resource_type == "Document" and main.initiator_type == "other"
        assert main.remote == f"{site.rules['a.test']}:80" and main.connection_reused is False
        js = next(q for q in r.requests if q.url.endswith("app.js"))
        assert js.protocol == "http/1.1" and js.timing["sslEnd"] > js.timing["sslStart"] >= 0
        assert all(q.finished and q.body is not None and q.end_ms >= q.start_ms for q in r.requests)
    # A fresh profile per load, cache off: the second load fetched everything again.
    seen_paths = [p for _, _, p in site.requests_seen()]
    assert all(seen_paths.count("/" + u.split("/", 3)[3]) == 2 for u, _, _ in EXPECTED)
    assert {c for c, _, _ in site.requests_seen()} == {names.CLIENT_IP}
    assert len(seen_paths) == 2 * len(EXPECTED)


@pytest.mark.root
def test_without_spki_https_origin_fails(site):
    opts = dict(site.chromium_opts(), spki=[])
    r = load("http://a.test/index.html", quiet_ms=200, **opts)
    js = next(q for q in r.requests if q.url == "https://c.test/app.js")
    assert js.status == 0 and "CERT" in js.error
    assert not any(u.startswith("/app.js") for _, _, u in site.requests_seen())


@pytest.mark.root
def test_timeout_is_a_clear_error(site):
    before = leftover_browsers()
    with pytest.raises(PltError, match=r"http://a.test/hang.html: .*Timeout"):
        load("http://a.test/hang.html", timeout_s=2, **site.chromium_opts())
    assert leftover_browsers() == before


@pytest.mark.root
def test_unresolvable_host(site):
    with pytest.raises(PltError, match="ERR_NAME_NOT_RESOLVED"):
        load("http://elsewhere.example/", **site.chromium_opts())


def test_missing_or_broken_chromium(tmp_path):
    with pytest.raises(PltError, match="chromium not found at /nonexistent/chromium"):
        Chromium(executable="/nonexistent/chromium")
    broken = tmp_path / "chromium"
    broken.write_text("#!/bin/sh\necho 'cannot start' >&2\nexit 1\n")
    broken.chmod(0o755)
    before = leftover_browsers()
    with pytest.raises(PltError, match="failed to start"):
        load("http://127.0.0.1:9/", executable=str(broken), timeout_s=10)
    assert leftover_browsers() == before


def test_emulated_addresses_need_a_namespace():
    with pytest.raises(PltError, match="namespace"):
        Chromium(host_rules={"a.test": "198.19.0.1"})
    with pytest.raises(PltError, match="not an IP address"):
        Chromium(host_rules={"a.test": "nowhere"}, netns="x")
