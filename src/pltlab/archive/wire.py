"""Bodies as they crossed the wire: the recorded Content-Encoding applied, and the encoded size
brought to the recorded transfer size (docs/conformance.md, "Bytes on the wire").

A recorded body is encoded with the recorded encoding at the level whose output comes closest to
the recorded transfer size (servers and CDNs use different levels), then, if still short, padded
inside the encoding where the format lets a decoder ignore bytes: a gzip header comment (FCOMMENT),
a zstd skippable frame, empty stored deflate blocks. Brotli has no such field here: its size is the
closest level's. The decoded bytes are always exactly the recorded body.

A size-only object gets a synthesized body (archive.synth) of its decoded size whose filler is
partly random (incompressible) and partly repetitive: the random share is solved for so that the
encoded size meets the recorded transfer size."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import brotli
import zstandard

from pltlab.archive import synth

# Levels tried for a recorded body, cheapest first; the first within TOLERANCE of the target wins.
LEVELS = {"gzip": (6, 1, 9), "deflate": (6, 1, 9), "br": (5, 1, 9, 11), "zstd": (3, 1, 9, 19)}
SYNTH_LEVEL = {"gzip": 6, "deflate": 6, "br": 5, "zstd": 3}  # for synthesized bodies
TOLERANCE = 0.01
BROTLI_MAX_Q11 = 1 << 20  # quality 11 is ~1 s/MB: not for bodies larger than this
ALIASES = {"x-gzip": "gzip", "identity": ""}


def codings(value: str) -> list[str]:
    """A Content-Encoding value as the list of codings, in the order they were applied."""
    out = []
    for c in (value or "").split(","):
        c = ALIASES.get(c.strip().lower(), c.strip().lower())
        if c:
            out.append(c)
    return out


def supported(value: str) -> bool:
    return all(c in LEVELS for c in codings(value))


def _gzip(data: bytes, level: int, pad: int = 0) -> bytes:
    """A gzip member; ``pad`` > 0 adds a header comment of that many bytes (NUL included)."""
    # by hand: the gzip module writes no header comment, the padding that makes a body its recorded size
    flg, extra = 0, b""
    if pad > 0:
        flg, extra = 0x10, b"p" * (pad - 1) + b"\x00"
    head = b"\x1f\x8b\x08" + bytes([flg]) + b"\x00\x00\x00\x00\x00\xff" + extra
    c = zlib.compressobj(level, zlib.DEFLATED, -15)
    raw = c.compress(data) + c.flush()
    return head + raw + struct.pack("<II", zlib.crc32(data) & 0xFFFFFFFF, len(data) & 0xFFFFFFFF)


def _deflate(data: bytes, level: int, pad: int = 0) -> bytes:
    """zlib-wrapped deflate (what browsers expect); ``pad`` bytes of empty stored blocks (5 each)."""
    c = zlib.compressobj(level, zlib.DEFLATED, 15)
    out = c.compress(data)
    if pad >= 5:
        out += c.flush(zlib.Z_SYNC_FLUSH) + b"\x00\x00\x00\xff\xff" * (pad // 5)
    return out + c.flush()


def _zstd(data: bytes, level: int, pad: int = 0) -> bytes:
    frame = zstandard.ZstdCompressor(level=level).compress(data)
    # (by hand: zstandard writes no skippable frames, the padding that makes a body its recorded size)
    if pad >= 8:  # a skippable frame (magic 0x184D2A50): decoders skip its payload
        frame = struct.pack("<II", 0x184D2A50, pad - 8) + b"\x00" * (pad - 8) + frame
    return frame


def _br(data: bytes, level: int, pad: int = 0) -> bytes:
    return brotli.compress(data, quality=level)


CODERS = {"gzip": _gzip, "deflate": _deflate, "zstd": _zstd, "br": _br}
PADDABLE = {"gzip": 1, "deflate": 5, "zstd": 8}  # the smallest padding each format can add


def encode(data: bytes, value: str, level: int | None = None) -> bytes:
    """``data`` with every coding of ``value`` applied in order (default levels)."""
    for c in codings(value):
        data = CODERS[c](data, SYNTH_LEVEL[c] if level is None else level)
    return data


def decode(data: bytes, value: str) -> bytes:
    """The inverse of encode (tests, checks): codings undone in reverse order."""
    for c in reversed(codings(value)):
        if c == "gzip":
            data = zlib.decompress(data, 16 + 15)
        elif c == "deflate":
            data = zlib.decompress(data)
        elif c == "br":
            data = brotli.decompress(data)
        elif c == "zstd":
            data = zstandard.ZstdDecompressor().decompressobj(read_across_frames=True).decompress(data)
        else:
            raise ValueError(f"unsupported content-encoding {c!r}")
    return data


def _padded(data: bytes, coding: str, level: int, target: int | None) -> bytes:
    out = CODERS[coding](data, level)
    short = (target or 0) - len(out)
    for pad in (short, short - 5, short - 10):  # deflate: a flush marker comes with the padding
        if coding in PADDABLE and pad >= PADDABLE[coding]:
            padded = CODERS[coding](data, level, pad=pad)
            if len(padded) <= target:
                return padded
    return out


def encode_to(data: bytes, value: str, target: int | None) -> bytes:
    """``data`` encoded with ``value``, its size as close to ``target`` as the formats allow
    (level choice, then padding); ``target`` None: default levels. Stacked codings: the inner
    ones at default levels, the outer one fitted."""
    cs = codings(value)
    if not cs:
        return data
    for c in cs[:-1]:
        data = CODERS[c](data, SYNTH_LEVEL[c])
    c = cs[-1]
    if target is None:
        return CODERS[c](data, SYNTH_LEVEL[c])
    best = None
    for level in LEVELS[c]:
        if c == "br" and level == 11 and len(data) > BROTLI_MAX_Q11:
            continue
        out = _padded(data, c, level, target)
        if best is None or abs(len(out) - target) < abs(len(best) - target):
            best = out
        if abs(len(best) - target) <= TOLERANCE * target:
            break
    return best


@dataclass
class Fit:
    """A body for the wire: ``wire`` (encoded), how many decoded bytes it carries, and the
    Content-Encoding applied ("" = sent as is: identity, or a coding this module cannot make)."""

    wire: bytes
    decoded: int
    encoding: str = ""


def fit_synthetic(make, size: int, value: str, target: int | None) -> Fit:
    """Solve for the random share of a synthesized body: ``make(noise)`` returns the decoded body
    (``size`` bytes) whose filler has ``noise`` random bytes. The encoded size grows about
    linearly with ``noise``; a few secant steps get within a byte or two, padding does the rest."""
    c = codings(value)
    if not c or target is None:
        body = make(None)
        return Fit(encode(body, value) if c else body, len(body), value if c else "")

    def enc(noise):
        return encode(make(noise), value)

    lo, hi = 0, size
    out_lo, out_hi = enc(lo), enc(hi)
    best = min((out_lo, out_hi), key=lambda o: abs(len(o) - target))
    for _ in range(8):
        if not len(out_lo) < target < len(out_hi) or hi - lo <= 1:
            break
        guess = lo + int((target - len(out_lo)) * (hi - lo) / max(1, len(out_hi) - len(out_lo)))
        guess = min(hi - 1, max(lo + 1, guess))
        out = enc(guess)
        if abs(len(out) - target) < abs(len(best) - target):
            best = out
        if len(out) <= target:
            lo, out_lo = guess, out
        else:
            hi, out_hi = guess, out
        if 0 <= target - len(out_lo) <= 64:
            break
    # Pad the best body that is not larger than the target (the format's ignorable bytes).
    under = out_lo if len(out_lo) <= target else best
    last = c[-1]
    if len(under) < target and last in PADDABLE:
        inner = decode(under, last)  # the inner codings' output, re-wrapped with padding
        padded = _padded(inner, last, SYNTH_LEVEL[last], target)
        if abs(len(padded) - target) < abs(len(best) - target):
            best = padded
    return Fit(best, size, value)


NO_BODY = (204, 304)


def for_object(page, o, structure: synth.Structure | None = None) -> Fit:
    """What the replay sends as ``o``'s body: the recorded wire bytes where the archive kept them
    (Obj.wire_body), else encoded here. An encoding this module cannot produce (sdch,
    compress, ...) is served decoded (Fit.encoding ""); the caller then drops its header.
    ``structure``: the page's synth.Structure, shared by the objects of one unchanged page."""
    if 100 <= o.status < 200 or o.status in NO_BODY or o.method.upper() == "HEAD":
        return Fit(b"", 0)
    if o.wire_body is not None:  # the recorded bytes, byte for byte, with their recorded encoding
        return Fit(o.wire_body, o.size, o.encoding)
    value = o.encoding if supported(o.encoding) else ""
    if o.body is not None:
        return Fit(encode_to(o.body, value, o.transfer_size), len(o.body), value)
    return fit_synthetic(
        lambda noise: synth.body(page, o, noise, structure), o.size, value, o.transfer_size if value else None
    )
