"""Parsing and validation of human-friendly parameters (durations, rates, loss, sizes)."""

import re

from pltlab.errors import PltError

_NUM = r"([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)"

_TIME_US = {"us": 1, "µs": 1, "ms": 1_000, "s": 1_000_000, "": 1_000}  # bare number = ms
_RATE_BPS = {
    "bit": 1, "bps": 1, "kbit": 1e3, "kbps": 1e3, "mbit": 1e6, "mbps": 1e6, "gbit": 1e9, "gbps": 1e9,
    "": 1e6,  # bare number = Mbit/s
}
_SIZE_B = {"b": 1, "": 1, "kb": 1000, "kib": 1024, "mb": 1_000_000, "mib": 1 << 20}


def _split(text: str, what: str) -> tuple[float, str]:
    m = re.fullmatch(r"\s*(-)?" + _NUM + r"\s*([a-zA-Zµ%]*)\s*", str(text))
    if not m:
        raise PltError(f"invalid {what} {text!r}")
    value = float(m.group(2))
    if m.group(1):
        raise PltError(f"invalid {what} {text!r}: must not be negative")
    return value, m.group(3).lower()


def duration_us(text: str | float | int, what: str = "duration") -> int:
    """'100ms', '250us', '1.5s' or a bare number of milliseconds -> microseconds (>= 0)."""
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        if text < 0:
            raise PltError(f"invalid {what} {text!r}: must not be negative")
        return round(text * 1000)
    value, unit = _split(text, what)
    if unit not in _TIME_US:
        raise PltError(f"invalid {what} {text!r}: unknown unit {unit!r} (use us, ms or s)")
    return round(value * _TIME_US[unit])


def rate_bps(text: str | float | int | None, what: str = "rate") -> int | None:
    """'4mbit', '256kbit', '1gbit' (bare number = Mbit/s) -> bit/s; None/'0'/'inf' are refused
    except None and 'unlimited', which mean no rate limit."""
    if text is None or str(text).strip().lower() in ("unlimited", "none", "inf"):
        return None
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value, unit = float(text), ""
        if value < 0:
            raise PltError(f"invalid {what} {text!r}: must not be negative")
    else:
        value, unit = _split(text, what)
    if unit not in _RATE_BPS:
        raise PltError(f"invalid {what} {text!r}: unknown unit {unit!r} (use kbit, mbit or gbit)")
    bps = round(value * _RATE_BPS[unit])
    if bps <= 0:
        raise PltError(f"invalid {what} {text!r}: must be positive (omit it for an unlimited link)")
    return bps


def loss_fraction(text: str | float | int | None, what: str = "loss") -> float:
    """'1%' or '0.01' -> 0.01; must lie in [0, 1]."""
    if text is None:
        return 0.0
    if isinstance(text, (int, float)) and not isinstance(text, bool):
        value = float(text)
        if value < 0:
            raise PltError(f"invalid {what} {text!r}: must not be negative")
    else:
        value, unit = _split(text, what)
        if unit == "%":
            value /= 100.0
        elif unit:
            raise PltError(f"invalid {what} {text!r}: use a fraction (0.01) or a percentage (1%)")
    if value > 1.0:
        raise PltError(f"invalid {what} {text!r}: must be between 0 and 100%")
    return value


def size_bytes(text: str | int, what: str = "size") -> int:
    """'64KB', '1MiB', '1500' -> bytes (> 0)."""
    if isinstance(text, int) and not isinstance(text, bool):
        value, unit = float(text), ""
    else:
        value, unit = _split(text, what)
    if unit not in _SIZE_B:
        raise PltError(f"invalid {what} {text!r}: unknown unit {unit!r} (use B, KB, KiB, MB, MiB)")
    n = round(value * _SIZE_B[unit])
    if n <= 0:
        raise PltError(f"invalid {what} {text!r}: must be positive")
    return n


def queue_spec(text: str | int | None) -> tuple[int | None, int | None]:
    """Drop-tail queue limit: '1000' or '1000p' (packets), '64KB' (bytes) -> (packets, bytes)."""
    if text is None:
        return None, None
    s = str(text).strip().lower()
    m = re.fullmatch(r"([0-9]+)\s*(p|pkt|pkts|packets)?", s)
    if m:
        n = int(m.group(1))
        if n <= 0:
            raise PltError(f"invalid queue {text!r}: must be positive")
        return n, None
    return None, size_bytes(s, "queue")
