"""What `pltlab explain` says, in the report: the critical path of a load drawn in its waterfall,
and per page the sentence naming the handshakes TFO saved on the path. Used for loads whose
requests carry their graph (initiators); without one the path would follow connections only, so
the report keeps its own approximation and the improvement figures instead."""

from collections.abc import Callable

from pltlab.errors import PltError
from pltlab.explain import explain, loads
from pltlab.explain import pair as explain_pair
from pltlab.explain.critical import critical_path
from pltlab.report import figures, headline
from pltlab.report import statistics as an

SOURCE = "the load's dependency graph (pltlab explain)"


def path_requests(out_dir: str, run_id: int) -> set[int] | None:
    """The request indices (requests.idx) on the load's critical path, or None when the load has
    no graph (or no request record)."""
    if not loads.has_graph(out_dir, run_id):
        return None
    try:
        return set(loads.load(out_dir, run_id).path.objects)
    except PltError:
        return None


def _what(g: dict) -> str:
    """The compared side as sentences name it: ``TFO``, or ``h2`` (against ``h1``)."""
    return "TFO" if g.get("by", "tfo") == "tfo" else g["labels"][1]


def sentence_hook(out_dir: str) -> Callable[[str, list[dict]], str | None]:
    """headline.sentences' explain hook: for a page, what the median TFO load saved against the
    median load without, at the page's largest RTT measured on both sides."""

    def hook(page: str, rows: list[dict]) -> str | None:
        both = [g for g in rows if g["runs"][False] and g["runs"][True]]
        if not both:
            return None
        g = max(both, key=lambda g: g["rtt_ms"])
        on, off = figures.median_run(g["runs"][True]), figures.median_run(g["runs"][False])
        if not (loads.has_graph(out_dir, on["id"]) and loads.has_graph(out_dir, off["id"])):
            return None
        try:
            res = explain(out_dir, on["id"], vs=off["id"], by=g.get("by", "tfo"))
        except PltError:
            return None
        cfg = f" ({g['config']})" if g["config"] else ""
        return (
            f"At {g['rtt_ms']:g} ms{cfg} the median {_what(g)} load (run #{on['id']} vs #{off['id']}) "
            + explain_pair.saved_sentence(res)
            + "."
        )

    return hook


CHECKS_TITLE = "Savings checked against the critical path (pltlab explain)"


def checks(out_dir: str, analysis: dict) -> list[str]:
    """Per row (page, RTT, configuration) explained by its median loads of each TFO mode: a saving
    (the row's, of the means) larger than the handshakes TFO saved on the critical path can account
    for (saved ms > (k + 1) x RTT, k = those handshakes), or under one RTT although k > 1 (a cost
    although k = 1: something else cost what they saved), with the cause `pltlab explain` finds;
    and each median load whose handshakes and requests waited longer in the uplink's queue than
    their round trips took."""
    out = []
    for g in analysis["rows"]:
        on, off = figures.median_run(g["runs"][True]), figures.median_run(g["runs"][False])
        if not (on and off and loads.has_graph(out_dir, on["id"]) and loads.has_graph(out_dir, off["id"])):
            continue
        try:
            by = g.get("by", "tfo")
            a, b = loads.load(out_dir, on["id"], by), loads.load(out_dir, off["id"], by)
        except PltError:
            continue
        c = explain_pair.compare(a, b)
        rtt, k1, saved = g["rtt_ms"], explain_pair.handshake_bound(c), headline.saved_ms(g)
        where = f"{g['page']} @ {rtt:g} ms" + (f" ({g['config']})" if g["config"] else "")
        k = c["handshakes_saved_on_path"]
        runs = f"explain (run #{on['id']} vs #{off['id']}): "
        hs = f"the {k} handshake{'s' if k != 1 else ''} it saved on the critical path account for"
        if k1 is not None and saved is not None and rtt and saved > k1 * rtt:
            out.append(
                f"{where}: {_what(g)} saved {saved:.0f} ms = {saved / rtt:.1f} RTT, more than {hs} (k + 1 = {k1} RTT); "
                + runs
                + explain_pair.cause_sentence(c, a, b)
            )
        elif k1 is not None and saved is not None and rtt and k and saved < min(1, k - 1) * rtt:
            out.append(
                f"{where}: {_what(g)} {'saved' if saved >= 0 else 'cost'} {abs(saved):.0f} ms = {saved / rtt:.1f} RTT "
                f"although it saved {k} handshake{'s' if k != 1 else ''} on the critical path; "
                + runs
                + explain_pair.cause_sentence(c, a, b)
            )
        for x in (b, a):
            w = explain_pair.waited(x)
            if w and w["cause"] == "uplink":
                out.append(f"{where}, {x.label}: " + explain_pair.queue_sentence(x))
    return out


def section(lines: list[str]) -> dict:
    """The checks as a report section (every line marked)."""
    return {"title": CHECKS_TITLE, "lines": lines, "bad": [""]}


class StudyExplainer:
    """What `pltlab explain` finds, for a study of several experiments (pltlab.studies: a layer
    below explain, handed this by pltlab.report.study_report): per load the handshake round trips
    on its critical path, and what one load saved against another in words."""

    def handshake_rtts(self, folder: str, runs: list[dict]) -> dict[int, float | None]:
        """run id -> (TCP + TLS handshake ms on the load's critical path) / its RTT; None where
        the load has no request records or no RTT. ``runs``: dicts with ``id`` and ``rtt_ms``."""
        ids = [r["id"] for r in runs]
        reqs = an.load_requests(folder, ids) if ids else {}
        out: dict[int, float | None] = {}
        for r in runs:
            rec = reqs.get(r["id"])
            if not rec or not r.get("rtt_ms"):
                out[r["id"]] = None
                continue
            try:
                split = critical_path(rec, plt_ms=r.get("plt_ms")).split
            except ValueError:
                out[r["id"]] = None
                continue
            out[r["id"]] = (split["tcp"] + split["tls"]) / r["rtt_ms"]
        return out

    def saved(self, folder: str, alt_id: int, base_id: int, by: str = "tfo") -> str | None:
        """`pltlab explain ALT --vs BASE`'s sentence of what ALT saved ('saved 655 ms = 3.3 RTT:
        the handshakes of ...'); None when either load has no graph or cannot be explained."""
        if not (loads.has_graph(folder, alt_id) and loads.has_graph(folder, base_id)):
            return None
        try:
            return explain_pair.saved_sentence(explain(folder, alt_id, vs=base_id, by=by))
        except PltError:
            return None
