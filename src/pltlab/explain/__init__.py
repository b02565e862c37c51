"""`pltlab explain`: the critical path of a load, its PLT split into DNS, handshakes, round trips,
transfer, waits and compute, and for two loads (TFO on vs off, or any two) what one saved on the
other's path (docs/explain.md). ``critical`` and ``pair`` are pure; ``loads`` reads a results
folder."""

from pltlab.explain import loads
from pltlab.explain import pair as cmp

NO_GRAPH = (
    "its requests carry no initiators (results written before pltlab explain, or a loader that "
    "reported none): the path follows connections only and may miss the objects that made requests ready"
)


def _notes(folder: str, run_ids: list[int]) -> list[str]:
    return [f"run {i}: {NO_GRAPH}" for i in run_ids if not loads.has_graph(folder, i)]


def explain(folder: str, run_id: int, vs: int | None = None, vs_folder: str | None = None, by: str = "tfo") -> dict:
    """Run ``run_id`` of ``folder`` explained, and compared with run ``vs`` (of ``vs_folder``,
    default the same folder) if given: a JSON-able dict with ``sentences``. ``by``: the knob whose
    value names each load (``run 12 (TFO on)``, ``run 12 (protocol h2)``)."""
    a = loads.load(folder, run_id, by)
    notes = _notes(folder, [run_id])
    if vs is None:
        q = cmp.queue_sentence(a)
        return {
            "folder": folder,
            "a": cmp.describe(a),
            "sentences": [cmp.where_sentence(a)] + ([f"{a.label}: {q}"] if q else []),
            "notes": notes,
        }
    vf = vs_folder or folder
    b = loads.load(vf, vs, by)
    notes += _notes(vf, [vs])
    out = cmp.compare(a, b)
    k1 = cmp.handshake_bound(out)
    beyond = k1 is not None and out["saved_ms"] > k1 * out["rtt_ms"]
    out.update(
        folder=folder,
        handshake_bound_rtts=k1,  # what the saved handshakes account for: k + 1 RTT
        beyond_handshakes=beyond,
        sentences=[
            f"{a.label} vs {b.label}: " + cmp.saved_sentence(out),
            f"{a.label}: " + cmp.where_sentence(a),
            f"{b.label}: " + cmp.where_sentence(b),
        ]
        + [f"{x.label}: {q}" for x in (a, b) for q in [cmp.queue_sentence(x)] if q]
        + (
            [
                f"more saved than the handshakes account for ({out['saved_rtts']:.1f} RTT > k + 1 = {k1}): "
                + cmp.cause_sentence(out, a, b)
            ]
            if beyond
            else []
        ),
        notes=notes,
    )
    return out


def explain_page(folder: str, page: str, rtt: str, by: str | None = None) -> dict:
    """The median loads of two values of knob ``by`` (default: the folder's own comparison, else
    TFO; TFO on vs off, h2 vs h1, ...) of ``page`` at ``rtt`` in ``folder``, compared: the other
    value's load explained against the baseline's."""
    by = by or loads.default_by(folder)
    alt, base = loads.median_pair(folder, page, rtt, by)
    return explain(folder, alt, vs=base, by=by)
