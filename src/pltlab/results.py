"""A results folder as pandas DataFrames: ``pltlab.results.open(DIR)`` (docs/api.md "Results as
DataFrames"). A thin, read-only layer over the folder's results database
(pltlab.experiments.results): the database is checked first and opened read-only, so a sweep may
be writing it meanwhile (what it committed is what is read)."""

from __future__ import annotations

import gzip
import json
import os
import sqlite3
from dataclasses import dataclass, field

import pandas as pd

from pltlab.errors import PltError
from pltlab.experiments import results as _db

__all__ = ["Folder", "open"]


@dataclass
class Folder:
    """One results folder. ``runs``: one row per run attempt (table `runs`: the knobs' columns,
    ``page``, ``rep``, ``tfo``, ``status``, ``valid``, ``plt_ms``, ...); ``requests``: one row per
    request of every load (table `requests`; ``run_id`` is its run's ``id``); ``meta``: the
    experiment (``name``, ``experiment``: its file, ``compare``: its axis, the environment)."""

    path: str
    meta: dict
    runs: pd.DataFrame
    _requests: pd.DataFrame | None = field(default=None, repr=False)

    @property
    def requests(self) -> pd.DataFrame:
        """Every request (read when first asked for: the larger table)."""
        if self._requests is None:
            self._requests = _read(self.path, "requests")
        return self._requests

    def loads(self) -> pd.DataFrame:
        """The valid page loads: the runs the report averages (status ok, valid, a PLT)."""
        r = self.runs
        return r[(r["status"] == "ok") & (r["valid"] == 1) & r["plt_ms"].notna()].reset_index(drop=True)

    def requests_of(self, run_id: int) -> pd.DataFrame:
        """The requests of one load, in the order it made them."""
        q = self.requests
        return q[q["run_id"] == run_id].sort_values("idx").reset_index(drop=True)

    def har(self, run_id: int) -> dict | None:
        """The HAR 1.2 stored with a load (a dict), or None (an older folder, a failed run)."""
        db = _db.connect(self.path)
        try:
            got = db.execute("SELECT har FROM hars WHERE run_id = ?", (int(run_id),)).fetchone()
        finally:
            db.close()
        return json.loads(gzip.decompress(got[0])) if got and got[0] is not None else None


def _read(path: str, table: str) -> pd.DataFrame:
    db = _db.connect(path)  # (checked first: one line for a missing or damaged database)
    try:
        return pd.read_sql_query(f"SELECT * FROM {table} ORDER BY id", db)
    except (sqlite3.DatabaseError, pd.errors.DatabaseError) as e:
        raise PltError(f"{os.path.join(path, _db.DB_NAME)}: not a results database: {e}") from None
    finally:
        db.close()


def open(out_dir: str) -> Folder:  # noqa: A001 (pltlab.results.open, as the issue names it)
    """The results folder ``out_dir`` (a sweep's or a study experiment's output folder)."""
    db = _db.connect(out_dir)
    try:
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    except sqlite3.DatabaseError as e:
        raise PltError(f"{os.path.join(out_dir, _db.DB_NAME)}: not a results database: {e}") from None
    finally:
        db.close()
    return Folder(out_dir, meta, _read(out_dir, "runs"))
