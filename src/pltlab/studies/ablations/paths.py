"""Where the TFO-off loads' time went, per page x RTT of a TFO ablation variant: the critical path
of the cell's median TFO-off load split by pltlab.explain (TCP handshakes, request round trips,
transfer, ...) beside what TFO saved against it. TFO takes one round trip off each new connection
on the path (its SYN carries the request), so k connection set-ups on the path make TFO's expected
saving k x RTT, whatever the rest of the path (transfer, queueing) holds: k x RTT / PLT is the
improvement the page's structure allows. Reads the variant's loads (its results database); a
folder without them has no paths."""

from __future__ import annotations

import os

from pltlab.errors import PltError
from pltlab.experiments import results
from pltlab.explain import explain_page


def cells(folder: str, pairs: list[tuple[str, float]]) -> list[dict] | None:
    """One row per (page, RTT ms) of ``pairs`` whose median TFO on/off loads can be explained;
    None when ``folder`` holds no loads (a committed folder keeps its rows in ablations.json)."""
    if not os.path.exists(os.path.join(folder, results.DB_NAME)):
        return None
    out = []
    for page, rtt in pairs:
        try:
            e = explain_page(folder, page, f"{rtt:g}ms", by="tfo")
        except PltError:  # a cell without valid loads on both sides: no row
            continue
        off, split = e["b"], e["b"]["split_ms"]
        out.append(
            {
                "page": page,
                "rtt_ms": rtt,
                "plt_off_ms": off["plt_ms"],
                "tcp_ms": split["tcp"],
                "request_ms": split["request"],
                "transfer_ms": split["transfer"],
                "handshakes_on_path": len(off["handshakes_on_path"]),
                "new_connections": off["new_connections"],
                "saved_ms": e["saved_ms"],
            }
        )
    return out


def shares(row: dict) -> dict:
    """A row's parts as shares of its TFO-off PLT: ``allowed`` (k x RTT, k the connection set-ups
    on the path), the TCP handshakes as timed (queueing included), the transfer, and what TFO
    saved (the median pair's difference)."""
    plt = row["plt_off_ms"] or float("nan")
    return {
        "allowed": row["handshakes_on_path"] * row["rtt_ms"] / plt,
        "handshakes": row["tcp_ms"] / plt,
        "transfer": row["transfer_ms"] / plt,
        "saved": row["saved_ms"] / plt,
    }
