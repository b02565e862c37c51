"""Building and tearing down one run's emulated network.

    client ns (plt-<id>-c)                      server ns (plt-<id>-s)
    198.18.0.1 on TUN plt-<id>-t  <-- pltlab-dp link -->  TUN plt-<id>-t, origins 198.19.0.x on lo
                                                          (or: router to one ns per origin)

The client namespace has only loopback and the TUN, with a route to the origin range and nothing
else: any other destination fails at once with ENETUNREACH.
"""

import logging
import os
import secrets
import shutil
import signal
import threading
from typing import TYPE_CHECKING

from pltlab.errors import PltError
from pltlab.net import backends, names, nsutil
from pltlab.net.emulator import LinkConfig, link_config
from pltlab.net.supervise import Supervisor
from pltlab.net.wan import TopologySpec

if TYPE_CHECKING:  # (pyroute2 costs ~0.3 s CPU to import: imported where a link is set up)
    from pyroute2 import IPRoute

log = logging.getLogger(__name__)


def _tcp_knob_metrics(cc: str, initcwnd: int | None, initrwnd: int | None) -> dict:
    m = {"RTAX_CC_ALGO": cc}
    if initcwnd:
        m["RTAX_INITCWND"] = initcwnd
    if initrwnd:
        m["RTAX_INITRWND"] = initrwnd
    return m


def require_root() -> None:
    """One error line unless this process may build emulated WANs (checked before anything is
    made: a sweep refuses at once instead of failing every load)."""
    if os.geteuid() != 0:
        raise PltError("pltlab needs root (network namespaces, TUN devices)")


class Topology:
    """One run's namespaces, link and processes. Use as a context manager: teardown is guaranteed
    on normal exit, exceptions, SIGINT and SIGTERM; after SIGKILL, `pltlab clean` removes leftovers.
    """

    def __init__(self, spec: TopologySpec | None = None, run_id: str | None = None):
        self.spec = spec or TopologySpec()
        self.run_id = run_id or names.new_run_id()
        if not names.valid_run_id(self.run_id):
            raise PltError(f"invalid run id {self.run_id!r}: 6 lowercase hex digits")
        self.client_ns = names.client_ns(self.run_id)
        self.server_ns = names.server_ns(self.run_id)
        self.tun = names.tun_name(self.run_id)
        self.origin_ips = [names.origin_ip(i) for i in range(self.spec.origins)]
        self.workdir = names.workdir(self.run_id)
        self.link = None
        self.link_stats: dict | None = None
        # the link's precision aids asked for and refused (pltlab.net.emulator.aids_missing); kept
        # after teardown
        self.link_aids_missing: dict[str, str] = {}
        self.backend: str | None = None  # the name of what runs the link (pltlab.net.backends)
        self._backend: backends.LinkBackend | None = None
        self._namespaces: list[str] = []
        self._own_workdir = False
        self._procs = []
        # the run's long-lived processes: a load waiting on them ends the moment one dies
        self.supervisor = Supervisor()
        self._old_handlers = None
        self._is_up = False

    # ---- where things live -------------------------------------------------------------
    def origin_ns(self, i: int) -> str:
        """Namespace in which origin i's servers run."""
        if self.spec.origin_namespaces:
            return names.origin_ns(self.run_id, i)
        return self.server_ns

    def server_namespaces(self) -> list[str]:
        if self.spec.origin_namespaces:
            return [self.origin_ns(i) for i in range(self.spec.origins)]
        return [self.server_ns]

    # ---- lifecycle ---------------------------------------------------------------------
    def __enter__(self) -> "Topology":
        self._install_signal_handlers()
        try:
            self.up()
        except BaseException:
            self.down()
            self._restore_signal_handlers()
            raise
        return self

    def __exit__(self, *exc):
        try:
            self.down()
        finally:
            self._restore_signal_handlers()
        return False

    def up(self) -> "Topology":
        require_root()
        try:  # claims the run id: a run never removes another one's folder
            os.mkdir(self.workdir)
        except FileExistsError:
            raise PltError(f"run id {self.run_id} is in use ({self.workdir} exists)") from None
        self._own_workdir = True
        names.write_owner(self.run_id)  # before any namespace: `pltlab clean` spares a live run
        self._add_ns(self.client_ns)
        self._add_ns(self.server_ns)
        self._backend = backends.resolve(self.spec, self.client_ns)
        self.backend = self._backend.name
        self._build_client()
        self._build_server()
        if self.spec.origin_namespaces:
            self._build_origin_namespaces()
        self._start_link()
        self._is_up = True
        return self

    def link_snapshot(self) -> dict | None:
        """The link's figures since the previous snapshot (None: its backend has none)."""
        snap = getattr(self.link, "snapshot", None)
        return snap() if snap else None

    def link_unimpaired(self, on: bool) -> bool:
        """The link passes packets unimpaired (``on``: a warm-up visit's) or as configured; False:
        its backend cannot (or did not answer), nothing changed."""
        switch = getattr(self.link, "unimpaired", None)
        return bool(switch and switch(on))

    def down(self) -> dict | None:
        """Stop everything this run started and delete its namespaces. Idempotent."""
        self.supervisor.forget()  # stopping them now is no death
        for p in reversed(self._procs):
            _stop_process(p)
        self._procs.clear()
        if self.link is not None:
            try:
                self.link_stats = self.link.stop()
            finally:
                self.link = None
        for ns in reversed(self._namespaces):
            kill_netns_processes(ns)
            try:
                nsutil.remove_netns(ns)
            except OSError as e:
                log.warning("could not remove namespace %s: %s", ns, e)
        self._namespaces.clear()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self._own_workdir = False
        self._is_up = False
        return self.link_stats

    # ---- construction ------------------------------------------------------------------
    def _add_ns(self, name: str) -> None:
        if os.path.exists(nsutil.ns_path(name)):
            raise PltError(f"namespace {name} already exists (another run with id {self.run_id}?)")
        nsutil.create_netns(name)
        self._namespaces.append(name)

    def _device(self, ipr: "IPRoute", peer_ns: str | None = None) -> int:
        """The link's device on this side (``peer_ns``: the server's, from the client side)."""
        k = self.spec.knobs
        self._backend.make_device(ipr, self.tun, peer_ns)
        idx = ipr.link_lookup(ifname=self.tun)[0]
        ipr.link("set", index=idx, mtu=k.mtu, state="up")
        return idx

    def _build_client(self) -> None:
        k = self.spec.knobs
        from pyroute2 import IPRoute  # noqa: PLC0415 (heavy: loaded only to set up links)

        with nsutil.in_netns(self.client_ns), IPRoute() as ipr:
            ipr.link("set", index=1, state="up")
            idx = self._device(ipr, peer_ns=self.server_ns)
            ipr.addr("add", index=idx, address=names.CLIENT_IP, prefixlen=32)
            # Only the origin range is reachable, and only through the emulated link.
            ipr.route(
                "add",
                dst=names.ORIGIN_NET,
                oif=idx,
                prefsrc=names.CLIENT_IP,
                metrics=_tcp_knob_metrics(k.cc, k.client_initcwnd, k.initrwnd),
            )
            _write_sysctls(
                {
                    "net.ipv4.tcp_fastopen": k.tfo_client,
                    "net.ipv4.tcp_no_metrics_save": 1,  # no cwnd/ssthresh carried from run to run
                    **dict(k.sysctls),  # (the TCP knobs: this namespace's own, the host's untouched)
                }
            )
            if k.client_rmem:
                _write_sysctls({"net.ipv4.tcp_rmem": f"4096 {k.client_rmem} {max(k.client_rmem, 6 << 20)}"})

    def _build_server(self) -> None:
        k = self.spec.knobs
        from pyroute2 import IPRoute  # noqa: PLC0415 (heavy: loaded only to set up links)

        with nsutil.in_netns(self.server_ns), IPRoute() as ipr:
            ipr.link("set", index=1, state="up")
            idx = self._device(ipr)
            ipr.route("add", dst=names.CLIENT_NET, oif=idx, metrics=_tcp_knob_metrics(k.cc, k.initcwnd, None))
            if self.spec.origin_namespaces:
                ipr.addr("add", index=1, address=names.ROUTER_IP, prefixlen=32)
                _write_sysctls({"net.ipv4.ip_forward": 1, **dict(k.sysctls)})  # (every namespace of the run alike)
            else:
                for ip in self.origin_ips:
                    ipr.addr("add", index=1, address=ip, prefixlen=32)
                self._server_sysctls()

    def _server_sysctls(self) -> None:
        k = self.spec.knobs
        _write_sysctls(
            {
                "net.ipv4.tcp_fastopen": k.tfo_server,
                "net.ipv4.tcp_no_metrics_save": 1,
                "net.ipv4.tcp_fastopen_key": _random_tfo_key(),
                **dict(k.sysctls),
            }
        )

    def _build_origin_namespaces(self) -> None:
        k = self.spec.knobs
        for i in range(self.spec.origins):
            self._add_ns(self.origin_ns(i))
        # One netlink session per namespace: the server side's router first, then each origin.
        from pyroute2 import IPRoute  # noqa: PLC0415 (heavy: loaded only to set up links)

        with nsutil.in_netns(self.server_ns), IPRoute() as ipr:
            for i, ip in enumerate(self.origin_ips):
                veth = names.veth_name(self.run_id, i)
                ipr.link("add", ifname=veth, kind="veth", peer={"ifname": veth, "net_ns_fd": self.origin_ns(i)})
                idx = ipr.link_lookup(ifname=veth)[0]
                ipr.link("set", index=idx, state="up", mtu=k.mtu)
                ipr.route("add", dst=f"{ip}/32", oif=idx)
                _write_sysctls({f"net.ipv4.conf.{veth}.proxy_arp": 1})
        for i, ip in enumerate(self.origin_ips):
            veth = names.veth_name(self.run_id, i)
            with nsutil.in_netns(self.origin_ns(i)), IPRoute() as ipr:
                ipr.link("set", index=1, state="up")
                idx = ipr.link_lookup(ifname=veth)[0]
                ipr.link("set", index=idx, state="up", mtu=k.mtu)
                ipr.addr("add", index=idx, address=ip, prefixlen=32)
                ipr.route(
                    "add", dst="198.18.0.0/15", oif=idx, scope=253, metrics=_tcp_knob_metrics(k.cc, k.initcwnd, None)
                )
                self._server_sysctls()

    def link_config(self) -> LinkConfig:
        """The user-space link emulator's configuration for this topology."""
        return link_config(
            self.spec,
            client_ns=self.client_ns,
            server_ns=self.server_ns,
            tun=self.tun,
            origin_ips=self.origin_ips,
            stats=os.path.join(self.workdir, "link-stats.json"),
        )

    def _start_link(self) -> None:
        self.link = self._backend.link(self)
        self.link.start()  # set first: a link that fails to start is still stopped at teardown
        self.link_aids_missing = dict(getattr(self.link, "aids_missing", None) or {})  # (netem: none)
        proc = getattr(self.link, "proc", None)  # a link process of ours dies: the load ends
        if proc is not None:
            self.supervisor.watch("link emulator", proc, self.link.stderr_tail)

    # ---- using the network -------------------------------------------------------------
    def _where(self, where) -> str:
        if where == "client":
            return self.client_ns
        if where == "server":
            return self.server_ns
        if isinstance(where, int):
            return self.origin_ns(where)
        raise ValueError(f"unknown place {where!r}")

    def popen(self, where, argv: list[str], **kw):
        """Start a process in the client ('client'), the server side ('server') or origin i's
        namespace; it is stopped at teardown at the latest."""
        p = nsutil.popen(self._where(where), argv, **kw)
        self._procs.append(p)
        return p

    def run(
        self,
        where,
        argv: list[str],
        check: bool = True,
        timeout: float | None = None,
        input: str | None = None,
        on_line=None,
    ):
        """Run ``argv`` in a namespace of this run to completion, output captured as text (like
        nsutil.run). Supervised: if a watched process (the link emulator, servers registered with
        ``watch``) dies meanwhile, the command is killed at once and ProcessDied names the dead
        process; likewise when the command itself is killed by a signal."""
        ns = self._where(where)
        cp = self.supervisor.run(argv, lambda a, **kw: nsutil.popen(ns, a, **kw), timeout, input, on_line)
        if check and cp.returncode != 0:
            msg = (cp.stderr or cp.stdout or "").strip().splitlines()
            raise PltError(f"{' '.join(argv)} failed in {ns}: {msg[-1] if msg else cp.returncode}")
        return cp

    def watch(self, what: str, proc, stderr=None) -> None:
        """Supervise ``proc`` (a server of this run) under the name ``what`` (see run())."""
        self.supervisor.watch(what, proc, stderr)

    def guard(self, where="client"):
        """``with topo.guard(): ...`` for a load driven from this process (Chromium): a watched
        death kills the processes in namespace ``where`` at once (the browser; not this
        process's own children, such as the Playwright driver, which then reports the browser
        gone and is stopped as usual) and ends the block in ProcessDied."""
        ns = self._where(where)
        return self.supervisor.guard(lambda: kill_netns_processes(ns, spare_children=True))

    def counters(self) -> dict:
        """TcpExt counters of the client and (summed) server side."""
        server: dict[str, int] = {}
        for ns in self.server_namespaces():
            for key, v in nsutil.netstat_counters(ns).items():
                server[key] = server.get(key, 0) + v
        return {"client": nsutil.netstat_counters(self.client_ns), "server": server}

    def reset_tfo(self) -> None:
        """Make the next connections 'cold': new server TFO keys, no cached client cookies."""
        for ns in self.server_namespaces():
            nsutil.sysctl_set(ns, "net.ipv4.tcp_fastopen_key", _random_tfo_key())
        nsutil.run(self.client_ns, ["ip", "tcp_metrics", "flush", "all"], check=False)

    def link_alive(self) -> bool:
        return self.link is not None and self.link.alive()

    # ---- signals -----------------------------------------------------------------------
    def _install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        self._old_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            signal.signal(signal.SIGTERM, _raise_exit)
        if signal.getsignal(signal.SIGINT) in (signal.SIG_DFL, signal.SIG_IGN, None):
            signal.signal(signal.SIGINT, signal.default_int_handler)

    def _restore_signal_handlers(self) -> None:
        if self._old_handlers:
            for s, h in self._old_handlers.items():
                signal.signal(s, h)
            self._old_handlers = None


def _raise_exit(signum, frame):
    raise SystemExit(128 + signum)


def _write_sysctls(values: dict) -> None:
    """Write sysctls in the namespace this thread is in."""
    for key, v in values.items():
        try:
            with open(nsutil.sysctl_path(key), "w") as f:
                f.write(str(v))
        except OSError as e:
            raise PltError(f"cannot set {key}={v}: {e.strerror}") from None


def _random_tfo_key() -> str:
    h = secrets.token_hex(16)
    return "-".join(h[i : i + 8] for i in range(0, 32, 8))


def _stop_process(p, timeout: float = 3.0) -> None:
    if p.poll() is not None:
        return
    p.terminate()
    try:
        p.wait(timeout)
    except Exception:
        p.kill()
        p.wait()


def kill_netns_processes(ns: str, spare_children: bool = False) -> int:
    """SIGKILL every process whose network namespace is ``ns`` (``spare_children``: except this
    process's own children); returns how many."""
    try:
        st = os.stat(nsutil.ns_path(ns))
    except FileNotFoundError:
        return 0
    n = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            pst = os.stat(f"/proc/{pid}/ns/net")
            if (pst.st_dev, pst.st_ino) == (st.st_dev, st.st_ino):
                if spare_children and _parent(pid) == os.getpid():
                    continue
                os.kill(int(pid), signal.SIGKILL)
                n += 1
        except (FileNotFoundError, ProcessLookupError, PermissionError):
            continue
    return n


def _parent(pid: str) -> int | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return None
