"""Loads from a results folder for `pltlab explain`: a run's row and requests by id
(pltlab.experiments.runref), or the median loads of two values of a knob (TFO off and on, h1 and
h2, ...) for a page and RTT."""

import json
import sqlite3

from pltlab import protocols, units
from pltlab.errors import PltError
from pltlab.experiments import results
from pltlab.explain.critical import critical_path
from pltlab.explain.pair import Load
from pltlab.run import knobs


def _connect(folder: str) -> sqlite3.Connection:
    db = results.connect(folder)  # (checked first: a damaged database is refused)
    db.row_factory = sqlite3.Row
    return db


def column(by: str) -> str:
    """The results column of knob ``by`` (any of its names; TFO: ``tfo``)."""
    k = knobs.axis(by)
    return "tfo" if k.name == "tfo" else k.column


def show(col: str, v) -> str:
    if col == "tfo":
        return {None: "", 0: "TFO off", 1: "TFO on"}.get(None if v is None else int(bool(v)), "")
    k = knobs.by_column(col)
    return k.words(v) if k else f"{col} {v}"


def _label(run: dict, col: str = "tfo") -> str:
    side = show(col, run.get(col))
    return f"run {run['id']}" + (f" ({side})" if side else "")


def load(folder: str, run_id: int, by: str = "tfo") -> Load:
    """Run ``run_id`` of ``folder`` (resolved by runref) with its critical path; PltError when the
    run has no request record (e.g. a measurement kind without requests)."""
    db = _connect(folder)
    try:
        run = dict(db.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchone())
        reqs = [dict(r) for r in db.execute("SELECT * FROM requests WHERE run_id = ? ORDER BY idx", (run_id,))]
    finally:
        db.close()
    if not reqs:
        raise PltError(f"{folder}: run {run_id} has no request records: nothing to explain")
    try:
        path = critical_path(reqs, plt_ms=run.get("plt_ms"))
    except ValueError as e:
        raise PltError(f"{folder}: run {run_id}: {e}") from None
    return Load(
        path=path,
        run_id=run_id,
        label=_label(run, column(by)),
        rtt_ms=run.get("rtt_ms"),
        tfo=None if run.get("tfo") is None else bool(run["tfo"]),
        page=run.get("page") or run.get("page_id") or "",
        queue_wait_us=_queue_waits(run),
        rate_up_bps=run.get("rate_up_bps"),
    )


def _queue_waits(run: dict) -> dict | None:
    """The link's queue waits during the load (pltlab.run.runner.queue_waits), if measured."""
    try:
        return (json.loads(run.get("metrics") or "null") or {}).get("queue_wait_us")
    except (ValueError, AttributeError):
        return None


def has_graph(folder: str, run_id: int) -> bool:
    """Whether the run's requests carry initiators (results written before pltlab.explain: no)."""
    db = _connect(folder)
    try:
        n = db.execute("SELECT COUNT(*) FROM requests WHERE run_id = ? AND parent IS NOT NULL", (run_id,)).fetchone()
        return bool(n and n[0])
    except sqlite3.OperationalError:  # an older database without the column
        return False
    finally:
        db.close()


def default_by(folder: str) -> str:
    """The folder's comparison axis as its sweep recorded it (meta ``compare``), else TFO."""
    db = _connect(folder)
    try:
        got = db.execute("SELECT value FROM meta WHERE key = 'compare'").fetchone()
    finally:
        db.close()
    return (json.loads(got[0]) if got else None) or "tfo"


def median_pair(folder: str, page: str, rtt: str, by: str = "tfo") -> tuple[int, int]:
    """(other, baseline) run ids: the median valid load of each of the two values of knob ``by``
    (TFO on and off by default; the baseline: TFO off, h1, full TLS, cold, else the first) for
    ``page`` (its label, id or URL) at RTT ``rtt``; the lower of the two middle ones for an even
    count. PltError when the folder has no such loads, they span several configurations, or the
    knob took more than two values (then name the loads by run id)."""
    col = column(by)
    rtt_ms = units.duration_us(rtt, "--rtt") / 1000
    db = _connect(folder)
    try:
        rows = [
            dict(r)
            for r in db.execute(
                "SELECT * FROM runs "
                "WHERE status = 'ok' AND valid = 1 AND abs(rtt_ms - ?) < 1e-6 AND plt_ms IS NOT NULL",
                (rtt_ms,),
            )
        ]
    finally:
        db.close()
    if col == "tfo":
        return _median_tfo(folder, page, rtt_ms, rows)
    mine = _of_page(folder, page, rtt_ms, rows)
    others = [k.column for k in knobs.point() if k.column and k.column != col]
    # a knob that does not apply under one side's protocol holds n/a there (protocols.NA): not a
    # difference between the two configurations (keepalive under h2 against h1's "on")
    same = [c for c in others if all(r.get(c) != protocols.NA for r in mine)]
    if len({tuple(json.dumps(r.get(c)) for c in same) + (r["tfo"],) for r in mine}) > 1:
        raise PltError(
            f"{folder}: page {page!r} at {rtt_ms:g} ms was loaded in several configurations besides {by}: "
            "name the two loads by run id (pltlab explain ID --vs ID --dir DIR)"
        )
    values = sorted({json.dumps(r.get(col)) for r in mine})
    if len(values) != 2:
        seen = ", ".join(show(col, json.loads(v)) for v in values)
        raise PltError(
            f"{folder}: page {page!r} at {rtt_ms:g} ms has {len(values)} value(s) of {by} ({seen}), not two: "
            "name the two loads by run id (pltlab explain ID --vs ID --dir DIR)"
        )
    vals = [json.loads(v) for v in values]
    base = next((v for v in vals if v == knobs.BASELINES.get(col)), vals[0])
    alt = next(v for v in vals if v != base)
    out = {}
    for v in (alt, base):
        runs = sorted((r for r in mine if r.get(col) == v), key=lambda r: (r["plt_ms"], r["id"]))
        out[json.dumps(v)] = runs[(len(runs) - 1) // 2]["id"]
    return out[json.dumps(alt)], out[json.dumps(base)]


def _of_page(folder: str, page: str, rtt_ms: float, rows: list[dict]) -> list[dict]:
    mine = [r for r in rows if page in (r["page"], r["page_id"], r["page_url"])]
    if not mine:
        pages = sorted({r["page"] for r in rows})
        have = f" (at {rtt_ms:g} ms: {', '.join(pages[:8])})" if pages else f" (no valid load at {rtt_ms:g} ms)"
        raise PltError(f"{folder}: no valid load of page {page!r} at RTT {rtt_ms:g} ms{have}")
    return mine


def _median_tfo(folder: str, page: str, rtt_ms: float, rows: list[dict]) -> tuple[int, int]:
    mine = _of_page(folder, page, rtt_ms, rows)
    configs = sorted({r["config_key"] for r in mine if r["config_key"]})
    if len(configs) > 1:
        raise PltError(
            f"{folder}: page {page!r} at {rtt_ms:g} ms was loaded in {len(configs)} configurations: "
            "name the two loads by run id (pltlab explain ID --vs ID --dir DIR)"
        )
    out = {}
    for tfo in (1, 0):
        runs = sorted((r for r in mine if r["tfo"] == tfo), key=lambda r: (r["plt_ms"], r["id"]))
        if not runs:
            raise PltError(
                f"{folder}: no valid load of page {page!r} at {rtt_ms:g} ms with TFO {'on' if tfo else 'off'}"
            )
        out[tfo] = runs[(len(runs) - 1) // 2]["id"]
    return out[1], out[0]
