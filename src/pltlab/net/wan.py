"""What a run's emulated network looks like: link shaping, TCP knobs, origins."""

from dataclasses import dataclass, field

from pltlab import units
from pltlab.errors import PltError
from pltlab.net.backends import CHOICES as BACKENDS
from pltlab.net.loss import gilbert

CC_CHOICES = ("cubic", "reno", "bbr")


@dataclass(frozen=True)
class TcpSysctl:
    """A per-namespace TCP sysctl pltlab sets in every namespace it creates (client, server side,
    origins), never on the host: its knob's words and the values written (docs/knobs.md "TCP of
    2011": each one measured per network namespace and settable on this kernel)."""

    key: str
    values: dict  # the knob's word -> the value written
    kernel: str  # this kernel's default (the knob's default)
    linux_2011: str  # Linux 2.6.34's (the TFO patches' base), nearest available
    help: str


TCP_SYSCTLS: dict[str, TcpSysctl] = {
    "rack": TcpSysctl(
        "net.ipv4.tcp_recovery",
        {"on": 1, "off": 0},
        "on",
        "off",
        "RACK loss detection (net.ipv4.tcp_recovery; Linux 4.4+). off: duplicate-ACK counting, as 2011's kernels did.",
    ),
    "tlp": TcpSysctl(
        "net.ipv4.tcp_early_retrans",
        {"on": 3, "off": 0},
        "on",
        "off",
        "Tail loss probes (net.ipv4.tcp_early_retrans; Linux 3.10+). off: a lost tail waits for the "
        "retransmission timeout, as in 2011.",
    ),
    "ss_after_idle": TcpSysctl(
        "net.ipv4.tcp_slow_start_after_idle",
        {"on": 1, "off": 0},
        "on",
        "on",
        "Slow start again after an idle period of one RTO (net.ipv4.tcp_slow_start_after_idle).",
    ),
    "sack": TcpSysctl(
        "net.ipv4.tcp_sack",
        {"on": 1, "off": 0},
        "on",
        "on",
        "Selective acknowledgements (net.ipv4.tcp_sack).",
    ),
    "frto": TcpSysctl(
        "net.ipv4.tcp_frto",
        {"on": 2, "off": 0},
        "on",
        "on",
        "F-RTO, spurious retransmission timeout detection (net.ipv4.tcp_frto; on: 2, SACK-enhanced).",
    ),
    "wscale": TcpSysctl(
        "net.ipv4.tcp_window_scaling",
        {"on": 1, "off": 0},
        "on",
        "on",
        "Window scaling (net.ipv4.tcp_window_scaling). off: receive windows of at most 64 KB, as "
        "Windows XP clients had by default.",
    ),
    "timestamps": TcpSysctl(
        "net.ipv4.tcp_timestamps",
        {"on": 1, "off": 0},
        "on",
        "on",
        "TCP timestamps (net.ipv4.tcp_timestamps; off: no RTT samples from them, 12 bytes more "
        "payload per segment), off by default in Windows XP.",
    ),
}
SYSCTL_KEYS = {s.key for s in TCP_SYSCTLS.values()}


@dataclass(frozen=True)
class LinkSpec:
    """The bottleneck between the client and the origins, per direction.

    up = client -> server, down = server -> client. A rate of None means unlimited (no queue).
    """

    delay_up_us: int = 0
    delay_down_us: int = 0
    rate_up_bps: int | None = None
    rate_down_bps: int | None = None
    trace_up: str | None = None
    trace_down: str | None = None
    queue_packets: int | None = 1000  # drop-tail; netem's and txqueuelen's default
    queue_bytes: int | None = None
    loss_up: float = 0.0
    loss_down: float = 0.0
    seed: int = 1
    # mean length of a burst of losses in packets (both directions' loss; 1: random per packet,
    # else Gilbert-Elliott with that loss rate: ``gilbert``); origin overrides' losses stay random
    loss_burst: float = 1.0

    def __post_init__(self):
        if (
            isinstance(self.loss_burst, bool)
            or not isinstance(self.loss_burst, (int, float))
            or not (1 <= self.loss_burst <= units.MAX_LOSS_BURST)
        ):
            raise PltError(
                f"invalid loss burst {units.show(self.loss_burst)}: packets, from 1 to {units.MAX_LOSS_BURST}"
            )
        for lo in (self.loss_up, self.loss_down):
            gilbert(lo, self.loss_burst)

    @property
    def rtt_us(self) -> int:
        return self.delay_up_us + self.delay_down_us

    @classmethod
    def build(
        cls,
        rtt="0ms",
        rate=None,
        rate_up=None,
        loss=None,
        loss_up=None,
        loss_down=None,
        queue=None,
        seed: int = 1,
        trace_up=None,
        trace_down=None,
    ) -> "LinkSpec":
        """From CLI-style values. ``rtt`` is split evenly over both directions; ``rate`` and
        ``loss`` apply to both directions unless the per-direction value is given."""
        rtt_us = units.duration_us(rtt, "rtt")
        down = units.rate_bps(rate, "rate")
        up = units.rate_bps(rate_up, "uplink rate") if rate_up is not None else down
        lo = units.loss_fraction(loss)
        qp, qb = units.queue_spec(queue) if queue is not None else (1000, None)
        seed = units.seed(seed)
        return cls(
            delay_up_us=rtt_us // 2,
            delay_down_us=rtt_us - rtt_us // 2,
            rate_up_bps=up,
            rate_down_bps=down,
            trace_up=trace_up,
            trace_down=trace_down,
            queue_packets=qp,
            queue_bytes=qb,
            loss_up=units.loss_fraction(loss_up, "uplink loss") if loss_up is not None else lo,
            loss_down=units.loss_fraction(loss_down, "downlink loss") if loss_down is not None else lo,
            seed=seed,
        )

    @property
    def shaped(self) -> bool:
        return bool(self.rate_up_bps or self.rate_down_bps or self.trace_up or self.trace_down)


@dataclass(frozen=True)
class OriginOverride:
    """A different RTT (and optionally loss) for one origin, e.g. a near CDN or a far third party."""

    origin: int  # index into the topology's origins
    rtt_us: int
    loss: float | None = None

    def __post_init__(self):
        if (
            isinstance(self.rtt_us, bool)
            or not isinstance(self.rtt_us, int)
            or not 0 <= self.rtt_us <= units.MAX_RTT_US
        ):
            raise PltError(f"invalid origin rtt {units.show(self.rtt_us)} us: at most 10 s")
        if self.loss is not None and not 0 <= self.loss <= 1:
            raise PltError(f"invalid origin loss {units.show(self.loss)}: must be between 0 and 100%")


# What page loads use unless told otherwise (`--client-rmem`, experiment key `client_rmem`): with
# it the receive window never limits a page load, so loads repeat (benches/notes.md "loaders";
# measured by benches/bench_run.py, `repeat` vs `repeat-kernel`).
DEFAULT_CLIENT_RMEM = 1 << 20


@dataclass(frozen=True)
class TcpKnobs:
    """Kernel TCP settings applied per namespace and per route."""

    tfo_client: int = 3  # net.ipv4.tcp_fastopen in the client namespace
    tfo_server: int = 3  # ... and on the server side
    initcwnd: int | None = None  # server-side routes (what the origins send with); None = kernel's 10
    initrwnd: int | None = None  # client-side routes (what the client advertises)
    cc: str = "cubic"  # per route (congctl): only reno/bbr can be a namespace default here
    mtu: int = 1500
    client_initcwnd: int | None = None
    # the client's initial receive buffer (net.ipv4.tcp_rmem's middle value); None = the kernel's
    # (131072: a 64 KB initial window, grown by autotuning, whose pace depends on sub-millisecond
    # timing, so a large object can take one round trip more in some loads than in others).
    # Page loads default to DEFAULT_CLIENT_RMEM (experiments.runner.RunConfig).
    client_rmem: int | None = None
    # per-namespace TCP sysctls (TCP_SYSCTLS' keys -> value), written in every namespace of the run
    sysctls: tuple[tuple[str, int], ...] = ()

    def __post_init__(self):
        for key, v in self.sysctls:
            if key not in SYSCTL_KEYS or isinstance(v, bool) or not isinstance(v, int):
                raise PltError(f"invalid TCP sysctl {units.show(key)}={units.show(v)}: not one pltlab sets")
        for name in ("tfo_client", "tfo_server"):
            v = getattr(self, name)
            if not isinstance(v, int) or not 0 <= v <= 0x7FF:
                raise PltError(f"invalid {name} {units.show(v)}: a net.ipv4.tcp_fastopen value (0..3, flags)")
        for name in ("initcwnd", "initrwnd", "client_initcwnd"):
            v = getattr(self, name)
            if v is not None and not units.is_window(v):
                raise PltError(
                    f"invalid {name} {units.show(v)}: must be an integer from {units.MIN_ICW} to {units.MAX_ICW} segments"
                )
        if self.cc not in CC_CHOICES:
            raise PltError(f"unknown congestion control {units.show(self.cc)} (choose from {', '.join(CC_CHOICES)})")
        if self.client_rmem is not None and (
            isinstance(self.client_rmem, bool)
            or not isinstance(self.client_rmem, int)
            or not units.MIN_CLIENT_RMEM <= self.client_rmem <= units.MAX_CLIENT_RMEM
        ):
            raise PltError(
                f"invalid client receive buffer {units.show(self.client_rmem)}: "
                f"{units.MIN_CLIENT_RMEM} bytes to {units.MAX_CLIENT_RMEM >> 20} MB"
            )
        if (
            isinstance(self.mtu, bool)
            or not isinstance(self.mtu, int)
            or not units.MIN_MTU <= self.mtu <= units.MAX_MTU
        ):
            raise PltError(f"invalid mtu {units.show(self.mtu)}: must be between {units.MIN_MTU} and {units.MAX_MTU}")


@dataclass(frozen=True)
class TopologySpec:
    origins: int = 1
    origin_namespaces: bool = False  # one namespace per origin instead of one shared server side
    link: LinkSpec = field(default_factory=LinkSpec)
    knobs: TcpKnobs = field(default_factory=TcpKnobs)
    overrides: tuple[OriginOverride, ...] = ()
    backend: str = "auto"
    busy_wait_us: int = 300
    linger_us: int = 0  # emulator polls this long after each packet (see link/emulator.rs)
    # A standby thread of the emulator on another CPU looks this often whether the main loop
    # has stalled, and does its work if so (link/emulator.rs; measured by benches/bench_precision.py
    # --standby-us N); 0 = none.
    standby_us: int = 100
    # Fault injection (tests): the emulator's main loop stops for stall_us every stall_every_ms.
    stall_us: int = 0
    stall_every_ms: int = 0
    sched_fifo: bool = False
    # CPUs poll instead of halting while the emulator runs (PM QoS; link/config.rs)
    idle_poll: bool = False
    pcap: str | None = None
    # Emulator logs each release/ingress delay >= this many us (the self-check tells machine
    # stalls from link errors with them); 0 = off: page loads keep only the per-load histograms,
    # so a long sweep's emulator does not grow a log (benches/bench_soak.py).
    late_event_us: int = 0

    def __post_init__(self):
        if not isinstance(self.origins, int) or not 1 <= self.origins <= 999:
            raise PltError(f"invalid number of origins {units.show(self.origins)}: must be 1..999")
        if self.backend not in BACKENDS:
            raise PltError(f"unknown backend {units.show(self.backend)} (choose from {', '.join(BACKENDS)})")
        for o in self.overrides:
            if not 0 <= o.origin < self.origins:
                raise PltError(f"override for origin {o.origin}: the topology has {self.origins} origins")
        most = units.MAX_EMULATOR_WAIT_US
        for what, v in (
            ("busy-wait", self.busy_wait_us),
            ("linger", self.linger_us),
            ("standby tick", self.standby_us),
        ):
            if not 0 <= v <= most:
                raise PltError(f"invalid {what} {v} us: must be 0..{most}")
        if not 0 <= self.stall_us <= most or (self.stall_us and self.stall_every_ms <= 0):
            raise PltError(f"invalid injected stall {self.stall_us} us every {self.stall_every_ms} ms")
        if not 0 <= self.late_event_us <= 1_000_000:
            raise PltError(f"invalid late-event threshold {self.late_event_us} us: must be 0..1000000")
