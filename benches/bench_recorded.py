#!/usr/bin/env python3
"""Replay vs recording (issue 27, deliverable 4; docs/fidelity.md): every page of
../shared/corpus/har and har-conformance whose recording has page timings is loaded once with
`--network recorded` (the recorded network inferred from its timings: pltlab.archive.netinfer),
in the built-in loader and in Chromium (--chromium), and compared with the recording itself:

    onLoad        the load's PLT minus the recording's onLoad
    onContentLoad Chromium's DOMContentLoaded minus the recording's (the built-in loader has none)
    network end   the load's last response byte minus the recording's last response end: the
                  network inference's own error (no compute on either side of it)
    tail          onLoad after the last byte, recorded vs loaded: the compute (the recording's
                  machine and page scripts vs this machine's, on bodies synthesized where the
                  recording kept only sizes)
    request start each request's start vs its recorded start (matched by URL, in order): when it
                  was discovered, i.e. everything before it, compute included
    duration      each request's time from being sent to its last byte vs the recording's send +
                  wait + receive: the network inference's part alone (round trip, think time,
                  transfer; no queueing, connection set-up or compute inside)

    python3 benches/bench_recorded.py [--chromium] [--json OUT] [--quick] [FILE ...]

Figures are error distributions over the pages (median and p90 of |error| / recorded), no
targets: they describe how far a replay of a recording is from the recording. Needs root and the
corpus (skipped without). --quick: the first 3 files."""

import argparse
import glob
import json
import os
import statistics
import subprocess
import sys

import record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")

META = {
    "name": "bench_recorded",
    "area": "archive",
    "title": "Replay vs recording: --network recorded against the recordings' own timings",
    "command": "python3 benches/bench_recorded.py --chromium",
    "quick": "python3 benches/bench_recorded.py --quick",
    "duration": "~3 min (~8 min with --chromium)",
    "needs": "root, ../shared/corpus/har and har-conformance",
    "figures": {
        "pages": {
            "name": "pages with page timings loaded validly (built-in loader)",
            "unit": "pages",
            "target": None,
            "on": "every page of the corpus whose recording has onLoad and connect times, loaded once, TFO off",
        },
        "onload_err": {
            "name": "built-in loader: |PLT - recorded onLoad| / onLoad, median over pages",
            "unit": "fraction",
            "target": None,
            "on": "the same loads; p90 and signed median beside it",
        },
        "network_err": {
            "name": "built-in loader: |last byte - recorded last response end| / recorded, median over pages",
            "unit": "fraction",
            "target": None,
            "on": "the same loads: the network inference's own error",
        },
        "dcl_err": {
            "name": "built-in loader: |DOMContentLoaded - recorded onContentLoad| / recorded, median over pages",
            "unit": "fraction",
            "target": None,
            "on": "Chromium's loads only (the built-in loader has no DOMContentLoaded)",
        },
        "duration_err": {
            "name": "built-in loader: |request duration - recorded|, sent to last byte, median over every matched request",
            "unit": "ms",
            "target": None,
            "on": "the same loads: the network inference's part (no compute inside a request)",
        },
        "start_err": {
            "name": "built-in loader: |request start - recorded start|, median over every matched request",
            "unit": "ms",
            "target": None,
            "on": "the same loads; p90 beside it",
        },
    },
}


def inputs() -> list[str]:
    pats = [
        "har/*.har",
        "har-conformance/*.har",
        "har-conformance/devtools/*.json",
        "har-conformance/devtools/*.json.gz",
    ]
    return sorted(f for p in pats for f in glob.glob(os.path.join(SHARED, p)))


def _key(url: str) -> str:
    return url.split("#", 1)[0].split("://", 1)[-1]


def _p(vs, q):
    vs = sorted(vs)
    return vs[min(len(vs) - 1, int(q * len(vs)))] if vs else None


def compare(page, run: dict) -> dict:
    """One load against its recording (times in ms from each one's start)."""
    reqs = run.get("requests") or []
    queues: dict[str, list] = {}
    for r in reqs:
        queues.setdefault(_key(r.get("url", "")), []).append(r)
    starts, durations = [], []
    for o in page.objects:
        q = queues.get(_key(o.url))
        if not q or o.start_ms is None:
            continue
        r = q.pop(0)
        s = r.get("start_ms", r.get("released_ms"))
        if s is None:
            continue
        starts.append(s - o.start_ms)
        # from the request on the wire to its last byte (send + wait + receive): no browser
        # queueing, connection set-up or compute inside, on either side
        t = o.extras.get("timings") or {}
        phases = [t.get(k) for k in ("send", "wait", "receive")]
        if None not in phases and min(phases) >= 0 and None not in (r.get("request_ms"), r.get("last_byte_ms")):
            durations.append((r["last_byte_ms"] - r["request_ms"]) - sum(phases))
    rec_last = max((o.end_ms for o in page.objects if o.end_ms is not None), default=None)
    last = max((r["last_byte_ms"] for r in reqs if r.get("last_byte_ms") is not None), default=None)
    m = run.get("metrics") or {}
    onload, dcl = page.on_load_ms, page.extras.get("on_content_load_ms")
    plt = run["plt_ms"]
    return {
        "valid": run["valid"],
        "reason": run.get("invalid_reason"),
        "plt_ms": plt,
        "onload_ms": onload,
        "onload_err": (plt - onload) / onload if onload else None,
        "dcl_ms": m.get("dcl_ms"),
        "recorded_dcl_ms": dcl,
        "dcl_err": (m["dcl_ms"] - dcl) / dcl if m.get("dcl_ms") and dcl else None,
        "last_byte_ms": last,
        "recorded_last_ms": rec_last,
        "network_err": (last - rec_last) / rec_last if last and rec_last else None,
        "tail_ms": plt - last if last is not None else None,
        "recorded_tail_ms": onload - rec_last if onload is not None and rec_last is not None else None,
        "start_err_ms": starts,
        "duration_err_ms": durations,
        "inferred": m.get("recorded_network"),
    }


def file_rows(path: str, client: str) -> list[dict]:
    """Every page of one file: loaded by one `pltlab run` (it loads each page of a file)."""
    from pltlab.archive.resolve import archive_pages

    name = os.path.relpath(path, SHARED)
    try:
        pages = archive_pages(path)
    except Exception as e:  # noqa: BLE001 - a refused import is one line, and the bench goes on
        return [{"file": name, "skip": str(e).splitlines()[0][:160]}]
    cp = subprocess.run(
        [sys.executable, "-m", "pltlab", "run", path, "--network", "recorded", "--tfo", "off", "--reps", "1"]
        + ["--client", client, "--json"],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    try:
        out = json.loads(cp.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return [{"file": name, "skip": (cp.stderr.strip().splitlines() or ["no output"])[-1][:160]}]
    runs = {r.get("page_id"): r for r in out["runs"]}
    errors = {p["page_id"]: p.get("error") for p in out.get("pages", [])}
    rows = []
    for page in pages:
        row = {"file": name, "page": page.id}
        if page.on_load_ms is None:
            rows.append(dict(row, skip="no onLoad in the recording"))
        elif page.id not in runs:
            rows.append(dict(row, skip=str(errors.get(page.id) or "not loaded")[:160]))
        else:
            rows.append(dict(row, **compare(page, runs[page.id])))
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*")
    ap.add_argument("--chromium", action="store_true", help="also load every page with Chromium")
    ap.add_argument("--json", help="write all rows here")
    ap.add_argument("--quick", action="store_true", help="the first 3 files only")
    a = ap.parse_args()
    with record.Bench(META, quick=a.quick, chromium=a.chromium) as b:
        files = a.files or inputs()
        if a.quick:
            files = files[:3]
        if not files:
            b.skip(f"no input: {SHARED} absent")
        elif os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            measure(b, a, files)
    return b.exit_code


def _fmt(v, pct=True):
    if v is None:
        return "-"
    return f"{v:+.0%}" if pct else f"{v:.0f}"


def measure(b, a, files: list[str]) -> None:
    rows = []
    clients = ["builtin"] + (["chromium"] if a.chromium else [])
    print(
        f"{'file / page':52} {'client':8} {'load':7} {'PLT':>7} {'onLoad':>7} {'err':>6} {'DCL err':>7} "
        f"{'net err':>7} {'tail':>6} {'rec tail':>8} {'start |err| p50':>15} {'dur |err| p50':>13}"
    )
    for f in files:
        for client in clients:
            for r in file_rows(f, client):
                r["client"] = client
                rows.append(r)
                label = (r["file"] + " " + str(r.get("page", "")).split("#")[-1])[-52:]
                if "skip" in r:
                    print(f"{label:52} {client:8} skipped: {r['skip']}", flush=True)
                    continue
                st = [abs(x) for x in r["start_err_ms"]]
                du = [abs(x) for x in r["duration_err_ms"]]
                print(
                    f"{label:52} {client:8} {'valid' if r['valid'] else 'invalid':7} {r['plt_ms']:7.0f} "
                    f"{r['onload_ms']:7.0f} {_fmt(r['onload_err']):>6} {_fmt(r['dcl_err']):>7} "
                    f"{_fmt(r['network_err']):>7} {_fmt(r['tail_ms'], False):>6} {_fmt(r['recorded_tail_ms'], False):>8} "
                    f"{_fmt(statistics.median(st) if st else None, False):>15} "
                    f"{_fmt(statistics.median(du) if du else None, False):>13}"
                    + (f"  {r['reason']}" if r["reason"] else ""),
                    flush=True,
                )
    for client in clients:
        ok = [r for r in rows if r["client"] == client and "skip" not in r and r["valid"]]
        tried = [r for r in rows if r["client"] == client and "skip" not in r]
        pre = "" if client == "builtin" else "chromium_"
        who = "built-in loader" if client == "builtin" else "Chromium"
        b.figure(
            f"{pre}pages",
            len(ok),
            f"of {len(tried)} pages",
            name=META["figures"]["pages"]["name"].replace("built-in loader", who),
            on="skipped: "
            + "; ".join(f"{r['file']}: {r['skip'][:60]}" for r in rows if r["client"] == client and "skip" in r),
        )
        for key in ("onload_err", "network_err", "dcl_err"):
            vs = [r[key] for r in ok if r.get(key) is not None]
            if not vs:
                continue
            absv = [abs(v) for v in vs]
            b.figure(
                f"{pre}{key}",
                round(statistics.median(absv), 4),
                "fraction",
                name=META["figures"][key]["name"].replace("built-in loader", who),
                dist={
                    "n": len(vs),
                    "p50_abs": statistics.median(absv),
                    "p90_abs": _p(absv, 0.9),
                    "median_signed": statistics.median(vs),
                    "max_abs": max(absv),
                },
                on=f"{len(vs)} pages",
            )
        st = [abs(x) for r in ok for x in r["start_err_ms"]]
        if st:
            b.figure(
                f"{pre}start_err",
                round(statistics.median(st), 1),
                "ms",
                name=META["figures"]["start_err"]["name"].replace("built-in loader", who),
                dist={"n": len(st), "p50": statistics.median(st), "p90": _p(st, 0.9), "max": max(st)},
                on=f"{len(st)} requests of {len(ok)} pages",
            )
        du = [x for r in ok for x in r["duration_err_ms"]]
        if du:
            b.figure(
                f"{pre}duration_err",
                round(statistics.median(abs(x) for x in du), 1),
                "ms",
                name=META["figures"]["duration_err"]["name"].replace("built-in loader", who),
                dist={
                    "n": len(du),
                    "p50_abs": statistics.median(abs(x) for x in du),
                    "p90_abs": _p([abs(x) for x in du], 0.9),
                    "median_signed": statistics.median(du),
                },
                on=f"{len(du)} requests of {len(ok)} pages",
            )
        tails = [
            (r["tail_ms"], r["recorded_tail_ms"])
            for r in ok
            if r["tail_ms"] is not None and r["recorded_tail_ms"] is not None
        ]
        if tails:
            b.figure(
                f"{pre}tail",
                round(statistics.median(t for t, _ in tails), 1),
                "ms",
                name=f"{who}: onLoad after the last byte (compute), median over pages",
                dist={"n": len(tails), "recorded_median": statistics.median(rt for _, rt in tails)},
                on="recorded_median: the recordings' own tail (their machine, their bodies)",
            )
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    sys.exit(main())
