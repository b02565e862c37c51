"""`pltlab compare DIR_A DIR_B`: the same pages and configurations measured in two results folders
that differ in any dimension (initcwnd, cc, protocol, loader, ...), side by side: each side's mean
PLT, the difference B − A with a 95 % BCa bootstrap interval and the relative change. Rows are matched
on page, RTT, TFO and every other knob whose values the folders share; the knobs whose values
differ between the folders are the ones compared (each must have one value per folder).

``by`` names the knob compared: with two folders, the one knob they must differ in (TFO too: a
folder of TFO off against one of TFO on); with one folder, its two values of that knob are the
sides (A: the baseline, pltlab.report.statistics.baseline; B: the other value).
"""

import json
import os
import statistics

from markupsafe import Markup

from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.protocols import NA
from pltlab.report import headline, html
from pltlab.report import statistics as an

HEADERS = [
    "page",
    "RTT(ms)",
    "TFO",
    "n (A / B)",
    "A: mean (ms)",
    "B: mean (ms)",
    "B − A (ms)",
    f"{stats.INTERVAL} (ms)",
    "change (%)",
]


def _ok(runs: list[dict]) -> list[dict]:
    return [r for r in runs if r["status"] == "ok" and r["valid"] and r["plt_ms"] is not None]


def _values(runs: list[dict], col: str) -> set[str]:
    return {json.dumps(r.get(col)) for r in runs}


def _describe(col: str, raw: str) -> str:
    return an.show(col, json.loads(raw))


def _split(d: str, col: str, by: str) -> list[tuple]:
    """One folder's sides by knob ``col``: its baseline's valid loads and its other value's."""
    runs, meta = an.load_runs(d)
    ok = _ok(runs)
    vals = [json.loads(v) for v in sorted({json.dumps(an.value(r, col)) for r in ok})]
    if len(vals) != 2:
        shown = ", ".join(an.show(col, v) for v in vals) or "no valid load"
        raise PltError(
            f"{d}: --by {by}: {len(vals)} value(s) of it ({shown}), not two; "
            f"pltlab report {d} --by {by} pairs each value with its baseline"
        )
    base = an.baseline(col, vals)
    alt = next(v for v in vals if v != base)
    return [(d, meta, [r for r in ok if an.value(r, col) == v]) for v in (base, alt)]


def compare(dir_a: str, dir_b: str | None = None, by: str | None = None) -> dict:
    """{a, b (folder, name, label), compared (columns), context (columns), rows, only_a, only_b
    (what one folder measured and the other not: "page @ RTT, TFO, context"), few (rows with a
    side of n < MIN_N)}; every row: page, rtt_ms, tfo, context, n_a, n_b, mean_a, mean_b,
    diff_ms, ci ([lo, hi] or None where n < MIN_N), change (B / A - 1)."""
    col = None if by is None else an.by_column(by)
    if dir_b is None and col is None:
        raise PltError(f"{dir_a}: one folder: give --by KNOB (its two values are compared), or a second folder")
    sides = []
    for d in (dir_a, dir_b) if dir_b is not None else ():
        runs, meta = an.load_runs(d)
        ok = _ok(runs)
        if not ok:
            raise PltError(f"{d}: no valid page load in its results database")
        sides.append((d, meta, ok))
    if dir_b is None:
        sides = _split(dir_a, col, by)
    (_, meta_a, a), (_, meta_b, b) = sides
    # a knob n/a under a side's protocol (keepalive under h2, server_priority under h1) is no
    # difference between the sides, nor a context: the report's and explain's pairing skip it alike
    na = {c for c in an.DIMS if any(r.get(c) == NA for r in a + b)}
    dims = [c for c in an.DIMS if c not in na] + (["tfo"] if col == "tfo" else [])
    compared = [c for c in dims if _values(a, c) != _values(b, c)]
    if col is not None:
        if col not in compared:
            raise PltError(f"{dir_a} and {dir_b or dir_a}: --by {by}: the sides do not differ in it")
        if len(compared) > 1:
            others = ", ".join(c for c in compared if c != col)
            raise PltError(f"{dir_a} and {dir_b}: --by {by}: the folders differ in {others} too")
    for c in compared:
        for d, _, runs in sides:
            if len(_values(runs, c)) > 1:
                shown = ", ".join(_describe(c, v) for v in sorted(_values(runs, c)))
                raise PltError(
                    f"{d}: {c} takes several values ({shown}) while the folders differ in it: "
                    "compare folders where each compared knob has one value"
                )
    context = [c for c in dims if c != "tfo" and c not in compared and len(_values(a, c) | _values(b, c)) > 1]

    def key(r):  # (compared by TFO: no TFO in the key, "-" in the rows)
        tfo = None if col == "tfo" else bool(r["tfo"])
        return (r["page"], r[an.RTT], tfo, tuple(json.dumps(r.get(c)) for c in context))

    groups: dict[tuple, tuple[list, list]] = {}
    for side, runs in ((0, a), (1, b)):
        for r in runs:
            groups.setdefault(key(r), ([], []))[side].append(r["plt_ms"])
    rows, only_a, only_b = [], [], []
    order = lambda kv: (kv[0][0], kv[0][3], kv[0][1], bool(kv[0][2]))  # noqa: E731
    for i, (k, (va, vb)) in enumerate(sorted(groups.items(), key=order)):
        page, rtt, tfo, ctx = k
        if not va or not vb:
            what = ", ".join(
                [f"{page} @ {rtt:g} ms"]
                + ([] if tfo is None else [f"TFO {'on' if tfo else 'off'}"])
                + [_describe(c, v) for c, v in zip(context, ctx)]
            )
            (only_b if not va else only_a).append(what)
            continue
        ma, mb = statistics.fmean(va), statistics.fmean(vb)
        ci = None
        if stats.shown(len(va), len(vb)):
            got = stats.diff_of_means(va, vb, seed=i * 7919)
            ci = None if got is None else list(got)
        rows.append(
            {
                "page": page,
                "rtt_ms": rtt,
                "tfo": tfo,
                "context": ", ".join(_describe(c, v) for c, v in zip(context, ctx)),
                "n_a": len(va),
                "n_b": len(vb),
                "mean_a": ma,
                "mean_b": mb,
                "diff_ms": mb - ma,
                "ci": ci,
                "change": mb / ma - 1 if ma else None,
            }
        )
    if not rows:
        raise PltError(
            f"{dir_a} and {dir_b}: no page x RTT x TFO x configuration measured in both "
            f"(pages: {', '.join(sorted({r['page'] for r in a}))} vs {', '.join(sorted({r['page'] for r in b}))})"
        )

    def side(d, meta, runs):
        label = ", ".join(_describe(c, next(iter(_values(runs, c)))) for c in compared)
        return {"folder": d, "name": meta.get("name", os.path.basename(os.path.normpath(d))), "label": label}

    return {
        "a": side(*sides[0]),
        "b": side(*sides[1]),
        "compared": compared,
        "context": context,
        "rows": rows,
        "only_a": only_a,
        "only_b": only_b,
        "few": [r for r in rows if r["ci"] is None],
    }


def _side_name(s: dict, tag: str) -> str:
    return f"{tag}: {s['folder']}" + (f" ({s['label']})" if s["label"] else "")


def title(res: dict) -> str:
    return f"{_side_name(res['a'], 'A')} vs {_side_name(res['b'], 'B')}"


def table_rows(res: dict) -> list[list[str]]:
    out = []
    for r in res["rows"]:
        page = r["page"] + (f" ({r['context']})" if r["context"] else "")
        ci = headline.NO_CI if r["ci"] is None else f"[{r['ci'][0]:+.1f}, {r['ci'][1]:+.1f}]"
        out.append(
            [
                page,
                f"{r['rtt_ms']:g}",
                "-" if r["tfo"] is None else "on" if r["tfo"] else "off",
                f"{r['n_a']} / {r['n_b']}",
                f"{r['mean_a']:.1f}",
                f"{r['mean_b']:.1f}",
                f"{r['diff_ms']:+.1f}",
                ci,
                "-" if r["change"] is None else f"{r['change'] * 100:+.1f}",
            ]
        )
    return out


def notes(res: dict) -> list[str]:
    """What the reader must know besides the table: rows without an interval, unmatched pages."""
    out = []
    if not res["compared"]:
        out.append("The folders share every knob's values: B − A is run-to-run (or machine/version) variation.")
    if res["few"]:
        out.append(
            f"{len(res['few'])} of {len(res['rows'])} row(s) have fewer than {stats.MIN_N} valid loads on a side: "
            f"no interval shown there (a {stats.INTERVAL} of so few loads understates the uncertainty)."
        )
    for side in ("a", "b"):
        only = res[f"only_{side}"]
        if only:
            shown = "; ".join(only[:8]) + (f"; and {len(only) - 8} more" if len(only) > 8 else "")
            out.append(f"Only in {side.upper()} (not compared): {shown}")
    return out


def to_html(res: dict) -> str:
    """A self-contained page: the two folders, the table, the notes."""
    dims = f"{res['a']['label']} (A) vs {res['b']['label']} (B)" if res["compared"] else "nothing (same knobs)"
    intro = html.template("compare_intro.html.j2", dims=dims, context=res["context"], interval=stats.INTERVAL)
    warn = Markup("").join(html.warn(n) for n in notes(res))
    return html.render(
        f"pltlab compare: {title(res)}",
        [("", intro + warn), ("PLT, A vs B", html._table(HEADERS, table_rows(res)))],
    )


def to_json(res: dict) -> dict:
    return {k: res[k] for k in ("a", "b", "compared", "context", "rows", "only_a", "only_b")} | {
        "min_n_for_ci": stats.MIN_N,
        "interval": stats.INTERVAL,
    }
