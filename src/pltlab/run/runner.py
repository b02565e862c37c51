"""One configuration of one page, loaded repeatedly over an emulated WAN with replay servers.

Validity: a load is valid only when its document arrived: every hop of the main URL's recorded
redirect chain got the status recorded for it, the final document a 2xx (a page whose recording
has no such document is refused before anything is built). Every load also records the TFO
counters of both sides: a load asked to use TFO whose client shows no TFO connection
(TCPFastOpenActive did not rise) is invalid, and so is a load without TFO where it rose. Invalid
loads are reported, never averaged in.

Timing: every load carries the link emulator's lateness during it (pltlab.net.lateness). A load
during which the emulator was late beyond the bounds there is re-run, at most
RunConfig.late_reruns times; the record counts its re-runs (``late_reruns``), and a load still late
after them is invalid.

Protocol: every request records the HTTP version it went over; a load where one went over another
than the replay offered its origin (h2 on https addresses offering it, to a client that speaks
h2; else HTTP/1.1) is invalid with the URL named.

Schemes: every request records the URL as loaded. A page loaded with its names renamed out of
Chromium's HSTS preload list (knob hosts "unpreloaded", pltlab.archive.rename) goes over its
recorded schemes; a load that fell back to https anyway is invalid (pltlab.run.schemes), as is a
built-in load that strayed from its plan's schemes.
"""

import statistics
import time
from urllib.parse import urljoin, urlsplit, urlunsplit

from pltlab import protocols
from pltlab.archive import rename
from pltlab.archive.model import Obj, Page, strip_fragment
from pltlab.errors import PltError
from pltlab.loaders import builtin, chromium
from pltlab.loaders import plan as plans
from pltlab.loaders.browser import hsts
from pltlab.loaders.registry import get as loader_of
from pltlab.net import lateness
from pltlab.net.supervise import ProcessDied
from pltlab.net.topology import Topology
from pltlab.replay import hosts as hostmap
from pltlab.replay.server import ReplayServer
from pltlab.run import graph, knobs, loadpcaps, schemes
from pltlab.run.config import RunConfig
from pltlab.run.point import Point

COUNTERS_CLIENT = ("TCPFastOpenActive", "TCPFastOpenActiveFail", "TCPFastOpenCookieReqd")
COUNTERS_SERVER = ("TCPFastOpenPassive", "TCPFastOpenPassiveFail", "TCPFastOpenListenOverflow", "TCPFastOpenCookieReqd")


def _delta(after: dict, before: dict, keys) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


def page_label(page: Page) -> str:
    """How runs and messages name a page: its stable id ("<file>#<pageref>"), else its URL."""
    return page.id or page.url


def _wire_url(url: str) -> str:
    """A URL as requested: no fragment, an empty path is "/"."""
    parts = urlsplit(strip_fragment(url))
    return urlunsplit(parts._replace(path=parts.path or "/"))


def document_chain(page: Page, host_ips, https_hosts=None) -> list[tuple[int, Obj]]:
    """(plan index, object) of every hop from the main URL to its document, as the plan fetches
    them (pltlab.loaders.plan.plan_objects): object 0, then each redirect's target; a hop the
    browser's own upgrade to https makes internal (``https_hosts``, plan.upgrade_hops) is not
    fetched: the chain goes on from its https target. A URL the
    chain reaches again is answered by its next recording (the replay serves repeated URLs in
    recorded order); with none left, the chain loops. Raises PltError when the recording itself
    has no 2xx document at the end of that chain."""
    name = page_label(page)
    if not page.objects:
        raise PltError(f"{name}: the recording has no objects")
    internal = (
        plans.upgrade_hops(page, plans.effective_schemes(page, https_hosts)) if https_hosts is not None else set()
    )
    pos = {id(o): i for i, o in enumerate(plans.plan_objects(page, host_ips, hops=internal))}
    by_url: dict[str, list[Obj]] = {}
    for o in page.objects:
        by_url.setdefault(_wire_url(o.url), []).append(o)
    visits: dict[str, int] = {}
    hops, cur = [], page.objects[0]
    while True:
        if id(cur) in internal:
            pass  # never on the wire
        elif id(cur) not in pos:
            raise PltError(f"{name}: the recording's document {cur.url} cannot be replayed (scheme {cur.scheme!r})")
        else:
            hops.append((pos[id(cur)], cur))
        key = _wire_url(cur.url)
        visits[key] = visits.get(key, 0) + 1
        if not cur.redirect_url:
            break
        target = _wire_url(urljoin(cur.url, cur.redirect_url))
        recorded = by_url.get(target, [])
        if not recorded:
            raise PltError(
                f"{name}: the recording's document {cur.url} answered {cur.status} "
                f"-> {target}, which was not recorded: no document to load"
            )
        if visits.get(target, 0) >= len(recorded):
            raise PltError(
                f"{name}: the recording's document redirects in a loop "
                f"({' -> '.join(o.url for _, o in hops)} -> {target}): no document to load"
            )
        cur = recorded[visits.get(target, 0)]
    if not 200 <= cur.status < 300:
        raise PltError(f"{name}: the recording's document {cur.url} answered {cur.status}: no document to load")
    return hops


def _what_came(status: int) -> str:
    if status == 404:
        return "no recorded response matched"
    return "replay served the wrong response"


def document_problem(chain: list[tuple[int, Obj]], requests: list[dict], plan: dict | None = None) -> str | None:
    """Why the built-in loader's load did not get the page's document, or None: every hop of
    ``chain`` (document_chain) must have its request record (by plan index) with the recorded
    status and no error. A hop the plan upgraded to https (Chromium's HSTS upgrades) may instead
    get a 2xx straight away: the https URL's own recorded answer."""
    by_index = {r.get("index"): r for r in requests}
    for i, o in chain:
        r = by_index.get(i)
        url = plan["objects"][i]["url"] if plan else o.url.split("#", 1)[0]
        if r is None or not r.get("status"):
            why = f": {r['error']}" if r and r.get("error") else ""
            return f"document {url} never arrived{why}"
        if r.get("error"):
            return f"document {url} answered {r['status']} but failed: {r['error']}"
        got = r["status"]
        if got == o.status:
            if 200 <= got < 300:
                return None  # the document (a 2xx hop ends the chain: document_chain)
            continue
        upgraded = plan is not None and not url.startswith(o.scheme + ":")
        if upgraded and 200 <= got < 300:
            return None
        return f"document {url} answered {got} (recorded {o.status}): {_what_came(got)}"
    return None


def judge(tfo: bool, counters: dict, requests: list[dict], document: str | None = None) -> str | None:
    """Why a load is invalid, or None. ``document``: why its document did not arrive (first)."""
    if document:
        return document
    active = counters["client"].get("TCPFastOpenActive", 0)
    if tfo and active == 0:
        return "TFO requested but the client's TCPFastOpenActive did not rise: no connection used TFO"
    if not tfo and active > 0:
        return "TFO off but the client's TCPFastOpenActive rose"
    if counters["server"].get("TCPFastOpenListenOverflow", 0) > 0:
        return "the server's TFO queue overflowed (TCPFastOpenListenOverflow > 0)"
    return None


def expected_protocol(url: str, host_ips: dict, h2_ips: set) -> str:
    """The protocol a request should go over (pltlab.protocols.expected): h2 to an https origin
    whose address offers it (ALPN; Chromium and the built-in loader both offer h2 and http/1.1),
    else HTTP/1.1."""
    parts = urlsplit(url)
    offered = protocols.get("h2") if host_ips.get(parts.hostname or "") in h2_ips else None
    return protocols.expected(parts.scheme, offered)


def protocol_problem(requests: list[dict], host_ips: dict, h2_ips: set) -> str | None:
    """Why a load's requests did not go over the protocols offered, or None (the first one named;
    requests without a reported protocol, e.g. failed ones, are not judged)."""
    bad = []
    for r in requests:
        got = (r.get("protocol") or "").lower()
        if not got or not str(r.get("url", "")).startswith(("http://", "https://")):
            continue
        want = expected_protocol(r["url"], host_ips, h2_ips)
        if got != want:
            bad.append((r["url"], got, want))
    if not bad:
        return None
    url, got, want = bad[0]
    more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
    return f"protocol: {url} went over {got} where the replay offered {want}{more}"


SERVER_CONN_KEYS = ("h1_connections", "h2_connections", "h2_streams", "h2_errors")
SERVER_TFO_KEYS = (
    "tls_connections",
    "tfo_connections",
    "tfo_tls_connections",
    "tfo_tls_hello_split",
    "tfo_tls_early_in_syn",
)
# the replay server's own count of TLS handshakes: the proof of resumption and 0-RTT; *_used:
# of the connections that carried a request (Chromium opens spare connections it never uses)
SERVER_TLS_KEYS = (
    "tls_full",
    "tls_resumed",
    "tls_early_data",
    "tls_early_bytes",
    "tls_full_used",
    "tls_resumed_used",
    "tls_early_used",
)


def tls_problem(mode: str, server: dict | None, requests: list[dict], client: str = "builtin") -> str | None:
    """Why a load did not get the TLS handshakes its ``mode`` asked for, or None: resume/0rtt need
    the handshake of every connection that carried a request resumed, 0rtt also each such
    connection's early data accepted (the loader's records say which were refused and sent again
    at 1-RTT). Spare connections that carried nothing are not judged. Chromium decides itself
    how many connections it can resume (tls_note): its load needs one resumed (0rtt: with early
    data), the proof that the warm visit left tickets it used."""
    if mode == "full" or server is None:
        return None
    full, resumed = server.get("tls_full_used", 0), server.get("tls_resumed_used", 0)
    used = full + resumed
    if used == 0:
        return f"TLS {mode} asked but no request went over TLS (no https origin loaded)"
    if loader_of(client).resumes_itself:
        if resumed == 0:
            return f"TLS {mode} asked but Chromium resumed none of the {used} TLS connections that carried requests"
        if mode == "0rtt" and server.get("tls_early_used", 0) == 0:
            return f"TLS 0rtt asked but Chromium sent early data on none of its {resumed} resumed connections"
        return None
    if full:
        return (
            f"TLS {mode} asked but {full} of the {used} TLS connections that carried requests had full "
            "handshakes (no ticket resumed)"
        )
    if mode == "0rtt":
        refused = [r["url"] for r in requests if r.get("early_data") == "rejected"]
        if refused:
            more = f" (and {len(refused) - 1} more)" if len(refused) > 1 else ""
            return f"TLS 0rtt asked but the early data with {refused[0]} was refused (sent again at 1-RTT){more}"
        early = server.get("tls_early_used", 0)
        if early < used:
            return (
                f"TLS 0rtt asked but only {early} of {used} resumed connections that carried requests sent early data"
            )
    return None


def tls_note(mode: str, server: dict | None, client: str) -> str | None:
    """Chromium on a warm visit: how many of its connections resumed (and sent early data) when
    not all did. It keeps the last 2 session tickets per host (net's SSLClientSessionCache), so
    over HTTP/1.1 a host's third parallel connection is a full handshake, as after a real visit."""
    if not loader_of(client).resumes_itself or mode == "full" or not server:
        return None
    full, resumed, early = (server.get(f"tls_{k}_used", 0) for k in ("full", "resumed", "early"))
    if not full and (mode != "0rtt" or early == resumed):
        return None
    zero = f", {early} with early data" if mode == "0rtt" else ""
    return (
        f"Chromium resumed {resumed} of the {resumed + full} TLS connections that carried requests{zero}; "
        "the others were full handshakes (it keeps 2 session tickets per host)"
    )


def tfo_note(tfo: bool, server: dict | None) -> str | None:
    """Why TFO, although used, could not save a round trip on some connections, or None."""
    if not tfo or not server or not server.get("tfo_tls_hello_split"):
        return None
    return (
        f"TFO was used, but on {server['tfo_tls_hello_split']} of {server['tfo_tls_connections']} https "
        f"connections with SYN data the TLS ClientHello ({server.get('tfo_tls_hello_max')} B) was larger "
        f"than the data the SYN carried ({server.get('tfo_syn_bytes_max')} B): no round trip saved there"
    )


def queue_waits(snapshot: dict | None) -> dict | None:
    """Per direction, how long the packets of a load waited in the link's queue behind the
    packets before them (the emulator's histogram: count, p50, p99, max, mean in us); None when
    not measured (netem, no rate, an older pltlab-dp)."""
    out = {}
    for d in ("uplink", "downlink"):
        h = (snapshot or {}).get(d, {}).get("queue_wait_us")
        if h and h.get("count"):
            out[d] = {q: h.get(q) for q in ("count", "p50", "p99", "max", "mean")}
    return out or None


class PageRunner:
    """Topology + replay for one page and one link configuration; loads it on demand."""

    per_load_pcap = True  # cfg.pcap: a folder getting one pcap per load (run.loadpcaps)

    def __init__(self, page: Page, cfg: RunConfig):
        self.page, self.cfg = page, cfg
        self.hosts = hostmap.assign([page])
        self.chain = document_chain(page, self.hosts)  # refuses a page without a document
        # hosts recorded at one server address share an origin (replay/hosts.py)
        spec, rid = cfg.topology(max(self.hosts.values(), default=0) + 1, self.hosts), None
        folder = loadpcaps.out_folder(cfg.pcap) if self.per_load_pcap else None
        self.pcaps = loadpcaps.LoadPcaps(folder) if folder else None
        if self.pcaps:
            spec, rid = self.pcaps.attach(spec)
        self.topo = Topology(spec, run_id=rid)
        self.host_ips = {h: self.topo.origin_ips[i] for h, i in self.hosts.items()}
        self.replay: ReplayServer | None = None
        self.https_hosts = None  # hosts the built-in loader upgrades to https (schemes "chromium"/"https")
        self.loaded, self.renaming = page, rename.Renaming()  # the page as loaded (knob hosts)
        self.http: set[str] | None = None  # URLs the load must fetch over http (run.schemes), None: no check
        self.warmed = False  # TFO cookies cached for every origin (warm policy: once per runner)
        self._plans: dict[bool, dict] = {}

    def __enter__(self):
        self.topo.__enter__()
        try:
            if self.cfg.hosts == knobs.UNPRELOADED:  # no name of the page on Chromium's HSTS preload list
                self._rename(hsts.unpreloaded(self.hosts, netns=self.topo.client_ns))
            self.replay = ReplayServer(
                self.topo,
                [self.loaded],
                self.host_ips,
                self.topo.workdir,
                think_time=self.cfg.think_time,
                protocol=self.cfg.protocol,
                h2_priority=self.cfg.server_priority,
                request_timeout_s=self.cfg.server_timeout_s,
            )
            self.replay.start()
            self.topo.watch("replay server", self.replay.proc, self.replay.error)
            if self.cfg.schemes == "chromium":
                self.https_hosts = hsts.upgraded_hosts(self.hosts, netns=self.topo.client_ns)
            elif self.cfg.schemes == "https":  # every origin over https (the replay answers 443 everywhere)
                self.https_hosts = set(self.hosts)
            if self.https_hosts is not None:  # hops the upgrade makes internal are not fetched
                self.chain = document_chain(self.loaded, self.hosts, self.https_hosts)
            if not loader_of(self.cfg.client).upgrades_itself or self.renaming:  # (else it upgrades what it likes)
                self.http = schemes.http_urls(self.loaded, self.https_hosts or ())
        except BaseException:
            self.topo.__exit__(None, None, None)
            raise
        return self

    def _rename(self, r: rename.Renaming) -> None:
        """Load the page with its names renamed by ``r`` (same origins, same addresses)."""
        self.renaming, self.loaded = r, r.page(self.page)
        self.hosts = {r.host(h): i for h, i in self.hosts.items()}
        self.host_ips = {r.host(h): ip for h, ip in self.host_ips.items()}
        self.chain = document_chain(self.loaded, self.hosts)

    def __exit__(self, *exc):
        try:
            if self.replay:
                self.replay.stop()
        finally:
            self.topo.__exit__(*exc)
            if self.pcaps:  # the emulator has stopped: its trace is complete
                self.pcaps.split()
        return False

    def _load_once(self, tfo: bool, warmed=None) -> dict:
        if not loader_of(self.cfg.client).planned:
            with self.topo.guard("client"):  # a dead emulator/replay kills the browser at once
                return chromium.load(
                    self.topo,
                    self.loaded,
                    self.host_ips,
                    self.replay.spki,
                    tfo=tfo,
                    check=False,
                    tls=self.cfg.tls,
                    warmed=warmed,
                )
        if tfo not in self._plans:
            self._plans[tfo] = plans.build(
                self.loaded,
                self.host_ips,
                tfo=tfo,
                ca=self.replay.ca,
                max_conns_per_host=self.cfg.max_conns_per_host,
                https_hosts=self.https_hosts,
                model=self.cfg.model,
                calibrated=self.cfg.calibrated,
                timeout_s=self.cfg.load_timeout_s,
                h2_ips=self.replay.h2_ips,
                tls_mode=self.cfg.tls,
            )
        res = builtin.load(self.topo, self._plans[tfo], self.topo.workdir, warmed=warmed)
        tail = plans.tail_ms(self.loaded, self.cfg.model, self.cfg.calibrated)
        if tail is not None:  # Chromium's measured time from the last response to loadEventEnd
            res["network_plt_ms"], res["tail_ms"] = res["plt_ms"], tail
            res["plt_ms"] = res["plt_ms"] + tail
        return res

    def warm_up(self) -> None:
        """The prior visit that caches a TFO cookie for every origin: one TFO request per origin
        address (the kernel keys cookies by address) for its smallest object, whatever the client."""
        plan = plans.build(self.loaded, self.host_ips, tfo=True, ca=self.replay.ca, h2_ips=self.replay.h2_ips)
        size = {o.url.split("#", 1)[0]: o.size for o in self.loaded.objects}
        pick: dict[str, dict] = {}
        for o in plan["objects"]:
            if o["ip"] not in pick or size.get(o["url"], 0) < size.get(pick[o["ip"]]["url"], 0):
                pick[o["ip"]] = dict(o, parent=None, delay_ms=0.0)
        plan["objects"] = list(pick.values())
        builtin.load(self.topo, plan, self.topo.workdir, name="warm.json")
        self.warmed = True

    def load(self, point: Point, rep: int) -> dict:
        """One measured load at ``point`` (its TFO mode; after the warm-up policy); returns the
        run record. A data-plane
        process that dies meanwhile ends it at once: ProcessDied names the process. A load the
        emulator was late for is re-run (``late_reruns`` in the record)."""
        tfo = point.tfo
        late = []
        while True:
            try:
                r = self._load(tfo, rep)
            except ProcessDied as e:
                raise ProcessDied(f"page load failed: {e}") from None
            why = lateness.late_reason(r["emulator_lateness_us"])
            if why is None or len(late) >= self.cfg.late_reruns:
                break
            late.append(why)
        r["late_reruns"], r["late_rerun_reasons"] = len(late), late
        if why is not None and r["valid"]:  # never averaged in
            r["valid"] = False
            r["invalid_reason"] = f"{why} (still, after {len(late)} re-run(s))"
        if self.pcaps:  # (the file is written when the runner closes)
            name = loadpcaps.file_name(page_label(self.page), self.cfg, tfo, rep)
            r["pcap"] = self.pcaps.add(name, r["started_at"], r["ended_at"])
        return r

    def _load(self, tfo: bool, rep: int) -> dict:
        self.topo.supervisor.check()
        if tfo and self.cfg.warm and not self.warmed:
            self.warm_up()  # cookies stay cached across the following loads
        elif tfo and not self.cfg.warm:
            self.topo.reset_tfo()
            self.warmed = False
        before = {}

        def start() -> None:  # counts begin here (after the loader's TLS warm-up visit, if any)
            self.replay.new_session()  # repeated URLs are served again from their first recording
            before.update(c=self.topo.counters(), s=self.replay.snapshot())
            self.topo.link_snapshot()  # starts the emulator's interval: its lateness during this load
            before["t"] = time.time()

        if self.cfg.tls == "full":
            start()
            res = self._load_once(tfo)
        else:
            res = self._load_once(tfo, warmed=start)
        ended = time.time()
        if "c" not in before:  # (a loader that never said its visit was over: a bug, not a load)
            raise PltError("the built-in loader finished without reporting the end of its TLS warm-up visit")
        c0, s0 = before["c"], before["s"]
        c1, s1 = self.topo.counters(), self.replay.snapshot()
        snap = self.topo.link_snapshot()
        late, queued = lateness.summary(snap), queue_waits(snap)
        server = conns = tls = None
        if s0 and s1:  # what the replay server saw during this load
            server = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_TFO_KEYS}
            conns = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_CONN_KEYS}
            tls = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_TLS_KEYS}
            server.update(tfo_tls_hello_max=s1.get("tfo_tls_hello_max"), tfo_syn_bytes_max=s1.get("tfo_syn_bytes_max"))
        counters = {
            "client": _delta(c1["client"], c0["client"], COUNTERS_CLIENT),
            "server": _delta(c1["server"], c0["server"], COUNTERS_SERVER),
        }
        requests = [_request_record(r, self.cfg.client) for r in res.get("requests", [])]
        if loader_of(self.cfg.client).planned:  # the load's graph on its records (pltlab.explain)
            graph.from_plan(requests, self._plans.get(tfo))
            doc = document_problem(self.chain, requests, self._plans.get(tfo))
        else:
            graph.from_initiators(requests)
            doc = res.get("document_problem")
        reason = (
            judge(tfo, counters, requests, doc)
            or (schemes.problem(requests, self.http, res.get("hsts_upgraded") or ()) if self.http is not None else None)
            or protocol_problem(requests, self.host_ips, self.replay.h2_ips)
            or tls_problem(self.cfg.tls, tls, requests, self.cfg.client)
        )
        cfg = self.cfg
        return {
            "page": self.page.url,
            "page_id": page_label(self.page),
            "rtt_ms": cfg.rtt_us / 1000,
            "rate_mbit": (cfg.rate_bps / 1e6) if cfg.rate_bps else None,
            "loss": cfg.loss,
            "tfo": tfo,
            "icw": self.cfg.icw,
            "cc": self.cfg.cc,
            "client": self.cfg.client,
            "protocol": self.cfg.protocol,
            "tls": self.cfg.tls,
            "hosts_renamed": self.renaming.mapping() or None,  # recorded name -> as loaded (knob hosts)
            "rep": rep,
            "plt_ms": res["plt_ms"],
            # built-in loader with a calibrated model="chromium": plt_ms = network_plt_ms + tail_ms
            "network_plt_ms": res.get("network_plt_ms", res["plt_ms"]),
            "tail_ms": res.get("tail_ms"),
            "valid": reason is None,
            "invalid_reason": reason,
            "tfo_counters": counters,
            "server_tfo": server,
            "tfo_note": tfo_note(tfo, server),
            "tls_note": tls_note(self.cfg.tls, tls, self.cfg.client),
            "server_connections": conns,  # HTTP/1.x and h2 connections, h2 streams and errors
            "server_tls": tls,  # full and resumed handshakes, early data accepted (connections, bytes)
            "tls_warmup_ms": res.get("warmup_ms"),  # the loader's visit before the load (resume/0rtt)
            "emulator_lateness_us": late,  # the emulator's lateness during this load
            # how long packets waited in each direction's queue behind those before them (pltlab.explain)
            "metrics": {"queue_wait_us": queued} if queued else None,
            "started_at": before["t"],  # wall clock (s) of the load's start and end
            "ended_at": ended,
            "not_found": sum(1 for r in requests if r.get("status") == 404),
            "requests": requests,
            # the built-in loader's connections (TFO, TLS per connection) and the load's first
            # request's wall clock: for the load's HAR (pltlab.run.loadhar)
            "connections": res.get("connections"),
            "load_started_at": res.get("load_started_at", before["t"]),
        }


REQUEST_BYTES = ("transfer_bytes", "body_bytes", "encoding", "protocol", "tls_handshake", "early_data")


def _request_record(r: dict, client: str) -> dict:
    """A loader's request record with the byte fields every record has (None: not reported);
    a loader that does not say speaks HTTP/1.1."""
    out = dict(r)
    for k in REQUEST_BYTES:
        out.setdefault(k, None)
    if not out["protocol"]:
        out["protocol"] = loader_of(client).default_protocol
    return out


def summarize(runs: list[dict]) -> list[dict]:
    groups: dict[tuple, list[float]] = {}
    for r in runs:
        if r["valid"]:
            key = (r.get("page_id") or r["page"], r["page"], r["rtt_ms"], r["tfo"])
            groups.setdefault(key, []).append(r["plt_ms"])
    out = []
    for (page_id, page, rtt, tfo), v in sorted(groups.items()):
        mean = statistics.fmean(v)
        out.append(
            {
                "page": page,
                "page_id": page_id,
                "rtt_ms": rtt,
                "tfo": tfo,
                "n": len(v),
                "mean_ms": round(mean, 3),
                "median_ms": round(statistics.median(v), 3),
                "cv": round(statistics.pstdev(v) / mean, 5) if len(v) > 1 and mean else 0.0,
            }
        )
    return out


def run_page(page: Page, cfg: RunConfig, on_run=None) -> list[dict]:
    """All repetitions of all TFO modes; the order alternates modes within each repetition."""
    runs = []
    with PageRunner(page, cfg) as pr:
        for rep in range(1, cfg.reps + 1):
            modes = cfg.tfo_modes if rep % 2 else tuple(reversed(cfg.tfo_modes))
            for tfo in modes:
                r = pr.load(Point(tfo=tfo), rep)
                runs.append(r)
                if on_run:
                    on_run(r)
    return runs
