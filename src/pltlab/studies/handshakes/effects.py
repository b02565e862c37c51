"""What each handshake feature saves (pure): paired comparisons of loads that differ in the
feature only (same page, loader, repetition and every other knob), per loader, context (the
other handshake knobs), RTT and loss. Per comparison: the PLT saved in ms and the handshake round
trips saved on the critical path (`pltlab explain`'s TCP + TLS time over the RTT), each a mean
over the pairs with its BCa bootstrap interval (pltlab.experiments.stats), shown where there are
MIN_N pairs (stats.shown). And the paragraph that answers, from these numbers alone, what TFO
still adds once TLS 1.3 0-RTT and QUIC exist.

A load is a dict: page, client, protocol, tls, tfo (bool), rtt_ms, loss, rep, plt_ms, valid,
hs_rtts (handshake round trips on its critical path; None: not known), id, folder."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from pltlab.experiments import stats

FACTORS = ("client", "protocol", "tls", "tfo", "rtt_ms", "loss")  # what a load's configuration is
CONTEXT = ("protocol", "tls", "tfo")  # the handshake knobs a comparison may hold fixed


@dataclass(frozen=True)
class Effect:
    """One feature: loads with ``base``'s values against loads with ``alt``'s, everything else
    equal; ``where``: values both sides must have (e.g. TFO off while TLS modes are compared)."""

    name: str
    label: str
    base: dict
    alt: dict
    where: dict = field(default_factory=dict)

    def fixed(self) -> tuple[str, ...]:
        """The context knobs a row of this effect is split by (those it neither sets nor holds)."""
        return tuple(k for k in CONTEXT if k not in self.base and k not in self.alt and k not in self.where)


EFFECTS = (
    Effect("tfo", "TFO (the request in the SYN)", {"tfo": False}, {"tfo": True}),
    Effect(
        "resume", "TLS 1.3 resumption instead of a full handshake", {"tls": "full"}, {"tls": "resume"}, {"tfo": False}
    ),
    Effect("0rtt", "TLS 1.3 0-RTT instead of a full handshake", {"tls": "full"}, {"tls": "0rtt"}, {"tfo": False}),
    Effect("h2", "h2 instead of h1", {"protocol": "h1"}, {"protocol": "h2"}, {"tfo": False}),
    Effect("quic", "QUIC (h3) instead of h2 over TCP", {"protocol": "h2", "tfo": False}, {"protocol": "h3"}),
    Effect(
        "quic-vs-tfo",
        "QUIC (h3) instead of h2 over TCP with TFO",
        {"protocol": "h2", "tfo": True},
        {"protocol": "h3", "tfo": False},
    ),
)
BY_NAME = {e.name: e for e in EFFECTS}


def _matches(load: dict, values: dict) -> bool:
    return all(load.get(k) == v for k, v in values.items())


def pairs(loads: list[dict], effect: Effect) -> dict[tuple, list[tuple[dict, dict]]]:
    """(base load, alt load) pairs of valid loads, by row: (client, context values, RTT, loss)."""
    changed = set(effect.base) | set(effect.alt)
    same = ("page", "rep") + tuple(k for k in FACTORS if k not in changed)

    def key(x):
        return tuple(x.get(k) for k in same)

    good = [x for x in loads if x.get("valid") and x.get("plt_ms") is not None and _matches(x, effect.where)]
    alts = {key(x): x for x in good if _matches(x, effect.alt)}
    out: dict[tuple, list] = {}
    for b in good:
        if not _matches(b, effect.base):
            continue
        a = alts.get(key(b))
        if a is not None:
            row = (b["client"], tuple(b.get(k) for k in effect.fixed()), b["rtt_ms"], b["loss"])
            out.setdefault(row, []).append((b, a))
    return out


def _mean_ci(values: list[float], seed: int) -> tuple[float | None, list]:
    if not values:
        return None, [None, None]
    ci = stats.bca(lambda x, axis=-1: x.mean(axis=axis), values, seed=seed)
    return statistics.fmean(values), [None, None] if ci is None else [ci[0], ci[1]]


def rows(loads: list[dict], seed: int = 1) -> list[dict]:
    """Every effect's rows: n pairs, ms and handshake round trips saved (base - alt) with their
    intervals, the saving relative to the base's mean PLT."""
    out = []
    for e in EFFECTS:
        for (client, ctx, rtt, loss), ps in sorted(pairs(loads, e).items(), key=lambda kv: _order(kv[0])):
            ms = [b["plt_ms"] - a["plt_ms"] for b, a in ps]
            rt = [
                b["hs_rtts"] - a["hs_rtts"]
                for b, a in ps
                if b.get("hs_rtts") is not None and a.get("hs_rtts") is not None
            ]
            saved_ms, ms_ci = _mean_ci(ms, seed)
            saved_rt, rt_ci = _mean_ci(rt, seed)
            base_ms = statistics.fmean(b["plt_ms"] for b, _ in ps)
            out.append(
                {
                    "effect": e.name,
                    "label": e.label,
                    "client": client,
                    "context": dict(zip(e.fixed(), ctx)),
                    "rtt_ms": rtt,
                    "loss": loss,
                    "n": len(ps),
                    "base_ms": base_ms,
                    "saved_ms": saved_ms,
                    "saved_ms_ci": ms_ci,
                    "saved_pct": saved_ms / base_ms if base_ms else None,
                    "n_rtts": len(rt),
                    "saved_rtts": saved_rt,
                    "saved_rtts_ci": rt_ci,
                    "pages": sorted({b["page"] for b, _ in ps}),
                }
            )
    return out


def _order(row: tuple):
    client, ctx, rtt, loss = row
    return (client, tuple(str(c) for c in ctx), rtt, loss)


def shown(r: dict, what: str = "ms") -> bool:
    """Whether a row's interval of ``what`` (ms, rtts) is shown: MIN_N pairs and an interval."""
    n = r["n"] if what == "ms" else r["n_rtts"]
    ci = r[f"saved_{what}_ci"]
    return stats.shown(n) and ci[0] is not None and not math.isnan(ci[0])


def verdict(r: dict, what: str = "ms") -> str:
    """'saved', 'cost' or 'same' (the interval holds 0); without a shown interval, the point's
    sign followed by '?'."""
    v = r[f"saved_{what}"]
    if v is None:
        return "none"
    if not shown(r, what):
        return ("saved" if v > 0 else "cost" if v < 0 else "same") + "?"
    lo, hi = r[f"saved_{what}_ci"]
    return "saved" if lo > 0 else "cost" if hi < 0 else "same"


# ---- the answer -------------------------------------------------------------------------------
def find(rows_: list[dict], effect: str, client: str, loss: float | None = None, **context) -> list[dict]:
    """An effect's rows of one loader in one context, by RTT (at ``loss``; None: the lowest)."""
    mine = [r for r in rows_ if r["effect"] == effect and r["client"] == client and _matches(r["context"], context)]
    if not mine:
        return []
    lo = min(r["loss"] for r in mine) if loss is None else loss
    return sorted((r for r in mine if r["loss"] == lo), key=lambda r: r["rtt_ms"])


def amount(r: dict) -> str:
    """'118 ms [96, 140] (1.0 RTT) at 100 ms' (an interval where shown)."""
    ms = f"{r['saved_ms']:.0f} ms"
    if shown(r):
        ms += f" [{r['saved_ms_ci'][0]:.0f}, {r['saved_ms_ci'][1]:.0f}]"
    rt = f", {_1(r['saved_rtts'])} handshake round trips" if r["saved_rtts"] is not None else ""
    return f"{ms}{rt} at {r['rtt_ms']:g} ms"


def _1(x: float) -> str:
    """One decimal, without a sign for what rounds to zero (-0.0)."""
    return f"{round(x, 1) + 0.0:.1f}"


def _list(rs: list[dict]) -> str:
    return "; ".join(amount(r) for r in rs)


def _all(rs: list[dict], v: str) -> bool:
    return bool(rs) and all(verdict(r).rstrip("?") == v for r in rs)


def _any(rs: list[dict], v: str) -> bool:
    return any(verdict(r).rstrip("?") == v for r in rs)


def _words(rs: list[dict], saved: str = "saved", cost: str = "cost") -> str:
    """What the rows say together: saved, cost, no measurable difference, or no consistent one."""
    for v, words in (("saved", saved), ("cost", cost)):
        if _all(rs, v):
            return words
    return "no measurable difference" if _all(rs, "same") else "no consistent difference"


def _hedge(rs: list[dict]) -> str:
    return "" if all(shown(r) for r in rs) else f" (fewer than {stats.MIN_N} pairs somewhere: no interval there)"


def answer(rows_: list[dict], client: str = "builtin") -> str:
    """The paragraph that answers what TFO still adds once TLS 1.3 0-RTT and QUIC exist, from
    the rows of one loader (h2 the TCP protocol; the lowest loss, then the highest)."""
    full = find(rows_, "tfo", client, protocol="h2", tls="full")
    zero = find(rows_, "tfo", client, protocol="h2", tls="0rtt")
    if not full and not zero:
        return f"No TFO comparison over h2 was measured with the {client} loader: no answer from this run."
    out = []
    if full:
        out.append(f"Over h2 with full TLS 1.3 handshakes TFO saved {_list(full)}{_hedge(full)}.")
    own = find(rows_, "0rtt", client, protocol="h2")
    if own:
        out.append(f"0-RTT alone (TFO off) saved {_list(own)}.")
    if zero:
        if _all(zero, "saved"):
            head = "With 0-RTT on, TFO still saved"
        elif _any(zero, "saved"):
            head = "With 0-RTT on, TFO saved at some RTTs and not at others:"
        else:
            head = "With 0-RTT on, TFO saved nothing measurable:"
        out.append(f"{head} {_list(zero)}{_hedge(zero)}.")
        rts = [r["saved_rtts"] for r in zero if r["saved_rtts"] is not None]
        if rts and _any(zero, "saved"):
            span = _1(min(rts)) if _1(min(rts)) == _1(max(rts)) else f"{_1(min(rts))} to {_1(max(rts))}"
            out.append(
                f"That is the TCP handshake 0-RTT leaves in place ({span} handshake round trips fewer on the "
                "critical path): 0-RTT removes TLS's round trip, TFO TCP's, and only both together put the "
                "request in the first packet."
            )
    lossy = [r for r in find(rows_, "tfo", client, loss=_max_loss(rows_, client), protocol="h2", tls="0rtt")]
    if lossy and lossy[0]["loss"] > 0:
        out.append(
            f"At {lossy[0]['loss'] * 100:g} % loss, TFO with 0-RTT: {_words(lossy)} ({_list(lossy)}){_hedge(lossy)}."
        )
    quic = find(rows_, "quic-vs-tfo", client, tls="0rtt")
    if quic:
        how = _words(quic, "QUIC faster", "QUIC slower")
        out.append(
            f"QUIC with 0-RTT against h2 with TFO and 0-RTT: {how} ({_list(quic)}: what h3 saved over TCP with both)."
        )
    out.append(_conclusion(zero, quic))
    return " ".join(out)


def _rtts(rs: list[dict]) -> str:
    """'1.2 handshake round trips' per load on average over the rows, or 'handshake time'."""
    v = [r["saved_rtts"] for r in rs if r["saved_rtts"] is not None]
    return f"{_1(statistics.fmean(v))} handshake round trips per load" if v else "handshake time"


def _max_loss(rows_: list[dict], client: str) -> float | None:
    losses = [r["loss"] for r in rows_ if r["client"] == client and r["effect"] == "tfo"]
    return max(losses) if losses else None


def _conclusion(zero: list[dict], quic: list[dict]) -> str:
    adds = _any(zero, "saved")
    if not zero:
        return "TFO was not measured with 0-RTT here, so what it adds beside 0-RTT stays open."
    if not adds:
        return "So, in this run, TFO adds nothing measurable once 0-RTT is used."
    gain = f"So TFO still adds {_rtts(zero)} on the critical path once 0-RTT is used"
    if quic and _all(quic, "same"):
        return (
            f"{gain}: it is what brings TCP level with QUIC's 0-RTT. Where QUIC is used TFO has nothing left to add "
            "(it does not apply)."
        )
    if quic and _all(quic, "cost"):
        return f"{gain}, and with it TCP was faster than QUIC's 0-RTT here. Where QUIC is used TFO does not apply."
    if quic and _any(quic, "saved"):
        return f"{gain}, but QUIC with 0-RTT was faster still: TFO matters for the connections that stay on TCP."
    return f"{gain}."
