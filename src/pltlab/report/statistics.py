"""From the results database to statistics rows: per page x configuration, TFO off vs on."""

import json
import os
import sqlite3

from pltlab.errors import PltError
from pltlab.experiments import results, stats
from pltlab.experiments.results import DB_NAME
from pltlab.protocols import NA
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
        # a database older than a column reads as migrated (results.past_value), as when resumed
        missing = {c: results.past_value(c) for c in results.RUN_COLUMNS if c not in names}
        runs = [{**missing, **dict(zip(names, r))} for r in cur]
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
    return k.words(v) if k else f"{column} {v}"


BASELINES = knobs.BASELINES


def show(col: str, v) -> str:
    """A knob's value in a results column as the report names it (``TFO on``, ``protocol h2``)."""
    if col == "tfo":
        return "TFO on" if v else "TFO off"
    return _fmt_dim(col, v)


def baseline(col: str, values: list):
    """The side a knob's other values are compared with: its BASELINES value, else its default,
    else the first value (sorted)."""
    want = BASELINES.get(col)
    if want in values:
        return want
    k = knobs.by_column(col)
    default = k.value if k else None
    return default if default in values else sorted(values, key=json.dumps)[0]


def by_column(by: str | None) -> str:
    """The results column of the knob to compare by (``--by``: any of its names; None: TFO)."""
    if by is None:
        return "tfo"
    k = knobs.axis(by)
    if k.name == "tfo":
        return "tfo"
    return k.column


def default_by(meta: dict) -> str:
    """A folder's comparison axis as its sweep recorded it (``compare``), else TFO (folders of
    before the axis was a knob: every one compared TFO off and on)."""
    return meta.get("compare") or "tfo"


def side_labels(col: str, base, alt) -> tuple[str, str]:
    """The two sides' short names: ``no TFO``/``TFO`` (the seeds' words), else each value's, the
    words both share said once (``protocol h1``, ``h2``)."""
    if col == "tfo":
        return "no TFO", "TFO"
    a, b = show(col, base), show(col, alt)
    wa, wb = a.split(" "), b.split(" ")
    if len(wa) > 1 and len(wb) > 1 and wa[:-1] == wb[:-1]:
        return wa[-1], wb[-1]
    return a, b


def value(run: dict, col: str):
    """A run's value in column ``col`` (TFO: 0 or 1)."""
    return int(bool(run.get("tfo"))) if col == "tfo" else run.get(col)


def analyse(runs: list[dict], by: str = "tfo") -> dict:
    """Per (page, configuration but ``by``): the baseline side's and the other side's summaries
    and the improvement (1 - mean(other) / mean(baseline)). ``by``: a results column, "tfo" or a
    knob's (statistics.by_column). A knob with more than two values gives one row per other value,
    each against the baseline (statistics.baseline). Sides: ``runs``/``plt`` [False] the baseline,
    [True] the other; ``base``/``alt`` their summaries; ``labels`` their names."""
    # runs of a kind that measures no PLT (flows) have none
    ok = [r for r in runs if r["status"] == "ok" and r["valid"] and r["plt_ms"] is not None]
    # (.get: a database older than a knob has no column for it)
    # (a knob n/a in some runs, of the other transport than theirs, is at its default in the others:
    # it tells no configurations apart, so runs over TCP and over QUIC pair)
    dims = [k for k in DIMS if k != by and not any(r.get(k) == NA for r in ok)]
    varying = [k for k in dims if len({json.dumps(r.get(k)) for r in runs if r["status"] == "ok"}) > 1]
    values = sorted({json.dumps(value(r, by)) for r in ok})
    if by == "tfo":  # (TFO off is the baseline even where a folder has TFO on only)
        values = sorted(set(values) | {"0"})
    base = json.dumps(baseline(by, [json.loads(v) for v in values])) if values else "0"
    # (TFO alone: TFO on is the other side, unmeasured, as every report of TFO off alone showed)
    others = [v for v in values if v != base] or (["1"] if by == "tfo" else [])
    many = len(others) > 1
    groups: dict[tuple, dict] = {}
    for r in ok:
        v = json.dumps(value(r, by))
        rest = r["config_key"] if by == "tfo" else (r[RTT], tuple(json.dumps(r.get(k)) for k in dims))
        for alt in [v] if v != base else others:
            alt_v = json.loads(alt)
            config = [_fmt_dim(k, r.get(k)) for k in varying]
            labels = side_labels(by, json.loads(base), alt_v)
            if many:
                config.append(f"{labels[1]} vs {labels[0]}")
            g = groups.setdefault(
                (r["page"], rest, alt),
                {
                    "page": r["page"],
                    "config_key": r["config_key"],
                    "rtt_ms": r[RTT],
                    "config": ", ".join(config),
                    "dims": {k: r.get(k) for k in dims},
                    "by": by,
                    "values": (json.loads(base), alt_v),
                    "labels": labels,
                    "plt": {False: [], True: []},
                    "runs": {False: [], True: []},
                },
            )
            if v == base:
                g["config_key"] = r["config_key"]  # (the baseline side's configuration)
            g["plt"][v != base].append(r["plt_ms"])
            g["runs"][v != base].append(r)
    rows = []
    for i, g in enumerate(sorted(groups.values(), key=lambda g: (g["page"], g["config"], g["rtt_ms"]))):
        seed = i * 7919
        g["base"] = stats.summary(g["plt"][False], seed)
        g["alt"] = stats.summary(g["plt"][True], seed + 2)
        imp = stats.improvement(g["plt"][True], g["plt"][False], seed + 4)
        g["improvement"], g["improvement_ci"] = imp["improvement"], imp["ci"]
        rows.append(g)
    failed = [r for r in runs if r["status"] == "failed"]
    invalid = [r for r in runs if r["status"] == "ok" and not r["valid"]]
    keys_ok = {r["run_key"] for r in runs if r["status"] == "ok"}
    b = json.loads(base)
    return {
        "rows": rows,
        "by": by,
        "baseline": b,
        "values": [b] + [json.loads(v) for v in others],
        # the two sides' names in headers (more than two values: "other" for the compared one)
        "labels": (side_labels(by, b, json.loads(others[0])) if len(others) == 1 else (show(by, b), "other")),
        "varying": varying,
        "n_runs": len(runs),
        "n_ok": len(ok),
        "failed": failed,
        "failed_final": [r for r in failed if r["run_key"] not in keys_ok],
        "invalid": invalid,
    }
