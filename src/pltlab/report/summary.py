"""What `pltlab report --json` and `pltlab sweep --json` print on stdout: one JSON object, the
report's tables as data (numbers, not the formatted text of table.md), its notes and the paths
of everything written."""

from __future__ import annotations

import os

from pltlab.experiments import stats
from pltlab.report import effects, tables


def _shown(ci, *ns: int) -> list:
    """An interval as the report shows it: none ([None, None]) where a side has fewer than MIN_N
    values (stats.shown: the rule of the tables and the console alike)."""
    return list(ci) if stats.shown(*ns) else [None, None]


def _side(s: dict) -> dict:
    return {k: s[k] for k in ("n", "mean", "median", "geomean")} | {"ci95": _shown(s["ci"], s["n"])}


def plt_rows(analysis: dict) -> list[dict]:
    """One row per page and configuration: both sides of the compared knob (``by``: its results
    column; ``base``: the baseline's, ``alt``: the other's, each with its ``value``; compared by
    TFO also as ``tfo_off``/``tfo_on``) and the improvement (a fraction)."""
    out = []
    for g in analysis["rows"]:
        row = {
            "page": g["page"],
            "configuration": g["config"],
            "config_key": g["config_key"],
            "rtt_ms": g["rtt_ms"],
            "knobs": dict(g["dims"]),
            "by": g["by"],
            "base": _side(g["base"]) | {"value": g["values"][0]},
            "alt": _side(g["alt"]) | {"value": g["values"][1]},
            "improvement": g["improvement"],
            "improvement_ci95": _shown(g["improvement_ci"], g["base"]["n"], g["alt"]["n"]),
        }
        if g["by"] == "tfo":
            row.update(tfo_off=_side(g["base"]), tfo_on=_side(g["alt"]))
        out.append(row)
    return out


def report(out_dir: str, built: dict) -> dict:
    """A report (pltlab.report.build's result) as data."""
    a = built["analysis"]
    return {
        "out_dir": os.path.abspath(out_dir),
        "name": built.get("meta", {}).get("name"),
        "by": a["by"],
        "runs": {
            "total": a["n_runs"],
            "valid": a["n_ok"],
            "invalid": len(a["invalid"]),
            "failed_attempts": len(a["failed"]),
            "failed": len(a["failed_final"]),
        },
        "plt": plt_rows(a),
        "effects": [
            {k: v for k, v in e.items() if _plain(v)}
            | {"ci": _shown(e["ci"], e["n"]), "rtts_ci": _shown(e["rtts_ci"], e["n"])}
            for e in built.get("effects") or []
        ],
        "interval": stats.INTERVAL,  # what every interval here is; none where a side has n < min_n_for_ci
        "min_n_for_ci": stats.MIN_N,
        "tables": {  # as table.md, stats.md and effects.md print them
            "plt": {"headers": tables.seed_headers(a), "rows": built["seeds"]},
            "stats": {"headers": tables.stats_headers(a), "rows": built["stats"]},
            "effects": {"headers": list(effects.HEADERS), "rows": effects.table_rows(built.get("effects") or [])},
        },
        "notes": [{"text": text, "warning": bool(bad)} for text, bad in built.get("notes", [])],
        "files": {k: os.path.abspath(v) for k, v in built.get("files", {}).items()},
        "figures": [os.path.abspath(f) for f in built.get("figures", [])],
    }


def study(out_dir: str, res: dict) -> dict:
    """A study folder's report (pltlab.report.study_report's results) with its files."""
    files = {n: os.path.join(os.path.abspath(out_dir), n) for n in ("results.json", "tables.md", "report.html")}
    return {"out_dir": os.path.abspath(out_dir), "study": res, "files": files}


def sweep(out_dir: str, stats: dict, rep: dict | None) -> dict:
    """A sweep's counts (this session's runs), its output paths and, if built, its report."""
    return {
        "out_dir": os.path.abspath(out_dir),
        "runs": {"done": stats["runs"], "failed": stats["failed"], "invalid": stats["invalid"]},
        "wall_s": round(stats["wall_s"], 3),
        "efficiency": round(stats["efficiency"], 4),
        "files": {
            "results.sqlite": os.path.join(os.path.abspath(out_dir), "results.sqlite"),
            **{os.path.basename(p): os.path.abspath(p) for p in stats.get("exported", [])},
        },
        "report": rep,
    }


def _plain(v) -> bool:
    return v is None or isinstance(v, (str, int, float, bool, list, dict))
