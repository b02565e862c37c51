"""From the results database to statistics rows: per page x configuration, TFO off vs on."""

import json
import os
import sqlite3

from pltlab.errors import PltError
from pltlab.experiments import results, stats
from pltlab.experiments.results import DB_NAME
from pltlab.run import knobs

# Configuration columns besides the RTT (the point knobs' columns): the ones that vary name a
# row's configuration, in the words of their knob (knobs.Knob.describe).
RTT = knobs.KNOBS["rtt"].column
DIMS = tuple(k.column for k in knobs.point() if k.column and k.column != RTT)


def load_runs(out_dir: str) -> tuple[list[dict], dict]:
    path = os.path.join(out_dir, DB_NAME)
    db = results.connect(out_dir)  # (checked first: a damaged database is refused)
    try:
        cur = db.execute("SELECT * FROM runs ORDER BY id")
        names = [d[0] for d in cur.description]
        runs = [dict(zip(names, r)) for r in cur]
        meta = {k: json.loads(v) for k, v in db.execute("SELECT key, value FROM meta")}
    except sqlite3.DatabaseError as e:
        raise PltError(f"{path}: not a results database: {e}") from None
    finally:
        db.close()
    return runs, meta


def load_requests(out_dir: str, run_ids: list[int]) -> dict[int, list[dict]]:
    db = results.connect(out_dir)
    try:
        out: dict[int, list[dict]] = {i: [] for i in run_ids}
        q = f"SELECT * FROM requests WHERE run_id IN ({','.join('?' * len(run_ids))}) ORDER BY idx"
        cur = db.execute(q, run_ids)
        names = [d[0] for d in cur.description]
        for r in cur:
            d = dict(zip(names, r))
            out[d["run_id"]].append(d)
        return out
    finally:
        db.close()


def _fmt_dim(column: str, v) -> str:
    k = knobs.by_column(column)
    return k.describe(v) if k and k.describe else f"{column} {v}"


def analyse(runs: list[dict]) -> dict:
    """Per (page, configuration): both TFO sides' summaries and the improvement."""
    # runs of a kind that measures no PLT (flows) have none
    ok = [r for r in runs if r["status"] == "ok" and r["valid"] and r["plt_ms"] is not None]
    # (.get: a database older than a knob has no column for it)
    varying = [k for k in DIMS if len({json.dumps(r.get(k)) for r in runs if r["status"] == "ok"}) > 1]
    groups: dict[tuple, dict] = {}
    for r in ok:
        g = groups.setdefault(
            (r["page"], r["config_key"]),
            {
                "page": r["page"],
                "config_key": r["config_key"],
                "rtt_ms": r[RTT],
                "config": ", ".join(_fmt_dim(k, r.get(k)) for k in varying),
                "dims": {k: r.get(k) for k in DIMS},
                "plt": {False: [], True: []},
                "runs": {False: [], True: []},
            },
        )
        g["plt"][bool(r["tfo"])].append(r["plt_ms"])
        g["runs"][bool(r["tfo"])].append(r)
    rows = []
    for i, g in enumerate(sorted(groups.values(), key=lambda g: (g["page"], g["config"], g["rtt_ms"]))):
        seed = i * 7919
        g["notfo"] = stats.summary(g["plt"][False], seed)
        g["tfo"] = stats.summary(g["plt"][True], seed + 2)
        imp = stats.improvement(g["plt"][True], g["plt"][False], seed + 4)
        g["improvement"], g["improvement_ci"] = imp["improvement"], imp["ci"]
        rows.append(g)
    failed = [r for r in runs if r["status"] == "failed"]
    invalid = [r for r in runs if r["status"] == "ok" and not r["valid"]]
    keys_ok = {r["run_key"] for r in runs if r["status"] == "ok"}
    return {
        "rows": rows,
        "varying": varying,
        "n_runs": len(runs),
        "n_ok": len(ok),
        "failed": failed,
        "failed_final": [r for r in failed if r["run_key"] not in keys_ok],
        "invalid": invalid,
    }
