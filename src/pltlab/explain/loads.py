"""Loads from a results folder for `pltlab explain`: a run's row and requests by id
(pltlab.experiments.runref), or the median loads of TFO off and on for a page and RTT."""

import json
import sqlite3

from pltlab import units
from pltlab.errors import PltError
from pltlab.experiments import results
from pltlab.explain.compare import Load
from pltlab.explain.critical import critical_path


def _connect(folder: str) -> sqlite3.Connection:
    db = results.connect(folder)  # (checked first: a damaged database is refused)
    db.row_factory = sqlite3.Row
    return db


def _label(run: dict) -> str:
    tfo = {None: "", 0: "TFO off", 1: "TFO on"}.get(run.get("tfo"), "")
    return f"run {run['id']}" + (f" ({tfo})" if tfo else "")


def load(folder: str, run_id: int) -> Load:
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
        label=_label(run),
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


def median_pair(folder: str, page: str, rtt: str) -> tuple[int, int]:
    """(TFO on, TFO off) run ids: the median valid load of each mode for ``page`` (its label, id
    or URL) at RTT ``rtt``; the lower of the two middle ones for an even count. PltError when
    the folder has no such loads, or they span several configurations."""
    rtt_ms = units.duration_us(rtt, "--rtt") / 1000
    db = _connect(folder)
    try:
        rows = [
            dict(r)
            for r in db.execute(
                "SELECT id, page, page_id, page_url, config_key, tfo, plt_ms FROM runs "
                "WHERE status = 'ok' AND valid = 1 AND abs(rtt_ms - ?) < 1e-6 AND plt_ms IS NOT NULL",
                (rtt_ms,),
            )
        ]
    finally:
        db.close()
    mine = [r for r in rows if page in (r["page"], r["page_id"], r["page_url"])]
    if not mine:
        pages = sorted({r["page"] for r in rows})
        have = f" (at {rtt_ms:g} ms: {', '.join(pages[:8])})" if pages else f" (no valid load at {rtt_ms:g} ms)"
        raise PltError(f"{folder}: no valid load of page {page!r} at RTT {rtt_ms:g} ms{have}")
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
