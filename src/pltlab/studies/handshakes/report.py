"""The handshake study's part of the report: the answer paragraph, a table per feature, the
sentence per page (as report sections, rendered by pltlab.report's templates), a figure, and the
JSON objects `pltlab reproduce handshakes` writes (results.json) and prints (--json)."""

from __future__ import annotations

import os

from pltlab.experiments import stats
from pltlab.studies.engine import lines, table
from pltlab.studies.handshakes import effects
from pltlab.studies.handshakes.parts import size
from pltlab.studies.handshakes.study_file import Params


class _Pyplot:
    """matplotlib.pyplot (Agg backend), imported on first use: not paid by `pltlab --help`."""

    def __getattr__(self, name: str):
        import matplotlib  # noqa: PLC0415 (heavy: loaded only to draw)

        matplotlib.use("Agg")
        import matplotlib.pyplot  # noqa: PLC0415

        return getattr(matplotlib.pyplot, name)


plt = _Pyplot()


def announce(p: Params, exps: list, out_dir: str, resume: bool) -> str:
    """The line `reproduce handshakes` starts with (on stderr)."""
    n = sum(e.n_runs for _, e in exps)
    return (
        f"reproduce handshakes ({'quick' if p.quick else 'full'}): {n} load(s) ({size(p)}), "
        f"{len(p.pages)} page(s), RTT {'/'.join(f'{r:g}' for r in p.rtts)} ms, loss "
        f"{'/'.join(f'{x * 100:g}' for x in p.losses)} %{' (resumed)' if resume else ''} -> {out_dir}"
    )


def title(p: Params, res: dict) -> str:
    wall = f"; wall time {res['wall_time_s']:.0f} s" if res.get("wall_time_s") else ""
    return f"Handshake study ({'quick run' if p.quick else 'full run'}: {size(p)}{wall})"


def _ci(r: dict, what: str, fmt: str) -> str:
    v = r[f"saved_{what}"]
    if v is None:
        return "-"
    if not effects.shown(r, what):
        n = r["n"] if what == "ms" else r["n_rtts"]
        return _num(v, fmt) + (f" ({stats.NO_CI})" if not stats.shown(n) else "")
    lo, hi = r[f"saved_{what}_ci"]
    return f"{_num(v, fmt)} [{_num(lo, fmt)}, {_num(hi, fmt)}]"


def _num(x: float, fmt: str) -> str:
    """``x`` formatted, without a sign for what rounds to zero."""
    s = format(x, fmt)
    return s[1:] if s.startswith("-") and float(s) == 0 else s


def _context(r: dict) -> str:
    c = r["context"]
    out = [c["protocol"]] if "protocol" in c else []
    out += [f"TLS {c['tls']}"] if "tls" in c else []
    out += [f"TFO {'on' if c['tfo'] else 'off'}"] if "tfo" in c else []
    return ", ".join(out) or "-"


def sections(res: dict) -> list[dict]:
    """The study's sections (pltlab.studies.engine.table/lines)."""
    out = []
    for client, text in res.get("answer", {}).items():
        out.append(
            {
                "title": f"What does TFO still add once TLS 1.3 0-RTT and QUIC exist? ({client} loader)",
                "note": text,
                "lines": [],
            }
        )
    headers = [
        "loader",
        "context",
        "RTT ms",
        "loss %",
        "pairs",
        "PLT without ms",
        "saved ms",
        "saved %",
        "handshake RTTs saved",
    ]
    for e in effects.EFFECTS:
        rs = [r for r in res.get("rows", []) if r["effect"] == e.name]
        if not rs:
            continue
        out.append(
            table(
                f"{e.label}: saved per load (paired, mean [{stats.INTERVAL}])",
                headers,
                [
                    [
                        r["client"],
                        _context(r),
                        f"{r['rtt_ms']:g}",
                        f"{r['loss'] * 100:g}",
                        str(r["n"]),
                        f"{r['base_ms']:.0f}",
                        _ci(r, "ms", ".0f"),
                        "-" if r["saved_pct"] is None else f"{r['saved_pct']:.1%}",
                        _ci(r, "rtts", ".2f"),
                    ]
                    for r in rs
                ],
                note=(
                    "saved = PLT without the feature - PLT with it, over loads that differ in it only (same page, "
                    "repetition and knobs); handshake round trips: TCP and TLS (QUIC) handshake time on the "
                    "load's critical path (pltlab explain) over the RTT."
                ),
            )
        )
    if res.get("pages"):
        out.append(
            lines(
                "Per page: what TFO saved on the critical path (pltlab explain)", [x["sentence"] for x in res["pages"]]
            )
        )
    out.append(
        lines(
            "Loads",
            [f"planned: {res['size']}"]
            + [f"{c}: {n} load(s)" for c, n in res.get("loads", {}).items()]
            + [f"valid: {res.get('valid_loads', 0)}"]
            + [f"invalid: {x['n']} x {x['reason']}" for x in res.get("invalid", [])],
            bad=["invalid: "],
        )
    )
    return out


def figures(res: dict, out_dir: str) -> list[str]:
    """saved_ms.png: ms saved by each feature (bars, with the intervals where shown), one panel
    per RTT, for the first loader at the lowest loss; features split by protocol over h2."""
    rows = res.get("rows") or []
    if not rows:
        return []
    client = rows[0]["client"]
    loss = min(r["loss"] for r in rows if r["client"] == client)
    bars = []  # (label, {rtt: row})
    for e in effects.EFFECTS:
        for ctx in _figure_contexts(rows, e.name, client):
            rs = effects.find(rows, e.name, client, loss=loss, **ctx)
            if rs:
                bars.append((f"{e.name} ({_context({'context': ctx})})", {r["rtt_ms"]: r for r in rs}))
    rtts = sorted({rtt for _, by in bars for rtt in by})
    if not rtts:
        return []
    fig, axes = plt.subplots(1, len(rtts), figsize=(3.2 * len(rtts) + 2.2, 0.32 * len(bars) + 1.4), sharey=True)
    axes = list(axes) if len(rtts) > 1 else [axes]
    ys = list(range(len(bars)))
    for ax, rtt in zip(axes, rtts):
        got = [by.get(rtt) for _, by in bars]
        v = [r["saved_ms"] if r else 0 for r in got]
        err = [
            [r["saved_ms"] - r["saved_ms_ci"][0] if r and effects.shown(r) else 0 for r in got],
            [r["saved_ms_ci"][1] - r["saved_ms"] if r and effects.shown(r) else 0 for r in got],
        ]
        ax.barh(ys, v, xerr=err, capsize=2, color=["tab:blue" if x >= 0 else "tab:red" for x in v])
        ax.axvline(0, color="grey", lw=0.8)
        ax.set_title(f"RTT {rtt:g} ms", fontsize=9)
        ax.set_xlabel("PLT saved (ms)")
    axes[0].set_yticks(ys, [label for label, _ in bars], fontsize=7)
    axes[0].invert_yaxis()
    fig.suptitle(f"Saved by each handshake feature ({client}, loss {loss * 100:g} %; {stats.INTERVAL})", fontsize=9)
    fig.tight_layout()
    path = os.path.join(out_dir, "saved_ms.png")
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return [path]


def _figure_contexts(rows: list[dict], effect: str, client: str) -> list[dict]:
    """The contexts drawn: over h2 where the effect is split by protocol, each TLS mode for TFO."""
    ctxs = [r["context"] for r in rows if r["effect"] == effect and r["client"] == client]
    if not ctxs:
        return []
    if "protocol" in ctxs[0]:
        ctxs = [c for c in ctxs if c["protocol"] == "h2"]
    return list({tuple(c.items()): c for c in ctxs}.values())


def full(p: Params, res: dict, config_file: str | None) -> dict:
    """results.json: the parameters, the file they came from, every result."""
    return {"study": "handshakes", "params": p.as_json(), "config_file": config_file, **res}


def slim(res: dict, quick: bool) -> dict:
    """What `reproduce handshakes --json` prints."""
    keep = (
        "effect",
        "client",
        "context",
        "rtt_ms",
        "loss",
        "n",
        "saved_ms",
        "saved_ms_ci",
        "saved_rtts",
        "saved_rtts_ci",
    )
    return {
        "quick": quick,
        "output_dir": res.get("output_dir"),
        "answer": res.get("answer"),
        "rows": [{k: r[k] for k in keep} for r in res.get("rows", [])],
        "pages": [x["sentence"] for x in res.get("pages", [])],
        "invalid_loads": sum(x["n"] for x in res.get("invalid", [])),
    }
