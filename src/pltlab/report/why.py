"""What `pltlab explain` says, in the report: the critical path of a load drawn in its waterfall,
and per page the sentence naming the handshakes TFO saved on the path. Used for loads whose
requests carry their graph (initiators); without one the path would follow connections only, so
the report keeps its own approximation and the improvement figures instead."""

from collections.abc import Callable

from pltlab.errors import PltError
from pltlab.explain import compare as explain_compare
from pltlab.explain import explain, loads
from pltlab.report import figures

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
            res = explain(out_dir, on["id"], vs=off["id"])
        except PltError:
            return None
        cfg = f" ({g['config']})" if g["config"] else ""
        return (
            f"At {g['rtt_ms']:g} ms{cfg} the median TFO load (run #{on['id']} vs #{off['id']}) "
            + explain_compare.saved_sentence(res)
            + "."
        )

    return hook
