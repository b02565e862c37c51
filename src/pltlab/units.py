"""Parsing and validation of human-friendly parameters (durations, rates, loss, sizes), and the
limits every input is held to.

Limits: the one place they are written down. Every knob is checked when it is parsed (CLI
options of `run`, `shell`, `calibrate`, `reproduce`; experiment files of `sweep`; ICW-study files
of `reproduce icw --config`), before any namespace, process or output file exists; a value
outside is one error line naming the option (or the file and key) and the value.

    knob                                   accepted
    RTT (--rtt, rtt, origin RTT overrides) 0 .. 10 s            (MAX_RTT_US)
    rate, uplink rate                      1 kbit/s .. 100 Gbit/s, or unlimited ("4mbit" or as
                                           printed: "4 Mbit/s"; a bare number is Mbit/s)
    loss (both directions, per origin)     0 .. 100 %
    queue                                  1 .. 1,000,000 packets, or 1500 B .. 1 GiB
    initial windows (--icw, initcwnd, the  1 .. 1024 segments    (MIN_ICW, MAX_ICW: the knob,
    ICW study's ICWs)                                            net.wan.TcpKnobs, run.traced)
    client receive buffer (client_rmem)    4096 B .. 64 MiB      (MIN_/MAX_CLIENT_RMEM)
    MTU                                    576 .. 65535          (MIN_MTU, MAX_MTU)
    seed                                   0 .. 2**32 - 1
    repetitions (--reps, repetitions)      1 .. 10,000
    origins (shell)                        1 .. 999              (net.wan.TopologySpec)
    emulator busy-wait, linger, standby    0 .. 100,000 us       (MAX_EMULATOR_WAIT_US)
    tick, injected stall
    server timeout (server_timeout_s)      1 .. 86,400 s         (MAX_SERVER_TIMEOUT_S)
    experiment name                        1..100 of [A-Za-z0-9._-], not starting with a dot
                                           (it names the folder results/NAME)

Limits the data plane checks too are in its schema (`pltlab-dp schema`, from the same Rust
constants); tests/test_contracts.py checks that both agree.

Archives (HAR files, DevTools logs, seed fetch folders), checked entry by entry at import:

    one object (decoded, on the wire)      at most 1 GiB         (MAX_OBJECT_BYTES)
    one page (decoded objects summed)      at most 4 GiB         (MAX_PAGE_BYTES)
    JSON nesting                           at most 64 levels where a value is kept as is
    a request URL                          http(s), a valid host and port (1..65535), no
                                           whitespace or control characters, <= 64 KiB
"""

import math
import re

from pltlab.errors import PltError

MAX_RTT_US = 10_000_000
MIN_ICW, MAX_ICW = 1, 1024  # segments (a route's initcwnd/initrwnd)
MIN_CLIENT_RMEM, MAX_CLIENT_RMEM = 4096, 64 << 20
MIN_MTU, MAX_MTU = 576, 65535
MAX_EMULATOR_WAIT_US = 100_000  # = the link emulator's MAX_WAIT_US (rust/src/link/config.rs)
MAX_SERVER_TIMEOUT_S = 86_400  # = the replay's MAX_REQUEST_TIMEOUT_MS / 1000 (rust/src/replay/manifest.rs)
MIN_RATE_BPS, MAX_RATE_BPS = 1_000, 100_000_000_000
MAX_QUEUE_PACKETS = 1_000_000
MIN_QUEUE_BYTES, MAX_QUEUE_BYTES = 1500, 1 << 30
MAX_SEED = 2**32 - 1
MAX_REPETITIONS = 10_000
MAX_OBJECT_BYTES = 1 << 30
MAX_PAGE_BYTES = 4 << 30

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_TIME_US = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "": 1_000}  # bare number = ms
_RATE_BPS = {
    "bit": 1,
    "bps": 1,
    "kbit": 1e3,
    "kbps": 1e3,
    "mbit": 1e6,
    "mbps": 1e6,
    "gbit": 1e9,
    "gbps": 1e9,
    "": 1e6,  # bare number = Mbit/s
}
_SIZE_B = {"b": 1, "": 1, "kb": 1000, "kib": 1024, "mb": 1_000_000, "mib": 1 << 20, "gb": 10**9, "gib": 1 << 30}


def show(v, limit: int = 60) -> str:
    """A value for an error message: its repr, shortened; containers by their type only (a
    hostile document's nested lists must not be printed, nor recursed into)."""
    if isinstance(v, (dict, list, tuple, set)):
        return "a table" if isinstance(v, dict) else "a list"
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > 10**30:
        return "a number too large"
    r = repr(v)
    return r if len(r) <= limit else r[: limit - 5] + "...'"


def _split(text, what: str) -> tuple[float, str]:
    if not isinstance(text, str):
        raise PltError(f"invalid {what} {show(text)}: expected a number or a string")
    m = re.fullmatch(r"\s*(-)?" + _NUM + r"\s*([a-zA-Zµ%]*)\s*", text)
    if not m:
        raise PltError(f"invalid {what} {show(text)}")
    value = float(m.group(2))
    if m.group(1):
        raise PltError(f"invalid {what} {show(text)}: must not be negative")
    if not math.isfinite(value):
        raise PltError(f"invalid {what} {show(text)}: too large")
    return value, m.group(3).lower()


def _number(text, what: str) -> float | None:
    """A bare number (int/float, not bool) as a finite float >= 0; None: not a number."""
    if isinstance(text, bool) or not isinstance(text, (int, float)):
        return None
    if isinstance(text, float) and not math.isfinite(text):
        raise PltError(f"invalid {what} {show(text)}: must be a finite number")
    if text < 0:
        raise PltError(f"invalid {what} {show(text)}: must not be negative")
    return float(text) if abs(text) < 1e300 else math.inf


def duration_us(text: str | float | int, what: str = "duration", max_us: int = MAX_RTT_US) -> int:
    """'100ms', '250us', '1.5s' or a bare number of milliseconds -> microseconds, 0..max_us
    (default: the RTT limit, 10 s)."""
    n = _number(text, what)
    if n is not None:
        us = n * 1000
    else:
        value, unit = _split(text, what)
        if unit not in _TIME_US:
            raise PltError(f"invalid {what} {show(text)}: unknown unit {unit!r} (use us, ms or s)")
        us = value * _TIME_US[unit]
    if us > max_us:
        raise PltError(f"invalid {what} {show(text)}: at most {max_us / 1e6:g} s")
    return round(us)


def rate_bps(text: str | float | int | None, what: str = "rate") -> int | None:
    """'4mbit', '256kbit', '1gbit' (bare number = Mbit/s), or as pltlab prints rates: '4 Mbit/s',
    '256 kbit/s' -> bit/s, 1 kbit/s .. 100 Gbit/s; None, 'unlimited', 'none' and 'inf' mean no
    rate limit."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("unlimited", "none", "inf")):
        return None
    n = _number(text, what)
    if n is not None:
        value, unit = n, ""
    else:
        # "4 Mbit/s" (reports, tables, help texts) is "4mbit"; "/s" only after a bit unit
        per_s = re.fullmatch(r"(.*bit)\s*/\s*s\s*", text, re.IGNORECASE) if isinstance(text, str) else None
        value, unit = _split(per_s.group(1) if per_s else text, what)
    if unit not in _RATE_BPS:
        raise PltError(f"invalid {what} {show(text)}: unknown unit {unit!r} (use kbit, mbit or gbit)")
    bps = value * _RATE_BPS[unit]
    if bps <= 0:
        raise PltError(f"invalid {what} {show(text)}: must be positive (omit it for an unlimited link)")
    if not MIN_RATE_BPS <= bps <= MAX_RATE_BPS:
        raise PltError(f"invalid {what} {show(text)}: must be from 1kbit to 100gbit (or unlimited)")
    return round(bps)


# the longest mean burst of losses (packets) the loss_burst knob takes
MAX_LOSS_BURST = 1000


def loss_fraction(text: str | float | int | None, what: str = "loss") -> float:
    """'1%' or '0.01' -> 0.01; must lie in [0, 1]."""
    if text is None:
        return 0.0
    n = _number(text, what)
    if n is not None:
        value = n
    else:
        value, unit = _split(text, what)
        if unit == "%":
            value /= 100.0
        elif unit:
            raise PltError(f"invalid {what} {show(text)}: use a fraction (0.01) or a percentage (1%)")
    if value > 1.0:
        raise PltError(f"invalid {what} {show(text)}: must be between 0 and 100%")
    return value


def size_bytes(text: str | int, what: str = "size") -> int:
    """'64KB', '1MiB', '1500' -> bytes (> 0, at most 1 TiB here; callers hold their own limit)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = float(max(-1, min(text, 1 << 60))), ""
    else:
        value, unit = _split(text, what)
    if unit not in _SIZE_B:
        raise PltError(f"invalid {what} {show(text)}: unknown unit {unit!r} (use B, KB, KiB, MB, MiB)")
    n = value * _SIZE_B[unit]
    if n > 1 << 40:
        raise PltError(f"invalid {what} {show(text)}: too large")
    n = round(n)
    if n <= 0:
        raise PltError(f"invalid {what} {show(text)}: must be positive")
    return n


def queue_spec(text: str | int | None) -> tuple[int | None, int | None]:
    """Drop-tail queue limit: '1000' or '1000p' (packets, 1..1e6), '64KB' (bytes, 1500 B..1 GiB)
    -> (packets, bytes)."""
    if text is None:
        return None, None
    if isinstance(text, bool) or not isinstance(text, (str, int)):
        raise PltError(f'invalid queue {show(text)}: packets (1000) or bytes ("64KB")')
    s = str(text).strip().lower()
    m = re.fullmatch(r"([0-9]+)\s*(p|pkt|pkts|packets)?", s)
    if m:
        n = int(m.group(1)) if len(m.group(1)) <= 12 else MAX_QUEUE_PACKETS + 1
        if n <= 0:
            raise PltError(f"invalid queue {show(text)}: must be positive")
        if n > MAX_QUEUE_PACKETS:
            raise PltError(f"invalid queue {show(text)}: at most {MAX_QUEUE_PACKETS} packets")
        return n, None
    b = size_bytes(s, "queue")
    if not MIN_QUEUE_BYTES <= b <= MAX_QUEUE_BYTES:
        raise PltError(f"invalid queue {show(text)}: from 1500 bytes (one full packet) to 1GiB")
    return None, b


def is_window(v) -> bool:
    """An initial window in segments: an integer MIN_ICW .. MAX_ICW (not a bool)."""
    return isinstance(v, int) and not isinstance(v, bool) and MIN_ICW <= v <= MAX_ICW


def seed(v, what: str = "seed") -> int:
    """A seed: an integer 0 .. 2**32 - 1."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_SEED:
        raise PltError(f"invalid {what} {show(v)}: must be an integer from 0 to {MAX_SEED}")
    return v


def repetitions(v, what: str = "repetitions") -> int:
    """A number of repetitions: an integer 1 .. 10,000."""
    if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_REPETITIONS:
        raise PltError(f"invalid {what} {show(v)}: must be an integer from 1 to {MAX_REPETITIONS}")
    return v
