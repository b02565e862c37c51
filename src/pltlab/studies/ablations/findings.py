"""The ablations' findings from their results folders: per variant its headline figures, per
factor its effect with its CI (pltlab.studies.ablations.effects), the measured sentences and one
paper's section of docs/results/paper-gaps.md (pltlab.studies.ablations.gaps). Reads the folders,
never measures; a variant that did not finish is listed as such."""

from __future__ import annotations

import json
import os

from pltlab import files
from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.studies import engine
from pltlab.studies.ablations import effects, paths
from pltlab.studies.ablations.variants import PAPERS
from pltlab.studies.paper_gaps import PUBLISHED, SUMMARY

TOP = 3  # factors named in the table as accounting for the difference: the largest effects
SLOW_MS = 1000  # icw: a 48 KB download slower than this waited a retransmission timeout (1 s initial RTO)


def _pct(x) -> str:
    return "-" if x is None else f"{x * 100:.1f} %"


def _pts(x) -> str:
    return "-" if x is None else f"{x * 100:+.1f} pts"


def _ci(ci, fmt, n: int | None = None) -> str:
    """An interval as text; none: too few loads (stats.shown: the tables' rule) or BCa had none."""
    if ci:
        return f"[{fmt(ci[0])}, {fmt(ci[1])}]"
    return stats.NO_CI if n is not None and not stats.shown(n) else "no CI"


def _ratio(x) -> str:
    return "-" if x is None else f"{x:.2f}"


def _dratio(x) -> str:
    return "-" if x is None else f"{x:+.2f}"


def read_plan(folder: str) -> tuple[str, list[dict]]:
    """The paper and the variants of an ablation folder (its study.json)."""
    doc = engine.read_study(folder)
    if not doc or doc.get("study") != "ablations":
        raise PltError(f"{folder}: no {engine.STUDY_FILE} of `pltlab reproduce ablations` here")
    return doc["params"]["paper"], doc["variants"]


def summarize(folder: str) -> dict:
    """An ablation folder's findings: each finished variant's headline, each factor's effect
    against its base, whether each moves the figure into the paper's band, and the sentences."""
    paper, plan = read_plan(folder)
    tfo = paper == "tfo"
    heads, loads, drops, where, missing = {}, {}, {}, {}, []
    for v in plan:
        d = os.path.join(folder, v["name"])
        try:
            heads[v["name"]] = effects.tfo_headline(d) if tfo else effects.icw_headline(d)
            loads[v["name"]] = effects.tfo_loads(d) if tfo else effects.icw_loads(d, heads[v["name"]]["icw"])
            if not tfo:
                h = heads[v["name"]]
                h["median_ci"] = effects.median_ratio_ci(loads[v["name"]])
                # a download that lost its SYN-ACK (or a tail of its answer) waits a retransmission timeout
                h["slow_downloads"] = effects.slow_downloads(loads[v["name"]], SLOW_MS)
        except PltError:
            missing.append(v["name"])
            continue
        if tfo:  # (the fairness flows' link: not recorded per flow)
            drops[v["name"]] = effects.tfo_drops(d)
            where[v["name"]] = paths.cells(d, [(c["page"], c["rtt_ms"]) for c in heads[v["name"]]["cells"]])
    if not tfo and heads:  # a variant whose run at the largest ICW failed: judged at none
        top = max(h["icw"] for h in heads.values())
        for name, h in heads.items():
            if h["icw"] != top:
                why = effects.icw_failures(os.path.join(folder, name), top)
                h.update(in_band=False, missing_icw=top, missing_why=why)
    out_effects = []
    for v in plan:
        b = v["base"]
        if not b or v["name"] not in heads or b not in heads:
            continue
        if not tfo and heads[v["name"]]["icw"] != heads[b]["icw"]:
            e = {"effect": None, "ci": None, "n": 0}  # (two ICWs: no effect)
        elif tfo:
            e = effects.tfo_effect(loads[v["name"]], loads[b])
            rtts = sorted({c["rtt_ms"] for c in heads[v["name"]]["cells"]})
            e["by_rtt"] = [{"rtt_ms": r, **effects.tfo_effect(loads[v["name"]], loads[b], r)} for r in rtts]
        else:
            e = effects.icw_effect(loads[v["name"]], loads[b])
        out_effects.append(
            {
                "variant": v["name"],
                "base": b,
                "factor": " ".join(v["knobs"]),
                "role": v["role"],
                "why": v.get("why", ""),
                **e,
                "in_band": heads[v["name"]]["in_band"],
                "base_in_band": heads[b]["in_band"],
                "moves_into_band": heads[v["name"]]["in_band"] and not heads[b]["in_band"],
            }
        )
    doc = {
        "paper": paper,
        "preset": PAPERS[paper].preset,
        "published": PUBLISHED[paper],
        "variants": [
            {**v, "headline": heads.get(v["name"]), "drops": drops.get(v["name"]), "paths": where.get(v["name"])}
            for v in plan
        ],
        "missing": missing,
        # why a variant has no figure, where its runs say (icw: each failed fairness run's reason)
        "missing_why": {n: effects.icw_failures(os.path.join(folder, n)) for n in missing} if not tfo else {},
        "effects": out_effects,
    }
    doc["run"] = run_facts(folder, doc)
    doc["sentences"] = sentences(doc)
    return doc


def run_facts(folder: str, doc: dict) -> str:
    """How much each variant measured, in words: tfo the loads a side per page x RTT (their
    stats.csv), icw each fairness run's duration (a variant's study.json)."""
    if doc["paper"] == "tfo":
        ns = [c["n"] for v in doc["variants"] if v["headline"] for c in v["headline"]["cells"]]
        if not ns:
            return "no loads"
        lo, hi = min(ns), max(ns)
        return f"{lo if lo == hi else f'{lo}-{hi}'} loads a side per page x RTT"
    for v in doc["variants"]:
        got = engine.read_study(os.path.join(folder, v["name"]))
        if got and got.get("params", {}).get("fairness_seconds"):
            return f"fairness runs of {got['params']['fairness_seconds']:g} s"
    return "no fairness run"


def _head(doc: dict, name: str) -> dict | None:
    return next((v["headline"] for v in doc["variants"] if v["name"] == name), None)


def headline_text(paper: str, h: dict | None, median: bool = True) -> str:
    """A variant's headline in words: tfo its range and per-RTT means, icw its ratio [CI]."""
    if h is None:
        return "not measured"
    if paper == "icw":
        text = f"{_ratio(h['ratio'])} {_ci(h['ci'], _ratio, h['downloads'])} at ICW {h['icw']}"
        if h.get("missing_icw"):
            why = "; ".join(h.get("missing_why") or [])
            text = f"no run at ICW {h['missing_icw']} (its fairness runs failed{': ' + why if why else ''}); {text}"
        return text + (median_text(h) if median else "")
    imps = [c["improvement"] for c in h["cells"] if c["improvement"] is not None]
    if not imps:
        return "no valid loads"
    by = {}
    for c in h["cells"]:
        if c["improvement"] is not None:
            by.setdefault(c["rtt_ms"], []).append(c["improvement"])
    means = "/".join(f"{sum(x) / len(x) * 100:.1f}" for _, x in sorted(by.items()))
    rtts = "/".join(f"{r:g}" for r in sorted(by))
    return f"{_pct(min(imps))} to {_pct(max(imps))} (mean at {rtts} ms: {means} %)"


def median_text(h: dict) -> str:
    """icw: the median download's rate over the long flow's, where the headline has it."""
    if h.get("median_ratio") is None:
        return ""
    ci = h.get("median_ci")
    return (
        f"; median download {h['short_median_kbyte_s']:.1f} KB/s over the long flow's {h['long_kbyte_s']:.1f}: "
        f"{_ratio(h['median_ratio'])}{f' [{_ratio(ci[0])}, {_ratio(ci[1])}]' if ci else ''}"
    )


def median_sentence(doc: dict) -> str | None:
    """icw: the study's short-flow rate beside the preset's median and aggregate download rates,
    and how many downloads waited a retransmission timeout (their aggregate's shortfall)."""
    v = next((v for v in doc["variants"] if v["name"] == doc["preset"] and v["headline"]), None)
    h = v and v["headline"]
    if not h or h.get("median_ratio") is None:
        return None
    slow = h.get("slow_downloads")
    lo = doc["published"]["band"][0]
    where = "within" if h["median_ratio"] >= lo else "outside"
    return (
        f"The study's rates (short downloads 59.1, the long flow 12.6 KB/s) beside the {doc['preset']} preset's: "
        f"the median download {h['short_median_kbyte_s']:.1f} KB/s, the long flow {h['long_kbyte_s']:.1f} KB/s, "
        f"their ratio {_ratio(h['median_ratio'])} ({where} the band, >= {lo:.1f}); the aggregate download rate "
        f"(all bytes over all download time, the ratio above) is {h['short_kbyte_s']:.1f} KB/s"
        + (
            f": {slow[0]} of its {slow[2]} downloads took over {SLOW_MS / 1000:g} s (TCP's initial retransmission "
            f"timeout), {slow[1]} of them with the client sending again (its SYN or request: the SYN-ACK or the "
            "first answer lost)"
            if slow
            else ""
        )
        + "."
    )


def largest(doc: dict, n: int = TOP) -> list[dict]:
    """The ``n`` factors with the largest measured effects (by size)."""
    es = [e for e in doc["effects"] if e["effect"] is not None]
    return sorted(es, key=lambda e: -abs(e["effect"]))[:n]


def effect_text(paper: str, e: dict) -> str:
    fmt = _pts if paper == "tfo" else _dratio
    return f"{fmt(e['effect'])} {_ci(e['ci'], fmt, e['n'])}"


def _where(e: dict) -> str:
    return "from today's defaults" if e["role"] != "back" and e["base"] == "today" else f"in the {e['base']} set-up"


def sentences(doc: dict) -> list[str]:
    """What was measured, in sentences (only figures of the folder)."""
    paper, preset = doc["paper"], doc["preset"]
    pub = doc["published"]
    what = "TFO improvement" if paper == "tfo" else "fairness ratio"
    out = []
    today, pre = _head(doc, "today"), _head(doc, preset)
    band = (
        f"{pub['band'][0]:.0%}-{pub['band'][1]:.0%} rising with RTT" if paper == "tfo" else f">= {pub['band'][0]:.1f}"
    )
    if today or pre:
        out.append(
            f"Measured {what}: today's defaults {headline_text(paper, today, False)}"
            f"{'' if not today else ' (in the paper band)' if today['in_band'] else ' (outside the paper band)'}"
            f"{median_text(today) if today else ''}; "
            f"the {preset} preset {headline_text(paper, pre, False)}"
            f"{'' if not pre else ' (in the paper band)' if pre['in_band'] else ' (outside the paper band)'}"
            f"{median_text(pre) if pre else ''}; "
            f"the paper's band: {band}."
        )
    for e in largest(doc):
        moved = (
            "moves it into the paper's band"
            if e["moves_into_band"]
            else "leaves it in the band"
            if e["in_band"]
            else "does not bring it into the paper's band"
        )
        zero = e["ci"] and e["ci"][0] <= 0 <= e["ci"][1]
        out.append(
            f"Setting {e['factor']} {_where(e)} changes the {what} by {effect_text(paper, e)}"
            f"{' (its CI spans zero)' if zero else ''} and {moved}."
        )
    if paper == "tfo":
        out += paths_sentences(doc)
        out.append(drops_sentence(doc))
    elif said := median_sentence(doc):
        out.append(said)
    if doc["missing"]:
        why = doc.get("missing_why") or {}
        out.append(
            "Not finished, so not measured: "
            + ", ".join(f"{n} (its runs failed: {'; '.join(why[n])})" if why.get(n) else n for n in doc["missing"])
            + "."
        )
    return out


def drops_text(d: dict | None) -> str:
    """A variant's link drops in words (effects.tfo_drops), or that they were not measured."""
    if not d:
        return "not measured"
    part = "" if d["loads"] == d["runs"] else f" (of {d['runs']})"
    return f"{d['loss'] + d['queue']} ({d['loss']} lost, {d['queue']} queue overflow) in {d['loads']} loads{part}"


def drops_sentence(doc: dict) -> str:
    """RACK and TLP (the preset's rack/tlp) recover lost packets: how many the TFO link dropped in
    the loads of today's defaults and of the preset, as its emulator counted them per load."""
    measured = [v for v in doc["variants"] if v["name"] in ("today", doc["preset"]) and v.get("drops")]
    got, names = [v["drops"] for v in measured], [v["name"] for v in measured]
    if not got:
        return (
            "RACK/TLP act on losses: the TFO link's drops were not measured (these loads predate pltlab "
            "recording the link emulator's drop counts per load)."
        )
    n, m = sum(d["loss"] + d["queue"] for d in got), sum(d["loads"] for d in got)
    loss, queue = sum(d["loss"] for d in got), sum(d["queue"] for d in got)
    return (
        f"RACK/TLP act on losses: the TFO link dropped {n} packets in {m} loads "
        f"({loss} by random loss, {queue} by queue overflow; {' and '.join(names)}, both directions)."
    )


def _span(xs: list[float], digits: int = 1) -> str:
    """Shares' range in percent: ``lo-hi %``, one number where they round alike."""
    lo, hi = (f"{x * 100:.{digits}f}" for x in (min(xs), max(xs)))
    return f"{lo} %" if lo == hi else f"{lo}-{hi} %"


def _by_rtt(rows: list[dict]) -> dict[float, list[dict]]:
    by: dict[float, list[dict]] = {}
    for r in rows:
        by.setdefault(r["rtt_ms"], []).append(paths.shares(r))
    return dict(sorted(by.items()))


def _count_span(xs: list[int]) -> str:
    return f"{min(xs)}" if min(xs) == max(xs) else f"{min(xs)}-{max(xs)}"


def paths_sentences(doc: dict) -> list[str]:
    """What the page's structure allows TFO to save (pltlab.studies.ablations.paths: k connection
    set-ups on the TFO-off critical path x RTT / PLT) beside what it saved, per RTT, in today's
    defaults, the preset and every variant in the paper's band (with the set-ups on its paths beside
    its base's); and the cells below the band one by one."""
    lo = doc["published"]["band"][0]
    out = []
    bases = {v["name"]: v for v in doc["variants"]}
    for v in doc["variants"]:
        inband = bool(v["headline"] and v["headline"].get("in_band"))
        if not (v["name"] in ("today", doc["preset"]) or inband) or not v.get("paths"):
            continue
        base = bases.get(v.get("base") or "")
        if v["name"] not in ("today", doc["preset"]) and base and base.get("paths"):
            ks, kb = ([r["handshakes_on_path"] for r in x["paths"]] for x in (v, base))
            out.append(
                f"`{v['name']}` is in the paper's band: {_count_span(ks)} connection set-ups on the critical path of "
                f"its TFO-off loads, against {_count_span(kb)} in `{base['name']}`."
            )
        parts = [
            f"at {r:g} ms k x RTT / PLT {_span([s['allowed'] for s in ss])}, TFO saved {_span([s['saved'] for s in ss])}"
            f" (transfer {_span([s['transfer'] for s in ss], 0)} of the path)"
            for r, ss in _by_rtt(v["paths"]).items()
        ]
        out.append(
            f"`{v['name']}`: TFO takes one round trip off each new connection on the critical path, so k set-ups "
            f"on the TFO-off path allow k x RTT: {'; '.join(parts)}."
        )
        imp = {(c["page"], c["rtt_ms"]): c["improvement"] for c in v["headline"]["cells"]}
        below = [
            r
            for r in v["paths"]
            if imp.get((r["page"], r["rtt_ms"])) is not None and imp[(r["page"], r["rtt_ms"])] < lo
        ]
        if below:
            each = "; ".join(
                f"{r['page']} {r['rtt_ms']:g} ms: {r['handshakes_on_path']} set-ups x {r['rtt_ms']:g} ms of a "
                f"{r['plt_off_ms'] / 1000:.1f} s PLT = {_span([paths.shares(r)['allowed']])}, measured "
                f"{_pct(imp[(r['page'], r['rtt_ms'])])}"
                for r in below
            )
            out.append(
                f"`{v['name']}`'s cells below the paper's {lo:.0%}: {each}. Reaching {lo:.0%} would take a "
                f"PLT of at most k x RTT / {lo:.0%} (e.g. {below[0]['handshakes_on_path']} x {below[0]['rtt_ms']:g} ms"
                f" / {lo:.0%} = {below[0]['handshakes_on_path'] * below[0]['rtt_ms'] / lo / 1000:.1f} s) or more "
                "set-ups on the path."
            )
    return out


def allowed_column(doc: dict) -> list[str]:
    """tfo: the top table's last column, its head and its text: what the pages allow TFO to save in
    the preset (k x RTT / PLT per RTT); none without the preset's paths."""
    v = next((v for v in doc["variants"] if v["name"] == doc["preset"] and v.get("paths")), None)
    if v is None:
        return []
    text = ", ".join(f"{r:g} ms {_span([s['allowed'] for s in ss])}" for r, ss in _by_rtt(v["paths"]).items())
    return [f"what the pages allow in the {doc['preset']} preset (k set-ups on the path x RTT / PLT)", text]


def _paths_table(doc: dict) -> list[str]:
    """tfo: per variant x RTT, what the page structure allows TFO to save (k x RTT / PLT) beside
    what it saved, and the transfer's share of the path (ranges over the pages)."""
    rows = [(v["name"], _by_rtt(v["paths"])) for v in doc["variants"] if v.get("paths")]
    if not rows:
        return []
    rtts = sorted({r for _, by in rows for r in by})
    out = [
        "What the pages allow TFO to save: k connection set-ups on the critical path of each page's median "
        "TFO-off load (`pltlab explain`) x RTT / its PLT, beside what TFO saved and the transfer's share of "
        "that path (ranges over the pages):",
        "",
        _row(["variant"] + [f"{r:g} ms: allowed / saved / transfer" for r in rtts]),
        _row(["---"] * (1 + len(rtts))),
    ]
    for name, by in rows:
        out.append(
            _row(
                [f"`{name}`"]
                + [
                    "-"
                    if r not in by
                    else f"{_span([s['allowed'] for s in by[r]])} / {_span([s['saved'] for s in by[r]])}"
                    f" / {_span([s['transfer'] for s in by[r]], 0)}"
                    for r in rtts
                ]
            )
        )
    return out


# ---- Markdown ----------------------------------------------------------------------------
def _row(cells) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def _cells_table(doc: dict) -> list[str]:
    """tfo: each variant's improvement per page x RTT with its CI (the study's stats.csv)."""
    heads = [(v["name"], v["headline"]) for v in doc["variants"] if v["headline"]]
    cells = sorted({(c["page"], c["rtt_ms"]) for _, h in heads for c in h["cells"]})
    out = [
        "TFO improvement per page x RTT [95 % BCa bootstrap interval] (each variant's stats.csv):",
        "",
        _row(["variant"] + [f"{p} {r:g} ms" for p, r in cells]),
        _row(["---"] * (1 + len(cells))),
    ]
    for name, h in heads:
        by = {(c["page"], c["rtt_ms"]): c for c in h["cells"]}
        out.append(
            _row(
                [f"`{name}`"]
                + [
                    "-"
                    if k not in by or by[k]["improvement"] is None
                    else f"{_pct(by[k]['improvement'])} {_ci(by[k]['ci'], _pct, by[k]['n'])}"
                    for k in cells
                ]
            )
        )
    return out


def markdown(doc: dict) -> str:
    """One paper's section of paper-gaps.md."""
    paper, preset = doc["paper"], doc["preset"]
    pub = doc["published"]
    pub_text = (
        f"{pub['band'][0]:.0%} to {pub['band'][1]:.0%}, rising with RTT"
        if paper == "tfo"
        else f"{pub['value']} (band: >= {pub['band'][0]:.1f})"
    )
    top = "; ".join(f"{e['variant']} vs {e['base']}: {effect_text(paper, e)}" for e in largest(doc)) or "-"
    bound = allowed_column(doc)
    lines = [
        f"## {'TFO' if paper == 'tfo' else 'ICW fairness'} ({len(doc['variants'])} variants, "
        f"{doc.get('run') or 'as its folder says'}): {pub['source']}",
        "",
        f"{pub['what'][0].upper()}{pub['what'][1:]}.",
        "",
        _row(
            [
                "published",
                "pltlab today",
                f"pltlab {preset} preset",
                "largest measured effects (factor: effect [95 % CI])",
            ]
            + bound[:1]
        ),
        _row(["---"] * (4 + len(bound[:1]))),
        _row(
            [pub_text, headline_text(paper, _head(doc, "today")), headline_text(paper, _head(doc, preset)), top]
            + bound[1:]
        ),
        "",
        "Every variant:",
        "",
        _row(["variant", "what", "figure", "in the paper's band"] + (["link drops"] if paper == "tfo" else [])),
        _row(["---"] * (5 if paper == "tfo" else 4)),
    ]
    for v in doc["variants"]:
        h = v["headline"]
        lines.append(
            _row(
                [
                    f"`{v['name']}`",
                    v.get("why") or v["role"],
                    headline_text(paper, h),
                    "-" if h is None else "yes" if h["in_band"] else "no",
                ]
                + ([drops_text(v.get("drops")) if h else "-"] if paper == "tfo" else [])
            )
        )
    if paper == "tfo":
        lines += ["", *_cells_table(doc)]
        table = _paths_table(doc)
        lines += ["", *table] if table else []
    rtts = sorted({r["rtt_ms"] for e in doc["effects"] for r in e.get("by_rtt", [])})
    lines += [
        "",
        "Each factor's effect (the variant minus its base; 95 % BCa bootstrap interval over the loads):",
        "",
        _row(["variant", "base", "effect"] + [f"at {r:g} ms" for r in rtts] + ["moves into the band"]),
        _row(["---"] * (4 + len(rtts))),
    ]
    for e in doc["effects"]:
        by = {r["rtt_ms"]: r for r in e.get("by_rtt", [])}
        lines.append(
            _row(
                [f"`{e['variant']}`", f"`{e['base']}`", effect_text(paper, e)]
                + [effect_text(paper, by[r]) if r in by and by[r]["effect"] is not None else "-" for r in rtts]
                + ["yes" if e["moves_into_band"] else "no"]
            )
        )
    lines += ["", *(f"- {s}" for s in doc["sentences"]), ""]
    return "\n".join(lines)


def write(folder: str) -> dict:
    """Write an ablation folder's ablations.json and ablations.md; returns the summary."""
    doc = summarize(folder)
    files.write_text(os.path.join(folder, SUMMARY), json.dumps(doc, indent=1))
    files.write_text(os.path.join(folder, "ablations.md"), markdown(doc))
    return doc
