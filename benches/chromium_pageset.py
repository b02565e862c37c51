"""Chromium's data on the 29-page set (issue 27), collected with pltlab's own commands, and what
makes 20 ms hard.

    python3 benches/chromium_pageset.py all --out /work/data27      # calib, why20, truth (resumable)
    python3 benches/chromium_pageset.py calib  --out DIR   # pltlab calibrate NAME -o DIR/calib --loads 3, per page
    python3 benches/chromium_pageset.py truth  --out DIR   # pltlab sweep benches/pagesets/chromium-truth.toml -o DIR/truth
    python3 benches/chromium_pageset.py why20  --out DIR   # Chromium at RTT 0/20 ms and the built-in loader
                                                           # (calibrated, model chromium) on 4 pages, 3 loads each
    python3 benches/chromium_pageset.py status --out DIR   # DIR/STATUS.md from what is there
    python3 benches/chromium_pageset.py analyse --out DIR  # the "Why 20 ms is hard" figures
    python3 benches/chromium_pageset.py export --out DIR --to docs/results/chromium-pageset
                                                           # what the benches read, committed

The page set is benches/pagesets/public.txt (its names; the experiment files must list the same).
Every step skips what is already there (a calibration written, a sweep's committed runs: --resume),
so `all` re-run after a kill continues. `all` runs benches/proc_sampler.py beside the loads
(DIR/cpu/samples.jsonl: per load, the CPU and run-queue wait of each Chromium process and thread,
and of each built-in loader process), samples the machine's load average every 10 s
(DIR/machine.jsonl: what the benches say of the machine the truth was taken on) and rewrites
DIR/STATUS.md every minute. Data stays in DIR:
no page body is written anywhere (calibrated HARs are structure and timings).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import datetime
import gzip
import io
import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter, defaultdict

HERE = os.path.dirname(os.path.abspath(__file__))
SRC = os.path.normpath(os.path.join(HERE, "..", "src"))  # this tree's pltlab, for the commands too
sys.path.insert(0, SRC)

from pltlab.experiments import folds, spec  # noqa: E402

PAGESET = os.path.join(HERE, "pagesets", "public.txt")
TRUTH = os.path.join(HERE, "pagesets", "chromium-truth.toml")
WHY20 = os.path.join(HERE, "pagesets", "why20-chromium.toml")
PLTLAB = [sys.executable, "-m", "pltlab"]


def names() -> list[str]:
    return [e.name for e in folds.read(PAGESET)]


def check_experiment(path: str, subset: bool = False) -> None:
    """The experiment lists the page set's pages (``subset``: some of them), or one line and exit 2."""
    want = names()
    got = [e.label for e in spec.load(path).pages]
    bad = [n for n in got if n not in want] if subset else ([] if got == want else got)
    if bad:
        sys.exit(f"{path}: pages {bad} are not the page set's ({PAGESET})")


def _log(out: str, line: str) -> None:
    stamp = datetime.datetime.now(datetime.UTC).strftime("%H:%M:%S")
    with open(os.path.join(out, "collect.log"), "a") as f:
        f.write(f"{stamp} {line}\n")
    print(f"{stamp} {line}", flush=True)


def _run(out: str, cmd: list[str], log_name: str) -> int:
    os.makedirs(os.path.join(out, "logs"), exist_ok=True)
    with open(os.path.join(out, "logs", log_name), "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)}
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=os.path.join(HERE, ".."), env=env).returncode


def _last_error(out: str, log_name: str) -> str:
    try:
        with open(os.path.join(out, "logs", log_name)) as f:
            lines = [ln.strip() for ln in f if ln.strip() and not ln.startswith("$")]
    except OSError:
        return "?"
    err = [ln for ln in lines if "rror" in ln] or lines
    return err[-1][:300] if err else "?"


# ---- steps -------------------------------------------------------------------------------------
def calib(out: str) -> None:
    d = os.path.join(out, "calib")
    os.makedirs(d, exist_ok=True)
    failed_path = os.path.join(d, "failed.json")
    failed = json.load(open(failed_path)) if os.path.exists(failed_path) else {}
    for n in names():
        if any(os.path.exists(os.path.join(d, f"{n}{ext}")) for ext in (".har", ".har.gz")):
            continue
        t = time.time()
        rc = _run(out, PLTLAB + ["calibrate", n, "-o", d, "--loads", "3"], f"calib-{n}.log")
        ok = rc == 0 and os.path.exists(os.path.join(d, f"{n}.har"))
        if ok:
            failed.pop(n, None)
        else:
            failed[n] = _last_error(out, f"calib-{n}.log")
        json.dump(failed, open(failed_path, "w"), indent=1)
        _log(out, f"calib {n}: {'ok' if ok else 'FAILED: ' + failed[n]} ({time.time() - t:.0f} s)")


def sweep(out: str, toml: str, sub: str) -> int:
    d = os.path.join(out, sub)
    resume = os.path.exists(os.path.join(d, "results.sqlite"))
    cmd = PLTLAB + ["sweep", toml, "-o", d, "--no-report"] + (["--resume"] if resume else [])
    t = time.time()
    rc = _run(out, cmd, f"{sub.replace('/', '-')}.log")
    _log(out, f"sweep {sub}: exit {rc} ({time.time() - t:.0f} s)")
    return rc


def truth(out: str) -> int:
    check_experiment(TRUTH)
    return sweep(out, TRUTH, "truth")


WHY20_BUILTIN = """# written by benches/chromium_pageset.py why20: the built-in loader with the Chromium model,
# calibrated at RTT 0 (pltlab calibrate: {calib}), on Chromium's schemes, same link as
# benches/pagesets/why20-chromium.toml
name = "why20-builtin"
pages = [{pages}]
client = "builtin"
model = "chromium"
schemes = "chromium"
calibrated = true
rtt = ["0ms", "20ms"]
rate = "20mbit"
rate_up = "5mbit"
protocol = ["h1", "h2"]
tfo = "off"
repetitions = 3
seed = 27
"""


def why20(out: str) -> None:
    check_experiment(WHY20, subset=True)
    sweep(out, WHY20, "why20/chromium")
    chosen = [e.label for e in spec.load(WHY20).pages]
    cal = os.path.join(out, "calib")
    have = [n for n in chosen if os.path.exists(os.path.join(cal, f"{n}.har"))]
    if not have:
        _log(out, "why20 builtin: no calibration of its pages yet")
        return
    path = os.path.join(out, "why20", "builtin.toml")
    with open(path, "w") as f:
        f.write(WHY20_BUILTIN.format(calib=cal, pages=", ".join(f'"{cal}/{n}.har"' for n in have)))
    sweep(out, path, "why20/builtin")


# ---- status ------------------------------------------------------------------------------------
def _db(path: str):
    if not os.path.exists(path):
        return None
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=10)
    db.row_factory = sqlite3.Row
    return db


def status(out: str, running: str = "") -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"# Chromium data of the 29-page set (issue 27): status {now}", ""]
    lines += [f"Running now: {running or 'nothing (from this script)'}", ""]
    all_names = names()
    cal = os.path.join(out, "calib")
    done = [n for n in all_names if os.path.exists(os.path.join(cal, f"{n}.har"))]
    failed = (
        json.load(open(os.path.join(cal, "failed.json"))) if os.path.exists(os.path.join(cal, "failed.json")) else {}
    )
    lines += [
        f"## Calibrations ({cal}/NAME.har; pltlab calibrate NAME --loads 3, RTT 0, Chromium's schemes)",
        "",
        f"{len(done)} of {len(all_names)} written."
        + (f" Missing: {', '.join(n for n in all_names if n not in done)}." if len(done) < len(all_names) else ""),
    ]
    for n, why in sorted(failed.items()):
        lines.append(f"- FAILED {n}: {why}")
    lines.append("")
    for sub, what in (
        ("truth", "ground truth: benches/pagesets/chromium-truth.toml"),
        ("why20/chromium", "why 20 ms: Chromium"),
        ("why20/builtin", "why 20 ms: built-in loader"),
    ):
        db = _db(os.path.join(out, sub, "results.sqlite"))
        lines.append(f"## {sub} ({what})")
        lines.append("")
        if db is None:
            lines += ["not started", ""]
            continue
        rows = db.execute(
            "select page, rtt_ms, protocol, tfo, rep, status, valid, invalid_reason, failure_reason, wall_ms "
            "from runs where id in (select max(id) from runs group by run_key)"
        ).fetchall()
        exp_path = (
            TRUTH
            if sub == "truth"
            else (WHY20 if sub == "why20/chromium" else os.path.join(out, "why20", "builtin.toml"))
        )
        total = spec.load(exp_path).n_runs if os.path.exists(exp_path) else None
        ok = [r for r in rows if r["status"] == "ok"]
        lines.append(
            f"{len(rows)} of {total} runs done ({len(ok)} ok, {sum(1 for r in ok if r['valid'])} valid; "
            f"{len(rows) - len(ok)} failed)"
        )
        walls = [r["wall_ms"] for r in rows if r["wall_ms"]]
        if walls and total:
            left = (total - len(rows)) * statistics.mean(walls) / 60000
            lines.append(
                f"mean wall time per load {statistics.mean(walls) / 1000:.1f} s; about {left:.0f} min of loads left"
            )
        lines += ["", "| rep | RTT ms | protocol | TFO | valid | invalid | failed |", "|---|---|---|---|---|---|---|"]
        cells = defaultdict(Counter)
        for r in rows:
            k = (r["rep"], r["rtt_ms"], r["protocol"], r["tfo"])
            cells[k][
                "valid" if r["status"] == "ok" and r["valid"] else ("invalid" if r["status"] == "ok" else "failed")
            ] += 1
        for k in sorted(cells):
            c = cells[k]
            lines.append(
                f"| {k[0]} | {k[1]:g} | {k[2]} | {'on' if k[3] else 'off'} | {c['valid']} | {c['invalid']} | {c['failed']} |"
            )
        bad = [r for r in rows if not (r["status"] == "ok" and r["valid"])]
        if bad:
            lines += ["", "Invalid or failed loads, page by page:"]
            for r in sorted(bad, key=lambda r: (r["page"], r["rtt_ms"], r["protocol"], r["tfo"], r["rep"])):
                why = (r["invalid_reason"] or r["failure_reason"] or "?")[:240]
                lines.append(
                    f"- {r['page']} {r['rtt_ms']:g} ms {r['protocol']} TFO {'on' if r['tfo'] else 'off'} rep {r['rep']}: {why}"
                )
        lines.append("")
        db.close()
    lines += [
        "## Reading it",
        "",
        "- truth/results.sqlite: `pltlab.results.open(DIR)` (runs, requests, HARs). Chromium loads each page on its",
        "  recorded schemes plus its own HSTS upgrades (the 2013 pages: https): compare the built-in loader with",
        "  `--schemes chromium`. TFO on https saves nothing in Chromium 156 (its ClientHello does not fit in the SYN).",
        "- cpu/samples.jsonl (benches/proc_sampler.py): per Chromium load (key = its temp profile), the CPU and run-queue",
        "  wait per process type and thread, sampled every 100 ms; match a load by time (its HAR's startedDateTime).",
        "",
    ]
    text = "\n".join(lines)
    tmp = os.path.join(out, "STATUS.md.tmp")
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, os.path.join(out, "STATUS.md"))
    return text


MACHINE_EVERY_S = 10


def machine_sample(out: str) -> None:
    """One line of DIR/machine.jsonl: the time, the load averages and the CPU count."""
    with open("/proc/loadavg", encoding="ascii") as f:
        l1, l5, l15 = (float(x) for x in f.read().split()[:3])
    rec = {"t": round(time.time(), 1), "load1": l1, "load5": l5, "load15": l15, "cpus": os.cpu_count()}
    with open(os.path.join(out, "machine.jsonl"), "a", encoding="utf-8") as f:
        f.write(json.dumps(rec) + "\n")


def all_steps(out: str) -> None:
    os.makedirs(os.path.join(out, "cpu"), exist_ok=True)
    sampler = subprocess.Popen(
        [sys.executable, os.path.join(HERE, "proc_sampler.py"), "--out", os.path.join(out, "cpu", "samples.jsonl")]
    )
    step = ["starting"]
    stop = threading.Event()

    def keep_status():
        while not stop.wait(60):
            try:
                status(out, step[0])
            except Exception as e:  # noqa: BLE001 - a status file is never worth the collection
                _log(out, f"status: {e}")

    def keep_machine():  # the machine's state beside the loads: DIR/machine.jsonl (benches quote it)
        while not stop.wait(MACHINE_EVERY_S):
            try:
                machine_sample(out)
            except OSError as e:
                _log(out, f"machine: {e}")

    threading.Thread(target=keep_status, daemon=True).start()
    threading.Thread(target=keep_machine, daemon=True).start()
    try:
        for name, fn in (
            ("calibrations", calib),
            ("why20 (Chromium and built-in at RTT 0/20 ms, 4 pages, h1/h2)", why20),
            ("truth sweep", truth),
        ):
            step[0] = f"{name} (pid {os.getpid()}, since {datetime.datetime.now(datetime.UTC):%H:%M} UTC)"
            status(out, step[0])
            _log(out, f"start {name}")
            fn(out)
    finally:
        stop.set()
        sampler.send_signal(signal.SIGTERM)
        sampler.wait(30)
        status(out, "")
        _log(out, "all done")


# ---- analysis: why 20 ms is hard ------------------------------------------------------------------
def _loads(db_path: str) -> list[dict]:
    """Valid runs with their requests and the load's start (epoch s, its HAR)."""
    db = _db(db_path)
    if db is None:
        return []
    out = []
    for r in db.execute("select * from runs where status='ok' and valid=1"):
        r = dict(r)
        r["req"] = [dict(q) for q in db.execute("select * from requests where run_id=?", (r["id"],))]
        har = db.execute("select * from hars where run_id=?", (r["id"],)).fetchone()
        r["t0"] = None
        if har is not None:
            blob = [v for v in dict(har).values() if isinstance(v, bytes)]
            if blob:
                page = json.loads(gzip.decompress(blob[0]))["log"]["pages"][0]
                r["t0"] = datetime.datetime.fromisoformat(page["startedDateTime"].replace("Z", "+00:00")).timestamp()
        out.append(r)
    return out


def _cpu_records(out: str) -> list[dict]:
    path = os.path.join(out, "cpu", "samples.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(ln) for ln in f if ln.strip()]


def _at(times: list[float], series: list, t: float) -> list[float]:
    """The cumulative figures at time ``t`` (linear between samples)."""
    i = bisect.bisect_left(times, t)
    if i <= 0:
        return series[0]
    if i >= len(times):
        return series[-1]
    a, b, f = series[i - 1], series[i], (t - times[i - 1]) / max(times[i] - times[i - 1], 1e-9)
    return [x + (y - x) * f for x, y in zip(a, b)]


def cpu_of(load: dict, recs: list[dict], kind: str) -> dict | None:
    """CPU and run-queue wait (ms) of the process group that ran ``load``, from its start to its PLT:
    total, per process type, and Chromium's main threads."""
    if load.get("t0") is None:
        return None
    t0, t1 = load["t0"], load["t0"] + load["plt_ms"] / 1000
    ns = f"plt-{load['runner_id']}-"
    rec = max(  # (a sampler restarted mid-load leaves a partial record beside the full one)
        (
            r
            for r in recs
            if r["kind"] == kind
            and (r.get("netns") or "").startswith(ns)
            and r["times"]
            and (r["times"][0] <= t0 <= r["times"][-1] if kind == "chromium" else t0 - 1 <= r["times"][0] <= t1)
        ),
        key=lambda r: len(r["times"]),
        default=None,
    )
    if rec is None:
        return None
    whole = kind != "chromium"  # a built-in loader process lives for its load: all of it
    res: dict = defaultdict(float)
    for name, s in rec["threads"].items():
        a, b = (s[0], s[-1]) if whole else (_at(rec["times"], s, t0), _at(rec["times"], s, t1))
        if whole:
            a = [0.0, 0.0, 0]
        run, wait, sl = b[0] - a[0], b[1] - a[1], b[2] - a[2]
        ptype, thread = name.split("/", 1)
        res["cpu_ms"] += run
        res["wait_ms"] += wait
        res["slices"] += sl
        res[f"cpu:{ptype}"] += run
        res[f"wait:{ptype}"] += wait
        if thread == "main" or thread in ("Chrome_ChildIOT", "Chrome_IOThread"):
            res[f"cpu:{ptype}/{thread}"] += run
            res[f"wait:{ptype}/{thread}"] += wait
    return dict(res)


def _med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def _conns(load: dict) -> int:
    """Connections that carried a request (distinct connection ids)."""
    return len({q["conn_id"] for q in load["req"] if q["conn_id"] is not None and q["host"]})


def _tail(load: dict) -> float | None:
    ends = [q["last_byte_ms"] for q in load["req"] if q["last_byte_ms"] is not None]
    return load["plt_ms"] - max(ends) if ends else None


def _lastbyte(load: dict) -> float | None:
    ends = [q["last_byte_ms"] for q in load["req"] if q["last_byte_ms"] is not None]
    return max(ends) if ends else None


def _spans(load: dict, a: str, b: str, new: bool = False) -> list[float]:
    """Per request, ``b`` - ``a``; the set-up's end is its TLS handshake's where the loader reports
    it apart (the built-in loader's connect_end_ms is TCP's; Chromium's includes TLS)."""
    out = []
    for q in load["req"]:
        end = max(q[b], q["tls_end_ms"] or 0) if b == "connect_end_ms" and q[b] is not None else q[b]
        if q[a] is not None and end is not None and end >= q[a] and (q["new_conn"] or not new):
            out.append(end - q[a])
    return out


def _side(runs: list[dict], recs: list[dict], kind: str) -> dict:
    """Medians over ``runs`` (one page, RTT and protocol) of what each load measured."""
    cpu = [x for x in (cpu_of(r, recs, kind) for r in runs) if x]
    out = {
        "n": len(runs),
        "plt_ms": _med(r["plt_ms"] for r in runs),
        "last_byte_ms": _med(_lastbyte(r) for r in runs),
        "tail_ms": _med(_tail(r) for r in runs),
        "conns": _med(_conns(r) for r in runs),
        "tls_full": _med(r["tls_full"] for r in runs),
        "lateness_p99_us": _med(r["lateness_p99_us"] for r in runs),
        "lateness_max_us": _med(r["lateness_max_us"] for r in runs),
        "cpu_n": len(cpu),
        # the network stack's own time: a new connection's TCP + TLS set-up (2 RTT on the link), a
        # request's wait for its first byte (1 RTT for a small response), medians over the load's requests
        "handshake_ms": _med(_med(_spans(r, "connect_start_ms", "connect_end_ms", new=True)) for r in runs),
        "ttfb_ms": _med(_med(_spans(r, "request_ms", "first_byte_ms")) for r in runs),
    }
    keys = sorted({k for x in cpu for k in x})
    out.update({k: _med(x.get(k, 0.0) for x in cpu) for k in keys})
    if cpu:
        out["cores_busy"] = _med(x["cpu_ms"] / r["plt_ms"] / 2 for r, x in zip(runs, cpu) if r["plt_ms"])
    return out


def analyse(out: str) -> dict:
    """The why-20-ms figures: per page and protocol, Chromium and the built-in loader (calibrated at
    RTT 0) at RTT 0 and 20 ms, medians of their loads; a markdown table on stdout, all of it in
    DIR/why20/analysis.json."""
    recs = _cpu_records(out)
    chrom = _loads(os.path.join(out, "why20", "chromium", "results.sqlite"))
    built = _loads(os.path.join(out, "why20", "builtin", "results.sqlite"))
    cal = {}
    for n in names():
        p = os.path.join(out, "calib", f"{n}.har")
        if os.path.exists(p):
            with open(p) as f:
                cal[n] = json.load(f)["log"]["pages"][0].get("_pltlab_calibration", {})
    rows = []
    for page, proto, rtt in sorted({(r["page"], r["protocol"], r["rtt_ms"]) for r in chrom}):
        c = _side([r for r in chrom if (r["page"], r["protocol"], r["rtt_ms"]) == (page, proto, rtt)], recs, "chromium")
        b = _side([r for r in built if (r["page"], r["protocol"], r["rtt_ms"]) == (page, proto, rtt)], recs, "dp:load")
        b["network_plt_ms"] = _med(
            r["network_plt_ms"] for r in built if (r["page"], r["protocol"], r["rtt_ms"]) == (page, proto, rtt)
        )
        rows.append(
            {
                "page": page,
                "protocol": proto,
                "rtt_ms": rtt,
                "chromium": c,
                "builtin": b,
                "calibration": {k: cal.get(page, {}).get(k) for k in ("tail_ms", "tight_delay_ms", "load_plt_ms")},
            }
        )
    f = lambda v, d=0: "-" if v is None else f"{v:.{d}f}"  # noqa: E731
    print(
        "| page | proto | RTT | Chromium PLT | built-in PLT | off | calibration loads' PLT | Chromium last byte "
        "| built-in network PLT | tail Chromium / calib | conns C / B | TLS hs C / B | set-up ms C / B "
        "| req->1st byte ms C / B | CPU ms | cores busy | run-queue wait ms | renderer main cpu / wait "
        "| net IO cpu / wait | browser main cpu | loader cpu / wait / slices | emulator lateness p99 us C / B |"
    )
    print("|" + "---|" * 22)
    for r in rows:
        c, b = r["chromium"], r["builtin"]
        off = (c["plt_ms"] / b["plt_ms"] - 1) * 100 if c["plt_ms"] and b["plt_ms"] else None
        print(
            f"| {r['page']} | {r['protocol']} | {r['rtt_ms']:g} | {f(c['plt_ms'])} ({c['n']}) | {f(b['plt_ms'])} ({b['n']}) "
            f"| {f(off)} % | {f(_med(r['calibration']['load_plt_ms'] or []))} "
            f"| {f(c['last_byte_ms'])} | {f(b['network_plt_ms'])} | {f(c['tail_ms'])} / {f(r['calibration']['tail_ms'])} "
            f"| {f(c['conns'])} / {f(b['conns'])} | {f(c['tls_full'])} / {f(b['tls_full'])} "
            f"| {f(c['handshake_ms'])} / {f(b['handshake_ms'])} | {f(c['ttfb_ms'])} / {f(b['ttfb_ms'])} "
            f"| {f(c.get('cpu_ms'))} | {f(c.get('cores_busy'), 2)} | {f(c.get('wait_ms'))} "
            f"| {f(c.get('cpu:renderer/main'))} / {f(c.get('wait:renderer/main'))} "
            f"| {f(c.get('cpu:network/Chrome_ChildIOT'))} / {f(c.get('wait:network/Chrome_ChildIOT'))} "
            f"| {f(c.get('cpu:browser/main'))} | {f(b.get('cpu_ms'))} / {f(b.get('wait_ms'))} / {f(b.get('slices'))} "
            f"| {f(c['lateness_p99_us'])} / {f(b['lateness_p99_us'])} |"
        )
    res = {"why20": rows, "truth": truth_cpu(out, recs)}
    print(json.dumps(res["truth"], indent=1))
    os.makedirs(os.path.join(out, "why20"), exist_ok=True)
    with open(os.path.join(out, "why20", "analysis.json"), "w") as fh:
        json.dump(res, fh, indent=1)
    return res


def truth_cpu(out: str, recs: list[dict]) -> dict:
    """Over the ground truth's loads, per RTT and protocol: the median over pages of each page's
    median Chromium CPU during its load (to its load event), the share of the 2 cores it kept busy
    (CPU / PLT / 2), its threads' run-queue wait, the renderer's and the network service's main
    threads, the connections that carried a request, and the tail (load event - last byte)."""
    loads = _loads(os.path.join(out, "truth", "results.sqlite"))
    by = defaultdict(lambda: defaultdict(list))
    for r in loads:
        c = cpu_of(r, recs, "chromium")
        by[(r["rtt_ms"], r["protocol"])][r["page"]].append((r, c))
    res = {}
    for (rtt, proto), pages in sorted(by.items()):
        per = defaultdict(list)
        for runs in pages.values():
            with_cpu = [(r, c) for r, c in runs if c]
            per["plt_ms"].append(_med(r["plt_ms"] for r, _ in runs))
            per["tail_ms"].append(_med(_tail(r) for r, _ in runs))
            per["conns"].append(_med(_conns(r) for r, _ in runs))
            if with_cpu:
                per["cpu_ms"].append(_med(c["cpu_ms"] for _, c in with_cpu))
                per["cores_busy"].append(_med(c["cpu_ms"] / r["plt_ms"] / 2 for r, c in with_cpu))
                per["wait_ms"].append(_med(c["wait_ms"] for _, c in with_cpu))
                per["renderer_main_ms"].append(_med(c.get("cpu:renderer/main", 0.0) for _, c in with_cpu))
                per["network_io_ms"].append(_med(c.get("cpu:network/Chrome_ChildIOT", 0.0) for _, c in with_cpu))
                per["browser_ms"].append(_med(c.get("cpu:browser", 0.0) for _, c in with_cpu))
        res[f"{rtt:g}ms {proto}"] = {
            "pages": len(pages),
            **{k: _med(v) for k, v in per.items()},
            "pages_with_cpu": len(per["cpu_ms"]),
        }
    return res


def export(out: str, to: str) -> None:
    """What the benches read of DIR, derived facts only, into ``to`` (docs/results/chromium-pageset:
    committed, so a fresh clone computes bench_predict_chromium's figures without the 2 h of
    Chromium loads): calib/NAME.har.gz (the calibrated archives: structure and timings), calib/
    failed.json, truth/experiment.toml and truth/runs.csv.gz (each load's TRUTH_COLUMNS),
    machine.jsonl and STATUS.md (what of them there is: the calibrations alone before the truth
    is collected). Not exported: the loads' requests, pcaps and cpu/ samples (`analyse` needs
    DIR). Each file is written whole (temp, then renamed)."""
    from bench_predict_chromium import TRUTH_COLUMNS, truth_rows

    def put(rel: str, data: bytes) -> None:
        path = os.path.join(to, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path + ".tmp", "wb") as f:
            f.write(data)
        os.replace(path + ".tmp", path)

    if not os.path.isdir(out):
        sys.exit(f"{out}: no such data folder")
    os.makedirs(to, exist_ok=True)
    cal = os.path.join(out, "calib")
    n_cal = 0
    for f in sorted(os.listdir(cal)) if os.path.isdir(cal) else []:
        with open(os.path.join(cal, f), "rb") as src:
            raw = src.read()
        if f.endswith(".har"):  # mtime 0: the same calibration exports to the same bytes
            put(f"calib/{f}.gz", gzip.compress(raw, mtime=0))
            n_cal += 1
        elif f.endswith((".har.gz", "failed.json")):
            put(f"calib/{f}", raw)
            n_cal += f.endswith(".har.gz")
    truth_dir = os.path.join(out, "truth")
    rows = []
    if os.path.isdir(truth_dir):  # (not yet collected: the calibrations alone)
        rows = truth_rows(truth_dir)
        buf = io.StringIO()
        w = csv.DictWriter(buf, fieldnames=TRUTH_COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
        put("truth/runs.csv.gz", gzip.compress(buf.getvalue().encode(), mtime=0))
        with open(os.path.join(truth_dir, "experiment.toml"), "rb") as src:
            put("truth/experiment.toml", src.read())
    for f in ("machine.jsonl", "STATUS.md"):
        if os.path.isfile(os.path.join(out, f)):
            with open(os.path.join(out, f), "rb") as src:
                put(f, src.read())
    print(f"exported {n_cal} calibrations and {len(rows)} truth loads of {out} to {to}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("step", choices=("all", "calib", "truth", "why20", "status", "analyse", "export"))
    ap.add_argument("--out", required=True, help="data folder (outside the repository)")
    ap.add_argument("--to", default=None, help="export: the folder to write (docs/results/chromium-pageset)")
    a = ap.parse_args(argv)
    if a.step == "export":
        if not a.to:
            sys.exit("export needs --to FOLDER (docs/results/chromium-pageset)")
        export(a.out, a.to)
        return 0
    os.makedirs(a.out, exist_ok=True)
    {
        "all": all_steps,
        "calib": calib,
        "truth": truth,
        "why20": why20,
        "status": lambda o: print(status(o)),
        "analyse": analyse,
    }[a.step](a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
