"""The settings of one measured page load (network, servers, loader, run)."""

from dataclasses import dataclass, field

from pltlab.net import LinkSpec
from pltlab.net.spec import DEFAULT_CLIENT_RMEM


@dataclass
class RunConfig:
    rtt: str = "100ms"
    rate: str | None = None
    rate_up: str | None = None
    loss: str | None = None
    queue: str | None = None
    icw: int | None = None
    cc: str = "cubic"
    client: str = "builtin"
    warm: bool = True  # TFO cookies warmed by a prior visit (else: cold, keys reset)
    reps: int = 1
    seed: int = 1
    tfo_modes: tuple[bool, ...] = (False, True)
    max_conns_per_host: int = 6
    think_time: bool = False
    overrides: tuple = ()  # ((host name or origin index, rtt_us, loss or None), ...)
    # "recorded": the built-in loader uses the archive's schemes; "chromium": also the https
    # upgrades Chromium makes by itself (HSTS preload), for a like-for-like comparison.
    schemes: str = "recorded"
    # TcpKnobs.client_rmem, the client's initial receive buffer; None = the kernel's
    client_rmem: int | None = DEFAULT_CLIENT_RMEM
    load_timeout_s: float = 120.0  # the built-in loader gives up on a load after this long
    # Built-in loader's model of the page (pltlab.loaders.plan.build): "archive" = recorded
    # initiators, no priorities; "chromium" = what Chromium sees and how it schedules it.
    model: str = "archive"
    # model "chromium" on a calibrated page (pltlab calibrate): measured compute delays per
    # object and the load-event tail (added to plt_ms, also reported as tail_ms); False: none
    calibrated: bool = True
    pcap: str | None = None  # the emulator's client-side packet trace of the runner's loads
    backend: str = "auto"
    # emulator under SCHED_FIFO (None: yes): on a busy machine its wake-ups are otherwise delayed
    # by milliseconds (docs/performance.md)
    sched_fifo: bool | None = None
    # a load during which the emulator was late (pltlab.net.lateness) is re-run this many times
    # at most; still late after them, it is invalid
    late_reruns: int = 2
    extra: dict = field(default_factory=dict)

    def columns(self) -> dict:
        """This configuration's values in the results database's run columns."""
        link = self.link()
        return {"rtt_ms": link.rtt_us / 1000, "rate_down_bps": link.rate_down_bps,
                "rate_up_bps": link.rate_up_bps, "loss": link.loss_down, "queue": self.queue,
                "icw": self.icw, "cc": self.cc, "client": self.client, "warm": self.warm,
                "overrides": [list(o) for o in self.overrides], "seed": self.seed}

    def link(self) -> LinkSpec:
        return LinkSpec.build(rtt=self.rtt, rate=self.rate, rate_up=self.rate_up, loss=self.loss,
                              queue=self.queue, seed=self.seed)
