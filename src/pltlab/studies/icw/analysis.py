"""From the parts' results databases to the study's results: the points of Fig. 19/20 (geometric
means of the trace PLTs with bootstrap CIs), the transfer-time samples of Fig. 18 (from the
request rows), the fairness rates and ratio, and the checks against the published shapes.
Statistics: pltlab.experiments.stats only."""

from __future__ import annotations

import json
import math
import os

import numpy as np

from pltlab.experiments import stats
from pltlab.experiments.results import DB_NAME, Results
from pltlab.studies.icw import parts

FIGS = {"rtt": "plt_vs_rtt", "loss": "plt_vs_loss", "transfer": "transfer_rtts", "fairness": "fairness"}


def _r(x, nd: int = 3):
    return None if x is None else round(x, nd)


def _runs(folder: str) -> tuple[list[dict], Results | None]:
    if not os.path.isfile(os.path.join(folder, DB_NAME)):
        return [], None
    res = Results(folder)
    return res.rows("runs"), res


def _final(runs: list[dict]) -> dict[str, dict]:
    """run key -> its ok attempt, else its last attempt."""
    out: dict[str, dict] = {}
    for r in sorted(runs, key=lambda r: r["attempt"]):
        if out.get(r["run_key"], {}).get("status") != "ok":
            out[r["run_key"]] = r
    return out


def _good(r: dict | None) -> bool:
    return r is not None and r["status"] == "ok" and bool(r["valid"])


def _why(r: dict | None) -> str:
    if r is None:
        return "not run"
    return r.get("failure_reason") or r.get("invalid_reason") or "?"


def _by_config(exp, runs: list[dict]) -> list[tuple[dict, list[dict]]]:
    """(point, {(page, rep): final attempt}) per configuration, in the experiment's order."""
    final = _final(runs)
    out = []
    for c, k in enumerate(exp.configs):
        key = k.key()
        mine = [r for r in final.values() if r["config_key"] == key]
        out.append((exp.extras["points"][c], mine))
    return out


def _point(pt: dict, mine: list[dict], exp, seed: int) -> dict:
    """One point of Fig. 19/20 from its loads' final attempts."""
    got = {r["rep"]: r for r in mine}
    ok = [got[k] for k in sorted(got) if _good(got[k])]
    tr = [r["plt_ms"] for r in ok]
    met = [json.loads(r["metrics"]) for r in ok]
    ld = [m["loader_plt_ms"] for m in met]
    s = stats.geo_summary(tr, seed=seed)
    failed = [
        {"rep": rep, "seed": exp.seed + rep - 1, "error": _why(got.get(rep))}
        for rep in range(1, exp.repetitions + 1)
        if not _good(got.get(rep))
    ]
    return {
        **pt,
        "plt_ms": _r(s["geomean"]),
        "ci": [_r(x) for x in s["ci"]],
        "n": s["n"],
        "loader_plt_ms": _r(stats.geomean(ld)) if ld else None,
        "max_abs_diff_ms": _r(max(abs(a - b) for a, b in zip(tr, ld))) if ld else None,
        "plt_runs_ms": tr,
        "loader_runs_ms": ld,
        "trace_connections": [m["connections"] for m in met],
        "failed_loads": failed,
    }


def transfer_samples(exp, runs: list[dict], res: Results) -> tuple[dict, list]:
    """{icw: [transfer time in RTTs, ...]} over every object of every good load (request sent ->
    last byte received, / RTT; 404s left out), and the loads that failed."""
    samples: dict[int, list[float]] = {}
    failed = []
    good_ids = {}
    for pt, mine in _by_config(exp, runs):
        samples.setdefault(pt["icw"], [])
        got = {(r["page"], r["rep"]): r for r in mine}
        for e in exp.pages:
            for rep in range(1, exp.repetitions + 1):
                r = got.get((e.label, rep))
                if _good(r):
                    good_ids[r["id"]] = pt
                else:
                    failed.append({"fig": "transfer_rtts", **pt, "page": e.label, "reps": rep})
    if good_ids:
        q = (
            f"SELECT run_id, request_ms, last_byte_ms, status FROM requests WHERE run_id IN "
            f"({','.join('?' * len(good_ids))}) ORDER BY run_id, idx"
        )
        for rid, req, last, status in res.db.execute(q, list(good_ids)):
            if req is None or last is None or status == 404:
                continue
            pt = good_ids[rid]
            samples[pt["icw"]].append((last - req) / pt["rtt_ms"])
    return samples, failed


def _fair(pt: dict, r: dict, seed: int, rate: str) -> dict:
    m = json.loads(r["metrics"])
    dl = np.asarray([[f[1], f[0]] for f in m["downloads"]], dtype=float)  # bytes, ms
    iv = m["long_intervals_kbyte_s"]
    long_kbs = m["long_bytes"] / m["long_seconds"] / 1000 if m["long_seconds"] else 0.0
    short_kbs = dl[:, 0].sum() / dl[:, 1].sum()  # time-weighted: all bytes / all download time
    ratio = short_kbs / long_kbs if long_kbs > 0 else float("inf")

    # CI of the ratio: resample the downloads (sum bytes / sum ms: rows resampled whole, as their
    # indices) and the long flow's 1-s interval rates (their mean; probe bulk has none: its rate
    # is taken as fixed)
    def rows(i):
        return dl[np.asarray(i, dtype=int)]

    if long_kbs <= 0 and not iv:
        ci = (math.inf, math.inf)
    elif iv:
        ci = stats.bca(
            lambda i, v, axis=-1: rows(i)[..., 0].sum(-1) / rows(i)[..., 1].sum(-1) / v.mean(axis=axis),
            np.arange(len(dl)),
            iv,
            seed=seed,
        )
    else:
        ci = stats.bca(
            lambda i, axis=-1: rows(i)[..., 0].sum(-1) / rows(i)[..., 1].sum(-1) / long_kbs,
            np.arange(len(dl)),
            seed=seed,
        )
    if ci is None:
        ci = (math.nan, math.nan)
    return {
        "icw": pt["icw"],
        "seconds": m["seconds"],
        "rtt_ms": pt["rtt_ms"],
        "loss": pt["loss"],
        "loss_up": m["loss_up"],
        "rate": rate,
        "download_bytes": m["download_bytes"],
        "long_flow": m["long_flow"],
        "long_kbyte_s": round(long_kbs, 3),
        "short_kbyte_s": round(float(short_kbs), 3),
        "ratio": round(float(ratio), 3),
        "ratio_ci": [round(x, 3) for x in ci],
        "short_downloads": len(dl),
        "short_median_kbyte_s": round(stats.quantile(dl[:, 0] / dl[:, 1], 0.5), 3),
        "long_bytes": m["long_bytes"],
        "long_retransmits": m["long_retransmits"],
        "downlink_dropped": m["downlink_dropped"],
    }


def results(p, out_dir: str, explainer=None) -> dict:
    """The study's results from the databases of the parts in ``p.parts`` under ``out_dir``
    (``explainer``: the report's pltlab explain, not asked here)."""
    res: dict = {"plt_vs_rtt": [], "plt_vs_loss": [], "transfer_rtts": [], "fairness": []}
    failed: list[dict] = []
    samples = None
    for sub, exp in parts.experiments(p):
        folder = os.path.join(out_dir, sub)
        runs, db = _runs(folder)
        try:
            if sub in ("rtt", "loss"):
                pts = [_point(pt, mine, exp, p.seed) for pt, mine in _by_config(exp, runs)]
                res[FIGS[sub]] = pts
                failed += [
                    {"fig": FIGS[sub], **{k: pt[k] for k in ("icw", "rtt_ms", "loss") if k in pt}, "reps": f["rep"]}
                    for pt in pts
                    for f in pt["failed_loads"]
                ]
            elif sub == "transfer":
                samples, lost = transfer_samples(exp, runs, db) if db else ({}, [])
                failed += lost
                res["transfer_rtts"] = [
                    {
                        "icw": i,
                        "n": len(xs),
                        "p50": _r(stats.quantile(xs, 0.5)),
                        "p80": _r(stats.quantile(xs, 0.8)),
                        "p95": _r(stats.quantile(xs, 0.95)),
                    }
                    for i, xs in samples.items()
                ]
            else:
                for pt, mine in _by_config(exp, runs):
                    r = mine[0] if mine else None
                    if _good(r):
                        res["fairness"].append(_fair(pt, r, p.seed, p.fairness_rate))
                    else:
                        failed.append({"fig": "fairness", "icw": pt["icw"], "reps": 1, "error": _why(r)})
        finally:
            if db is not None:
                db.close()
    res["failed"] = failed
    res["checks"] = checks(res)
    if samples is not None:
        res["transfer_samples"] = {str(k): v for k, v in samples.items()}
    return res


# ---- checks against the published shapes ----------------------------------------------------
def checks(res: dict) -> dict:
    out = {}
    lost = res.get("failed")
    if lost is None:  # results of points only (tests): their failed loads
        lost = [
            {"fig": fig, **{k: p[k] for k in ("icw", "rtt_ms", "loss") if k in p}, "reps": f["rep"]}
            for fig in ("plt_vs_rtt", "plt_vs_loss")
            for p in res.get(fig) or []
            for f in p.get("failed_loads") or []
        ]
    out["all_loads_done"] = {"ok": not lost, "failed": lost}
    rtt_pts = [p for p in res.get("plt_vs_rtt") or [] if p.get("n")]
    if rtt_pts:
        by = {(p["icw"], p["rtt_ms"]): p for p in rtt_pts}
        icws = sorted({p["icw"] for p in rtt_pts})
        rtts = sorted({p["rtt_ms"] for p in rtt_pts})
        bad = []
        for r in rtts:
            here = [i for i in icws if (i, r) in by]
            for a, b in zip(here, here[1:]):
                if by[(b, r)]["ci"][0] > by[(a, r)]["ci"][1]:
                    bad.append(
                        f"{r} ms: ICW {b} ({by[(b, r)]['plt_ms']:.0f} ms) above ICW {a} "
                        f"({by[(a, r)]['plt_ms']:.0f} ms) beyond the CIs"
                    )
        out["fig19_monotone"] = {"ok": not bad, "violations": bad}
        lo_i, hi_i = (3, 16) if {3, 16} <= set(icws) else (icws[0], icws[-1])
        sav = []
        for r in rtts:
            if (lo_i, r) in by and (hi_i, r) in by:
                a, b = by[(lo_i, r)], by[(hi_i, r)]
                tol = sum((p["ci"][1] - p["ci"][0]) / 2 for p in (a, b))
                sav.append((r, a["plt_ms"] - b["plt_ms"], tol))
        grow = all(s2 >= s1 - (t1 + t2) for (_, s1, t1), (_, s2, t2) in zip(sav, sav[1:]))
        out["fig19_savings_grow"] = {
            "ok": grow and len(icws) > 1,
            "from_icw": lo_i,
            "to_icw": hi_i,
            "savings_ms": {str(r): round(s, 1) for r, s, _ in sav},
        }
    loss_pts = [p for p in res.get("plt_vs_loss") or [] if p.get("n")]
    if loss_pts:
        bad = []
        for icw in sorted({p["icw"] for p in loss_pts}):
            pts = sorted((p for p in loss_pts if p["icw"] == icw), key=lambda p: p["loss"])
            if len(pts) > 1 and not pts[-1]["plt_ms"] > pts[0]["plt_ms"]:
                bad.append(f"ICW {icw}: PLT at {pts[-1]['loss']:.0%} not above PLT at {pts[0]['loss']:.0%}")
            for a, b in zip(pts, pts[1:]):
                if b["ci"][1] < a["ci"][0]:
                    bad.append(f"ICW {icw}: PLT falls from {a['loss']:.0%} to {b['loss']:.0%} beyond the CIs")
        out["fig20_rising"] = {"ok": not bad, "violations": bad}
    fair = res.get("fairness") or []
    if fair:
        out["fairness"] = {
            f"icw{f['icw']}": {
                "ratio": f["ratio"],
                "ci": f["ratio_ci"],
                "short_exceeds_long": f["ratio"] > 1,
                "significant": f["ratio_ci"][0] > 1,
            }
            for f in fair
        }
        out["fairness"]["ok"] = (
            all(f["ratio"] > 1 for f in fair if f["icw"] >= 16) if any(f["icw"] >= 16 for f in fair) else None
        )
    lossless = rtt_pts + [p for p in loss_pts if p["loss"] == 0]
    if lossless:
        out["trace_vs_loader"] = {
            "ok": all(p["max_abs_diff_ms"] <= p["rtt_ms"] for p in lossless),
            "max_abs_diff_ms": max(p["max_abs_diff_ms"] for p in lossless),
        }
    return out
