"""Bytes of HTTP/3 over QUIC that the prediction counts, from the protocols and the crates the
data plane uses (no fitted constant):

- ``request_bytes``: an h3 request of the built-in loader as its HEADERS frame on a STREAM frame:
  its fields QPACK-encoded as h3 0.0.8 encodes them (RFC 9204 static table, no dynamic table, no
  Huffman coding), the fields being those rust/src/loader/h2.rs `request` sends.
- ``AMPLIFICATION``: RFC 9000 §8.1: before a server has validated the client's address it sends
  at most 3 times the bytes it received from it. quinn-proto 0.11.19 (connection/paths.rs
  `anti_amplification_blocked`, checked per datagram in connection/mod.rs `poll_transmit`) lets
  a datagram go while the bytes sent so far are below 3 x those received (the last datagram may
  pass the bound by less than one packet). The address is validated by the client's first
  Handshake packet (its second flight), or at once by an address validation token the client
  brings (RFC 9000 §8.1.3).
- ``TOKEN_MODES``: the replay sends NEW_TOKEN tokens (rust/src/replay/quic_tokens.rs) and the
  built-in loader keeps them from the visit before the load (rust/src/loader/transport/quic.rs
  `tokens()`), which it makes for TLS "resume" and "0rtt" only: those loads' connections are
  validated from their first Initial; a "full" load (no visit before it) is held to the limit.
"""

from __future__ import annotations

AMPLIFICATION = 3
TOKEN_MODES = ("resume", "0rtt")
# RFC 9204 Appendix A, the static table: (name, value) -> index, for the fields the loader sends
STATIC = {
    (":authority", ""): 0,
    (":path", "/"): 1,
    (":method", "CONNECT"): 15,
    (":method", "DELETE"): 16,
    (":method", "GET"): 17,
    (":method", "HEAD"): 18,
    (":method", "OPTIONS"): 19,
    (":method", "POST"): 20,
    (":method", "PUT"): 21,
    (":scheme", "https"): 23,
    ("accept", "*/*"): 29,
    ("accept-encoding", "gzip, deflate, br"): 31,
    ("user-agent", ""): 95,
}
STATIC_NAMES = {name: i for (name, _), i in sorted(STATIC.items(), key=lambda kv: -kv[1])}
# the loader's own fields beside the pseudo-headers (rust/src/loader/h2.rs `request`)
LOADER_FIELDS = (("user-agent", "pltlab-loader/0.1"), ("accept", "*/*"), ("accept-encoding", "gzip, deflate, br, zstd"))


def _int(n: int, prefix_bits: int) -> int:
    """Bytes of ``n`` as an RFC 7541 §5.1 integer with an N-bit prefix."""
    limit = (1 << prefix_bits) - 1
    if n < limit:
        return 1
    n, size = n - limit, 2
    while n >= 128:
        n, size = n >> 7, size + 1
    return size


def _varint(n: int) -> int:
    """Bytes of ``n`` as a QUIC variable-length integer (RFC 9000 §16)."""
    return 1 if n < 64 else 2 if n < 16384 else 4


def field_bytes(name: str, value: str) -> int:
    """One field line, RFC 9204 §4.5: indexed (static), literal with a static name reference, or
    literal with a literal name; strings not Huffman-coded (7-bit length prefix; a literal name's 3)."""
    if (name, value) in STATIC:
        return _int(STATIC[(name, value)], 6)
    if name in STATIC_NAMES:
        return _int(STATIC_NAMES[name], 4) + _int(len(value), 7) + len(value)
    return _int(len(name), 3) + len(name) + _int(len(value), 7) + len(value)


def request_bytes(obj: dict) -> int:
    """The plan object's request as the loader sends it over h3: the HEADERS frame (type, length,
    the field section's 2-byte prefix and its lines) on its STREAM frame (type, stream id, length)."""
    url = obj["url"].split("#", 1)[0]
    rest = url.split("://", 1)[-1]
    authority, _, path = rest.partition("/")
    fields = [(":method", obj.get("method", "GET")), (":scheme", "https"), (":authority", authority)]
    fields += [(":path", "/" + path), *LOADER_FIELDS]
    if obj.get("priority"):
        fields.append(("priority", obj["priority"]))
    section = 2 + sum(field_bytes(n, v) for n, v in fields)
    frame = 1 + _varint(section) + section
    return 1 + 2 + _varint(frame) + frame
