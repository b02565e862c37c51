"""HTTP/1.x messages as recorders store them: Mahimahi's first line, header lines and body as
received (chunk framing included), Web Page Replay's serialized requests and responses.

Hand-written (a few lines each): http.client refuses the "HTTP/2.0" status lines Web Page Replay
writes for h2 responses and hides broken chunk framing, which an import must count."""

from __future__ import annotations

CRLF = b"\r\n"


def latin1(b: bytes) -> str:
    """Header bytes as text, every byte kept (written back with ``to_bytes``)."""
    return b.decode("latin-1")


def to_bytes(s: str) -> bytes:
    """Text of a header or first line as bytes: Latin-1 where it fits (what was read), else UTF-8."""
    try:
        return s.encode("latin-1")
    except UnicodeEncodeError:
        return s.encode("utf-8")


def header_line(line: str) -> tuple[str, str]:
    """ "Name: value" -> (name, value); ValueError without a colon."""
    name, sep, value = line.partition(":")
    if not sep:
        raise ValueError(f"header line without a colon: {line[:80]!r}")
    return name, value.strip(" \t")


def split_message(raw: bytes) -> tuple[str, list[tuple[str, str]], bytes]:
    """A serialized message -> (first line, headers, the bytes after the head). Header lines
    folded onto the next line (obsolete, RFC 9112 5.2) are joined with a space."""
    end = raw.find(b"\r\n\r\n")
    if end < 0:
        if raw.endswith(b"\r\n") and raw.count(b"\r\n") == 1:  # a first line alone
            end = len(raw) - 2
        else:
            raise ValueError("no end of the message head (blank line)")
    head, rest = raw[:end], raw[end + 4 :]
    lines = latin1(head).split("\r\n")
    headers: list[tuple[str, str]] = []
    for line in lines[1:]:
        if line[:1] in (" ", "\t") and headers:
            k, v = headers[-1]
            headers[-1] = (k, f"{v} {line.strip()}")
            continue
        headers.append(header_line(line))
    return lines[0], headers, rest


def header(headers: list[tuple[str, str]], name: str) -> str | None:
    name = name.lower()
    return next((v for k, v in headers if k.lower() == name), None)


def status_line(line: str) -> tuple[str, int, str]:
    """ "HTTP/1.1 200 OK" -> ("HTTP/1.1", 200, "OK"); ValueError if it is none."""
    version, _, rest = line.partition(" ")
    code, _, reason = rest.partition(" ")
    if not version.upper().startswith("HTTP/") or not (len(code) == 3 and code.isdigit()) or int(code) < 100:
        raise ValueError(f"not an HTTP status line: {line[:80]!r}")
    return version, int(code), reason.strip()


def request_line(line: str) -> tuple[str, str, str]:
    """ "GET /x HTTP/1.1" -> ("GET", "/x", "HTTP/1.1"); ValueError if it is none."""
    parts = line.split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1] or not parts[2].upper().startswith("HTTP/"):
        raise ValueError(f"not an HTTP request line: {line[:80]!r}")
    return parts[0], parts[1], parts[2]


def is_chunked(headers: list[tuple[str, str]]) -> bool:
    te = header(headers, "transfer-encoding")
    return te is not None and te.split(",")[-1].strip().lower() == "chunked"


def dechunk(data: bytes) -> tuple[bytes, bool]:
    """A chunked body's payload, and whether its framing was whole (up to the last chunk; chunk
    extensions and trailers are dropped). Broken or cut short: the complete chunks, False."""
    out, pos, n = [], 0, len(data)
    while True:
        eol = data.find(CRLF, pos)
        if eol < 0:
            return b"".join(out), False
        size_text = data[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            return b"".join(out), False
        if size < 0:
            return b"".join(out), False
        if size == 0:
            return b"".join(out), True  # trailers (if any) follow: not kept
        start = eol + 2
        if start + size + 2 > n or data[start + size : start + size + 2] != CRLF:
            return b"".join(out), False
        out.append(data[start : start + size])
        pos = start + size + 2


def chunk(body: bytes) -> bytes:
    """``body`` as one chunk and the last chunk."""
    return (f"{len(body):x}\r\n".encode() + body + CRLF if body else b"") + b"0\r\n\r\n"
