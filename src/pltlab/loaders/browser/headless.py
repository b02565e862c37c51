"""Headless Chromium through Playwright: one driver, a fresh browser and profile per load."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pltlab.errors import PltError
from pltlab.loaders.browser import flags, procs
from pltlab.loaders.browser.collect import Collector, Request
from pltlab.net import nsutil

PROFILE_PREFIX = "pltlab-chromium-"
# After a warm visit: every socket closed (h2 sessions too) and the caches emptied; TLS session
# tickets stay (net benchmarking's closeConnections keeps the SSL session cache).
FORGET_JS = """async () => {
  const b = window.chrome && chrome.benchmarking;
  if (!b) return false;
  await b.clearCache();
  b.clearHostResolverCache();
  b.clearPredictorCache();
  b.closeConnections();
  return true;
}"""
STALL_QUIETS = 10
QUIC_FAILED = "net::ERR_QUIC_"  # a request's error over QUIC (ERR_QUIC_PROTOCOL_ERROR, ...)
WARM_TRIES = 3
# PLT from Navigation Timing (level 2 entry, level 1 as fallback); 0 until the load event ends.
NAV_JS = """() => {
  const n = performance.getEntriesByType('navigation')[0];
  if (n) return {navigationStart: 0, responseStart: n.responseStart,
                 domContentLoadedEventEnd: n.domContentLoadedEventEnd,
                 loadEventStart: n.loadEventStart, loadEventEnd: n.loadEventEnd};
  const t = performance.timing, s = t.navigationStart;
  return {navigationStart: 0, responseStart: t.responseStart - s,
          domContentLoadedEventEnd: t.domContentLoadedEventEnd - s,
          loadEventStart: t.loadEventStart - s, loadEventEnd: t.loadEventEnd ? t.loadEventEnd - s : 0};
}"""


@dataclass
class LoadResult:
    url: str
    final_url: str
    title: str
    plt_ms: float | None  # loadEventEnd - navigationStart
    nav_timing: dict  # ms since navigationStart
    requests: list[Request]  # in start order; redirect hops are separate requests
    started: float | None  # epoch seconds of the first request
    browser_version: str
    missing_bodies: int = 0  # finished responses whose body Chromium no longer had
    unfinished: list[str] = field(default_factory=list)  # URLs still loading at the deadline


class Chromium:
    """Drives Chromium, optionally inside network namespace ``netns``.

        with Chromium(netns=topo.client_ns, host_rules={"a.test": ip}) as c:
            res = c.load("http://a.test/")

    The Playwright driver (node) is started while this thread is inside ``netns``, so node and
    every browser it launches live there. Each load gets a new browser with a temp profile that is
    removed, with every browser process, whatever happens.
    """

    def __init__(
        self,
        netns: str | None = None,
        executable: str | None = None,
        host_rules: dict[str, str] | None = None,
        spki: list[str] | tuple = (),
        env: dict[str, str] | None = None,
        extra_args: list[str] | tuple = (),
        timeout_s: float = 60.0,
        quiet_ms: float = 500.0,
        bodies: bool = True,
        block: list[str] | tuple = ("*/favicon.ico",),
    ):
        self.netns, self.host_rules = netns, dict(host_rules or {})
        self.env, self.timeout_s, self.quiet_ms, self.bodies = env, timeout_s, quiet_ms, bodies
        self.block = tuple(block)  # URL patterns never fetched: the browser's own favicon request
        self.args = flags.build_args(self.host_rules, spki, extra_args)
        if netns is None and any(flags.emulated(ip) for ip in self.host_rules.values()):
            raise PltError(
                "host rules point into the emulated network (198.18.0.0/15): run inside its client namespace (netns)"
            )
        self.executable = flags.find_executable(executable)
        self._pw = None
        self._driver_pid: int | None = None

    # ---- driver lifecycle ----------------------------------------------------------------
    def __enter__(self) -> Chromium:
        self._old_term = None
        if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGTERM) in (
            signal.SIG_DFL,
            None,
        ):
            # SIGTERM unwinds like Ctrl-C, so the browser is killed and its profile removed.
            self._old_term = signal.signal(signal.SIGTERM, _raise_exit)
        try:
            self.start()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.close(abort=exc[0] is not None)
        finally:
            if self._old_term is not None:
                signal.signal(signal.SIGTERM, self._old_term)
                self._old_term = None
        return False

    def start(self) -> None:
        try:
            from playwright.sync_api import sync_playwright  # noqa: PLC0415 (heavy: loaded only to drive Chromium)
        except ImportError:
            raise PltError(
                "the Python package playwright is missing: pip install playwright "
                "(no browser download needed: Debian's chromium is used)"
            ) from None

        procs.remove_stale_profiles(tempfile.gettempdir(), PROFILE_PREFIX)
        where = nsutil.in_netns(self.netns) if self.netns else contextlib.nullcontext()
        before = set(procs.children("run-driver"))
        try:
            with where:
                self._pw = sync_playwright().start()
        except PltError:
            raise
        except Exception as e:
            raise PltError(f"cannot start the Playwright driver: {_first_line(e)}") from None
        new = sorted(set(procs.children("run-driver")) - before)  # node, our child
        self._driver_pid = new[0] if len(new) == 1 else None
        if self.netns and self._driver_pid:
            self._check_netns([self._driver_pid], "the Playwright driver")

    def close(self, abort: bool = False) -> None:
        """Stop the driver. ``abort``: after an exception or Ctrl-C, kill it instead of asking."""
        pw, self._pw = self._pw, None
        if pw is None:
            return
        if abort and self._driver_pid:
            procs.kill_all([self._driver_pid])
        try:
            pw.stop()
        except BaseException:  # noqa: BLE001 - the driver may be dead already
            pass
        if self._driver_pid:
            procs.kill_all([self._driver_pid])

    def _check_netns(self, pids: list[int], what: str) -> None:
        want = procs.path_netns_id(nsutil.ns_path(self.netns))
        wrong = [p for p in pids if procs.netns_id(p) not in (want, None)]
        if wrong:
            raise PltError(f"{what} is not in namespace {self.netns} (pids {wrong})")

    # ---- one load ------------------------------------------------------------------------
    def load(self, url: str, warm: Callable[[], None] | None = None) -> LoadResult:
        """One load of ``url`` in a fresh browser and profile. ``warm``: first visit the page in
        the same browser (not measured), then close every connection and empty the caches
        (`chrome.benchmarking`, needs ``--enable-net-benchmarking``): what is left is what a prior
        visit leaves to the next one besides its cache, TLS session tickets (and the kernel's TFO
        cookies); ``warm`` is called just before the measured load starts."""
        if self._pw is None:
            raise RuntimeError("Chromium.load() outside of `with Chromium(...)`")
        profile = tempfile.mkdtemp(prefix=PROFILE_PREFIX)
        ctx = None
        graceful = True  # after Ctrl-C the driver's event loop may be mid-call: just kill
        try:
            ctx = self._launch(profile)
            if self.netns:
                self._check_netns(procs.pids_with_arg(profile), "chromium")
            if warm is not None:
                self._warm_visit(ctx, url)
                warm()
            return self._load(ctx, url)
        except BaseException as e:
            graceful = isinstance(e, Exception)
            raise
        finally:
            if ctx is not None and graceful:
                with contextlib.suppress(Exception):
                    ctx.close()
            procs.kill_all(procs.pids_with_arg(profile))
            shutil.rmtree(profile, ignore_errors=True)

    def _launch(self, profile: str):
        # No speculative preconnects: every connection is one the page asked for.
        os.makedirs(os.path.join(profile, "Default"))
        with open(os.path.join(profile, "Default", "Preferences"), "w") as f:
            json.dump({"net": {"network_prediction_options": 2}}, f)
        env = {**os.environ, **self.env} if self.env else None
        try:
            return self._pw.chromium.launch_persistent_context(
                profile,
                executable_path=self.executable,
                headless=True,
                args=self.args,
                env=env,
                timeout=self.timeout_s * 1000,
            )
        except Exception as e:
            raise PltError(f"chromium ({self.executable}) failed to start: {_first_line(e)}") from None

    def _warm_visit(self, ctx, url: str) -> None:
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        cdp = ctx.new_cdp_session(page)
        col = self._watch(cdp)
        try:
            for attempt in range(WARM_TRIES):  # (not measured: a navigation failed over QUIC is tried again)
                try:
                    page.goto(url, wait_until="load", timeout=self.timeout_s * 1000)
                    break
                except Exception as e:  # its error page may interrupt the next try: tried again too
                    if attempt + 1 == WARM_TRIES or not (QUIC_FAILED in str(e) or "chrome-error://" in str(e)):
                        raise
                    page.wait_for_timeout(200)
            self._wait_quiet(page, col, time.monotonic() + self.timeout_s)
            ok = page.evaluate(FORGET_JS)
            cdp.send("Network.clearBrowserCache")
        except Exception as e:
            raise PltError(f"{url}: warm visit: {_first_line(e)}") from None
        if not ok:
            raise PltError(f"{url}: warm visit: Chromium has no chrome.benchmarking (--enable-net-benchmarking)")
        # The measured load runs in a new tab: nothing of this one's renderer (memory cache) is kept.
        ctx.new_page()
        page.close()

    def _watch(self, cdp) -> Collector:
        col = Collector(cdp)
        cdp.send("Network.enable", {"maxTotalBufferSize": 512 << 20, "maxResourceBufferSize": 128 << 20})
        cdp.send("Network.setCacheDisabled", {"cacheDisabled": True})
        if self.block:
            cdp.send("Network.setBlockedURLs", {"urls": list(self.block)})
        return col

    def _load(self, ctx, url: str) -> LoadResult:
        page = ctx.pages[0] if ctx.pages else ctx.new_page()
        cdp = ctx.new_cdp_session(page)
        col = self._watch(cdp)
        deadline = time.monotonic() + self.timeout_s
        try:
            page.goto(url, wait_until="load", timeout=self.timeout_s * 1000)
        except Exception as e:
            # a navigation that failed over QUIC is an invalid load (its document never arrived:
            # the loader's document_problem), not the end of the run
            if QUIC_FAILED not in str(e):
                raise PltError(f"{url}: {_first_line(e)}") from None
        nav = self._wait_quiet(page, col, deadline)
        missing = col.fetch_bodies(cdp) if self.bodies else 0
        col.wire_headers()
        end = nav.get("loadEventEnd") or 0
        try:
            title = page.title()
        except Exception:
            title = ""
        return LoadResult(
            url=url,
            final_url=page.url,
            title=title,
            plt_ms=end or None,
            nav_timing=nav,
            requests=col.requests,
            started=col.wall_start,
            browser_version=ctx.browser.version if ctx.browser else "",
            missing_bodies=missing,
            unfinished=[r.url for r in col.requests if not r.finished and not r.error],
        )

    def _wait_quiet(self, page, col: Collector, deadline: float) -> dict:
        """Until the load event has ended and the network was idle for quiet_ms (no request
        started, received data or ended)."""
        nav: dict = {}
        while True:
            if not nav.get("loadEventEnd"):
                try:
                    nav = page.evaluate(NAV_JS)
                except Exception:  # a script navigated the page meanwhile: ask the next one
                    nav = {}
            now = time.monotonic()
            idle_ms = (now - col.last_activity) * 1000
            # Requests silent for 10 quiet periods (long polls, hung servers) do not hold the load.
            quiet = idle_ms >= self.quiet_ms * (1 if col.inflight() == 0 else STALL_QUIETS)
            if (quiet and nav.get("loadEventEnd")) or now >= deadline:
                return nav
            page.wait_for_timeout(20)  # lets the event loop deliver CDP events


def load(url: str, **kw) -> LoadResult:
    """One load with a driver of its own (see Chromium for the options)."""
    with Chromium(**kw) as c:
        return c.load(url)


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _first_line(e: BaseException) -> str:
    msg = str(getattr(e, "message", None) or e).strip()
    lines = [ln.strip() for ln in msg.splitlines() if ln.strip() and not set(ln.strip()) <= set("=")]
    return lines[0] if lines else type(e).__name__
