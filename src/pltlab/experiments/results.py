"""The results database of one experiment (`results.sqlite` in its output folder).

One row per run attempt (a stable run key + attempt number; unique together), one row per request
of a run. A database of an earlier version gains the columns it lacks when opened (NULL in its
rows), so old results folders resume and report. Every run is committed with its requests in one transaction, so a killed sweep loses at
most the run in progress and never half of one.
"""

import contextlib
import gzip
import json
import os
import sqlite3
import time
from collections.abc import Iterator

from pltlab import files, protocols
from pltlab.errors import PltError
from pltlab.net.wan import TCP_SYSCTLS
from pltlab.run import knobs

DB_NAME = "results.sqlite"
# the results columns of the knobs of QUIC alone (pltlab.protocols.TRANSPORT_KNOBS)
_QUIC_COLUMNS = {knobs.KNOBS[n].column for n in protocols.TRANSPORT_KNOBS["udp"] if knobs.KNOBS[n].column}
# What the runs of a database older than a knob ran with, where known: the TCP sysctl knobs were
# this kernel's defaults in the fresh namespaces, loss was random (burst 1), HTTP/1.1 kept alive
_PAST = {
    **{knobs.KNOBS[n].column: knobs.KNOBS[n].value for n in TCP_SYSCTLS},
    "loss_burst": 1.0,
    "keepalive": "on",
}


def past_value(column: str):
    """What the runs of a database older than a runs column ran with, where known (None: unknown):
    the value a column added later takes in their rows, whether the database is migrated or read."""
    if column in _QUIC_COLUMNS:
        return protocols.NA  # every run before HTTP/3 was over TCP
    return _PAST.get(column)


RUN_COLUMNS = {
    "run_key": "TEXT NOT NULL",
    "attempt": "INTEGER NOT NULL",
    "status": "TEXT NOT NULL",  # ok|failed
    "seq": "INTEGER",
    "page": "TEXT",
    "page_id": "TEXT",
    "page_url": "TEXT",
    "objects": "INTEGER",
    "page_bytes": "INTEGER",
    "config_key": "TEXT",
    # the configuration: one column per knob that has one (pltlab.run.knobs; RunConfig.columns())
    **knobs.columns(),
    "tfo": "INTEGER",
    "rep": "INTEGER",
    "plt_ms": "REAL",
    "network_plt_ms": "REAL",
    "tail_ms": "REAL",
    "valid": "INTEGER",
    "invalid_reason": "TEXT",
    "failure_reason": "TEXT",
    "not_found": "INTEGER",
    "tfo_active": "INTEGER",
    "tfo_passive": "INTEGER",
    "tfo_counters": "TEXT",
    # the replay server's TLS handshakes during the load: full, resumed, with early data accepted
    "tls_full": "INTEGER",
    "tls_resumed": "INTEGER",
    "tls_early_data": "INTEGER",
    # the same, of the connections that carried requests (a browser's spare connections left out)
    "tls_full_used": "INTEGER",
    "tls_resumed_used": "INTEGER",
    "tls_early_used": "INTEGER",
    # the same of QUIC's handshakes (HTTP/3), and the largest client Initial flight (its
    # ClientHello's size over QUIC); NULL: no address served QUIC
    "quic_full": "INTEGER",
    "quic_resumed": "INTEGER",
    "quic_early_data": "INTEGER",
    "quic_full_used": "INTEGER",
    "quic_resumed_used": "INTEGER",
    "quic_early_used": "INTEGER",
    "quic_handshake_errors": "INTEGER",
    "quic_initial_bytes_max": "INTEGER",
    "runner_id": "TEXT",
    "lateness_p50_us": "REAL",
    "lateness_p99_us": "REAL",
    "lateness_max_us": "REAL",
    # times the load was re-run because the link emulator was late (pltlab.net.lateness)
    "late_reruns": "INTEGER",
    # the link emulator's precision aids asked for and refused, comma-separated ("idle_poll,sched_fifo";
    # "": every aid asked for applied; NULL: not known: a failed run, an older folder)
    "link_aids_missing": "TEXT",
    # what a measurement kind other than a plain page load measured (JSON; pltlab.run.kinds)
    "metrics": "TEXT",
    "started_at": "REAL",
    "wall_ms": "REAL",
    "pltlab_version": "TEXT",
    "dp_version": "TEXT",
    "kernel": "TEXT",
    "browser": "TEXT",
    # the machine that ran the load (JSON: host, kernel, CPU model, versions) when a cluster ran
    # the sweep (pltlab.cluster); NULL: this machine (environment in the meta table)
    "node": "TEXT",
}
REQUEST_COLUMNS = {
    "run_id": "INTEGER NOT NULL",
    "idx": "INTEGER",
    "url": "TEXT",
    "host": "TEXT",
    "conn_id": "INTEGER",
    "new_conn": "INTEGER",
    "tfo": "INTEGER",
    "ready_ms": "REAL",
    "connect_start_ms": "REAL",
    "connect_end_ms": "REAL",
    "tls_end_ms": "REAL",
    "request_ms": "REAL",
    "start_ms": "REAL",
    "first_byte_ms": "REAL",
    "last_byte_ms": "REAL",
    "bytes": "INTEGER",
    "header_bytes": "INTEGER",
    "status": "INTEGER",
    "error": "TEXT",
    # everything received for the response (heads + body as on the wire), the body decoded, its
    # Content-Encoding ("" identity) and the protocol ("http/1.1", "h2", ...); NULL: not reported
    "transfer_bytes": "INTEGER",
    "body_bytes": "INTEGER",
    "encoding": "TEXT",
    "protocol": "TEXT",
    # a connection's first request: its TLS handshake (full/resumed) and early data (accepted/rejected)
    "tls_handshake": "TEXT",
    "early_data": "TEXT",
    # the load's graph (pltlab.explain): when a scheduler's priority limits let it go (built-in
    # loader), the request it waited for (its initiator's idx), the further ones (JSON list), whether
    # the initiator's first byte sufficed, and the compute delay between them and ready_ms
    "released_ms": "REAL",
    "tls_start_ms": "REAL",  # Chromium: sslStart (its connect_end_ms includes TLS)
    "parent": "INTEGER",
    "after": "TEXT",
    "at_first_byte": "INTEGER",
    "delay_ms": "REAL",
}


class DiskFull(PltError):
    """The results database could not be written: its file system is full. SQLite rolled the
    transaction back, so the database holds every earlier run and nothing of this one."""


# Databases up to this size get SQLite's full integrity check (indexes against tables too); larger
# ones its quick check (every page and record, not the indexes): on a 172 MB database (30,000
# runs) 1.0-1.2 s vs 1.4-2.4 s (docs/robustness.md "Results databases").
FULL_CHECK_BYTES = 64 << 20
_checked: dict[str, tuple] = {}  # path -> (size, mtime) of the files when last found sound


def check(path: str) -> None:
    """A PltError unless the database at ``path`` passes SQLite's integrity check (once per
    process while the file and its write-ahead log are unchanged)."""
    stamp = tuple((st.st_size, st.st_mtime_ns) if st else None for st in (_stat(path), _stat(path + "-wal")))
    if _checked.get(path) == stamp:
        return
    how = "integrity_check" if (stamp[0] or (0,))[0] <= FULL_CHECK_BYTES else "quick_check"
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            found = [r[0] for r in db.execute(f"PRAGMA {how}(5)")]
        finally:
            db.close()
    except sqlite3.DatabaseError as e:  # damaged beyond what the check itself can read, or no database
        if getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_NOTADB:
            raise PltError(f"{path}: not a results database (SQLite: {e}); nothing was read from it") from None
        raise PltError(f"{path}: the results database is damaged (SQLite: {e}); {salvage_hint(path)}") from None
    if found != ["ok"]:
        raise PltError(f"{path}: the results database is damaged (SQLite {how}: {found[0]}); {salvage_hint(path)}")
    _checked[path] = stamp


def salvage_hint(path: str) -> str:
    folder = os.path.dirname(path) or "."
    return f"nothing was read from it; copy what is readable into a new folder: pltlab salvage {folder} -o NEW_FOLDER"


def _stat(path: str):
    try:
        return os.stat(path)
    except OSError:
        return None


def connect(out_dir: str) -> sqlite3.Connection:
    """A read-only connection to a results folder's database, checked first (``check``); a
    PltError when there is none or it is damaged."""
    path = os.path.join(out_dir, DB_NAME)
    if not os.path.isfile(path):
        raise PltError(f"{out_dir}: no {DB_NAME} in this folder (not an experiment's output folder)")
    check(path)
    return sqlite3.connect(f"file:{path}?mode=ro", uri=True)


def is_disk_full(e: BaseException) -> bool:
    return isinstance(e, sqlite3.OperationalError) and getattr(e, "sqlite_errorcode", None) == sqlite3.SQLITE_FULL


class Results:
    def __init__(self, out_dir: str, check_existing: bool = True):
        """Open (or create) ``out_dir``'s database; an existing one is checked first (``check``)."""
        self.path = os.path.join(out_dir, DB_NAME)
        if check_existing and os.path.isfile(self.path) and os.path.getsize(self.path):
            check(self.path)
        with self._writing("the database's tables"):
            self._open()

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """A write that a full disk turns into one line (DiskFull), the database intact."""
        try:
            yield
        except sqlite3.OperationalError as e:
            if not is_disk_full(e):
                raise
            raise DiskFull(
                f"{self.path}: disk full: could not store {what}; the database is intact (earlier runs kept, "
                f"nothing of this one written): free space on that file system, then continue with --resume"
            ) from None

    def _open(self) -> None:
        self.db = sqlite3.connect(self.path, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")  # commits survive SIGKILL; readers never block
        self.db.execute("PRAGMA synchronous=NORMAL")
        # rows are appended, never re-read during a sweep: a small page cache keeps a long sweep's
        # memory flat (the default 2 MB fills over its first ~3,000 runs)
        self.db.execute("PRAGMA cache_size=-256")
        cols = ", ".join(f"{k} {v}" for k, v in RUN_COLUMNS.items())
        self.db.executescript(f"""
            CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
            CREATE TABLE IF NOT EXISTS runs (id INTEGER PRIMARY KEY, {cols}, UNIQUE(run_key, attempt));
            CREATE TABLE IF NOT EXISTS requests (id INTEGER PRIMARY KEY,
                {", ".join(f"{k} {v}" for k, v in REQUEST_COLUMNS.items())});
            CREATE INDEX IF NOT EXISTS requests_run ON requests(run_id);
            CREATE TABLE IF NOT EXISTS runners (run_id TEXT PRIMARY KEY, opened REAL, closed REAL);
            CREATE TABLE IF NOT EXISTS hars (run_id INTEGER PRIMARY KEY, har BLOB);
        """)
        # a database of an earlier version (resumed): add the columns it lacks (past_value)
        for table, want in (("runs", RUN_COLUMNS), ("requests", REQUEST_COLUMNS)):
            have = {r[1] for r in self.db.execute(f"PRAGMA table_info({table})")}
            for k, v in want.items():
                if k not in have:
                    v0 = past_value(k) if table == "runs" else None
                    dflt = "" if v0 is None else f" DEFAULT '{v0}'" if isinstance(v0, str) else f" DEFAULT {v0!r}"
                    self.db.execute(f"ALTER TABLE {table} ADD COLUMN {k} {v.replace(' NOT NULL', '')}{dflt}")
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    # ---- meta ------------------------------------------------------------------------
    def meta(self) -> dict:
        return {k: json.loads(v) for k, v in self.db.execute("SELECT key, value FROM meta")}

    def set_meta(self, **values) -> None:
        with self._writing("the experiment's description"), self.db:
            self.db.executemany(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)", [(k, json.dumps(v)) for k, v in values.items()]
            )

    # ---- runs ------------------------------------------------------------------------
    def attempts(self) -> dict[str, list[str]]:
        """run key -> statuses of its attempts so far."""
        out: dict[str, list[str]] = {}
        for key, status in self.db.execute("SELECT run_key, status FROM runs ORDER BY attempt"):
            out.setdefault(key, []).append(status)
        return out

    def count(self) -> int:
        return self.db.execute("SELECT COUNT(*) FROM runs").fetchone()[0]

    def add_run(self, row: dict, requests: list[dict], har: dict | None = None) -> int:
        """Insert one run attempt and its requests (and the load's HAR, pltlab.run.loadhar: gzip'd
        JSON in table `hars`) atomically; returns the run id."""
        cols = [c for c in RUN_COLUMNS if c in row]
        what = f"run {row.get('page')} rep {row.get('rep')} (attempt {row.get('attempt')})"
        with self._writing(what), self.db:
            cur = self.db.execute(
                f"INSERT INTO runs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [_sql(row[c]) for c in cols],
            )
            rid = cur.lastrowid
            rcols = [c for c in REQUEST_COLUMNS if c != "run_id"]
            self.db.executemany(
                f"INSERT INTO requests (run_id, {', '.join(rcols)}) VALUES (?{', ?' * len(rcols)})",
                [[rid] + [_sql(_req_value(r, c)) for c in rcols] for r in requests],
            )
            if har is not None:
                blob = gzip.compress(json.dumps(har, separators=(",", ":")).encode(), compresslevel=6, mtime=0)
                self.db.execute("INSERT INTO hars (run_id, har) VALUES (?, ?)", (rid, blob))
        return rid

    def load_har(self, run_id: int) -> dict | None:
        """The HAR stored with run ``run_id``, or None (none stored: an older folder, a failed run,
        a measurement kind without requests)."""
        got = self.db.execute("SELECT har FROM hars WHERE run_id = ?", (run_id,)).fetchone()
        return json.loads(gzip.decompress(got[0])) if got and got[0] is not None else None

    def set_lateness(self, runner_id: str, stats: dict | None) -> None:
        """The emulator's lateness (downlink) over a whole runner, known at its teardown: for its
        runs that have no per-load figures (the emulator could not be asked during the load)."""
        lat = ((stats or {}).get("downlink") or {}).get("lateness_us") or {}
        if not lat:
            return
        with self._writing("the emulator's lateness"), self.db:
            self.db.execute(
                "UPDATE runs SET lateness_p50_us=?, lateness_p99_us=?, lateness_max_us=? "
                "WHERE runner_id=? AND lateness_p99_us IS NULL",
                (lat.get("p50"), lat.get("p99"), lat.get("max"), runner_id),
            )

    def runner_opened(self, run_id: str) -> None:
        """Recorded before the runner's namespaces exist, so a resume can remove what a kill left."""
        with self._writing("a runner's start"), self.db:
            self.db.execute("INSERT OR REPLACE INTO runners VALUES (?, ?, NULL)", (run_id, time.time()))

    def runner_closed(self, run_id: str) -> None:
        with self._writing("a runner's end"), self.db:
            self.db.execute("UPDATE runners SET closed=? WHERE run_id=?", (time.time(), run_id))

    def open_runners(self) -> list[str]:
        return [r[0] for r in self.db.execute("SELECT run_id FROM runners WHERE closed IS NULL")]

    def rows(self, table: str = "runs") -> list[dict]:
        cur = self.db.execute(f"SELECT * FROM {table} ORDER BY id")
        names = [d[0] for d in cur.description]
        return [dict(zip(names, r)) for r in cur]


def _req_value(r: dict, col: str):
    return r.get("index") if col == "idx" else r.get(col)


def _sql(v):
    if isinstance(v, bool):
        return int(v)
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    return v


def export(out_dir: str) -> list[str]:
    """CSV and Parquet of both tables next to the database (each written to .tmp, then renamed)."""
    import pandas as pd  # noqa: PLC0415 (heavy: loaded only to export)

    db = sqlite3.connect(os.path.join(out_dir, DB_NAME))
    written = []
    try:
        for table in ("runs", "requests"):
            df = pd.read_sql_query(f"SELECT * FROM {table} ORDER BY id", db)
            for c in df.columns:  # a knob's numbers beside n/a (pltlab.protocols.NA): text, for Parquet
                if df[c].dtype == object and len({type(v) for v in df[c].dropna()}) > 1:
                    df[c] = df[c].map(lambda v: v if v is None or isinstance(v, str) else str(v))
            for ext in ("csv", "parquet"):
                path = os.path.join(out_dir, f"{table}.{ext}")
                with files.replaced(path) as tmp:
                    if ext == "csv":
                        df.to_csv(tmp, index=False)
                    else:
                        df.to_parquet(tmp, index=False)
                written.append(path)
    finally:
        db.close()
    return written
