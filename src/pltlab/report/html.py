"""The self-contained HTML report: no external resource (figures are data: URIs; the waterfalls'
script and data are inline, pltlab.report.waterfalls). Its tables fit a 1280 px wide window. The
markup is Jinja2's (templates/: the page and its pieces), autoescaped."""

import base64
import os

import jinja2
from markupsafe import Markup

from pltlab.experiments import stats

CSS = """*{box-sizing:border-box}
body{font-family:sans-serif;max-width:1240px;margin:1.5em auto;padding:0 1em;color:#222}
table{border-collapse:collapse;margin:1em 0;max-width:100%}td,th{border:1px solid #bbb;padding:3px 8px;text-align:right;overflow-wrap:anywhere}
td:first-child,th:first-child{text-align:left}th{background:#eee}img{max-width:100%;border:1px solid #ddd}
.wide{overflow-x:auto;font-size:90%}pre{background:#f6f6f6;padding:1em;overflow:auto;white-space:pre-wrap}
.bad{color:#a00}figure{margin:1.5em 0}td.noci{color:#a00;font-style:italic}
.warn{border-left:5px solid #d98b00;background:#fff6e0;padding:.6em 1em;margin:1em 0}
.headline li{margin:.3em 0}.env td:last-child{text-align:left}"""


# The page and its pieces are Jinja2 templates (templates/*.html.j2, package data), autoescaped:
# text passed in is escaped there; the pieces below return Markup, which composes unescaped.
_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("pltlab.report", "templates"),
    autoescape=True,
    trim_blocks=True,
    lstrip_blocks=True,
    undefined=jinja2.StrictUndefined,
)
_PARTS = _ENV.get_template("parts.html.j2").module


def _table(headers, rows, cls: str = "") -> Markup:
    return Markup(_PARTS.table(headers, rows, cls))


def _img(path: str) -> Markup:
    with open(path, "rb") as f:
        data = base64.b64encode(f.read()).decode()
    return Markup(_PARTS.figure(data, os.path.basename(path)))


def render(title: str, sections: list[tuple[str, str]], css: str = "") -> str:
    """The page; ``sections``: (heading, content: markup built by this module's pieces or a
    template); ``css``: more style (the waterfalls')."""
    return _ENV.get_template("page.html.j2").render(
        title=title, sections=[(h, Markup(c)) for h, c in sections], css=Markup(CSS + css)
    )


def notes(items: list[tuple[str, bool]]) -> Markup:
    return Markup(_PARTS.notes(items))


def pre(text: str) -> Markup:
    return Markup(_PARTS.pre(text))


def para(text: str) -> Markup:
    return Markup(_PARTS.para(text))


def images(pngs: list[str]) -> Markup:
    return Markup("").join(_img(p) for p in pngs)


def env_table(env: dict) -> Markup:
    return _table(["item", "value"], [[k, str(v)] for k, v in env.items()], cls="env")


def section(sec: dict) -> Markup:
    """A study's report section (pltlab.studies.engine.table/lines) as HTML."""
    out = para(sec["note"]) if sec.get("note") else Markup("")
    if "rows" in sec:
        return out + _table(sec["headers"], sec["rows"])
    bad = tuple(sec.get("bad") or ())
    return out + notes([(x, bool(bad) and x.startswith(bad)) for x in sec["lines"]])


def warn(text: str) -> Markup:
    return Markup(_PARTS.warn(text))


def sentences(items: list[tuple[str, str]]) -> Markup:
    return Markup(_PARTS.sentences(items))


def template(name: str, **values) -> Markup:
    """Another module's template (templates/NAME), rendered with ``values`` (autoescaped)."""
    return Markup(_ENV.get_template(name).render(**values))


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
    top = (warn(warning) if warning else Markup("")) + sentences(said)
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
