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
    return (
        f"Handshake study ({'quick run' if p.quick else 'full run'}: {size(p)}; "
        f"wall time {res.get('wall_time_s') or 0:.0f} s)"
    )


def _ci(r: dict, what: str, fmt: str) -> str:
    v = r[f"saved_{what}"]
    if v is None:
        return "-"
    if not effects.shown(r, what):
        n = r["n"] if what == "ms" else r["n_rtts"]
        return f"{v:{fmt}}" + (f" ({stats.NO_CI})" if not stats.shown(n) else "")
    lo, hi = r[f"saved_{what}_ci"]
    return f"{v:{fmt}} [{lo:{fmt}}, {hi:{fmt}}]"


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
    """saved_ms.png: ms saved by each feature against RTT (the first loader, lowest loss, h2
    contexts where a feature has several), with the intervals where shown."""
    rows = res.get("rows") or []
    if not rows:
        return []
    client = rows[0]["client"]
    fig, ax = plt.subplots(figsize=(7, 4.2))
    drawn = False
    for e in effects.EFFECTS:
        for ctx in _figure_contexts(rows, e.name, client):
            rs = effects.find(rows, e.name, client, **ctx)
            if not rs:
                continue
            x = [r["rtt_ms"] for r in rs]
            y = [r["saved_ms"] for r in rs]
            err = [
                [r["saved_ms"] - r["saved_ms_ci"][0] if effects.shown(r) else 0 for r in rs],
                [r["saved_ms_ci"][1] - r["saved_ms"] if effects.shown(r) else 0 for r in rs],
            ]
            label = e.name + ("" if not ctx else f" ({', '.join(str(v) for v in ctx.values())})")
            ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=label)
            drawn = True
    if not drawn:
        plt.close(fig)
        return []
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("RTT (ms)")
    ax.set_ylabel("PLT saved (ms)")
    ax.set_title(f"Saved by each handshake feature ({client}, no loss; {stats.INTERVAL})", fontsize=9)
    ax.legend(fontsize=7)
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
