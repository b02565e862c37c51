"""The knobs: every setting of a measured page load (and of `pltlab shell`), declared once.

A knob says how a user's value is parsed into the typed value RunConfig holds (one PltError line
naming the option or key otherwise), its default as a user writes it, unit, help text, label,
results column, and where it applies:

    run     an option of `pltlab run`       (--NAME unless ``option`` says otherwise)
    shell   an option of `pltlab shell`
    sweep   a key of experiment files        (NAME unless ``toml`` says otherwise); ``sweep=True``:
            a list multiplies the cross product, else one value for the whole experiment
    (none)  set from Python only (RunConfig.from_knobs, studies)

Everything else is derived from this table: RunConfig's fields and RunConfig.from_knobs, the
options of `pltlab run` and `pltlab shell` (pltlab.cli.options), the keys and configurations of
experiment files (pltlab.experiments.spec), the results database's columns
(pltlab.experiments.results) and the report's labels (pltlab.report). Adding a knob is one entry
here plus its effect (where the runner, topology or loader reads the field).

A knob is found by any of its names: its name, TOML key, CLI option (``--rate-up``) or field.
By its field (where that differs from its name) a value is the typed one and taken as is
(``rtt_us=50_000``; dataclasses.replace does this); by any other name it is parsed
(``rtt="50ms"``). Parsers accept their own output, so ``loss=0.01`` and ``loss="1%"`` agree.

`python -m pltlab.run.knobs` (or `pltlab knobs`) prints the table.
"""

from __future__ import annotations

import functools
import json
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dc_field
from typing import Any

from pltlab import protocols, units
from pltlab.errors import PltError
from pltlab.loaders.plan import MODELS, NETWORK_STACK
from pltlab.loaders.registry import DEFAULT as DEFAULT_LOADER
from pltlab.loaders.registry import LOADERS
from pltlab.net.loss import gilbert
from pltlab.net.wan import BACKENDS, CC_CHOICES, DEFAULT_CLIENT_RMEM, TCP_SYSCTLS

SCOPES = ("run", "shell", "sweep")
PROTOCOLS = protocols.CHOICES
TLS_MODES = ("full", "resume", "0rtt")
SERVER_PRIORITIES = ("rfc9218", "round-robin")  # replay/priority.rs
KEEPALIVE = ("on", "off")  # HTTP/1.1 connection reuse (the manifest's keep_alive)
QUIC_CC = ("cubic", "newreno", "bbr")  # quinn's congestion controllers (the manifest's quic.cc)
# QUIC's initial window in packets of 1200 bytes (QUIC's initial datagram size): at least RFC 9002's
# minimum window of 2 packets, at most the TCP icw knob's 1024 (units.MAX_ICW). 10 is quinn's own
# default (12,000 bytes: 14,720 clamped to 2..10 x 1200, RFC 9002 §7.2) and the kernel's TCP one.
MIN_QUIC_ICW, MAX_QUIC_ICW = 2, units.MAX_ICW
H3_DISCOVERY = ("forced", "alt-svc")  # the client told to use QUIC, or learning it from Alt-Svc
UNPRELOADED = "unpreloaded"  # knob hosts: names on the HSTS preload list renamed (archive.rename)
HOSTS = ("recorded", UNPRELOADED)
RECORDED_NETWORK = "recorded"  # knob network: the page's recorded network (pltlab.run.recorded)
NETWORKS = ("emulated", RECORDED_NETWORK)
_HOST_RE = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*\.?")


# ---- parsers: (value, what) -> typed value; ``what`` names the option or key in errors ---------


def _int(lo: int, hi: int, noun: str = ""):
    def parse(v, what):
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise PltError(f"invalid {what} {units.show(v)}: must be an integer from {lo} to {hi}{noun}")
        return v

    return parse


def _choice(choices: tuple, noun: str):
    def parse(v, what):
        if not isinstance(v, str) or v not in choices:
            raise PltError(f"invalid {what} {units.show(v)}: unknown {noun} (choose from {', '.join(choices)})")
        return v

    return parse


def _bool(v, what):
    if not isinstance(v, bool):
        raise PltError(f"invalid {what} {units.show(v)}: true or false")
    return v


def _on(v, what):
    return True if v is None else _bool(v, what)


def _rtt(v, what):
    return units.duration_us(v, what)


def _rate(v, what):
    return units.rate_bps(v, what)


def _rate_up(v, what):
    return None if v is None else units.rate_bps(v, what)


def _loss(v, what):
    return units.loss_fraction(v, what)


def _queue(v, what):
    """(packets, None) or (None, bytes); the parsed form (a pair) is accepted as well."""
    if v is None:
        return 1000, None  # netem's and txqueuelen's default
    if isinstance(v, tuple) and len(v) == 2:
        v = f"{v[0]}" if v[0] is not None else f"{v[1]}B"
    return units.queue_spec(v)


def _queue_key(q) -> str:
    return f"{q[0]}" if q[0] is not None else f"{q[1]}B"


def _tfo(v, what) -> tuple[bool, ...]:
    """TFO modes: "on", "off", "both", true/false, or a list of them (in that order)."""
    if isinstance(v, (list, tuple)):
        out = tuple(m for x in v for m in _tfo(x, what))
        if not out or len(set(out)) != len(out):
            raise PltError(f"invalid {what} {units.show(v)}: each of on and off at most once")
        return out
    modes = {"on": (True,), "off": (False,), "both": (False, True), True: (True,), False: (False,)}
    if isinstance(v, (bool, str)) and v in modes:
        return modes[v]
    raise PltError(f"invalid {what} {units.show(v)}: on, off or both")


def _icw(v, what):
    if v is None or v == "default":
        return None
    if units.is_window(v):
        return v
    raise PltError(
        f"invalid {what} {units.show(v)}: must be an integer from {units.MIN_ICW} to {units.MAX_ICW} segments, "
        'or "default" (the kernel\'s 10)'
    )


_initrwnd = _icw  # (the same limits and words: a window in segments, the kernel's 10 by default)


def _loss_burst(v, what):
    """Mean burst length of losses in packets: 1 (random per packet) up to units.MAX_LOSS_BURST."""
    n = v
    if isinstance(v, str):
        try:
            n = float(v.strip())
        except ValueError:
            n = None
    if isinstance(n, bool) or not isinstance(n, (int, float)) or not 1 <= n <= units.MAX_LOSS_BURST:
        raise PltError(
            f"invalid {what} {units.show(v)}: the mean length of a burst of losses, from 1 (random per packet) "
            f"to {units.MAX_LOSS_BURST} packets"
        )
    return float(n)


def _onoff(words: tuple):
    def parse(v, what):
        if isinstance(v, bool):
            v = "on" if v else "off"
        if not isinstance(v, str) or v not in words:
            raise PltError(f"invalid {what} {units.show(v)}: {' or '.join(words)}")
        return v

    return parse


def _sysctl_knob(name: str) -> Knob:
    """The knob of a per-namespace TCP sysctl (pltlab.net.wan.TCP_SYSCTLS: its key, words and
    default are declared there)."""
    s = TCP_SYSCTLS[name]
    return Knob(
        name,
        _onoff(tuple(s.values)),
        s.kernel,
        f"{s.help} Default: this kernel's ({s.kernel}); Linux 2.6.34's: {s.linux_2011}.",
        type=str,
        label=name.replace("_", " "),
        column=name,
        describe=lambda v, n=name: f"{n.replace('_', ' ')} {v}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    )


def _warm(v, what):
    if isinstance(v, bool):
        return v
    if v in ("warm", "cold"):
        return v == "warm"
    raise PltError(f"invalid {what} {units.show(v)}: warm or cold")


def _origin_rtt(v, what) -> tuple:
    """Per-origin RTT[/LOSS] overrides -> ((host or origin index, rtt_us, loss or None), ...), sorted.
    A table {host or index = "RTT[/LOSS]"} (experiment files), a list of "N=RTT[/LOSS]" or
    "HOST=RTT[/LOSS]" (the CLI), or the parsed form."""
    if v is None:
        return ()
    if isinstance(v, dict):
        items = []
        for target, val in v.items():
            if isinstance(target, str):
                t = int(target) if target.isascii() and target.isdigit() else target.lower()
            elif isinstance(target, int) and not isinstance(target, bool) and target >= 0:
                t = target
            else:
                raise PltError(f"{units.show(target)}: a host name or an origin index")
            if isinstance(val, bool) or not isinstance(val, (str, int, float)):
                raise PltError(f'{units.show(target)}: {units.show(val)}: expected "RTT[/LOSS]"')
            items.append((t, str(val)))
    elif isinstance(v, (list, tuple)) and all(isinstance(x, str) for x in v):
        items = []
        for item in v:
            t, sep, val = item.partition("=")
            t = t.strip().lower()
            if t.isascii() and t.isdigit() and len(t) <= 6:
                t = int(t)
            elif not sep or not (t.isascii() and _HOST_RE.fullmatch(t)) or len(t) > 253:
                raise PltError(
                    f"invalid {what} {units.show(item)}: expected N=RTT[/LOSS] (origin N) or HOST=RTT[/LOSS]"
                )
            items.append((t, val))
    elif isinstance(v, (list, tuple)):  # the parsed form: (target, rtt_us, loss or None) triples
        out = []
        for o in v:
            if (
                not isinstance(o, (list, tuple))
                or len(o) != 3
                or isinstance(o[0], bool)
                or not isinstance(o[0], (int, str))
            ):
                raise PltError(f"invalid {what} {units.show(o)}: (host or index, rtt_us, loss or None)")
            t, us, lo = o
            if isinstance(us, bool) or not isinstance(us, int) or not 0 <= us <= units.MAX_RTT_US:
                raise PltError(f"invalid {what} {units.show(us)} us: at most 10 s")
            out.append((t, us, None if lo is None else units.loss_fraction(lo, "origin loss")))
        return tuple(sorted(out, key=repr))
    else:
        raise PltError(f'{units.show(v)}: each element is a table {{host or index = "RTT[/LOSS]"}}')
    out = []
    for t, val in items:
        r, _, lo = val.partition("/")
        try:
            out.append((t, units.duration_us(r, "origin rtt"), units.loss_fraction(lo, "origin loss") if lo else None))
        except PltError as e:
            raise PltError(f"{units.show(t)}: {e}") from None
    return tuple(sorted(out, key=repr))


def _client_rmem(v, what):
    if v is None:
        return None  # the kernel's
    if isinstance(v, str) and v.strip().lower() in ("default", "kernel"):
        return DEFAULT_CLIENT_RMEM if v.strip().lower() == "default" else None
    n = units.size_bytes(v, what)
    if not units.MIN_CLIENT_RMEM <= n <= units.MAX_CLIENT_RMEM:
        raise PltError(
            f"invalid {what} {units.show(v)} ({n} bytes): a client receive buffer of {units.MIN_CLIENT_RMEM} "
            f'bytes to {units.MAX_CLIENT_RMEM >> 20} MiB, "default" (1 MiB) or "kernel"'
        )
    return n


def _client_hello(v, what):
    """ "own" (None: the built-in loader's own), a loader's name (its ClientHello's size) or bytes."""
    if v is None or (isinstance(v, str) and v.strip().lower() == "own"):
        return None
    if isinstance(v, str) and v.strip().lower() in LOADERS:
        size = LOADERS[v.strip().lower()].client_hello_bytes
        if size is None:
            raise PltError(f"invalid {what} {units.show(v)}: that loader's ClientHello size is not known")
        return size
    names = [n for n, lo in LOADERS.items() if lo.client_hello_bytes is not None]
    try:
        n = units.size_bytes(v, what)
    except PltError:
        raise PltError(
            f"invalid {what} {units.show(v)}: 'own', a loader's name ({', '.join(names)}) or a size in bytes"
        ) from None
    if not 200 <= n <= 16384:
        raise PltError(f"invalid {what} {units.show(v)} ({n} bytes): a TLS ClientHello of 200 to 16384 bytes")
    return n


def _existing_dir(v, what):
    """An output file's path (made absolute): its folder must exist."""
    if v is None:
        return None
    if not isinstance(v, str) or not v:
        raise PltError(f"invalid {what} {units.show(v)}: a file path")
    path = os.path.abspath(v)
    if not os.path.isdir(os.path.dirname(path)):
        raise PltError(f"invalid {what} {units.show(v)}: directory {os.path.dirname(path)} does not exist")
    return path


def _pcap(v, what):
    """A folder (shell: a file) for packet traces; in experiment files also true: the results
    folder's pcap/ (the sweep fills it in), false: none."""
    if v is True or v is False:
        return v or None
    return _existing_dir(v, what)


def _existing_file(v, what):
    if v is None:
        return None
    if not isinstance(v, str) or not os.path.isfile(v):
        raise PltError(f"invalid {what} {units.show(v)}: trace file does not exist")
    return os.path.abspath(v)


def _trace(v, what):
    """A Mahimahi delivery trace (one millisecond timestamp per line, non-decreasing, the last
    > 0: the period it loops with), checked before the link is built."""
    path = _existing_file(v, what)
    if path is not None:
        st = os.stat(path)
        problem = _trace_problem(path, st.st_mtime_ns, st.st_size)
        if problem:
            raise PltError(f"invalid {what} {units.show(v)}: {problem}")
    return path


@functools.lru_cache(maxsize=16)
def _trace_problem(path: str, _mtime: int, _size: int) -> str | None:
    try:
        with open(path, encoding="ascii") as f:
            prev = last = 0
            for i, line in enumerate(f, 1):
                t = line.strip()
                if not t:
                    continue
                if not t.isdigit():
                    return f"line {i}: not a millisecond timestamp (a Mahimahi trace has one per line)"
                if int(t) < prev:
                    return f"line {i}: timestamps must not decrease ({t} < {prev})"
                prev = last = int(t)
    except (OSError, UnicodeDecodeError) as e:
        return f"cannot read it: {getattr(e, 'strerror', None) or e}"
    return None if last > 0 else "no timestamp after 0 ms (empty trace, or a period of 0)"


def _seconds(v, what):
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 < v <= 86_400:
        raise PltError(f"invalid {what} {units.show(v)}: seconds, more than 0 and at most 86400")
    return float(v)


def _table(v, what):
    if not isinstance(v, dict):
        raise PltError(f"invalid {what} {units.show(v)}: a table")
    return dict(v)


# ---- report labels of column values --------------------------------------------------------


def _show_rate(prefix: str):
    return lambda v: f"{prefix} {'unlimited' if v is None else f'{v / 1e6:g} Mbit/s'}"


def _show_overrides(v) -> str:
    ov = json.loads(v) if isinstance(v, str) else v
    return "origin RTT " + (", ".join(f"{t}={us / 1000:g}ms" for t, us, _ in ov) if ov else "none")


# ---- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Knob:
    name: str  # RunConfig.from_knobs key; CLI --NAME and TOML key unless given below
    parse: Callable[[Any, str], Any]
    default: Any  # as a user writes it; its parsed form is ``value``
    help: str
    type: Any = Any  # the parsed value's type (RunConfig's annotation)
    field: str = ""  # RunConfig's attribute (default: name)
    unit: str = ""  # of the parsed value
    label: str = ""  # in tables and the report (default: name)
    column: str = ""  # results column ("" none)
    sql: str = "TEXT"
    to_column: Callable | None = None  # RunConfig -> the column's value (default: the field's)
    describe: Callable | None = None  # a column value -> its words in a configuration's name
    key: Callable = lambda v: v  # parsed value -> its canonical JSON form (run keys, digests)
    sweep: bool = False  # a TOML list multiplies the cross product
    many: bool = False  # the field holds the whole list (the TFO modes), not one point of it
    scopes: tuple[str, ...] = ()
    toml: str = ""
    option: tuple[str, ...] = ()  # typer's option declarations (default: --NAME)
    cli_type: Any = str
    cli: Callable | None = None  # the option's value -> a user value (None: not given)
    defaults: dict = dc_field(default_factory=dict)  # a scope's own default (user value)
    value: Any = None  # set below: ``default`` parsed

    def __post_init__(self):
        for attr, v in (
            ("field", self.name),
            ("toml", self.name),
            ("label", self.name),
            ("option", ("--" + self.name.replace("_", "-"),)),
        ):
            if not getattr(self, attr):
                object.__setattr__(self, attr, v)
        object.__setattr__(self, "value", self.parse(self.default, self.name))

    @property
    def flag(self) -> str:
        """The long option users type (the first of ``option``, without a /--no- part)."""
        return self.option[-1].split("/")[0]

    def default_for(self, scope: str):
        return self.defaults.get(scope, self.default)

    def column_value(self, cfg):
        """Its results column's value for runs of ``cfg``: protocols.NA where it does not apply
        (a knob of the other transport than the run's protocol's, or another row's: pltlab.protocols)."""
        if self.name in protocols.EXCLUSIVE and not applies(cfg, self.name):
            return protocols.NA
        return self.to_column(cfg) if self.to_column else getattr(cfg, self.field)

    def words(self, v) -> str:
        """A column value in a configuration's name (``describe``, else "NAME VALUE"; n/a as such)."""
        if v == protocols.NA:
            return f"{self.label} {protocols.NA}"
        return self.describe(v) if self.describe else f"{self.name} {v}"


_ALL = (
    # -- the link (both directions unless said) --
    Knob(
        "rtt",
        _rtt,
        "100ms",
        "Round-trip time, split evenly over both directions (e.g. 100ms; a bare number is ms).",
        type=int,
        field="rtt_us",
        unit="us",
        label="RTT (ms)",
        column="rtt_ms",
        sql="REAL",
        to_column=lambda c: c.rtt_us / 1000,
        key=lambda v: f"{v}us",
        sweep=True,
        scopes=("run", "shell", "sweep"),
        defaults={"shell": "0ms"},
    ),
    Knob(
        "rate",
        _rate,
        "unlimited",
        "Bottleneck rate, both directions unless --rate-up (e.g. 4mbit; a bare number is Mbit/s).",
        type=int | None,
        field="rate_bps",
        unit="bit/s",
        label="downlink rate",
        column="rate_down_bps",
        sql="INTEGER",
        describe=_show_rate("down"),
        key=lambda v: None if v is None else f"{v}bit",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "rate_up",
        _rate_up,
        None,
        "Uplink rate if different (e.g. 256kbit); default: the downlink's.",
        type=int | None,
        field="rate_up_bps",
        unit="bit/s",
        label="uplink rate",
        column="rate_up_bps",
        sql="INTEGER",
        to_column=lambda c: c.rate_bps if c.rate_up_bps is None else c.rate_up_bps,
        describe=_show_rate("up"),
        key=lambda v: None if v is None else f"{v}bit",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "loss",
        _loss,
        "0%",
        "Random loss per direction (1% or 0.01).",
        type=float,
        unit="fraction",
        label="loss",
        column="loss",
        sql="REAL",
        describe=lambda v: f"loss {v * 100:g}%",
        key=lambda v: f"{v:.6g}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "loss_burst",
        _loss_burst,
        1,
        "Mean length of a burst of losses in packets: 1 = random per packet; more = bursty "
        "(Gilbert-Elliott) with the same mean loss (per-origin losses stay random).",
        type=float,
        unit="packets",
        label="loss burst",
        column="loss_burst",
        sql="REAL",
        describe=lambda v: "random loss" if v == 1 else f"loss in bursts of {v:g}",
        key=lambda v: f"{v:g}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
        cli_type=float,
    ),
    Knob(
        "queue",
        _queue,
        1000,
        "Drop-tail queue: packets (1000) or bytes (64KB).",
        type=tuple,
        unit="(packets, bytes)",
        label="queue",
        column="queue",
        to_column=lambda c: _queue_key(c.queue),
        describe=lambda v: f"queue {v}",
        key=_queue_key,
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    # -- TCP and the loader --
    Knob(
        "tfo",
        _tfo,
        "both",
        "TCP Fast Open: on, off or both (both: each repetition loads with and without; protocol h3: off).",
        type=tuple,
        field="tfo_modes",
        label="TFO",
        key=list,
        sweep=True,
        many=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "icw",
        _icw,
        "default",
        "Server initial congestion window (segments); default: the kernel's 10.",
        type=int | None,
        unit="segments",
        label="initcwnd",
        column="icw",
        sql="INTEGER",
        describe=lambda v: f"initcwnd {v or 'default'}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
        toml="initcwnd",
        cli_type=int,
    ),
    Knob(
        "cc",
        _choice(CC_CHOICES, "congestion control"),
        "cubic",
        f"Congestion control: {', '.join(CC_CHOICES)}.",
        type=str,
        label="congestion control",
        column="cc",
        describe=lambda v: f"cc {v}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "initrwnd",
        _initrwnd,
        "default",
        "Client's initial TCP receive window (segments, the client route's initrwnd); default: the "
        "kernel's 10 (Linux before 2.6.39: 4 segments, docs/knobs.md).",
        type=int | None,
        unit="segments",
        label="initrwnd",
        column="initrwnd",
        sql="INTEGER",
        describe=lambda v: f"initrwnd {v or 'default'}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
        cli_type=int,
    ),
    *(_sysctl_knob(n) for n in TCP_SYSCTLS),
    Knob(
        "client",
        _choice(tuple(LOADERS), "client"),
        DEFAULT_LOADER,
        "Page loader: builtin (pltlab's HTTP/1.1 and h2 loader) or chromium (headless Chromium).",
        type=str,
        label="client",
        column="client",
        describe=lambda v: f"client {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "protocol",
        _choice(PROTOCOLS, "protocol"),
        "recorded",
        "HTTP version on https origins: recorded (what the page used: h2 for spdy, h3 where the "
        "loader speaks it, else h2), h1, h2 or h3 (QUIC on UDP 443 beside TCP; TCP's knobs do not "
        "apply, QUIC's quic_* do). Plain http is always HTTP/1.1.",
        type=str,
        label="protocol",
        column="protocol",
        describe=lambda v: f"protocol {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "server_priority",
        _choice(SERVER_PRIORITIES, "server priority"),
        "rfc9218",
        "How the replay orders the responses of an h2 connection: rfc9218 (by the requests' "
        "`priority` headers, lowest urgency first, as CDN front ends do) or round-robin (every "
        "response at once, interleaved). h2 and h3 only: refused with protocol h1.",
        type=str,
        label="server priority",
        column="server_priority",
        describe=lambda v: f"server priority {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "keepalive",
        _onoff(KEEPALIVE),
        "on",
        "HTTP/1.1 connection reuse: on (keep-alive), or off: the replay (shell: the origin servers) "
        "answers every request with `Connection: close` and closes the connection after it, so each "
        "request opens a connection of its own, as HTTP/1.0 servers did (the 2013 reproduction of "
        "the TFO paper's Table 1: TFO then saves a round trip per request). HTTP/1.1 only: refused "
        "with protocol h2 or h3.",
        type=str,
        label="keep-alive",
        column="keepalive",
        describe=lambda v: f"keep-alive {v}",
        sweep=True,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "tls",
        _choice(TLS_MODES, "TLS handshake"),
        "full",
        "TLS 1.3 handshakes: full (no session kept), resume (tickets left by a prior visit: 1-RTT "
        "resumption) or 0rtt (resumption with each connection's first request as early data). "
        "Chromium: a warm visit in the same browser first (docs/loaders.md).",
        type=str,
        label="TLS",
        column="tls",
        describe=lambda v: f"TLS {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "warm",
        _warm,
        "warm",
        "TFO cookies: warm (cached by a prior visit) or cold (keys reset before each load: "
        "TFO costs a cookie request).",
        type=bool,
        label="TFO cookies",
        column="warm",
        sql="INTEGER",
        describe=lambda v: "warm" if v else "cold",
        sweep=True,
        scopes=("run", "sweep"),
        toml="warmup",
        option=("--cold",),
        cli_type=bool,
        cli=lambda cold: "cold" if cold else None,
    ),
    Knob(
        "origin_rtt",
        _origin_rtt,
        {},
        "Per-origin RTT override N=RTT\\[/LOSS] (origin N) or HOST=RTT\\[/LOSS], "
        "e.g. 2=5ms or cdn.example.com=5ms/1% (repeatable).",
        type=tuple,
        field="overrides",
        label="origin RTT",
        column="overrides",
        to_column=lambda c: [list(o) for o in c.overrides],
        describe=_show_overrides,
        key=lambda v: [list(o) for o in v],
        sweep=True,
        scopes=("run", "shell", "sweep"),
        cli_type=list[str],
    ),
    Knob(
        "network",
        _choice(NETWORKS, "network"),
        "emulated",
        "'emulated': the link as the other knobs set it; 'recorded': the network the page was "
        "recorded over, inferred from its HAR/DevTools timings (per-host RTT, server think time, download "
        "rate, DNS; docs/fidelity.md). Knobs off their defaults apply on top (--rtt, --rate, --origin-rtt, "
        "--tfo, --protocol, ...).",
        type=str,
        label="network",
        column="network",
        describe=lambda v: f"{v} network",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "dns",
        _rtt,
        "0ms",
        "Built-in loader: DNS lookup delay before each origin's first connection (e.g. 20ms).",
        type=int,
        field="dns_us",
        unit="us",
        label="DNS (ms)",
        column="dns_ms",
        sql="REAL",
        to_column=lambda c: c.dns_us / 1000,
        describe=lambda v: f"DNS {v:g} ms",
        key=lambda v: f"{v}us",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    # -- one value per experiment --
    Knob(
        "reps",
        units.repetitions,
        3,
        "Repetitions per configuration (and TFO mode).",
        type=int,
        label="repetitions",
        scopes=("run", "sweep"),
        toml="repetitions",
        cli_type=int,
    ),
    Knob(
        "seed",
        units.seed,
        1,
        "Seed of the loss pattern (and of a sweep's order).",
        type=int,
        label="seed",
        column="seed",
        sql="INTEGER",
        scopes=("run", "shell", "sweep"),
        cli_type=int,
    ),
    Knob(
        "max_conns_per_host",
        _int(1, 64),
        6,
        "Built-in loader: connections per host at most.",
        type=int,
        label="connections per host",
        column="max_conns_per_host",
        sql="INTEGER",
        scopes=("run", "sweep"),
        cli_type=int,
    ),
    Knob(
        "client_rmem",
        _client_rmem,
        "default",
        "Client's initial TCP receive buffer: a size, 'default' (1 MiB) or "
        "'kernel' (128 KB, whose autotuned window makes some loads one RTT slower).",
        type=int | None,
        unit="bytes",
        label="client receive buffer",
        column="client_rmem",
        sql="INTEGER",
        scopes=("run", "sweep"),
    ),
    Knob(
        "model",
        _choice(MODELS, "loader model"),
        "archive",
        "Built-in loader: 'archive' (recorded initiators, no "
        "priorities) or 'chromium' (Chromium's dependencies and request scheduling, docs/loaders.md).",
        type=str,
        label="model",
        column="model",
        scopes=("run", "sweep"),
    ),
    Knob(
        "schemes",
        _choice(("recorded", "chromium", "https"), "schemes"),
        "recorded",
        "Built-in loader: 'recorded' schemes, 'chromium' (also Chromium's own HSTS upgrades to https) "
        "or 'https' (every origin over https, as today's web serves pages recorded over http).",
        type=str,
        label="schemes",
        column="schemes",
        scopes=("run", "sweep"),
    ),
    Knob(
        "network_stack",
        _choice(NETWORK_STACK, "network stack"),
        "off",
        "Built-in loader with model chromium on a calibrated page: 'calibrated' adds Chromium's "
        "network stack beyond the link as `pltlab calibrate` measured it (a set-up delay before each "
        "new connection, a first-byte delay on each request); 'off' leaves it out (docs/fidelity.md).",
        type=str,
        label="network stack",
        column="network_stack",
        describe=lambda v: f"network stack {v}",
        scopes=("run", "sweep"),
    ),
    Knob(
        "client_hello",
        _client_hello,
        "own",
        "Built-in loader: the TLS ClientHello size its TFO acts as: 'own' (rustls's, ~300 B, fits in "
        "a SYN), a loader's ('chromium': ~2 KB, post-quantum) or bytes. One larger than a SYN "
        "carries (1420 B) saves no round trip over TLS, so TFO is then used on plain-http "
        "connections only (the bytes sent stay rustls's). `predict --client chromium` and its "
        "emulated stand-in use Chromium's.",
        type=int | None,
        unit="bytes",
        label="ClientHello",
        column="client_hello",
        sql="INTEGER",
        describe=lambda v: "own ClientHello" if v is None else f"ClientHello {v} B",
        scopes=("run", "sweep"),
    ),
    Knob(
        "hosts",
        _choice(HOSTS, "host names"),
        "recorded",
        "Host names: 'recorded', or 'unpreloaded': every name on Chromium's HSTS preload list renamed "
        "(one character, same length; in URLs, headers and bodies) so that Chromium loads the page on "
        "its recorded schemes, e.g. the 2013 pages over http (docs/loaders.md).",
        type=str,
        label="host names",
        column="hosts",
        describe=lambda v: "hosts renamed out of the HSTS preload list" if v == UNPRELOADED else f"hosts {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    # -- QUIC (protocol h3: pltlab.protocols.TRANSPORT_KNOBS) --
    Knob(
        "quic_cc",
        _choice(QUIC_CC, "QUIC congestion control"),
        "cubic",
        f"QUIC's congestion control (replay and loader, protocol h3): {', '.join(QUIC_CC)}.",
        type=str,
        label="QUIC congestion control",
        column="quic_cc",
        describe=lambda v: f"QUIC cc {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "quic_icw",
        _int(MIN_QUIC_ICW, MAX_QUIC_ICW, " packets"),
        10,
        "QUIC's initial congestion window (protocol h3) in packets of 1200 bytes; 10 = quinn's "
        "default (12,000 bytes), the counterpart of TCP's 10 segments.",
        type=int,
        unit="packets",
        label="QUIC initial window",
        column="quic_icw",
        sql="INTEGER",
        describe=lambda v: f"QUIC initial window {v}",
        sweep=True,
        scopes=("run", "sweep"),
        cli_type=int,
    ),
    Knob(
        "h3_discovery",
        _choice(H3_DISCOVERY, "HTTP/3 discovery"),
        "forced",
        "How the client comes to use HTTP/3 on h3 addresses: forced (told to, from the first "
        'request) or alt-svc (responses without an Alt-Svc header get `h3=":443"`: the first '
        "request goes over TCP; Chromium takes the replay's certificate over QUIC only when forced, so its "
        "alt-svc loads are invalid).",
        type=str,
        label="HTTP/3 discovery",
        column="h3_discovery",
        describe=lambda v: f"h3 discovery {v}",
        sweep=True,
        scopes=("run", "sweep"),
    ),
    Knob(
        "calibrated",
        _bool,
        True,
        "With model chromium on a page calibrated by `pltlab calibrate`: Chromium's "
        "measured compute delays and load-event tail.",
        type=bool,
        label="calibrated",
        column="calibrated",
        sql="INTEGER",
        scopes=("run", "sweep"),
        option=("--calibration/--no-calibration",),
        cli_type=bool,
    ),
    Knob(
        "server_timeout_s",
        _int(1, units.MAX_SERVER_TIMEOUT_S, " seconds"),
        120,
        "The replay closes a connection whose TLS handshake and first request head are not in "
        "this long after it connected, or a later HTTP/1.1 head this long after its first byte "
        "(slowloris); idle keep-alive connections stay open. The default outlasts Chromium's 60 s "
        "for an unused (preconnected) socket (docs/robustness.md).",
        type=int,
        unit="s",
        label="server timeout",
        scopes=("run", "sweep"),
        option=("--server-timeout",),
        cli_type=int,
    ),
    # -- the run's machinery --
    Knob(
        "pcap",
        _pcap,
        None,
        "Packet traces (the emulator's, client side): run: a folder getting one pcap per load; shell: "
        "one pcap file; experiment files: a folder, or true (OUT_DIR/pcap).",
        type=str | bool | None,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "sched_fifo",
        _on,
        True,
        "Emulator under SCHED_FIFO: precision under CPU load (benches/bench_precision.py).",
        type=bool,
        scopes=("run", "shell"),
        option=("--sched-fifo/--no-sched-fifo",),
        cli_type=bool,
        defaults={"shell": False},
    ),
    Knob(
        "idle_poll",
        _on,
        True,
        "CPUs poll instead of halting while the emulated link is up (PM QoS, /dev/cpu_dma_latency "
        "0): on a VM each wake-up of a halted vCPU is a hypervisor round trip, at each end of every "
        'round trip (benches/notes.md "link").',
        type=bool,
        scopes=("run", "shell"),
        option=("--idle-poll/--no-idle-poll",),
        cli_type=bool,
        defaults={"shell": False},
    ),
    Knob(
        "backend",
        _choice(BACKENDS, "backend"),
        "auto",
        "Link emulator: auto, userspace (TUN emulator) or netem.",
        type=str,
        scopes=("shell",),
    ),
    Knob(
        "mtu",
        _int(units.MIN_MTU, units.MAX_MTU),
        1500,
        "Link MTU.",
        type=int,
        unit="bytes",
        scopes=("shell",),
        cli_type=int,
    ),
    Knob(
        "trace_up",
        _trace,
        None,
        "Mahimahi delivery trace for the uplink (instead of a rate).",
        type=str | None,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "trace_down",
        _trace,
        None,
        "Mahimahi delivery trace for the downlink (instead of a rate).",
        type=str | None,
        scopes=("run", "shell", "sweep"),
    ),
    Knob(
        "busy_wait_us",
        _int(0, units.MAX_EMULATOR_WAIT_US),
        300,
        "Emulator busy-wait before each deadline (us).",
        type=int,
        unit="us",
        scopes=("shell",),
        cli_type=int,
    ),
    Knob(
        "origin_namespaces",
        _bool,
        False,
        "One namespace per origin instead of a shared one.",
        type=bool,
        scopes=("shell",),
        cli_type=bool,
    ),
    Knob("think_time", _bool, False, "Replay servers wait each response's recorded server time.", type=bool),
    Knob(
        "load_timeout_s",
        _seconds,
        120.0,
        "The built-in loader gives up on a load after this long.",
        type=float,
        unit="s",
    ),
    Knob(
        "late_reruns",
        _int(0, 100),
        2,
        "A load during which the emulator was late is re-run this many times at most (still late: invalid).",
        type=int,
    ),
    Knob("extra", _table, {}, "A measurement kind's own parameters (pltlab.run.kinds).", type=dict),
)

KNOBS: dict[str, Knob] = {k.name: k for k in _ALL}


def _aliases(ks) -> dict[str, Knob]:
    out: dict[str, Knob] = {}
    for k in ks:
        for a in {k.name, k.toml, k.field, k.flag}:
            if out.get(a, k) is not k:
                raise AssertionError(f"knob name {a!r} used twice")
            out[a] = k
    return out


ALIASES = _aliases(_ALL)


def for_scope(scope: str, ks=None) -> list[Knob]:
    return [k for k in (ks or _ALL) if scope in k.scopes]


def point() -> list[Knob]:
    """The knobs one point of an experiment's cross product sets (every list but the TFO modes)."""
    return [k for k in _ALL if k.sweep and not k.many]


# A compared knob's baseline by results column (tfo: the runs' TFO mode): its "without the
# feature" value; a knob not here compares against its default (else its first value).
BASELINES = {"tfo": 0, "protocol": "h1", "tls": "full", "warm": 0}


def axis(name: str) -> Knob:
    """The knob an experiment or a report compares (``compare`` key, ``--by``): TFO or a knob
    whose list multiplies the configurations, by any of its names; one PltError line otherwise."""
    k = ALIASES.get(name) if isinstance(name, str) else None
    if k is None and isinstance(name, str):  # (a results column: the report's rows name them)
        k = next((x for x in _ALL if x.column == name), None)
    if k is not None and k.name == "rtt":
        raise PltError("'rtt': every row is per RTT already (the report's figures show PLT vs RTT)")
    if k is None or not k.sweep:
        known = ", ".join(x.name for x in _ALL if x.sweep and x.name != "rtt")
        raise PltError(f"{name!r}: not a knob to compare by (choose from {known})")
    return k


def columns() -> dict[str, str]:
    """Results column -> SQL type, in the table's order."""
    return {k.column: k.sql for k in _ALL if k.column}


def by_column(column: str) -> Knob | None:
    return next((k for k in _ALL if k.column == column), None)


def label(name: str) -> str:
    return KNOBS[name].label


def parse(values: dict, ks=None, where: str = "") -> dict[str, Any]:
    """Typed values by field for the knobs ``ks`` (default: all), from ``values`` by any of their
    names (see the module's docstring); the others take their defaults. One PltError line, prefixed
    with ``where``, names what is wrong."""
    ks = list(ks or _ALL)
    names = _aliases(ks)
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for name, v in values.items():
        k = names.get(name)
        if k is None:
            known = ", ".join(k.name for k in ks)
            raise PltError(f"{where + ': ' if where else ''}unknown setting {name!r} (known: {known})")
        if k.name in given:
            raise PltError(
                f"{where + ': ' if where else ''}{name!r} and {given[k.name]!r} set the same setting ({k.name})"
            )
        given[k.name] = name
        if name == k.field != k.name:
            out[k.field] = v  # already parsed
            continue
        try:
            out[k.field] = k.parse(v, name)
        except PltError as e:
            raise PltError(f"{where}: {e}" if where else str(e)) from None
    for k in ks:
        if k.field not in out:
            out[k.field] = _copy(k.value)
    if out.get("schemes") == "https" and out.get("client") == "chromium":
        raise PltError(
            f"{where + ': ' if where else ''}schemes https is for the built-in loader (Chromium loads a page on "
            "its recorded schemes, upgrading what HSTS says)"
        )
    if out.get("dns_us") and out.get("client") is not None and not LOADERS[out["client"]].planned:
        raise PltError(
            f"{where + ': ' if where else ''}dns is for the built-in loader (Chromium resolves names itself)"
        )
    if out.get("client_hello") is not None and out.get("client") is not None and not LOADERS[out["client"]].planned:
        raise PltError(
            f"{where + ': ' if where else ''}client_hello is for the built-in loader ({out['client']} sends its own)"
        )
    for trace, rate, opt in (("trace_down", "rate_bps", "rate"), ("trace_up", "rate_up_bps", "rate_up")):
        if out.get(trace) and out.get(rate):  # a delivery trace is that direction's rate
            raise PltError(
                f"{where + ': ' if where else ''}{trace} and {opt} both set the "
                f"{trace[6:]}link's rate: give one of them"
            )
    if out.get("loss_burst", 1) != 1 and "loss" in out:
        try:
            gilbert(out["loss"], out["loss_burst"])
        except PltError as e:
            raise PltError(f"{where + ': ' if where else ''}{e}") from None
    problem = _transport_problem(out, ks, given)
    if problem is None and out.get("protocol") is not None and out.get("client") is not None:
        problem = LOADERS[out["client"]].protocol_problem(out["protocol"])
    if problem:
        raise PltError(f"{where + ': ' if where else ''}{problem}")
    return out


def _transport_problem(out: dict, ks, given: dict) -> str | None:
    """Why a knob of the other transport than the protocol's is set (pltlab.protocols: "tfo does
    not apply to protocol h3: ..."), or None. At its default such a knob is left as it is (its
    results column says n/a: ``applies``); TFO, whose default asks for both modes, is off when not
    given (a QUIC load uses no TFO)."""
    proto = out.get("protocol")
    if proto is None or proto == protocols.RECORDED:
        return None
    for k in ks:
        why = protocols.not_applying(proto, k.name) if k.name in protocols.EXCLUSIVE else None
        if why is None:
            continue
        v = out[k.field]
        if k.many:  # (tfo: the modes)
            if True not in v:
                continue
            if k.name not in given:
                out[k.field] = (False,)
                continue
        elif v == k.value:
            continue
        return why
    return None


def applies(cfg, name: str) -> bool:
    """Whether knob ``name`` applies to runs of ``cfg`` (a RunConfig or anything with a
    ``protocol``): its results column holds protocols.NA where not (RunConfig.columns)."""
    return protocols.applies(getattr(cfg, "protocol", protocols.RECORDED), name)


def _copy(v):
    return dict(v) if isinstance(v, dict) else v


def fields(ks):
    """Class decorator (before @dataclass): one annotated field per knob of ``ks``."""

    def add(cls):
        ann = dict(cls.__dict__.get("__annotations__", {}))
        for k in ks:
            ann[k.field] = k.type
        cls.__annotations__ = ann
        return cls

    return add


# ---- the table, printed -------------------------------------------------------------------------


def show_value(v) -> str:
    """A default as a user writes it."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "true" if v else "false"
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def rows() -> list[dict]:
    """One row per knob, as `pltlab knobs` and docs/api.md show them."""
    out = []
    for k in _ALL:
        scopes = [s for s in ("run", "shell") if s in k.scopes]
        out.append(
            {
                "knob": k.name,
                "field": k.field + (f" ({k.unit})" if k.unit else ""),
                "default": show_value(k.default) + "".join(f" ({s}: {show_value(v)})" for s, v in k.defaults.items()),
                "options": f"{k.option[-1]} ({', '.join(scopes)})" if scopes else "",
                "toml": (k.toml + (" [list]" if k.sweep else "")) if "sweep" in k.scopes else "",
                "column": k.column,
                "help": k.help.replace("\\[", "["),
            }
        )
    return out


HEADERS = {
    "knob": "knob",
    "field": "RunConfig field (unit)",
    "default": "default",
    "options": "CLI option",
    "toml": "experiment key",
    "column": "results column",
    "help": "help",
}


def markdown() -> str:
    rs = rows()
    lines = ["| " + " | ".join(HEADERS.values()) + " |", "|" + "|".join("---" for _ in HEADERS) + "|"]
    for r in rs:
        cells = [f"`{r['knob']}`" if c == "knob" else r[c].replace("|", "\\|") for c in HEADERS]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(markdown())
