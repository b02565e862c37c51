"""The self-contained HTML report: no external resource (figures are data: URIs; the waterfalls'
script and data are inline, pltlab.report.waterfalls). Its tables fit a 1280 px wide window."""

import base64
import html
import os

from pltlab.experiments import stats

CSS = """*{box-sizing:border-box}
body{font-family:sans-serif;max-width:1240px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;max-width:100%}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right;overflow-wrap:anywhere}
td:first-child,th:first-child{text-align:left}th{background:#eee}img{max-width:100%;border:1px solid #ddd}
.wide{overflow-x:auto;font-size:90%}pre{background:#f6f6f6;padding:1em;overflow:auto;white-space:pre-wrap}
.bad{color:#a00}figure{margin:1.5em 0}td.noci{color:#a00;font-style:italic}
.warn{border-left:5px solid #d98b00;background:#fff6e0;padding:.6em 1em;margin:1em 0}
.headline li{margin:.3em 0}.env td:last-child{text-align:left}"""


def _cell(c: str) -> str:
    cls = ' class="noci"' if c.startswith("n < ") else ""
    return f"<td{cls}>{html.escape(c)}</td>"


def _table(headers, rows, cls: str = "") -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(_cell(c) for c in r) + "</tr>" for r in rows)
    c = f' class="{cls}"' if cls else ""
    return f'<div class="wide"><table{c}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    name = os.path.basename(path)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(name)}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>"
    )


def render(title: str, sections: list[tuple[str, str]], css: str = "") -> str:
    """The page; ``css``: more style (the waterfalls')."""
    body = "".join(f"<h2>{html.escape(h)}</h2>{content}" if h else content for h, content in sections)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="icon" href="data:,"><style>{CSS}{css}</style></head>'
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def notes(items: list[tuple[str, bool]]) -> str:
    return "<ul>" + "".join(f"<li{' class=bad' if bad else ''}>{html.escape(n)}</li>" for n, bad in items) + "</ul>"


def pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def images(pngs: list[str]) -> str:
    return "".join(_img(p) for p in pngs)


def env_table(env: dict) -> str:
    return _table(["item", "value"], [[k, str(v)] for k, v in env.items()], cls="env")


def section(sec: dict) -> str:
    """A study's report section (pltlab.studies.engine.table/lines) as HTML."""
    out = f"<p>{html.escape(sec['note'])}</p>" if sec.get("note") else ""
    if "rows" in sec:
        return out + _table(sec["headers"], sec["rows"])
    bad = tuple(sec.get("bad") or ())
    return out + notes([(x, bool(bad) and x.startswith(bad)) for x in sec["lines"]])


def warn(text: str) -> str:
    return f'<p class="warn">{html.escape(text)}</p>'


def sentences(items: list[tuple[str, str]]) -> str:
    return '<ul class="headline">' + "".join(f"<li>{html.escape(s)}</li>" for _, s in items) + "</ul>"


def sections(
    analysis, meta, headline, stats_, figures, notes_, extra=(), waterfalls="", warning=None
) -> list[tuple[str, str]]:
    """The sweep report, headline first: the warning where n < 5, one sentence per page, the PLT
    table and the improvement vs RTT; then the waterfalls, statistics, ``extra`` (a study's
    sections, what each feature saves), validity, other figures, experiment file, environment.
    ``headline``: (sentences, headers, rows); ``stats_``: (headers, rows)."""
    said, h_headers, h_rows = headline
    pngs = [p for p in figures if p.endswith(".png") and not os.path.basename(p).startswith("requests-")]
    first = [p for p in pngs if os.path.basename(p).startswith("improvement-vs-rtt")]
    rest = [p for p in pngs if p not in first]
    top = (warn(warning) if warning else "") + sentences(said)
    return [
        ("", top),
        (
            f"PLT table (means; improvement = 1 − PLT_TFO / PLT_noTFO, signed; {stats.INTERVAL})",
            _table(h_headers, h_rows),
        ),
        *([("Improvement vs RTT", images(first))] if first else []),
        *([("Waterfalls: the median load, TFO off vs on", waterfalls)] if waterfalls else []),
        (f"Statistics per side (n, mean, median, geometric mean, {stats.INTERVAL} of the mean)", _table(*stats_)),
        *[(s["title"], section(s)) for s in extra],
        ("Validity", notes(notes_)),
        *([("Figures", images(rest))] if rest else []),
        ("Experiment file", pre(meta.get("experiment") or "(built in)")),
        ("Environment", env_table(meta.get("environment", {}))),
    ]
