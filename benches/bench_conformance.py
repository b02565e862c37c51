#!/usr/bin/env python3
"""Conformance of real-world inputs (issue 11, docs/conformance.md): every HAR and DevTools log of
../shared/corpus/har and ../shared/corpus/har-conformance imports; every page replays and loads
with the built-in loader at 20 ms (and with Chromium, --chromium); per page the encoded body bytes
the replay sent are within 5 % of the recorded transfer sizes, and the objects loaded are the
objects recorded minus those the import reported it cannot replay.

    python3 benches/bench_conformance.py [--chromium] [--json OUT] [--quick] [FILE ...]

One row per page (per file when the import fails): import, repair kinds, load verdict, objects
loaded (status as recorded, no error) / expected, encoded body bytes recorded vs sent over the
objects whose transfer size the recording has, response heads sent. Needs root and the corpus
(skipped without). --quick: the first 3 files (plumbing check).

Targets for the built-in loader on every page: valid, every expected object loaded, bytes within
5 %. Chromium's figures (--chromium) have none: on pages replayed with their recorded bodies the
page's own scripts decide what is fetched (docs/conformance.md)."""

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import record

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
BYTES_TOLERANCE = 0.05

META = {
    "name": "bench_conformance",
    "area": "archive",
    "title": "Real pages: conformance of imports, replay and loads",
    "command": "python3 benches/bench_conformance.py",
    "quick": "python3 benches/bench_conformance.py --quick",
    "duration": "~5 min (~10 min with --chromium)",
    "needs": "root, ../shared/corpus/har and har-conformance",
    "figures": {
        "imported": {
            "name": "files imported (the others refused in one line)",
            "unit": "files",
            "target": None,
            "on": "every HAR and DevTools log of ../shared/corpus/har and har-conformance",
        },
        "valid": {
            "name": "built-in loader: pages valid (document arrived)",
            "unit": "pages",
            "target": "every page",
            "on": "every imported page, loaded once at RTT 20 ms, TFO off",
        },
        "objects": {
            "name": "built-in loader: pages with every object loaded (recorded - unreplayable)",
            "unit": "pages",
            "target": "every page",
            "on": "the same loads",
        },
        "bytes": {
            "name": "built-in loader: pages whose encoded body bytes sent are within 5 % of the recorded transfer sizes",
            "unit": "pages",
            "target": "every page with recorded sizes",
            "on": "the same loads; worst deviation beside it",
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


def pltlab(*args, timeout=900):
    cp = subprocess.run([sys.executable, "-m", "pltlab", *args], capture_output=True, text=True, timeout=timeout)
    return cp


def _key(url: str) -> str:
    return url.split("#", 1)[0].split("://", 1)[-1]


def _body_sent(r: dict) -> int:
    """Encoded body bytes of a request record (Chromium's records count the head in)."""
    if r.get("transfer_bytes") is not None and r.get("header_bytes") is not None:
        return int(r["transfer_bytes"]) - int(r["header_bytes"])
    return int(r.get("bytes") or 0)


def page_row(har: str, client: str) -> dict:
    """Load one imported page once (RTT 20 ms, TFO off) and compare with its recording."""
    from pltlab.archive.har import read_page

    page = read_page(har)
    cp = pltlab("run", har, "--rtt", "20ms", "--tfo", "off", "--reps", "1", "--client", client, "--json")
    row = {
        "page": page.id or page.url,
        "objects_recorded": len(page.objects) + int(page.extras.get("unreplayable", 0)),
        "unreplayable": int(page.extras.get("unreplayable", 0)),
    }
    try:
        out = json.loads(cp.stdout.strip().splitlines()[-1])
        run = out["runs"][0]
    except (ValueError, IndexError, KeyError):
        err = (cp.stderr.strip().splitlines() or ["no output"])[-1]
        return dict(row, load="failed", reason=err[:160])
    reqs = run.get("requests", [])
    # Pair each object with a request of its URL (scheme aside: Chromium upgrades by HSTS), in
    # order: the built-in loader fetches page.objects in order, Chromium in its own.
    queues: dict[str, list] = {}
    for r in reqs:
        queues.setdefault(_key(r.get("url", "")), []).append(r)
    pairs = [(o, queues[k].pop(0)) for o in page.objects if queues.get(k := _key(o.url))]
    loaded = sum(1 for o, r in pairs if not r.get("error") and r.get("status") == o.status)
    with_size = [
        (o, r)
        for o, r in pairs
        if o.transfer_size is not None and not (o.status in (204, 304) or 100 <= o.status < 200 or o.method == "HEAD")
    ]
    recorded_body = sum(o.transfer_size for o, _ in with_size)
    sent_body = sum(_body_sent(r) for _, r in with_size)
    sent_heads = sum(int(r.get("header_bytes") or 0) for r in reqs)
    ratio = sent_body / recorded_body if recorded_body else None
    return dict(
        row,
        load="valid" if run["valid"] else "invalid",
        reason=run.get("invalid_reason"),
        plt_ms=run["plt_ms"],
        objects_loaded=loaded,
        objects_expected=len(page.objects),
        body_recorded=recorded_body,
        body_sent=sent_body,
        heads_sent=sent_heads,
        bytes_ratio=ratio,
        bytes_ok=ratio is not None and abs(ratio - 1) <= BYTES_TOLERANCE,
    )


def file_rows(path: str, client: str) -> list[dict]:
    name = os.path.relpath(path, SHARED)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "arc")
        cp = pltlab("import", path, "-o", out, "--json")
        if cp.returncode != 0:
            return [{"file": name, "import": "refused", "reason": (cp.stderr.strip().splitlines() or ["?"])[-1][:160]}]
        rep = json.loads(cp.stdout)
        repairs = len(rep.get("repairs") or [])
        rows = []
        for har in rep["files"]:
            r = page_row(har, client)
            rows.append(dict({"file": name, "import": "ok", "repair_kinds": repairs}, **r))
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
            print(f"conformance: skipped ({SHARED} absent)")
            b.skip(f"no input: {SHARED} absent")
        elif os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            measure(b, a, files)
    return b.exit_code


def measure(b, a, files: list[str]) -> None:
    rows = []
    clients = ["builtin"] + (["chromium"] if a.chromium else [])
    hdr = f"{'file / page':58} {'client':8} {'import':8} {'rep':>3} {'load':8} {'objects':>9} {'body rec':>10} {'body sent':>10} {'ratio':>6}"
    print(hdr)
    for f in files:
        for client in clients:
            for r in file_rows(f, client):
                r["client"] = client
                rows.append(r)
                label = r["file"] + (f" {r['page'][-30:]}" if r.get("page") and r["page"] != r["file"] else "")
                objs = f"{r.get('objects_loaded', '-')}/{r.get('objects_expected', '-')}"
                ratio = f"{r['bytes_ratio']:.3f}" if r.get("bytes_ratio") is not None else "-"
                print(
                    f"{label[-58:]:58} {client:8} {r['import']:8} {r.get('repair_kinds', '-')!s:>3} "
                    f"{r.get('load', '-'):8} {objs:>9} {r.get('body_recorded', '-')!s:>10} "
                    f"{r.get('body_sent', '-')!s:>10} {ratio:>6}" + (f"  {r['reason']}" if r.get("reason") else ""),
                    flush=True,
                )
    imported = {r["file"] for r in rows if r["import"] == "ok"}
    refused = sorted({r["file"] for r in rows if r["import"] != "ok"})
    b.figure(
        "imported",
        len(imported),
        f"of {len(files)} files",
        on="refused: " + (", ".join(refused) if refused else "none"),
    )
    for client in clients:
        pages = [r for r in rows if r.get("load") and r["client"] == client]
        valid = [r for r in pages if r["load"] == "valid"]
        every = [r for r in valid if r["objects_loaded"] == r["objects_expected"]]
        sized = [r for r in valid if r["body_recorded"]]
        in_bytes = [r for r in sized if r["bytes_ok"]]
        ok = [r for r in every if r["bytes_ok"] or not r["body_recorded"]]
        print(
            f"{client}: files {len(files)}, imported {len(imported)}, page loads {len(pages)}, valid with every object "
            f"and bytes within 5 %: {len(ok)}",
            flush=True,
        )
        worst = max((abs(r["bytes_ratio"] - 1) for r in sized), default=None)

        def names(rs, pages=pages):
            left = [f"{r['file']} {r.get('page', '')}".strip() for r in pages if r not in rs]
            return "not: " + "; ".join(left)[:300] if left else "every page"

        if client == "builtin":
            b.figure("valid", len(valid), f"of {len(pages)} pages", target=(">=", len(pages)), on=names(valid))
            b.figure("objects", len(every), f"of {len(pages)} pages", target=(">=", len(pages)), on=names(every))
            b.figure(
                "bytes",
                len(in_bytes),
                f"of {len(sized)} pages",
                target=(">=", len(sized)),
                on=(f"worst deviation {worst:.2%}; " if worst is not None else "") + names(in_bytes, sized),
            )
        else:
            for key, n, of, rs in (
                ("valid", len(valid), len(pages), valid),
                ("objects", len(every), len(pages), every),
                ("bytes", len(in_bytes), len(sized), in_bytes),
            ):
                b.figure(
                    f"chromium_{key}",
                    n,
                    f"of {of} pages",
                    name=META["figures"][key]["name"].replace("built-in loader", "Chromium"),
                    on=names(rs, pages if key != "bytes" else sized),
                )
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
