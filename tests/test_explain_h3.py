"""`pltlab explain` over HTTP/3 (pure, hand-written records as the built-in loader writes them
over QUIC: ``protocol`` "h3", ``connect_end_ms == tls_end_ms`` = the QUIC handshake's end, at
once with 0-RTT): no TCP handshake; the QUIC handshake on the critical path is one round trip,
full or resumed, none with early data accepted."""

import pytest

from pltlab.explain import pair as cmp
from pltlab.explain.critical import critical_path

R = 40.0  # RTT of the hand-written loads
TRANSFER = 7.0


def h3(idx, host, conn, t, mode, parent=None):
    """A request that opens an h3 connection at t: the handshake (one RTT; none with 0rtt: the
    request goes in the first flight), one round trip to its first byte, then its transfer."""
    hs = 0.0 if mode == "0rtt" else R
    return {
        "idx": idx,
        "url": f"https://{host}.test/o{idx}",
        "host": f"{host}.test",
        "conn_id": conn,
        "new_conn": True,
        "tfo": False,
        "ready_ms": t,
        "released_ms": t,
        "connect_start_ms": t,
        "connect_end_ms": t + hs,
        "tls_end_ms": t + hs,
        "request_ms": t + hs,
        "first_byte_ms": t + hs + R,
        "last_byte_ms": t + hs + R + TRANSFER,
        "parent": parent,
        "after": [],
        "at_first_byte": False,
        "delay_ms": 0.0,
        "protocol": "h3",
        "tls_handshake": "full" if mode == "full" else "resumed",
        "early_data": "accepted" if mode == "0rtt" else None,
    }


def chain(k, mode):
    """k objects in a chain, each on its own h3 origin."""
    reqs = [h3(0, "h0", 0, 0.0, mode)]
    for i in range(1, k):
        reqs.append(h3(i, f"h{i}", i, reqs[-1]["last_byte_ms"], mode, parent=i - 1))
    return reqs


@pytest.mark.parametrize("mode", ["full", "resume"])
def test_a_quic_handshake_is_one_round_trip_and_no_tcp(mode):
    p = critical_path([h3(0, "a", 0, 0.0, mode)])
    # by hand: 1 RTT handshake + 1 RTT request + the transfer
    assert p.plt_ms == pytest.approx(2 * R + TRANSFER)
    assert p.split["tcp"] == 0
    assert p.split["tls"] == pytest.approx(R) and p.split["request"] == pytest.approx(R)
    assert p.handshakes == [
        {"idx": 0, "url": "https://a.test/o0", "host": "a.test", "conn_id": 0, "tfo": False}
        | {"dns_ms": 0.0, "tcp_ms": 0.0, "tls_ms": R}
    ]


def test_0rtt_accepted_costs_no_handshake_round_trip():
    p = critical_path([h3(0, "a", 0, 0.0, "0rtt")])
    assert p.plt_ms == pytest.approx(R + TRANSFER)
    assert (p.split["tcp"], p.split["tls"], p.split["request"]) == (0, 0, pytest.approx(R))


@pytest.mark.parametrize("k", [1, 3])
def test_rtts_saved_by_0rtt_over_h3(k):
    """0-RTT vs resumed handshakes over h3, k origins in a chain: k round trips saved, each the
    QUIC handshake of one origin (a TLS one: QUIC has no TCP)."""
    early = cmp.Load(critical_path(chain(k, "0rtt")), 1, "TLS 0rtt", R, False, "p")
    resumed = cmp.Load(critical_path(chain(k, "resume")), 2, "TLS resume", R, False, "p")
    assert resumed.path.plt_ms == pytest.approx(k * (2 * R + TRANSFER))
    assert early.path.plt_ms == pytest.approx(k * (R + TRANSFER))
    c = cmp.compare(early, resumed)
    assert c["saved_ms"] == pytest.approx(k * R) and c["saved_rtts"] == pytest.approx(k)
    hs = c["handshakes_saved"]
    assert [h["idx"] for h in hs] == list(range(k)) and all(h["handshakes"] == ["tls"] for h in hs)
    assert c["split_saved_ms"]["tls"] == pytest.approx(k * R) and c["split_saved_ms"]["tcp"] == 0
    s = cmp.saved_sentence(c)
    assert s.startswith(f"saved {k * R:.0f} ms = {k:.1f} RTT: the handshakes of h0.test/o0")
    assert s.endswith(f"0 of {k} new connection{'s' if k > 1 else ''} were off the path")
