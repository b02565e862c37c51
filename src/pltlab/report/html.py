"""The self-contained HTML report: no script, no external resource (figures are data: URIs)."""

import base64
import html
import os

from pltlab.report.tables import SEED_HEADERS, STATS_HEADERS

CSS = """body{font-family:sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right}
td:first-child,th:first-child{text-align:left}th{background:#eee}img{max-width:100%;border:1px solid #ddd}
.wide{overflow-x:auto;font-size:90%}pre{background:#f6f6f6;padding:1em;overflow:auto}.bad{color:#a00}figure{margin:1.5em 0}"""


def _table(headers, rows) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f'<div class="wide"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _img(path: str) -> str:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    name = os.path.basename(path)
    return (
        f'<figure><img src="data:image/png;base64,{data}" alt="{html.escape(name)}">'
        f"<figcaption>{html.escape(name)}</figcaption></figure>"
    )


def render(title: str, sections: list[tuple[str, str]]) -> str:
    body = "".join(f"<h2>{html.escape(h)}</h2>{content}" for h, content in sections)
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
        f'<link rel="icon" href="data:,"><style>{CSS}</style></head>'
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>"
    )


def notes(items: list[tuple[str, bool]]) -> str:
    return "<ul>" + "".join(f"<li{' class=bad' if bad else ''}>{html.escape(n)}</li>" for n, bad in items) + "</ul>"


def pre(text: str) -> str:
    return f"<pre>{html.escape(text)}</pre>"


def images(pngs: list[str]) -> str:
    return "".join(_img(p) for p in pngs)


def env_table(env: dict) -> str:
    return _table(["item", "value"], [[k, str(v)] for k, v in env.items()])


def section(sec: dict) -> str:
    """A study's report section (pltlab.studies.engine.table/lines) as HTML."""
    out = f"<p>{html.escape(sec['note'])}</p>" if sec.get("note") else ""
    if "rows" in sec:
        return out + _table(sec["headers"], sec["rows"])
    bad = tuple(sec.get("bad") or ())
    return out + notes([(x, bool(bad) and x.startswith(bad)) for x in sec["lines"]])


def sections(analysis, meta, seeds, stats, figures, notes_, extra=()) -> list[tuple[str, str]]:
    """The sweep report; ``extra``: a study's sections (its comparison with the published
    results) after the tables."""
    pngs = [p for p in figures if p.endswith(".png")]
    return [
        ("PLT table (means; improvement = 1 − PLT_TFO / PLT_noTFO, signed)", _table(SEED_HEADERS, seeds)),
        ("Statistics (n, mean, median, geometric mean, 95 % bootstrap CIs)", _table(STATS_HEADERS, stats)),
        *[(s["title"], section(s)) for s in extra],
        ("Validity", notes(notes_)),
        ("Figures", images(pngs)),
        ("Experiment file", pre(meta.get("experiment") or "(built in)")),
        ("Environment", env_table(meta.get("environment", {}))),
    ]
