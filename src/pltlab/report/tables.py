"""The seeds' table (Page | RTT(ms) | PLT: no TFO (ms) | PLT: TFO (ms) | Improv. (%)) and the full
statistics table, as rows of text for Markdown, CSV, the console and HTML."""

import csv
import io

from pltlab.experiments import stats
from pltlab.report import headline
from pltlab.run import knobs

# The seeds' table, headers as the 2013 scripts printed them (its RTT is the rtt knob's column);
# compared by another knob, its sides are named by its values (seed_headers).
SEED_HEADERS = ["Page", "RTT(ms)", "PLT: no TFO (ms)", "PLT: TFO (ms)", "Improv. (%)"]
STATS_HEADERS = [
    "page",
    "configuration",
    knobs.KNOBS["rtt"].column,
    knobs.KNOBS["tfo"].name,
    "n",
    "mean_ms",
    "median_ms",
    "geomean_ms",
    "ci95_lo_ms",
    "ci95_hi_ms",
    "improvement_pct",
    "improvement_ci95_lo_pct",
    "improvement_ci95_hi_pct",
]


def seed_headers(analysis: dict) -> list[str]:
    base, alt = analysis["labels"]
    return ["Page", "RTT(ms)", f"PLT: {base} (ms)", f"PLT: {alt} (ms)", "Improv. (%)"]


def _by_name(analysis: dict) -> str:
    by = analysis["by"]
    if by == "tfo":
        return knobs.KNOBS["tfo"].name
    k = knobs.by_column(by)
    return k.name if k else by


def stats_headers(analysis: dict) -> list[str]:
    return [_by_name(analysis) if h == knobs.KNOBS["tfo"].name else h for h in STATS_HEADERS]


def _f(v, digits: int) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def _name(g: dict) -> str:
    return f"{g['page']} ({g['config']})" if g["config"] else g["page"]


def _value(g: dict, alt: bool) -> str:
    """A side's value of the compared knob: on/off for TFO, else the knob's value."""
    if g["by"] == "tfo":
        return "on" if alt else "off"
    return str(g["values"][alt])


def _side(g: dict, tfo: bool) -> list[str]:
    """RTT, the compared knob's value, n, mean, median, geomean of one side of a row (``tfo``:
    the other side, not the baseline)."""
    s = g["alt" if tfo else "base"]
    return [
        f"{g['rtt_ms']:g}",
        _value(g, tfo),
        str(s["n"]),
        _f(s["mean"], 1),
        _f(s["median"], 1),
        _f(s["geomean"], 1),
    ]


def seeds_rows(analysis: dict) -> list[list[str]]:
    return [
        [
            _name(g),
            f"{g['rtt_ms']:g}",
            _f(g["base"]["mean"], 0),
            _f(g["alt"]["mean"], 0),
            _f(None if g["improvement"] is None else g["improvement"] * 100, 1),
        ]
        for g in analysis["rows"]
    ]


def stats_rows(analysis: dict) -> list[list[str]]:
    out = []
    for g in analysis["rows"]:
        imp = g["improvement"]
        # (intervals as the report shows them: "-" where a side has fewer than MIN_N loads, stats.shown)
        lo, hi = g["improvement_ci"] if stats.shown(g["base"]["n"], g["alt"]["n"]) else (None, None)
        for tfo in (False, True):
            s = g["alt" if tfo else "base"]
            s = s | {"ci": s["ci"] if stats.shown(s["n"]) else [None, None]}
            out.append(
                [
                    g["page"],
                    g["config"],
                    *_side(g, tfo),
                    _f(s["ci"][0], 1),
                    _f(s["ci"][1], 1),
                    _f(None if imp is None else imp * 100, 2),
                    _f(None if lo is None else lo * 100, 2),
                    _f(None if hi is None else hi * 100, 2),
                ]
            )
    return out


COMPACT_STATS_HEADERS = [
    "page",
    "RTT(ms)",
    "TFO",  # (the compared knob: compact_stats names it)
    "n",
    "mean (ms)",
    "median (ms)",
    "geomean (ms)",
    f"{stats.INTERVAL} of the mean (ms)",
]


def compact_stats(analysis: dict) -> tuple[list[str], list[list[str]]]:
    """The statistics for the HTML report, one row per side in 8 columns that fit the page (the
    13-column table stays in stats.md/csv); no interval where n < MIN_N (stats.shown)."""
    out = []
    for g in analysis["rows"]:
        for tfo in (False, True):
            s = g["alt" if tfo else "base"]
            if not s["n"]:
                continue
            lo, hi = s["ci"]
            ci = headline.NO_CI if not stats.shown(s["n"]) else f"[{_f(lo, 1)}, {_f(hi, 1)}]"
            out.append([_name(g), *_side(g, tfo), ci])
    by = "TFO" if analysis["by"] == "tfo" else _by_name(analysis)
    return [by if h == "TFO" else h for h in COMPACT_STATS_HEADERS], out


def markdown(headers: list[str], rows: list[list[str]]) -> str:
    # by hand: a padded pipe table in 5 lines (pandas' to_markdown needs tabulate, another dependency)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    sep = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([line(headers), sep] + [line(r) for r in rows]) + "\n"


def to_csv(headers: list[str], rows: list[list[str]]) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(headers)
    w.writerows(rows)
    return buf.getvalue()
