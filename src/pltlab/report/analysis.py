"""From the results database to statistics rows: per page x configuration, TFO off vs on."""

import json
import os
import sqlite3

from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.experiments.results import DB_NAME

# Configuration columns besides the RTT; the ones that vary name a row's configuration.
DIMS = ("rate_down_bps", "rate_up_bps", "loss", "queue", "icw", "cc", "client", "warm", "overrides")


def load_runs(out_dir: str) -> tuple[list[dict], dict]:
    path = os.path.join(out_dir, DB_NAME)
    if not os.path.isfile(path):
        raise PltError(f"{out_dir}: no {DB_NAME} here (not an experiment's output folder)")
    db = sqlite3.connect(path)
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
    db = sqlite3.connect(os.path.join(out_dir, DB_NAME))
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


def _fmt_dim(k: str, v) -> str:
    if k in ("rate_down_bps", "rate_up_bps"):
        name = "down" if k == "rate_down_bps" else "up"
        return f"{name} {'unlimited' if v is None else f'{v / 1e6:g} Mbit/s'}"
    if k == "loss":
        return f"loss {v * 100:g}%"
    if k == "icw":
        return f"initcwnd {v or 'default'}"
    if k == "warm":
        return "warm" if v else "cold"
    if k == "overrides":
        ov = json.loads(v) if isinstance(v, str) else v
        return "origin RTT " + (", ".join(f"{t}={us / 1000:g}ms" for t, us, _ in ov) if ov else "none")
    return f"{k} {v}"


def analyse(runs: list[dict]) -> dict:
    """Per (page, configuration): both TFO sides' summaries and the improvement."""
    ok = [r for r in runs if r["status"] == "ok" and r["valid"]]
    varying = [k for k in DIMS if len({json.dumps(r[k]) for r in runs if r["status"] == "ok"}) > 1]
    groups: dict[tuple, dict] = {}
    for r in ok:
        g = groups.setdefault((r["page"], r["config_key"]), {
            "page": r["page"], "config_key": r["config_key"], "rtt_ms": r["rtt_ms"],
            "config": ", ".join(_fmt_dim(k, r[k]) for k in varying),
            "dims": {k: r[k] for k in DIMS}, "plt": {False: [], True: []}, "runs": {False: [], True: []}})
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
    return {"rows": rows, "varying": varying, "n_runs": len(runs), "n_ok": len(ok),
            "failed": failed, "failed_final": [r for r in failed if r["run_key"] not in keys_ok],
            "invalid": invalid}
