"""The report's headline: the PLT table with the improvement and its interval, one sentence per page,
and the warning wherever a side has fewer than MIN_N loads (a bootstrap interval of 2 or 3 values
says nothing about the uncertainty: such intervals are not shown; the rule is
pltlab.experiments.stats.shown, the console's too)."""

from collections.abc import Callable

from pltlab.experiments import stats

MIN_N = stats.MIN_N  # loads per side below which no interval is shown (stats.shown)
CI = f"{stats.INTERVAL} (%)"

HEADERS = [
    "Page",
    "RTT(ms)",
    "n (off / on)",
    "PLT: no TFO (ms)",
    "PLT: TFO (ms)",
    "saved (ms)",
    "Improv. (%)",
    CI,
]
NO_CI = stats.NO_CI


def headers(analysis: dict) -> list[str]:
    """HEADERS with the compared sides' names (TFO: HEADERS as they are)."""
    if analysis["by"] == "tfo":
        return list(HEADERS)
    base, alt = analysis["labels"]
    return [
        "Page",
        "RTT(ms)",
        f"n ({base} / {alt})",
        f"PLT: {base} (ms)",
        f"PLT: {alt} (ms)",
        "saved (ms)",
        "Improv. (%)",
        CI,
    ]


def subject(g: dict) -> str:
    """What a row's sentence says saved: ``TFO``, or ``h2 vs h1``."""
    if g["by"] == "tfo":
        return "TFO"
    base, alt = g["labels"]
    return f"{alt} vs {base}"


def enough(*ns: int) -> bool:
    return stats.shown(*ns)


def _name(g: dict) -> str:
    return f"{g['page']} ({g['config']})" if g["config"] else g["page"]


def _f(v, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def saved_ms(g: dict) -> float | None:
    off, on = g["base"]["mean"], g["alt"]["mean"]  # (the baseline's, the other side's)
    return None if off is None or on is None else off - on


def ci_text(g: dict) -> str:
    """The improvement's interval, or why there is none."""
    lo, hi = g["improvement_ci"]
    if g["improvement"] is None:
        return "-"
    if not enough(g["base"]["n"], g["alt"]["n"]):
        return NO_CI
    if lo is None:  # (BCa had no answer: stats.bca)
        return "-"
    return f"[{lo * 100:.1f}, {hi * 100:.1f}]"


def rows(analysis: dict) -> list[list[str]]:
    return [
        [
            _name(g),
            f"{g['rtt_ms']:g}",
            f"{g['base']['n']} / {g['alt']['n']}",
            _f(g["base"]["mean"], 0),
            _f(g["alt"]["mean"], 0),
            _f(saved_ms(g), 0),
            _f(None if g["improvement"] is None else g["improvement"] * 100, 1),
            ci_text(g),
        ]
        for g in analysis["rows"]
    ]


def small_n(analysis: dict) -> list[str]:
    """The rows (page @ RTT, configuration) with a side of fewer than MIN_N valid loads."""
    return [
        f"{_name(g)} @ {g['rtt_ms']:g} ms (n = {g['base']['n']} / {g['alt']['n']})"
        for g in analysis["rows"]
        if (g["base"]["n"] or g["alt"]["n"]) and not enough(g["base"]["n"], g["alt"]["n"])
    ]


def warning(analysis: dict) -> str | None:
    few = small_n(analysis)
    if not few:
        return None
    shown = ", ".join(few[:6]) + (f" and {len(few) - 6} more" if len(few) > 6 else "")
    return (
        f"Fewer than {MIN_N} valid loads per side in {len(few)} of {len(analysis['rows'])} row(s): {shown}. "
        f"A {stats.INTERVAL} of so few loads understates the uncertainty, so none is shown there "
        f"(tables say '{NO_CI}', figures draw no whiskers); run more repetitions to get one."
    )


def _point(g: dict) -> str:
    rtt = g["rtt_ms"]
    saved = saved_ms(g)
    if saved is None:
        return f"at {rtt:g} ms RTT only one side was measured"
    verb = "saves" if saved >= 0 else "costs"
    rtts = f" = {abs(saved) / rtt:.1f} RTT" if rtt else ""
    ci = ci_text(g)
    ci = f", {stats.INTERVAL} {ci} %" if ci.startswith("[") else f", n = {g['base']['n']} / {g['alt']['n']}: no CI"
    lo, hi = g["improvement_ci"]
    unclear = enough(g["base"]["n"], g["alt"]["n"]) and lo is not None and lo < 0 < hi
    return (
        f"{verb} {abs(saved):.0f} ms{rtts} at {rtt:g} ms RTT ({g['improvement'] * 100:.1f} %{ci}"
        + ("; not significant" if unclear else "")
        + ")"
    )


def sentences(analysis: dict, explain: Callable[[str, list[dict]], str | None] | None = None) -> list[tuple[str, str]]:
    """(page, sentence) per page, from the improvement figures; ``explain(page, rows)``: the hook
    for `pltlab explain`'s words on the page (which handshakes were saved on the critical path),
    added where it has some (pltlab.report.why.sentence_hook)."""
    pages: dict[str, list[dict]] = {}
    for g in analysis["rows"]:
        pages.setdefault(g["page"], []).append(g)
    out = []
    for page, gs in pages.items():
        why = explain(page, gs) if explain else None
        by_cfg: dict[str, list[dict]] = {}
        for g in gs:
            by_cfg.setdefault(g["config"], []).append(g)
        parts = [
            (f"with {cfg}, " if cfg else "")
            + f"{subject(cg[0])} "
            + "; ".join(_point(g) for g in sorted(cg, key=lambda g: g["rtt_ms"]))
            for cfg, cg in by_cfg.items()
        ]
        said = f"{page}: " + "; ".join(parts) + "."
        out.append((page, f"{said} {why}" if why else said))
    return out
