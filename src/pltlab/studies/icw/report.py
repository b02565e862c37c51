"""`pltlab reproduce icw`: runs the study, writes tables, figures and results.json, checks the
shapes the paper reports, and returns the JSON object of the issue."""

from __future__ import annotations

import json
import os
import time

from pltlab.studies.icw import config, study
from pltlab.studies.icw.page import YAHOO_OBJECTS, yahoo_page

PARTS = config.PARTS


def _kb(n: int) -> str:
    """The downloads' size as the study writes it: 49152 -> "48 KB"."""
    return f"{n // 1024} KB" if n % 1024 == 0 else f"{n} B"


# ---- checks ------------------------------------------------------------------------------
def checks(res: dict) -> dict:
    out = {}
    lost = [{"fig": fig, **{k: p[k] for k in ("icw", "rtt_ms", "loss") if k in p}, "reps": f["rep"]}
            for fig in ("plt_vs_rtt", "plt_vs_loss") for p in res.get(fig) or []
            for f in p.get("failed_loads") or []]
    out["all_loads_done"] = {"ok": not lost, "failed": lost}
    rtt_pts = res.get("plt_vs_rtt") or []
    if rtt_pts:
        by = {(p["icw"], p["rtt_ms"]): p for p in rtt_pts}
        icws = sorted({p["icw"] for p in rtt_pts})
        rtts = sorted({p["rtt_ms"] for p in rtt_pts})
        bad = []
        for r in rtts:
            for a, b in zip(icws, icws[1:]):
                if by[(b, r)]["ci"][0] > by[(a, r)]["ci"][1]:
                    bad.append(f"{r} ms: ICW {b} ({by[(b, r)]['plt_ms']:.0f} ms) above ICW {a} "
                               f"({by[(a, r)]['plt_ms']:.0f} ms) beyond the CIs")
        out["fig19_monotone"] = {"ok": not bad, "violations": bad}
        lo_i, hi_i = (3, 16) if {3, 16} <= set(icws) else (icws[0], icws[-1])
        sav = []
        for r in rtts:
            a, b = by[(lo_i, r)], by[(hi_i, r)]
            tol = sum((p["ci"][1] - p["ci"][0]) / 2 for p in (a, b))
            sav.append((r, a["plt_ms"] - b["plt_ms"], tol))
        grow = all(s2 >= s1 - (t1 + t2) for (_, s1, t1), (_, s2, t2) in zip(sav, sav[1:]))
        out["fig19_savings_grow"] = {"ok": grow and len(icws) > 1, "from_icw": lo_i, "to_icw": hi_i,
                                     "savings_ms": {str(r): round(s, 1) for r, s, _ in sav}}
    loss_pts = res.get("plt_vs_loss") or []
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
        out["fairness"] = {f"icw{f['icw']}": {"ratio": f["ratio"], "ci": f["ratio_ci"],
                                              "short_exceeds_long": f["ratio"] > 1,
                                              "significant": f["ratio_ci"][0] > 1} for f in fair}
        out["fairness"]["ok"] = all(f["ratio"] > 1 for f in fair if f["icw"] >= 16) if any(
            f["icw"] >= 16 for f in fair) else None
    agree = []
    for p in rtt_pts + [p for p in loss_pts if p["loss"] == 0]:
        agree.append(p["max_abs_diff_ms"] <= p["rtt_ms"])
    if agree:
        worst = max(p["max_abs_diff_ms"] for p in rtt_pts + [p for p in loss_pts if p["loss"] == 0])
        out["trace_vs_loader"] = {"ok": all(agree), "max_abs_diff_ms": worst}
    return out


# ---- tables ------------------------------------------------------------------------------
def _fmt_ci(p) -> str:
    return f"{p['plt_ms']:.0f} [{p['ci'][0]:.0f}, {p['ci'][1]:.0f}]"


def tables(res: dict) -> str:
    out = []
    rtt_pts = res.get("plt_vs_rtt") or []
    if rtt_pts:
        icws = sorted({p["icw"] for p in rtt_pts})
        rtts = sorted({p["rtt_ms"] for p in rtt_pts})
        by = {(p["icw"], p["rtt_ms"]): p for p in rtt_pts}
        out += ["## PLT vs RTT (Fig. 19): trace PLT, ms, geometric mean [95% CI]; loader PLT below", "",
                "| RTT ms | " + " | ".join(f"ICW {i}" for i in icws) + " |",
                "|---" * (len(icws) + 1) + "|"]
        for r in rtts:
            out.append(f"| {r:g} | " + " | ".join(_fmt_ci(by[(i, r)]) for i in icws) + " |")
        out += ["", "| RTT ms | " + " | ".join(f"ICW {i} loader" for i in icws) + " | max trace-loader diff ms |",
                "|---" * (len(icws) + 2) + "|"]
        for r in rtts:
            out.append(f"| {r:g} | " + " | ".join(f"{by[(i, r)]['loader_plt_ms']:.0f}" for i in icws)
                       + f" | {max(by[(i, r)]['max_abs_diff_ms'] for i in icws):.1f} |")
        out.append("")
    loss_pts = res.get("plt_vs_loss") or []
    if loss_pts:
        icws = sorted({p["icw"] for p in loss_pts})
        losses = sorted({p["loss"] for p in loss_pts})
        by = {(p["icw"], p["loss"]): p for p in loss_pts}
        rtt = loss_pts[0]["rtt_ms"]
        out += [f"## PLT vs loss at {rtt:g} ms RTT (Fig. 20): trace PLT, ms [95% CI]", "",
                "| loss | " + " | ".join(f"ICW {i}" for i in icws) + " |", "|---" * (len(icws) + 1) + "|"]
        for lo in losses:
            out.append(f"| {lo:.0%} | " + " | ".join(_fmt_ci(by[(i, lo)]) for i in icws) + " |")
        out.append("")
    tr = res.get("transfer_rtts") or []
    if tr:
        out += ["## Object transfer time in RTTs (Fig. 18; bundled corpus, emulated, not live traces)", "",
                "| ICW | objects | p50 | p80 | p95 |", "|---|---|---|---|---|"]
        for t in tr:
            out.append(f"| {t['icw']} | {t['n']} | {t['p50']:.2f} | {t['p80']:.2f} | {t['p95']:.2f} |")
        out.append("")
    fair = res.get("fairness") or []
    if fair:
        size = _kb(fair[0].get("download_bytes", study.SHORT_BYTES))
        out += [f"## Fairness: long flow vs back-to-back {size} downloads (KB/s = 1000 B/s)", "",
                "| ICW | seconds | long KB/s | short KB/s | short/long [95% CI] | downloads | short median KB/s |",
                "|---|---|---|---|---|---|---|"]
        for f in fair:
            out.append(f"| {f['icw']} | {f['seconds']:g} | {f['long_kbyte_s']:.1f} | {f['short_kbyte_s']:.1f} | "
                       f"{f['ratio']:.2f} [{f['ratio_ci'][0]:.2f}, {f['ratio_ci'][1]:.2f}] | "
                       f"{f['short_downloads']} | {f['short_median_kbyte_s']:.1f} |")
        out.append("")
    ck = res.get("checks") or {}
    if ck:
        out += ["## Checks", ""]
        for k, v in ck.items():
            out.append(f"- {k}: {json.dumps(v)}")
        out.append("")
    return "\n".join(out)


# ---- figures -----------------------------------------------------------------------------
def figures(res: dict, out_dir: str, samples: dict | None = None) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []

    def save(fig, name):
        for ext in ("png", "svg"):
            p = os.path.join(out_dir, f"{name}.{ext}")
            fig.savefig(p, dpi=120, bbox_inches="tight")
            written.append(p)
        plt.close(fig)

    def lines(points, xkey, xlabel, name, title, xscale=1.0, logy=False):
        fig, ax = plt.subplots(figsize=(6, 4))
        for icw in sorted({p["icw"] for p in points}):
            pts = sorted((p for p in points if p["icw"] == icw), key=lambda p: p[xkey])
            x = [p[xkey] * xscale for p in pts]
            y = [p["plt_ms"] / 1000 for p in pts]
            err = [[(p["plt_ms"] - p["ci"][0]) / 1000 for p in pts], [(p["ci"][1] - p["plt_ms"]) / 1000 for p in pts]]
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=f"ICW {icw}")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("page load time (s, trace)" + (", log scale" if logy else ""))
        if logy:  # PLT grows by orders of magnitude with loss: keep the low-loss points readable
            ax.set_yscale("log")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        ax.legend()
        save(fig, name)

    if res.get("plt_vs_rtt"):
        lines(res["plt_vs_rtt"], "rtt_ms", "RTT (ms)", "fig19_plt_vs_rtt", "PLT vs RTT (no loss)")
    if res.get("plt_vs_loss"):
        lines(res["plt_vs_loss"], "loss", "loss rate (%)", "fig20_plt_vs_loss",
              f"PLT vs loss at {res['plt_vs_loss'][0]['rtt_ms']:g} ms RTT", xscale=100, logy=True)
    if samples:
        fig, ax = plt.subplots(figsize=(6, 4))
        for icw, xs in sorted(samples.items()):
            xs = sorted(xs)
            if xs:
                ax.step(xs, [(k + 1) / len(xs) for k in range(len(xs))], where="post", label=f"ICW {icw}")
        ax.set_xlabel("object transfer time (RTTs)")
        ax.set_ylabel("CDF of objects")
        ax.set_xlim(left=0)
        ax.set_title("Object transfer time (bundled corpus, emulated)")
        ax.grid(alpha=0.3)
        ax.legend()
        save(fig, "fig18_transfer_rtts_cdf")
    if res.get("fairness"):
        fair = res["fairness"]
        fig, ax = plt.subplots(figsize=(6, 4))
        xs = range(len(fair))
        ax.bar([x - 0.2 for x in xs], [f["long_kbyte_s"] for f in fair], 0.4, label="long flow")
        size = _kb(fair[0].get("download_bytes", study.SHORT_BYTES))
        ax.bar([x + 0.2 for x in xs], [f["short_kbyte_s"] for f in fair], 0.4, label=f"{size} downloads")
        ax.set_xticks(list(xs), [f"ICW {f['icw']}" for f in fair])
        ax.set_ylabel("throughput (KB/s)")
        f0 = fair[0]
        ax.set_title(f"Fairness at {f0['rtt_ms']:g} ms RTT, {f0['loss']:.0%} loss")
        ax.legend()
        save(fig, "fairness")
    return written


# ---- the command's body ------------------------------------------------------------------
def reproduce_icw(quick: bool | None = None, out_dir: str = "icw-results", cc: str | None = None,
                  json_out: bool = False, config_file: str | None = None,
                  make_figures: bool = True, on_event=None, echo=print, **params) -> dict:
    """Run the study and write ``out_dir``/{results.json, tables.md, figures}. Parameters:
    ``config_file`` (an ICW-study TOML file), overridden by ``quick``, ``cc`` and ``params``
    (fields of ``config.Params``; None = not given). Everything is checked before anything is
    run or written. Returns the issue's JSON object (plus "checks", "wall_time_s", "quick");
    ``json_out`` prints it as one JSON object, otherwise the tables are printed via ``echo``."""
    from_file = config.load(config_file) if config_file else {}
    p = config.resolve(from_file, quick=quick, cc=cc, **params)
    quick, cc, reps, seed = p.quick, p.cc, p.reps, p.seed
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.monotonic()
    page = yahoo_page()
    full: dict = {"quick": quick, "cc": cc, "reps": reps, "seed": seed, "params": p.as_json(),
                  "config_file": os.path.abspath(config_file) if config_file else None,
                  "page": {"objects": [{"kind": k, "domain": dm, "bytes": b, "name": n}
                                       for k, dm, b, n in YAHOO_OBJECTS],
                           "total_bytes": sum(o.size for o in page.objects)}}
    res: dict = {"plt_vs_rtt": [], "plt_vs_loss": [], "transfer_rtts": [], "fairness": []}
    samples = None
    load_kw = {"cc": cc, "seed": seed, "rate": p.rate, "max_conns_per_host": p.max_conns_per_host,
               "load_timeout_s": p.load_timeout_s, "on_event": on_event}

    def keep(part: str) -> None:
        # after each part: what is done so far, so a crash or Ctrl-C later loses nothing measured
        with open(os.path.join(out_dir, "results.partial.json"), "w") as f:
            json.dump({**full, "parts_done": part, **res}, f, indent=1)
    if "rtt" in p.parts:
        res["plt_vs_rtt"] = study.plt_vs_rtt(page, p.rtts, p.icws, reps, **load_kw)
        keep("rtt")
    if "loss" in p.parts:
        res["plt_vs_loss"] = study.plt_vs_loss(page, p.losses, p.icws, p.loss_rtt_ms, reps, **load_kw)
        keep("loss")
    if "transfer" in p.parts:
        samples = study.transfer_times(p.transfer_pages, p.transfer_icws, p.transfer_rtts,
                                       p.transfer_reps, **load_kw)
        res["transfer_rtts"] = [{"icw": i, "n": len(xs), "p50": round(study.quantile(xs, 0.5), 3),
                                 "p80": round(study.quantile(xs, 0.8), 3),
                                 "p95": round(study.quantile(xs, 0.95), 3)} for i, xs in samples.items()]
        keep("transfer")
        full["transfer_setup"] = {"pages": list(p.transfer_pages), "rtts_ms": list(p.transfer_rtts),
                                  "note": "emulated loads of the bundled corpus; the study's Fig. 18 is from live traces"}
    if "fairness" in p.parts:
        res["fairness"] = [study.fairness(i, p.fairness_seconds, p.fairness_rtt_ms, p.fairness_loss,
                                          p.fairness_loss_up, p.fairness_rate, cc, seed,
                                          p.fairness_download_bytes, p.fairness_long_flow,
                                          on_event=on_event)
                           for i in p.fairness_icws]
    res["checks"] = checks(res)
    res["output_dir"] = os.path.abspath(out_dir)
    res["wall_time_s"] = round(time.monotonic() - t0, 1)
    res["quick"] = quick
    full.update(res)
    if samples is not None:
        full["transfer_samples"] = {str(k): v for k, v in samples.items()}
    with open(os.path.join(out_dir, "results.json"), "w") as f:
        json.dump(full, f, indent=1)
    partial = os.path.join(out_dir, "results.partial.json")
    if os.path.exists(partial):
        os.unlink(partial)
    text = tables(res)
    with open(os.path.join(out_dir, "tables.md"), "w") as f:
        f.write(f"# ICW study ({'quick' if quick else 'full'}, cc {cc}, {reps} loads per point, "
                f"wall time {res['wall_time_s']:.0f} s)\n\n" + text)
    if make_figures:
        res["figures"] = figures(res, out_dir, samples)
    slim = {
        "plt_vs_rtt": [{k: p[k] for k in ("icw", "rtt_ms", "plt_ms", "ci", "loader_plt_ms", "n")}
                       for p in res["plt_vs_rtt"]],
        "plt_vs_loss": [{k: p[k] for k in ("icw", "loss", "plt_ms", "ci", "loader_plt_ms", "n")}
                        for p in res["plt_vs_loss"]],
        "transfer_rtts": res["transfer_rtts"],
        "fairness": [{k: f[k] for k in ("icw", "long_kbyte_s", "short_kbyte_s", "ratio", "ratio_ci",
                                        "seconds")} for f in res["fairness"]],
        "checks": res["checks"], "output_dir": res["output_dir"], "wall_time_s": res["wall_time_s"],
        "quick": quick,
    }
    if json_out:
        echo(json.dumps(slim))
    else:
        echo(text)
        echo(f"results, tables and figures in {res['output_dir']} ({res['wall_time_s']:.0f} s)")
    return slim
