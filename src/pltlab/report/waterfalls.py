"""Interactive waterfalls in report.html: the median load of each side (TFO off, on) of every page x
configuration, drawn from its HAR by PerfCascade (vendored, inlined: the report stays one file
that works offline). Both sides share one time axis; a click on a request opens its details
(timings, headers, raw HAR entry); the requests on the load's critical path are marked."""

import base64
import datetime
import gzip
import importlib.resources
import json
import math

from markupsafe import Markup

from pltlab.report import figures, hars, html, why
from pltlab.report import statistics as an

SIDES = ((False, "TFO off"), (True, "TFO on"))


def _vendor(name: str) -> str:
    return importlib.resources.files("pltlab.report").joinpath("vendor", name).read_text(encoding="utf-8")


def _times(har: dict) -> list[tuple[float, float]]:
    """(start, end) of every entry in ms since the page's start."""
    log = har.get("log", har)
    pages = log.get("pages") or []
    stamps = [datetime.datetime.fromisoformat(e["startedDateTime"].replace("Z", "+00:00")) for e in log["entries"]]
    base = (
        datetime.datetime.fromisoformat(pages[0]["startedDateTime"].replace("Z", "+00:00"))
        if pages
        else min(stamps, default=None)
    )
    return [
        ((t - base).total_seconds() * 1000, (t - base).total_seconds() * 1000 + max(e.get("time") or 0, 0))
        for t, e in zip(stamps, log["entries"])
    ]


def critical_path(har: dict) -> tuple[list[int], str]:
    """Indices of the entries on the load's critical path, and where they come from: the entries'
    own `_critical_path` flags (the load's graph, pltlab explain) when the HAR has them, else an
    approximation from the times alone: from the entry that ends last, back through the entry
    that ended last before each one started."""
    entries = har.get("log", har)["entries"]
    flagged = [i for i, e in enumerate(entries) if e.get("_critical_path")]
    if flagged:
        return flagged, why.SOURCE
    times = _times(har)
    if not times:
        return [], "none"
    cur = max(range(len(times)), key=lambda i: times[i][1])
    path = [cur]
    while times[cur][0] > 0.5:
        before = [j for j in range(len(times)) if j not in path and times[j][1] <= times[cur][0] + 0.5]
        if not before:
            break
        cur = max(before, key=lambda j: times[j][1])
        path.append(cur)
    return sorted(path), "approximate: each request's latest-ending predecessor"


def _mark(har: dict, on_path: set[int] | None) -> dict:
    """Flag the entries on the critical path `pltlab explain` found (request indices: an entry's
    `_load.index`, as pltlab's HARs have it)."""
    for e in har.get("log", har)["entries"] if on_path else []:
        if (e.get("_load") or {}).get("index") in on_path:
            e["_critical_path"] = True
    return har


def syn_data(har: dict) -> list[int]:
    """Indices of the entries that opened a connection whose SYN carried data (TFO)."""
    out = []
    for i, e in enumerate(har.get("log", har)["entries"]):
        opened = e.get("_new_connection", (e.get("timings") or {}).get("connect", -1) >= 0)
        if opened and (e.get("_tfo_syn_data") or e.get("_tfo")):
            out.append(i)
    return out


def _pack(har: dict) -> str:
    return base64.b64encode(gzip.compress(json.dumps(har, separators=(",", ":")).encode(), 6, mtime=0)).decode()


def _keep(har: dict) -> dict:
    """The entries as PerfCascade draws its rows, so that an entry's index is its row's: without
    data: and javascript: URLs, in (stable) order of their start in whole ms."""
    har = hars.slim(har)
    log = har["log"]
    log["entries"] = [e for e in log["entries"] if not e["request"]["url"].startswith(("data:", "javascript:"))]
    starts = [math.floor(t[0] + 0.5) for t in _times(har)]
    log["entries"] = [e for _, e in sorted(zip(starts, log["entries"]), key=lambda p: p[0])]
    return har


def _side_name(g: dict, side: bool) -> str:
    """A side's name: TFO off/on, or the compared knob's value (``protocol h2``)."""
    if g.get("by", "tfo") == "tfo":
        return dict(SIDES)[side]
    return an.show(g["by"], g["values"][side])


def section(out_dir: str, rows: list[dict]) -> tuple[str, int]:
    """The waterfalls' HTML (data and script included; templates/waterfalls.html.j2) and the
    number of loads drawn."""
    picks = {(i, tfo): figures.median_run(g["runs"][tfo]) for i, g in enumerate(rows) for tfo, _ in SIDES}
    names = {(i, side): _side_name(g, side) for i, g in enumerate(rows) for side, _ in SIDES}
    runs = [r for r in picks.values() if r]
    if not runs:
        return html.para("No valid load to draw."), 0
    loaded = {rid: _keep(_mark(h, why.path_requests(out_dir, rid))) for rid, h in hars.for_runs(out_dir, runs).items()}
    store = {str(rid): _pack(h) for rid, h in loaded.items()}
    shown = []
    for i, g in enumerate(rows):
        sides = [(tfo, names[(i, tfo)], picks[(i, tfo)]) for tfo, _ in SIDES if picks[(i, tfo)]]
        ends = [t[1] for _, _, r in sides for t in _times(loaded[r["id"]])] + [r["plt_ms"] for _, _, r in sides]
        cfg = f" ({g['config']})" if g["config"] else ""
        summary = f"{g['page']} @ {g['rtt_ms']:g} ms RTT{cfg}, median loads: " + " vs ".join(
            f"{name} {r['plt_ms']:.0f} ms" for _, name, r in sides
        )
        drawn = []
        for tfo, name, r in sides:
            har = loaded[r["id"]]
            path, source = critical_path(har)
            entries = har["log"]["entries"]
            drawn.append(
                {
                    "name": name,
                    "run_id": r["id"],
                    "n": len(g["runs"][tfo]),
                    "plt_ms": r["plt_ms"],
                    "requests": len(entries),
                    "new": sum(1 for e in entries if e.get("_new_connection")),
                    "path": path,
                    "source": source,
                    "tfo": syn_data(har),
                }
            )
        shown.append({"summary": summary, "axis": max(ends, default=0), "sides": drawn})
    out = html.template(
        "waterfalls.html.j2",
        rows=shown,
        # a script element's text is not HTML (no entities): the JSON and scripts go in as they are,
        # "</" escaped in the JSON so that no string in it ends the element
        data=Markup(json.dumps(store).replace("</", "<\\/")),
        vendor_js=Markup(_vendor("perf-cascade.min.js")),
        script=Markup(SCRIPT),
    )
    return out, len(runs)


def css() -> str:
    return _vendor("perf-cascade.css") + CSS


CSS = """
.pc{margin:0 0 1em}.pc .water-fall-chart{width:100%}
.water-fall-chart .row-item.on-path .even,.water-fall-chart .row-item.on-path .odd{fill:#d62728;opacity:.16}
.on-path-key{background:#f7d4d4;padding:0 4px}.tfo-key{color:#1a7f37;font-weight:bold}
.water-fall-chart .row-item.tfo .left-fixed-holder text{fill:#1a7f37;font-weight:bold}details.wf{margin:.6em 0;border:1px solid #ddd;padding:.3em .6em}
details.wf summary{cursor:pointer;font-weight:bold}details.wf h4{margin:.8em 0 .2em;font-weight:normal}
#pc-legend ul{display:flex;flex-wrap:wrap;gap:.3em 1em;padding:0;list-style:none;font-size:90%}
"""

# (script and style as text, inlined by waterfalls.html.j2: the report stays one file that works offline)
# Decode each load's HAR (gzip, base64) when its <details> is opened, draw it with the shared
# axis (fixedLengthMs), then mark the critical path's rows.
SCRIPT = """(function(){
const store=JSON.parse(document.getElementById('pltlab-hars').textContent);
async function har(id){
  const bytes=Uint8Array.from(atob(store[id]),c=>c.charCodeAt(0));
  const s=new Blob([bytes]).stream().pipeThrough(new DecompressionStream('gzip'));
  return JSON.parse(await new Response(s).text());
}
async function draw(div){
  if(div.dataset.state)return;
  div.dataset.state='drawing';
  try{
    const svg=perfCascade.fromHar(await har(div.dataset.har),
      {fixedLengthMs:+div.dataset.len,leftColumnWidth:30,showIndicatorIcons:false});
    div.appendChild(svg);
    const path=new Set(JSON.parse(div.dataset.path));
    const tfo=new Set(JSON.parse(div.dataset.tfo));
    svg.querySelectorAll('.rows-holder > .row-item').forEach((a,i)=>{
      if(path.has(i))a.classList.add('on-path');
      if(tfo.has(i))a.classList.add('tfo');
    });
    div.dataset.state='drawn';
  }catch(e){div.dataset.state='failed';div.textContent='waterfall not drawn: '+e;console.error(e);}
}
document.querySelectorAll('details.wf').forEach(d=>{
  const go=()=>{if(d.open)d.querySelectorAll('.pc').forEach(draw);};
  d.addEventListener('toggle',go);go();
});
const leg=document.getElementById('pc-legend');
if(leg)leg.appendChild(perfCascade.makeLegend());
})();"""
