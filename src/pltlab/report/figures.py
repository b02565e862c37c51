"""matplotlib figures (PNG and SVG) of an experiment: request waterfalls (TFO vs no TFO side by
side), PLT vs RTT with whiskers (95 % BCa bootstrap intervals), improvement vs RTT per page."""

import os
import re

from pltlab.experiments import stats
from pltlab.report.headline import MIN_N


class _Pyplot:
    """matplotlib.pyplot (Agg backend), imported on first use: importing it costs ~0.9 s CPU, which
    every CLI command paid at start-up although only the reports draw figures."""

    def __getattr__(self, name: str):
        import matplotlib  # noqa: PLC0415 (heavy: loaded only to draw)

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: PLC0415

        return getattr(matplotlib.pyplot, name)


plt = _Pyplot()

SETUP, TRANSFER = "#e8912d", "#3a6fb0"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", s).strip("-").lower()


def _save(fig, folder: str, stem: str) -> list[str]:
    paths = []
    for ext in ("png", "svg"):
        p = os.path.join(folder, f"{stem}.{ext}")
        fig.savefig(p, dpi=110 if ext == "png" else None, bbox_inches="tight")
        paths.append(p)
    plt.close(fig)
    return paths


def median_run(runs: list[dict]) -> dict | None:
    """The run whose PLT is the (lower) median of its side: a typical load, not the best."""
    if not runs:
        return None
    s = sorted(runs, key=lambda r: r["plt_ms"])
    return s[(len(s) - 1) // 2]


def _bars(ax, reqs: list[dict], title: str) -> None:
    for i, r in enumerate(reqs):
        end = r["last_byte_ms"]
        req = r["request_ms"] if r["request_ms"] is not None else r["start_ms"]
        start = r["connect_start_ms"] if r["new_conn"] and r["connect_start_ms"] is not None else req
        if end is None or req is None:
            continue
        if start < req:
            ax.barh(i, req - start, left=start, height=0.8, color=SETUP, linewidth=0)
        ax.barh(i, max(end - req, 0.5), left=req, height=0.8, color=TRANSFER, linewidth=0)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel("time since navigation start (ms)")
    ax.grid(axis="x", alpha=0.3)


def waterfall(group: dict, requests: dict, folder: str, suffix: str = "") -> list[str]:
    sides = [(False, group["labels"][0]), (True, group["labels"][1])]
    picks = {tfo: median_run(group["runs"][tfo]) for tfo, _ in sides}
    n = max((len(requests.get(p["id"], [])) for p in picks.values() if p), default=1)
    fig, axes = plt.subplots(1, 2, sharex=True, sharey=True, figsize=(12, max(3.5, 1.5 + n * 0.07)))
    for ax, (tfo, name) in zip(axes, sides):
        p = picks[tfo]
        if p is None:
            ax.set_title(f"{name}: no valid run")
            continue
        _bars(ax, requests.get(p["id"], []), f"{name}: PLT {p['plt_ms']:.0f} ms (median run, rep {p['rep']})")
    axes[0].set_ylabel("request index")
    axes[0].invert_yaxis()
    handles = [plt.Rectangle((0, 0), 1, 1, color=SETUP), plt.Rectangle((0, 0), 1, 1, color=TRANSFER)]
    fig.legend(
        handles,
        ["connection set-up (TCP + TLS handshakes)", "request sent → last byte received"],
        loc="lower center",
        ncol=2,
        bbox_to_anchor=(0.5, -0.02),
    )
    cfg = f" ({group['config']})" if group["config"] else ""
    fig.suptitle(f"{group['page']} @ {group['rtt_ms']:g} ms RTT{cfg}: one bar per request")
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    return _save(fig, folder, f"requests-{_slug(group['page'])}-{group['rtt_ms']:g}ms{suffix}")


def _err(summary: dict) -> tuple[float, float]:
    """The whiskers of a mean: none below MIN_N values (their bootstrap interval means nothing)."""
    m, (lo, hi) = summary["mean"], summary["ci"]
    if not stats.shown(summary["n"]) or lo is None:
        return 0.0, 0.0
    return m - lo, hi - m


def _few_note(ax, n_min: int) -> None:
    if not stats.shown(n_min):
        ax.text(
            0.01, 0.01, f"n < {MIN_N} somewhere: no whiskers there", transform=ax.transAxes, fontsize=7, color="#a00"
        )


def plt_vs_rtt(rows: list[dict], folder: str) -> list[str]:
    pages = sorted({g["page"] for g in rows})
    fig, axes = plt.subplots(1, len(pages), figsize=(4.2 * len(pages), 3.8), squeeze=False)
    for ax, page in zip(axes[0], pages):
        by_cfg: dict[str, list[dict]] = {}
        for g in rows:
            if g["page"] == page:
                by_cfg.setdefault(g["config"], []).append(g)
        for cfg, gs in sorted(by_cfg.items()):
            gs = sorted(gs, key=lambda g: g["rtt_ms"])
            names = gs[0]["labels"]
            for side, name, mk in (("base", names[0], "o"), ("alt", names[1], "s")):
                pts = [g for g in gs if g[side]["n"]]
                if not pts:
                    continue
                errs = list(zip(*[_err(g[side]) for g in pts]))
                label = f"{name}{f' ({cfg})' if cfg else ''}"
                ax.errorbar(
                    [g["rtt_ms"] for g in pts],
                    [g[side]["mean"] / 1000 for g in pts],
                    yerr=[[e / 1000 for e in errs[0]], [e / 1000 for e in errs[1]]],
                    marker=mk,
                    capsize=4,
                    label=label,
                )
        _few_note(
            ax, min((g[s]["n"] for g in rows if g["page"] == page for s in ("base", "alt") if g[s]["n"]), default=0)
        )
        ax.set_title(page)
        ax.set_xlabel("RTT (ms)")
        ax.set_ylabel(f"page load time (s), mean with {stats.INTERVAL}", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return _save(fig, folder, "plt-vs-rtt")


def improvement_vs_rtt(rows: list[dict], folder: str) -> list[str]:
    tfo = not rows or rows[0]["by"] == "tfo"
    fig, ax = plt.subplots(figsize=(7, 4.2))
    lines: dict[str, list[dict]] = {}
    for g in rows:
        if g["improvement"] is not None:
            lines.setdefault(g["page"] + (f" ({g['config']})" if g["config"] else ""), []).append(g)
    for name, gs in sorted(lines.items()):
        gs = sorted(gs, key=lambda g: g["rtt_ms"])
        y = [g["improvement"] * 100 for g in gs]
        ok = [stats.shown(g["base"]["n"], g["alt"]["n"]) and g["improvement_ci"][0] is not None for g in gs]
        # (else no whiskers; max: a BCa interval may miss the point estimate by a rounding's width)
        lo = [max(y_ - g["improvement_ci"][0] * 100, 0) if k else 0 for y_, g, k in zip(y, gs, ok)]
        hi = [max(g["improvement_ci"][1] * 100 - y_, 0) if k else 0 for y_, g, k in zip(y, gs, ok)]
        ax.errorbar([g["rtt_ms"] for g in gs], y, yerr=[lo, hi], marker="o", capsize=4, label=name)
    _few_note(ax, min((min(g["base"]["n"], g["alt"]["n"]) for gs in lines.values() for g in gs), default=MIN_N))
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set_xlabel("RTT (ms)")
    if tfo:
        ax.set_ylabel("improvement 1 − PLT_TFO / PLT_noTFO (%)")
        ax.set_title(f"TFO improvement vs RTT ({stats.INTERVAL}; negative = slower with TFO)", fontsize=10)
    else:
        base, alt = rows[0]["labels"] if rows else ("baseline", "other")
        ax.set_ylabel(f"improvement 1 − PLT({alt}) / PLT({base}) (%)")
        ax.set_title(f"{alt} vs {base}: improvement vs RTT ({stats.INTERVAL}; negative = slower)", fontsize=10)
    ax.grid(alpha=0.3)
    if lines:
        ax.legend(fontsize=8)
    fig.tight_layout()
    return _save(fig, folder, "improvement-vs-rtt")


def effects_vs_rtt(rows: list[dict], folder: str) -> list[str]:
    """Round trips each feature saves (all pages pooled, every other knob at its baseline) vs RTT,
    with 95 % BCa bootstrap intervals: pltlab.report.effects."""
    rows = [r for r in rows if r["page"] == "all pages" and r.get("baseline_context")]
    if not rows:
        return []
    fig, ax = plt.subplots(figsize=(7, 4))
    for feature in sorted({r["feature"] for r in rows}):
        pts = sorted((r for r in rows if r["feature"] == feature), key=lambda r: r["rtt_ms"])
        x = [r["rtt_ms"] for r in pts]
        y = [r["saved_rtts"] for r in pts]
        ok = [stats.shown(r["n"]) and r["rtts_ci"][0] is not None and r["rtts_ci"][0] == r["rtts_ci"][0] for r in pts]
        err = [
            [r["saved_rtts"] - r["rtts_ci"][0] if k else 0 for r, k in zip(pts, ok)],
            [r["rtts_ci"][1] - r["saved_rtts"] if k else 0 for r, k in zip(pts, ok)],
        ]
        ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=feature)
    _few_note(ax, min(r["n"] for r in rows))
    ax.axhline(0, color="grey", lw=0.5)
    ax.set_xlabel("RTT (ms)")
    ax.set_ylabel("PLT saved (round trips)")
    ax.set_title(f"What each feature saves (mean over pages, {stats.INTERVAL})", fontsize=10)
    ax.legend(fontsize=7)
    return _save(fig, folder, "effects-vs-rtt")


def all_figures(analysis: dict, requests: dict, folder: str) -> list[str]:
    os.makedirs(folder, exist_ok=True)
    rows = analysis["rows"]
    configs = sorted({g["config"] for g in rows})
    out = []
    for g in rows:
        suffix = f"-cfg{configs.index(g['config']) + 1}" if len(configs) > 1 else ""
        out += waterfall(g, requests, folder, suffix)
    if rows:
        out += plt_vs_rtt(rows, folder) + improvement_vs_rtt(rows, folder)
    return out
