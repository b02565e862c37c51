"""Naming one load: the run id the report shows (``runs.id`` of a results folder's database).

Accepted: ``DIR#ID`` (a results folder, '#', the id), or a plain ``ID`` with ``results_dir`` (the
CLI's ``--dir``; None: the most recently modified folder under ./results holding a
results.sqlite). Used by ``pltlab export``, ``pltlab explain`` and the report.
"""

import os
import sqlite3

from pltlab.errors import PltError
from pltlab.experiments import results
from pltlab.experiments.results import DB_NAME


def latest_results_dir(base: str = "results") -> str | None:
    """The most recently modified folder under ``base`` holding a results.sqlite, or None."""
    try:
        names = os.listdir(base)
    except OSError:
        return None
    found = [os.path.join(base, n) for n in names if os.path.isfile(os.path.join(base, n, DB_NAME))]
    return max(found, key=lambda d: os.path.getmtime(os.path.join(d, DB_NAME)), default=None)


def resolve(ref: str, results_dir: str | None = None) -> tuple[str, int]:
    """(results folder, run id) of the load named ``ref``; PltError naming the folder and the id
    when the folder, its database or the run is unknown, or the run's status is not ok."""
    ref = str(ref).strip()
    if "#" in ref:
        folder, _, rid = ref.rpartition("#")
    else:
        folder, rid = results_dir, ref
        if folder is None:
            folder = latest_results_dir()
            if folder is None:
                raise PltError(f"run {ref}: no results folder given (DIR#ID or --dir DIR) and none under ./results")
    try:
        run_id = int(rid)
    except ValueError:
        raise PltError(f"{folder}: run id {rid!r} is not a number (the id the report shows)") from None
    db_path = os.path.join(folder, DB_NAME)
    if not os.path.isdir(folder):
        raise PltError(f"{folder}: no such results folder (run {run_id})")
    if not os.path.isfile(db_path):
        raise PltError(f"{folder}: no {DB_NAME} in this folder (run {run_id})")
    db = results.connect(folder)  # (checked first: a damaged database is refused)
    try:
        try:
            row = db.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()
        finally:
            db.close()
    except sqlite3.Error as e:
        raise PltError(f"{db_path}: cannot read the results database ({e}) (run {run_id})") from None
    if row is None:
        raise PltError(f"{folder}: no run with id {run_id}")
    if row[0] != "ok":
        raise PltError(f"{folder}: run {run_id} has status {row[0]!r}, not ok (it measured nothing)")
    return folder, run_id
