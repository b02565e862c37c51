"""`pltlab salvage DIR -o NEW`: what is still readable of a damaged results database, copied into
a new results folder that reports and resumes like any other.

Rows are read by ranges of their ids; a range that hits a damaged page is halved until the
unreadable ids are isolated, so every row on a sound page is kept, with its id (the run ids a
report or `explain` shows stay the same). The damaged folder is only read.
"""

from __future__ import annotations

import os
import shutil
import sqlite3

from pltlab.errors import PltError
from pltlab.experiments import lock
from pltlab.experiments.results import DB_NAME, Results

TABLES = ("meta", "runs", "requests", "runners", "hars")
ID = {"meta": "rowid", "runners": "rowid", "hars": "run_id"}  # (others: their column id)
BATCH = 4096
COPIED_FILES = ("experiment.toml",)


def salvage(src_dir: str, out_dir: str) -> dict:
    """Copy every readable row of ``src_dir``'s database into a new folder ``out_dir``; returns
    {table: {"kept": n, "lost_ranges": [[lo, hi], ...]}} and the files copied."""
    src = os.path.join(src_dir, DB_NAME)
    if not os.path.isfile(src):
        raise PltError(f"{src_dir}: no {DB_NAME} in this folder (nothing to salvage)")
    if os.path.realpath(src_dir) == os.path.realpath(out_dir):
        raise PltError(f"{out_dir}: salvage into a new folder, not the damaged one")
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or lock.contents(out_dir)):
        raise PltError(f"{out_dir}: exists and is not an empty folder: choose another output folder (-o)")
    try:
        old = sqlite3.connect(f"file:{src}?mode=ro", uri=True)
        have = {r[0] for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    except sqlite3.DatabaseError as e:
        raise PltError(f"{src}: its table list is unreadable ({e}): nothing can be salvaged") from None
    out: dict = {}
    with lock.held(out_dir, "salvage"):
        new = Results(out_dir)
        try:
            for table in TABLES:
                if table in have:
                    out[table] = _copy(old, new.db, table)
            dropped = _drop_incomplete(new.db, out.get("requests", {}).get("lost_ranges", []))
            new.db.commit()
        finally:
            new.close()
            old.close()
        for name in COPIED_FILES:
            if os.path.isfile(os.path.join(src_dir, name)):
                shutil.copyfile(os.path.join(src_dir, name), os.path.join(out_dir, name))
    return {
        "tables": out,
        "dropped_runs": dropped,
        "files": [n for n in COPIED_FILES if os.path.isfile(os.path.join(out_dir, n))],
    }


def _drop_incomplete(db: sqlite3.Connection, lost_requests: list) -> list[int]:
    """Runs that lost request rows (those between the readable rows around each lost range: a
    run's requests are stored together) and request rows of lost runs are removed, so a resume
    measures those runs again rather than keeping half of one."""
    runs: set[int] = set()
    for lo, hi in lost_requests:
        if lo == "all":
            runs |= {r[0] for r in db.execute("SELECT id FROM runs")}
            continue
        before = db.execute("SELECT run_id FROM requests WHERE id < ? ORDER BY id DESC LIMIT 1", (lo,)).fetchone()
        after = db.execute("SELECT run_id FROM requests WHERE id > ? ORDER BY id LIMIT 1", (hi,)).fetchone()
        first = before[0] if before else 0
        last = after[0] if after else 1 << 62
        runs |= {r[0] for r in db.execute("SELECT id FROM runs WHERE id BETWEEN ? AND ?", (first, last))}
    for rid in runs:
        for table, col in (("runs", "id"), ("requests", "run_id"), ("hars", "run_id")):
            db.execute(f"DELETE FROM {table} WHERE {col} = ?", (rid,))
    db.execute("DELETE FROM requests WHERE run_id NOT IN (SELECT id FROM runs)")
    db.execute("DELETE FROM hars WHERE run_id NOT IN (SELECT id FROM runs)")
    return sorted(runs)


def _copy(old: sqlite3.Connection, new: sqlite3.Connection, table: str) -> dict:
    key = ID.get(table, "id")
    try:
        cols = [r[1] for r in old.execute(f"PRAGMA table_info({table})")]
        newcols = {r[1] for r in new.execute(f"PRAGMA table_info({table})")}
    except sqlite3.DatabaseError:
        return {"kept": 0, "lost_ranges": [["all", "all"]]}
    cols = [c for c in cols if c in newcols]  # (an older database: fewer columns)
    sel = ", ".join([key] + cols)
    ins = f"INSERT OR REPLACE INTO {table} ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})"
    try:
        top = old.execute(f"SELECT max({key}) FROM {table}").fetchone()[0] or 0
    except sqlite3.DatabaseError:
        top = 1 << 40  # the right edge is damaged: search the whole range
    kept, lost = 0, []
    todo = [(lo, min(lo + BATCH - 1, top)) for lo in range(0, top + 1, BATCH)] if top < 1 << 40 else [(0, top)]
    while todo:
        lo, hi = todo.pop(0)
        try:
            rows = old.execute(f"SELECT {sel} FROM {table} WHERE {key} BETWEEN ? AND ?", (lo, hi)).fetchall()
        except sqlite3.DatabaseError:
            if lo == hi:
                _add_lost(lost, lo)
            else:
                mid = (lo + hi) // 2
                todo[:0] = [(lo, mid), (mid + 1, hi)]
            continue
        new.executemany(ins, [r[1:] for r in rows])
        kept += len(rows)
    return {"kept": kept, "lost_ranges": lost}


def _add_lost(lost: list, i: int) -> None:
    if lost and lost[-1][1] == i - 1:
        lost[-1][1] = i
    else:
        lost.append([i, i])
