"""One configuration of one page, loaded repeatedly over an emulated WAN with replay servers, by
the loader the registry names (pltlab.loaders.registry: its plan, load and rules of its own).

Validity (the rules: pltlab.loaders.validity, and the loader's own): a load is valid only when
its document arrived: every hop of the main URL's recorded redirect chain got the status recorded
for it, the final document a 2xx (a page whose recording has no such document is refused before
anything is built). Every load also records the TFO counters of both sides: a load asked to use
TFO whose client shows no TFO connection (TCPFastOpenActive did not rise) is invalid, and so is a
load without TFO where it rose. Invalid loads are reported, never averaged in.

Timing: every load carries the link emulator's lateness during it (pltlab.net.lateness). A load
during which the emulator was late beyond the bounds there is re-run, at most
RunConfig.late_reruns times; the record counts its re-runs (``late_reruns``), and a load still late
after them is invalid. Every load also carries the emulator's precision aids asked for and refused
(``link_aids_missing``: SCHED_FIFO, CPU pinning, mlock, idle polling; name -> error): such a load
stays valid (its lateness is checked all the same); the run says so once per aid.

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

from pltlab.archive import rename
from pltlab.archive.model import Page
from pltlab.errors import PltError
from pltlab.loaders import registry
from pltlab.loaders.browser import hsts
from pltlab.loaders.loader import Job
from pltlab.loaders.validity import document_chain, judge, page_label, protocol_problem, tfo_note
from pltlab.net import lateness
from pltlab.net.supervise import ProcessDied
from pltlab.net.topology import Topology
from pltlab.replay import hosts as hostmap
from pltlab.replay.server import ReplayServer
from pltlab.run import graph, knobs, loadpcaps, recorded, schemes
from pltlab.run.config import RunConfig
from pltlab.run.point import Point

COUNTERS_CLIENT = ("TCPFastOpenActive", "TCPFastOpenActiveFail", "TCPFastOpenCookieReqd")
COUNTERS_SERVER = ("TCPFastOpenPassive", "TCPFastOpenPassiveFail", "TCPFastOpenListenOverflow", "TCPFastOpenCookieReqd")


def _delta(after: dict, before: dict, keys) -> dict:
    return {k: after.get(k, 0) - before.get(k, 0) for k in keys}


SERVER_CONN_KEYS = ("h1_connections", "h1_requests", "h2_connections", "h2_streams", "h2_errors")
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
# the same of QUIC's handshakes (HTTP/3: TLS 1.3 inside QUIC), with its connections and streams;
# quic_initial_bytes_max: the largest client Initial flight (the ClientHello's size over QUIC)
SERVER_QUIC_KEYS = (
    "quic_connections",
    "quic_handshake_errors",
    "quic_full",
    "quic_resumed",
    "quic_early_data",
    "quic_early_bytes",
    "quic_early_rejected_bytes",
    "quic_full_used",
    "quic_resumed_used",
    "quic_early_used",
    "h3_streams",
    "h3_errors",
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


# the link snapshot's drop counts per direction (rust/src/link/stats.rs DirInterval) -> their names
LINK_DROP_KEYS = {"dropped_loss": "loss", "dropped_queue": "queue"}


def link_drops(snapshot: dict | None) -> dict | None:
    """Per direction, the packets the link emulator dropped during a load: by its random (or
    bursty) loss and by its full queue (drop-tail), {"loss": n, "queue": n}. None when not
    measured (netem, an older pltlab-dp whose snapshot has no drop counts)."""
    out = {}
    for d in ("uplink", "downlink"):
        s = (snapshot or {}).get(d) or {}
        if not all(k in s for k in LINK_DROP_KEYS):
            return None
        out[d] = {name: s[k] for k, name in LINK_DROP_KEYS.items()}
    return out


class PageRunner:
    """Topology + replay for one page and one link configuration; loads it on demand."""

    per_load_pcap = True  # cfg.pcap: a folder getting one pcap per load (run.loadpcaps)
    needs_root = True  # it builds an emulated WAN (pltlab.run.kinds.needs_root)

    def __init__(self, page: Page, cfg: RunConfig):
        self.inferred = None  # network "recorded": what pltlab.archive.netinfer inferred
        if cfg.network == knobs.RECORDED_NETWORK:  # (refuses a page without timings, naming it)
            page, cfg, self.inferred = recorded.apply(page, cfg)
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
        self._warm_unimpaired = False  # the last load's TLS warm-up visit passed the link unimpaired
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
                keep_alive=self.cfg.keepalive == "on",
                quic={
                    "quic_cc": self.cfg.quic_cc,
                    "quic_icw": self.cfg.quic_icw,
                    "h3_discovery": self.cfg.h3_discovery,
                },
                spoken=registry.get(self.cfg.client).protocols,
            )
            self.replay.start()
            self.topo.watch("replay server", self.replay.proc, self.replay.error)
            if self.cfg.schemes == "chromium":
                self.https_hosts = hsts.upgraded_hosts(self.hosts, netns=self.topo.client_ns)
            elif self.cfg.schemes == "https":  # every origin over https (the replay answers 443 everywhere)
                self.https_hosts = set(self.hosts)
            if self.https_hosts is not None:  # hops the upgrade makes internal are not fetched
                self.chain = document_chain(self.loaded, self.hosts, self.https_hosts)
            if not registry.get(self.cfg.client).upgrades_itself or self.renaming:  # (else it upgrades what it likes)
                self.http = schemes.http_urls(self.loaded, self.https_hosts or ())
                schemes.check_protocol(self.loaded, self.https_hosts or (), self.cfg.protocol, page_label(self.page))
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

    def job(self) -> Job:
        """What this runner's loads are of and over, for its loader (pltlab.loaders.loader)."""
        return Job(self.topo, self.loaded, self.host_ips, self.replay, self.https_hosts, self.cfg)

    def _load_once(self, tfo: bool, warmed=None) -> dict:
        loader = registry.get(self.cfg.client)
        if tfo not in self._plans:
            self._plans[tfo] = loader.plan(self.job(), tfo)
        return loader.load(self.job(), self._plans[tfo], tfo, warmed=warmed)

    def _warm_visit_then_load(self, tfo: bool, start) -> dict:
        """A load after the loader's own TLS warm-up visit (tls resume/0rtt), which calls
        ``start`` when the visit is over. With a loader whose visit keeps nothing that depends on
        the network (Loader.warm_visit_unimpaired) the link passes the visit unimpaired and is
        back to its configuration before ``start``; the record says so (metrics)."""
        self._warm_unimpaired = registry.get(self.cfg.client).warm_visit_unimpaired and self.topo.link_unimpaired(True)
        if not self._warm_unimpaired:
            return self._load_once(tfo, warmed=start)
        restored = []

        def warmed() -> None:
            if not self.topo.link_unimpaired(False):
                raise PltError("the link emulator did not return to its configured link after the TLS warm-up")
            restored.append(True)
            start()

        try:
            return self._load_once(tfo, warmed=warmed)
        finally:
            if not restored:  # (the load failed before its visit ended)
                self.topo.link_unimpaired(False)

    def warm_up(self) -> None:
        """The prior visit that caches a TFO cookie for every origin, whatever the client (over the
        link unimpaired: a cookie is the same whatever the network's conditions)."""
        unimpaired = self.topo.link_unimpaired(True)
        try:
            registry.warm_tfo(self.job())
        finally:
            if unimpaired and not self.topo.link_unimpaired(False):
                raise PltError("the link emulator did not return to its configured link after the TFO warm-up")
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
            res = self._warm_visit_then_load(tfo, start)
        ended = time.time()
        if "c" not in before:  # (a loader that never said its visit was over: a bug, not a load)
            raise PltError("the built-in loader finished without reporting the end of its TLS warm-up visit")
        c0, s0 = before["c"], before["s"]
        c1, s1 = self.topo.counters(), self.replay.snapshot()
        snap = self.topo.link_snapshot()
        late, queued, dropped = lateness.summary(snap), queue_waits(snap), link_drops(snap)
        server = conns = tls = None
        if s0 and s1:  # what the replay server saw during this load
            server = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_TFO_KEYS}
            conns = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_CONN_KEYS}
            tls = {k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_TLS_KEYS}
            if any(p.transport == "udp" for p in self.replay.offered.values()):  # (h1/h2 records as before)
                tls.update({k: s1.get(k, 0) - s0.get(k, 0) for k in SERVER_QUIC_KEYS})
                tls["quic_initial_bytes_max"] = s1.get("quic_initial_bytes_max")
            server.update(tfo_tls_hello_max=s1.get("tfo_tls_hello_max"), tfo_syn_bytes_max=s1.get("tfo_syn_bytes_max"))
        counters = {
            "client": _delta(c1["client"], c0["client"], COUNTERS_CLIENT),
            "server": _delta(c1["server"], c0["server"], COUNTERS_SERVER),
        }
        loader, plan = registry.get(self.cfg.client), self._plans.get(tfo)
        requests = [loader.request_record(r) for r in res.get("requests", [])]
        if loader.planned:  # the load's graph on its records (pltlab.explain)
            graph.from_plan(requests, plan)
        else:
            graph.from_initiators(requests)
        reason = (
            judge(
                tfo,
                counters,
                requests,
                loader.document_problem(res, requests, self.chain, plan),
                expected=loader.tfo_expected(plan, tfo),
            )
            or (schemes.problem(requests, self.http, res.get("hsts_upgraded") or ()) if self.http is not None else None)
            or protocol_problem(
                requests, self.host_ips, self.replay.offered, alt_svc=self.cfg.h3_discovery == "alt-svc"
            )
            or loader.quic_problem(self.cfg.h3_discovery, tls, requests)
            or loader.tls_problem(self.cfg.tls, tls, requests)
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
            "tls_note": loader.tls_note(self.cfg.tls, tls),
            "server_connections": conns,  # HTTP/1.x connections and requests, h2 connections, streams and errors
            # full and resumed handshakes, early data accepted (connections, bytes); QUIC's too (quic_*)
            "server_tls": tls,
            "tls_warmup_ms": res.get("warmup_ms"),  # the loader's visit before the load (resume/0rtt)
            "emulator_lateness_us": late,  # the emulator's lateness during this load
            # the link's precision aids asked for and refused: name -> error (pltlab.net.emulator)
            "link_aids_missing": dict(self.topo.link_aids_missing),
            # how long packets waited in each direction's queue behind those before them (pltlab.explain)
            # and how many the link dropped (its loss, its full queue): what loss recovery acted on
            "metrics": self._metrics(queued, dropped, res),
            "started_at": before["t"],  # wall clock (s) of the load's start and end
            "ended_at": ended,
            "not_found": sum(1 for r in requests if r.get("status") == 404),
            "requests": requests,
            # the built-in loader's connections (TFO, TLS per connection) and the load's first
            # request's wall clock: for the load's HAR (pltlab.run.loadhar)
            "connections": res.get("connections"),
            "load_started_at": res.get("load_started_at", before["t"]),
        }

    def _metrics(self, queued: dict | None, dropped: dict | None, res: dict) -> dict | None:
        out = {"queue_wait_us": queued} if queued else {}
        if self.cfg.tls != "full" and self._warm_unimpaired:
            out["warm_visit"] = "unimpaired"  # the loader's TLS warm-up visit: no delay, loss or rate
        if dropped is not None:
            out["link_drops"] = dropped
        if self.inferred is not None:  # what was replayed, and the browser's DOMContentLoaded beside onLoad
            out["recorded_network"] = self.inferred.summary()
            dcl = (res.get("nav_timing") or {}).get("domContentLoadedEventEnd")
            out["dcl_ms"] = dcl if isinstance(dcl, (int, float)) and dcl > 0 else None
        return out or None


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
