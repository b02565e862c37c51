"""The study's part of the report: its tables (as report sections), its figures (Fig. 18-20 and
fairness) and the JSON objects `pltlab reproduce icw` writes (results.json) and prints (--json)."""

from __future__ import annotations

import json
import math
import os

from pltlab.experiments import stats
from pltlab.run.flows import SHORT_BYTES
from pltlab.studies import paper_gaps
from pltlab.studies.engine import lines, table
from pltlab.studies.icw.parts import YAHOO_OBJECTS, total_bytes


class _Pyplot:
    """matplotlib.pyplot (Agg backend), imported on first use (as in pltlab.report.figures): not
    paid by every CLI command at start-up."""

    def __getattr__(self, name: str):
        import matplotlib  # noqa: PLC0415 (heavy: loaded only to draw)

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: PLC0415

        return getattr(matplotlib.pyplot, name)


plt = _Pyplot()


def _kb(n: int) -> str:
    """The downloads' size as the study writes it: 49152 -> "48 KB"."""
    return f"{n // 1024} KB" if n % 1024 == 0 else f"{n} B"


def _shown(ci, n: int) -> bool:
    """Whether an interval is shown: n >= MIN_N (stats.shown, the TFO report's rule) and one exists."""
    return stats.shown(n) and ci[0] is not None and not math.isnan(ci[0])


def _fmt_ci(p) -> str:
    if not p.get("n"):
        return "failed"
    if not _shown(p["ci"], p["n"]):
        return f"{p['plt_ms']:.0f} ({stats.NO_CI})" if not stats.shown(p["n"]) else f"{p['plt_ms']:.0f}"
    return f"{p['plt_ms']:.0f} [{p['ci'][0]:.0f}, {p['ci'][1]:.0f}]"


def _fmt_ratio(f) -> str:
    ci = f["ratio_ci"]
    if not _shown(ci, f["short_downloads"]):
        return f"{f['ratio']:.2f}" + (f" ({stats.NO_CI})" if not stats.shown(f["short_downloads"]) else "")
    return f"{f['ratio']:.2f} [{ci[0]:.2f}, {ci[1]:.2f}]"


def _f(v, fmt: str = ".0f") -> str:
    return "-" if v is None else format(v, fmt)


def announce(p, exps: list, out_dir: str, resume: bool) -> str:
    """The line `reproduce icw` starts with (on stderr)."""
    n = sum(e.n_runs for _, e in exps)
    return (
        f"reproduce icw: {', '.join(p.parts)}: {n} run(s) ({'quick' if p.quick else 'full'}, cc {p.cc})"
        f"{' (resumed)' if resume else ''} -> {out_dir}"
    )


def title(p, res: dict) -> str:
    return (
        f"ICW study ({'quick' if p.quick else 'full'}, cc {p.cc}, {p.reps} loads per point, "
        f"wall time {res.get('wall_time_s') or 0:.0f} s)"
    )


def sections(res: dict) -> list[dict]:
    """The study's tables and checks, as report sections (pltlab.studies.engine.table/lines)."""
    out = []
    rtt_pts = res.get("plt_vs_rtt") or []
    if rtt_pts:
        icws = sorted({p["icw"] for p in rtt_pts})
        rtts = sorted({p["rtt_ms"] for p in rtt_pts})
        by = {(p["icw"], p["rtt_ms"]): p for p in rtt_pts}
        out.append(
            table(
                f"PLT vs RTT (Fig. 19): trace PLT, ms, geometric mean [{stats.INTERVAL}]",
                ["RTT ms"] + [f"ICW {i}" for i in icws],
                [[f"{r:g}"] + [_fmt_ci(by[(i, r)]) for i in icws] for r in rtts],
            )
        )
        out.append(
            table(
                "PLT vs RTT (Fig. 19): loader PLT, ms (geometric mean)",
                ["RTT ms"] + [f"ICW {i} loader" for i in icws] + ["max trace-loader diff ms"],
                [
                    [f"{r:g}"]
                    + [_f(by[(i, r)]["loader_plt_ms"]) for i in icws]
                    + [
                        _f(
                            max(
                                (
                                    by[(i, r)]["max_abs_diff_ms"]
                                    for i in icws
                                    if by[(i, r)]["max_abs_diff_ms"] is not None
                                ),
                                default=None,
                            ),
                            ".1f",
                        )
                    ]
                    for r in rtts
                ],
            )
        )
    loss_pts = res.get("plt_vs_loss") or []
    if loss_pts:
        icws = sorted({p["icw"] for p in loss_pts})
        losses = sorted({p["loss"] for p in loss_pts})
        by = {(p["icw"], p["loss"]): p for p in loss_pts}
        out.append(
            table(
                f"PLT vs loss at {loss_pts[0]['rtt_ms']:g} ms RTT (Fig. 20): trace PLT, ms [{stats.INTERVAL}]",
                ["loss"] + [f"ICW {i}" for i in icws],
                [[f"{lo:.0%}"] + [_fmt_ci(by[(i, lo)]) for i in icws] for lo in losses],
            )
        )
    tr = res.get("transfer_rtts") or []
    if tr:
        out.append(
            table(
                "Object transfer time in RTTs (Fig. 18; bundled corpus, emulated, not live traces)",
                ["ICW", "objects", "p50", "p80", "p95"],
                [
                    [str(t["icw"]), str(t["n"]), _f(t["p50"], ".2f"), _f(t["p80"], ".2f"), _f(t["p95"], ".2f")]
                    for t in tr
                ],
            )
        )
    fair = res.get("fairness") or []
    if fair:
        size = _kb(fair[0].get("download_bytes", SHORT_BYTES))
        out.append(
            table(
                f"Fairness: long flow vs back-to-back {size} downloads (KB/s = 1000 B/s)",
                [
                    "ICW",
                    "seconds",
                    "long KB/s",
                    "short KB/s",
                    f"short/long [{stats.INTERVAL}]",
                    "downloads",
                    "short median KB/s",
                ],
                [
                    [
                        str(f["icw"]),
                        f"{f['seconds']:g}",
                        f"{f['long_kbyte_s']:.1f}",
                        f"{f['short_kbyte_s']:.1f}",
                        _fmt_ratio(f),
                        str(f["short_downloads"]),
                        f"{f['short_median_kbyte_s']:.1f}",
                    ]
                    for f in fair
                ],
            )
        )
    if fair:  # the gap to the study's 4.7x, as the ablations measured it (pltlab.studies.paper_gaps)
        out.append(
            lines(
                f"Why the fairness ratio can differ (measured by the ablations, {paper_gaps.DOC})",
                paper_gaps.why("icw"),
            )
        )
    ck = res.get("checks") or {}
    if ck:
        out.append(
            lines(
                "Checks",
                [f"{k}: {json.dumps(v)}" for k, v in ck.items()],
                bad=[k for k, v in ck.items() if isinstance(v, dict) and v.get("ok") is False],
            )
        )
    return out


# ---- figures -----------------------------------------------------------------------------
def figures(res: dict, out_dir: str) -> list[str]:
    """fig19_plt_vs_rtt, fig20_plt_vs_loss, fig18_transfer_rtts_cdf, fairness (PNG and SVG) in
    ``out_dir``, for the parts that ran."""
    written = []

    def save(fig, name):
        for ext in ("png", "svg"):
            p = os.path.join(out_dir, f"{name}.{ext}")
            fig.savefig(p, dpi=120, bbox_inches="tight")
            written.append(p)
        plt.close(fig)

    def plot_lines(points, xkey, xlabel, name, title, xscale=1.0, logy=False):
        fig, ax = plt.subplots(figsize=(6, 4))
        for icw in sorted({p["icw"] for p in points}):
            pts = sorted((p for p in points if p["icw"] == icw and p.get("n")), key=lambda p: p[xkey])
            x = [p[xkey] * xscale for p in pts]
            y = [p["plt_ms"] / 1000 for p in pts]
            ok = [_shown(p["ci"], p["n"]) for p in pts]  # else no whiskers (stats.shown)
            err = [
                [(p["plt_ms"] - p["ci"][0]) / 1000 if k else 0 for p, k in zip(pts, ok)],
                [(p["ci"][1] - p["plt_ms"]) / 1000 if k else 0 for p, k in zip(pts, ok)],
            ]
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
        plot_lines(res["plt_vs_rtt"], "rtt_ms", "RTT (ms)", "fig19_plt_vs_rtt", "PLT vs RTT (no loss)")
    if res.get("plt_vs_loss"):
        plot_lines(
            res["plt_vs_loss"],
            "loss",
            "loss rate (%)",
            "fig20_plt_vs_loss",
            f"PLT vs loss at {res['plt_vs_loss'][0]['rtt_ms']:g} ms RTT",
            xscale=100,
            logy=True,
        )
    samples = res.get("transfer_samples")
    if samples:
        fig, ax = plt.subplots(figsize=(6, 4))
        for icw, xs in sorted(samples.items(), key=lambda kv: int(kv[0])):
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
        size = _kb(fair[0].get("download_bytes", SHORT_BYTES))
        ax.bar([x + 0.2 for x in xs], [f["short_kbyte_s"] for f in fair], 0.4, label=f"{size} downloads")
        ax.set_xticks(list(xs), [f"ICW {f['icw']}" for f in fair])
        ax.set_ylabel("throughput (KB/s)")
        f0 = fair[0]
        ax.set_title(f"Fairness at {f0['rtt_ms']:g} ms RTT, {f0['loss']:.0%} loss")
        ax.legend()
        save(fig, "fairness")
    return written


# ---- the JSON objects --------------------------------------------------------------------
def full(p, res: dict, config_file: str | None) -> dict:
    """results.json: the parameters, the page, every point with its loads' two PLTs, the
    transfer samples, the fairness runs, the checks."""
    doc = {
        "quick": p.quick,
        "cc": p.cc,
        "reps": p.reps,
        "seed": p.seed,
        "params": p.as_json(),
        "config_file": os.path.abspath(config_file) if config_file else None,
        "page": {
            "objects": [{"kind": k, "domain": dm, "bytes": b, "name": n} for k, dm, b, n in YAHOO_OBJECTS],
            "total_bytes": total_bytes(),
        },
    }
    if "transfer" in p.parts:
        doc["transfer_setup"] = {
            "pages": list(p.transfer_pages),
            "rtts_ms": list(p.transfer_rtts),
            "note": "emulated loads of the bundled corpus; the study's Fig. 18 is from live traces",
        }
    return {**doc, **res}


def slim(res: dict, quick: bool) -> dict:
    """What `pltlab reproduce icw --json` prints."""
    return {
        "plt_vs_rtt": [
            {k: p[k] for k in ("icw", "rtt_ms", "plt_ms", "ci", "loader_plt_ms", "n")} for p in res["plt_vs_rtt"]
        ],
        "plt_vs_loss": [
            {k: p[k] for k in ("icw", "loss", "plt_ms", "ci", "loader_plt_ms", "n")} for p in res["plt_vs_loss"]
        ],
        "transfer_rtts": res["transfer_rtts"],
        "fairness": [
            {k: f[k] for k in ("icw", "long_kbyte_s", "short_kbyte_s", "ratio", "ratio_ci", "seconds")}
            for f in res["fairness"]
        ],
        "checks": res["checks"],
        "output_dir": res["output_dir"],
        "wall_time_s": res["wall_time_s"],
        "quick": quick,
    }
