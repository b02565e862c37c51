"""The settings of one measured page load (network, servers, loader, run): one typed field per knob
of pltlab.run.knobs, parsed once when the configuration is made.

    RunConfig(rtt="50ms", rate="4mbit", loss="1%", icw=10)        # user-facing values, parsed
    RunConfig.from_knobs({"rtt": "50ms", "initcwnd": 10})          # the same from a dict
    cfg.rtt_us, cfg.rate_bps, cfg.loss, cfg.queue, cfg.tfo_modes   # 50000, 4000000, 0.01, (1000, None), ...
    cfg.link(), cfg.tcp(), cfg.topology(origins)                   # what the network is built from
    cfg.columns()                                                  # the results database's run columns
"""

from dataclasses import dataclass

from pltlab.errors import PltError
from pltlab.net.wan import TCP_SYSCTLS, LinkSpec, OriginOverride, TcpKnobs, TopologySpec
from pltlab.run import knobs


@dataclass(init=False)
@knobs.fields(knobs.KNOBS.values())
class RunConfig:
    def __init__(self, **values):
        """Knobs by any of their names (pltlab.run.knobs): user values are parsed (a PltError line
        names a bad one), values by field name are taken as parsed; the rest are the defaults."""
        for f, v in knobs.parse(values).items():
            setattr(self, f, v)

    @classmethod
    def from_knobs(cls, values: dict, where: str = "") -> "RunConfig":
        """From user-facing values ("50ms", "4mbit", "1%", 10, "cubic", ...) by knob name, TOML key
        or CLI option; errors are prefixed with ``where`` (e.g. "study.toml: key 'icw'")."""
        cfg = cls.__new__(cls)
        for f, v in knobs.parse(values, where=where).items():
            setattr(cfg, f, v)
        return cfg

    def columns(self) -> dict:
        """This configuration's values in the results database's run columns."""
        return {k.column: k.column_value(self) for k in knobs.KNOBS.values() if k.column}

    def link(self) -> LinkSpec:
        rtt = self.rtt_us
        return LinkSpec(
            delay_up_us=rtt // 2,
            delay_down_us=rtt - rtt // 2,
            # an uplink trace replaces the rate there (`rate` then shapes the downlink only)
            rate_up_bps=None if self.trace_up else self.rate_bps if self.rate_up_bps is None else self.rate_up_bps,
            rate_down_bps=self.rate_bps,
            trace_up=self.trace_up,
            trace_down=self.trace_down,
            queue_packets=self.queue[0],
            queue_bytes=self.queue[1],
            loss_up=self.loss,
            loss_down=self.loss,
            seed=self.seed,
            loss_burst=self.loss_burst,
        )

    def tcp(self) -> TcpKnobs:
        return TcpKnobs(
            initcwnd=self.icw,
            initrwnd=self.initrwnd,
            cc=self.cc,
            client_rmem=self.client_rmem,
            mtu=self.mtu,
            sysctls=tuple((s.key, s.values[getattr(self, n)]) for n, s in TCP_SYSCTLS.items()),
        )

    def topology(self, origins: int = 1, hosts: dict | None = None) -> TopologySpec:
        """The emulated network for ``origins`` origins. ``hosts`` (host name -> origin index, a
        page's) resolves per-origin overrides by host; a host not in it is another page's, skipped.
        Without it (`pltlab shell`), origins are numbered."""
        return TopologySpec(
            origins=origins,
            origin_namespaces=self.origin_namespaces,
            link=self.link(),
            knobs=self.tcp(),
            overrides=self._overrides(origins, hosts),
            backend=self.backend,
            busy_wait_us=self.busy_wait_us,
            pcap=self.pcap if isinstance(self.pcap, str) else None,  # (true: a sweep's folder, not yet named)
            sched_fifo=self.sched_fifo,
            idle_poll=self.idle_poll,
        )

    def _overrides(self, origins: int, hosts: dict | None) -> tuple:
        out = []
        for target, rtt_us, loss in self.overrides:
            if isinstance(target, str):
                if hosts is None:
                    raise PltError(f"origin override {target!r}: name origins by number here (N=RTT)")
                if target not in hosts:
                    continue  # a host of another page
                idx = hosts[target]
            else:
                idx = target
                if hosts is not None and not 0 <= idx < origins:
                    raise PltError(f"origin override {target!r}: the page has {len(hosts)} origins")
            out.append(OriginOverride(idx, rtt_us, loss))
        return tuple(out)
