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
    queue_wait_us: dict | None = None  # per direction: the link's queue waits (pltlab.run.runner.queue_waits)
    rate_up_bps: int | None = None


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


ROUND_TRIPS = ("tcp", "tls", "request")  # the kinds of work that are one round trip each


def beyond_round_trips(path: Path, rtt_ms: float) -> tuple[int, float]:
    """(n, ms): the handshakes and requests on the critical path that took at least half an RTT
    (each one round trip: a TFO handshake of ~0 ms is none) and the time they took beyond n RTTs:
    waiting in the link's queues, or the server's or the loader's time."""
    took: dict[tuple[str, int | None], float] = {}
    for s in path.segments:
        if s.kind in ROUND_TRIPS:
            took[(s.kind, s.idx)] = took.get((s.kind, s.idx), 0.0) + s.ms
    trips = [ms for ms in took.values() if ms >= 0.5 * rtt_ms]
    return len(trips), sum(max(0.0, ms - rtt_ms) for ms in trips)


def queue_cause(x: Load) -> str | None:
    """ "uplink" / "downlink": the direction whose queue held the load's packets an RTT or longer
    (of two, the one with the longer mean wait), "" when neither did, None when not measured."""
    q = x.queue_wait_us
    if not q or not x.rtt_ms:
        return None
    long = {d: h for d, h in q.items() if (h.get("max") or 0) >= x.rtt_ms * 1000}
    return max(long, key=lambda d: long[d].get("mean") or 0) if long else ""


def waited(x: Load) -> dict | None:
    """When the handshakes and requests on the load's critical path waited longer beyond their
    round trips than those took: ``n`` round trips, ``beyond_ms``, ``cause`` (queue_cause) and
    that queue's ``wait_us`` figures; else None."""
    if not x.rtt_ms:
        return None
    n, beyond = beyond_round_trips(x.path, x.rtt_ms)
    if beyond <= n * x.rtt_ms:
        return None
    cause = queue_cause(x)
    return {"n": n, "beyond_ms": beyond, "cause": cause, "wait_us": (x.queue_wait_us or {}).get(cause or "")}


def queue_sentence(x: Load) -> str | None:
    """``waited`` in words, e.g. 'its handshakes and requests on the critical path waited 3120 ms
    beyond their 16 round trips (320 ms): uplink queueing (256 kbit/s): packets waited up to 1450
    ms (mean 310 ms) behind those sent before them'; None when they did not wait that long."""
    w = waited(x)
    if w is None:
        return None
    n = w["n"]
    head = (
        f"its handshakes and requests on the critical path waited {w['beyond_ms']:.0f} ms beyond their {n} "
        f"round trip{'s' if n != 1 else ''} ({n * x.rtt_ms:.0f} ms)"
    )
    if w["cause"] is None:
        return head + " (the link's queues were not measured)"
    if not w["cause"]:
        longest = max((h.get("max") or 0) for h in x.queue_wait_us.values())
        return head + f": not in the link's queues (the longest wait there {longest / 1000:.0f} ms)"
    h = w["wait_us"]
    rate = f" ({x.rate_up_bps / 1000:g} kbit/s)" if w["cause"] == "uplink" and x.rate_up_bps else ""
    return (
        head + f": {w['cause']} queueing{rate}: packets waited up to {h['max'] / 1000:.0f} ms (mean "
        f"{h['mean'] / 1000:.0f} ms) behind those sent before them"
    )


def handshake_bound(c: dict) -> int | None:
    """The round trips that the handshakes the first load saved on the critical path can account
    for: k + 1 (k saved handshakes, one RTT each, and one more), None without an RTT."""
    return None if c.get("rtt_ms") is None else c["handshakes_saved_on_path"] + 1


def cause_sentence(c: dict, a: Load, b: Load) -> str:
    """What changed on the critical path besides the handshakes' round trips: the kinds of work
    that changed most (by at least half an RTT), and either load's waiting beyond its round trips."""
    rtt = c.get("rtt_ms") or 0.0
    moved = sorted(
        ((abs(v), k, v) for k, v in c["split_saved_ms"].items() if abs(v) >= max(0.5 * rtt, 1.0)), reverse=True
    )
    parts = [f"{LABELS[k]} {abs(v):.0f} ms {'less' if v > 0 else 'more'}" for _, k, v in moved[:3]]
    out = ", ".join(parts) if parts else "no kind of work changed by half an RTT"
    for x in (b, a):
        w = waited(x)
        if w:
            where = f" in {w['cause']} queueing (up to {w['wait_us']['max'] / 1000:.0f} ms)" if w["cause"] else ""
            out += f"; {x.label} waited {w['beyond_ms']:.0f} ms beyond its {w['n']} round trips{where}"
    return out
