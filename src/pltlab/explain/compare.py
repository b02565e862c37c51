"""Two loads side by side (pure): where the time went in each, what one saved on the other's
critical path, and the sentences that say so.

``compare(a, b)`` explains load A against load B (e.g. A = TFO on, B = TFO off): ``saved_ms`` =
PLT(B) - PLT(A), ``saved_rtts`` in the loads' RTT, and the handshakes saved on the path: the
connections whose set-up (DNS, TCP and TLS together) lay on B's critical path for at least half an
RTT (1 ms without an RTT) more than on A's, matched by URL (its n-th request of that URL). A TFO
handshake that rode in the SYN is on A's path for ~0 ms: saved; one whose TLS then took a round
trip longer (a ClientHello too large for the SYN) is not.
"""

from dataclasses import dataclass
from urllib.parse import urlsplit

from pltlab.explain.critical import KINDS, LABELS, Path


@dataclass
class Load:
    """One load to explain: its path, run id and a few facts from its run row."""

    path: Path
    run_id: int | None = None
    label: str = ""  # e.g. "TFO on"
    rtt_ms: float | None = None
    tfo: bool | None = None
    page: str = ""


def short(url: str, width: int = 48) -> str:
    """An object as sentences name it: host and last path segment, shortened."""
    p = urlsplit(url)
    tail = p.path.rstrip("/").rsplit("/", 1)[-1] or "/"
    s = f"{p.hostname or ''}/{tail}" if tail != "/" else f"{p.hostname or url}/"
    return s if len(s) <= width else s[: width - 1] + "…"


def _keys(path: Path) -> dict[int, tuple[str, int]]:
    """idx -> (url, how many requests of that URL came before it): the same object in two loads."""
    seen: dict[str, int] = {}
    out = {}
    for i in sorted(path.requests):
        u = path.requests[i].url
        out[i] = (u, seen.get(u, 0))
        seen[u] = seen.get(u, 0) + 1
    return out


def _setup_on_path(path: Path) -> dict[tuple[str, int], dict]:
    keys = _keys(path)
    return {keys[h["idx"]]: h for h in path.handshakes}


def handshakes_saved(a: Path, b: Path, rtt_ms: float | None) -> list[dict]:
    """Connections whose set-up (DNS, TCP, TLS together) lay on B's path at least half an RTT
    (1 ms without one) longer than on A's, in B's order; ``handshakes``: which of them shrank."""
    threshold = 0.5 * rtt_ms if rtt_ms else 1.0
    on_a, out = _setup_on_path(a), []
    a_by_key = {k: a.requests[i] for i, k in _keys(a).items()}
    for key, hb in _setup_on_path(b).items():
        ha = on_a.get(key, {})
        saved = {k: hb[f"{k}_ms"] - ha.get(f"{k}_ms", 0.0) for k in ("dns", "tcp", "tls")}
        total = sum(saved.values())  # a TCP round trip saved but a TLS one added is no saving
        kinds = [k for k, v in saved.items() if v >= threshold] or [k for k, v in saved.items() if v > 0]
        if total >= threshold:
            a_req = a_by_key.get(key)
            out.append(
                {
                    "url": key[0],
                    "idx": hb["idx"],
                    "host": hb["host"],
                    "handshakes": kinds,
                    "saved_ms": round(total, 3),
                    "tfo": bool(a_req and a_req.tfo),
                    "reused": bool(a_req and not a_req.new_conn),
                }
            )
    return out


def compare(a: Load, b: Load) -> dict:
    rtt = a.rtt_ms if a.rtt_ms and (b.rtt_ms is None or b.rtt_ms == a.rtt_ms) else None
    saved = b.path.plt_ms - a.path.plt_ms
    hs = handshakes_saved(a.path, b.path, rtt)
    on_b = len(b.path.handshakes)
    return {
        "a": describe(a),
        "b": describe(b),
        "saved_ms": round(saved, 3),
        "saved_rtts": round(saved / rtt, 3) if rtt else None,
        "rtt_ms": rtt,
        "split_saved_ms": {k: round(b.path.split[k] - a.path.split[k], 3) for k in KINDS},
        # how many connections' handshakes the first load saved on its critical path, and which
        "handshakes_saved_on_path": len(hs),
        "handshakes_saved": hs,
        "new_connections": b.path.new_connections,
        "new_connections_on_path": on_b,
        "new_connections_off_path": b.path.new_connections - on_b,
    }


def describe(x: Load) -> dict:
    return {"run_id": x.run_id, "label": x.label, "page": x.page, "rtt_ms": x.rtt_ms, "tfo": x.tfo, **x.path.to_dict()}


def _names(urls: list[str], most: int = 4) -> str:
    names = [short(u, 40) for u in urls]
    if len(names) > most:
        names = names[:most] + [f"{len(urls) - most} more"]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def where_sentence(x: Load) -> str:
    """'PLT 1234 ms: 40% request round trips, 30% TCP handshakes, ...' (the three largest)."""
    p = x.path
    parts = sorted(((v, k) for k, v in p.split.items() if p.plt_ms and v / p.plt_ms >= 0.005), reverse=True)[:3]
    share = ", ".join(f"{v / p.plt_ms:.0%} {LABELS[k]}" for v, k in parts) if p.plt_ms else ""
    n = len(p.objects)
    return f"PLT {p.plt_ms:.0f} ms over {n} object{'s' if n != 1 else ''} on the critical path: {share}"


def saved_sentence(c: dict) -> str:
    """'saved 655 ms = 3.3 RTT: the handshakes of x, y and z; 23 of 26 new connections were off
    the path' ('cost ... although ...' when A is slower; the largest other change when it is at
    least half an RTT)."""
    ms, rtt = c["saved_ms"], c.get("rtt_ms")
    head = f"{'saved' if ms >= 0 else 'cost'} {abs(ms):.0f} ms"
    if c["saved_rtts"] is not None:
        head += f" = {abs(c['saved_rtts']):.1f} RTT"
    hs = c["handshakes_saved"]
    if hs:
        names = f"the handshakes of {_names([h['url'] for h in hs])}"
        what = f": {names}" if ms >= 0 else f" although {names} were saved on the path"
    else:
        what = ": no handshake saved on the critical path"
    # the largest change outside the handshakes, when it matters
    other = {k: v for k, v in c["split_saved_ms"].items() if k not in ("dns", "tcp", "tls")}
    k, v = max(other.items(), key=lambda kv: abs(kv[1]))
    if abs(v) >= (0.5 * rtt if rtt else 1.0):
        what += f" ({LABELS[k]}: {abs(v):.0f} ms {'less' if v > 0 else 'more'})"
    n, off = c["new_connections"], c["new_connections_off_path"]
    conns = f"{off} of {n} new connection{'s' if n != 1 else ''} were off the path" if n else "no new connection"
    return f"{head}{what}; {conns}"
