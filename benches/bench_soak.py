#!/usr/bin/env python3
"""Soak (issue 12): N quick loads in ONE sweep (one runner: one replay server and one link emulator
for all of them), sampled every K loads: open fds and RSS of the control process, the replay
server and the link emulator, and the processes left over (loaders are short-lived: nothing may
remain in the client namespace or among our children between loads). Target, last sample vs the
first (taken after K loads of warm-up): fds flat and RSS growth <= 10 % in every process.

    python3 benches/bench_soak.py [--loads 10000] [--every 500] [--rtt 1ms] [--tracemalloc] [--quick]

A tiny generated page (4 objects, 2 origins), built-in loader, TFO off/on alternating. The sweep
ends by itself; its runner is torn down and the temporary folder removed (also on Ctrl-C/SIGTERM).
--quick: 40 loads sampled every 20 (plumbing check). Needs root.
"""

import argparse
import gc
import math
import os
import signal
import sys
import tempfile
import time
import tracemalloc

import record
from rich.console import Console

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.experiments import spec, sweep
from pltlab.net import names, nsutil

RSS_TARGET = 0.10

META = {
    "name": "bench_soak",
    "area": "soak",
    "title": "Soak: 10,000 loads in one sweep",
    "command": "python3 benches/bench_soak.py",
    "quick": "python3 benches/bench_soak.py --quick",
    "duration": "~3 min",
    "needs": "root",
    "figures": {
        "failed": {
            "name": "failed loads",
            "unit": "",
            "target": ("==", 0),
            "on": "10,000 loads of a 4-object page (2 origins) at RTT 1 ms, TFO off/on alternating, one sweep",
        },
        "rss_growth": {
            "name": "RSS growth, first sample (after 500 loads) to the last",
            "unit": "%",
            "target": ("<=", 10.0),
            "on": "control process, replay server, link emulator",
        },
        "fds_change": {
            "name": "open fds, first sample to the last",
            "unit": "",
            "target": ("==", 0),
            "on": "control process, replay server, link emulator",
        },
        "leftovers": {
            "name": "nothing left over (no stray child or process in the client namespace between loads; no "
            "child, namespace or work folder after the sweep)",
            "unit": "",
            "target": ("==", True),
            "on": "sampled every 500 loads, and after the sweep",
        },
        "ms_per_load": {
            "name": "wall time per load",
            "unit": "ms",
            "target": None,
            "on": "the whole sweep divided by its loads",
        },
    },
}


def _fds(pid: int) -> int:
    """Open fds of a process, those on /proc apart: the result recorder's sampler thread
    (record.QuietSampler) reads /proc from this process while the soak counts."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/proc/")
        except OSError:  # closed meanwhile
            pass
    return n


def proc_figures(pid: int) -> dict | None:
    """VmRSS (kB) and open fds of a process, None if it is gone."""
    try:
        with open(f"/proc/{pid}/status") as f:
            rss = next(int(ln.split()[1]) for ln in f if ln.startswith("VmRSS:"))
        return {"pid": pid, "rss_kb": rss, "fds": _fds(pid)}
    except (OSError, StopIteration):
        return None


def _stat(pid: str) -> tuple[str, int] | None:
    """(state, ppid) from /proc/PID/stat."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            rest = f.read().rsplit(")", 1)[1].split()
        return rest[0], int(rest[1])
    except (OSError, IndexError, ValueError):
        return None


def leftovers(expected: set[int], client_namespaces: list[str]) -> dict:
    """Our children other than the runners' servers (zombies among them), and processes still in
    a client namespace (a loader that outlived its load)."""
    me = os.getpid()
    ns_ids = set()
    for ns in client_namespaces:
        try:
            st = os.stat(nsutil.ns_path(ns))
            ns_ids.add((st.st_dev, st.st_ino))
        except OSError:
            pass
    stray = zombies = in_client = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == me:
            continue
        s = _stat(pid)
        if s and s[1] == me and int(pid) not in expected:
            stray += 1
            zombies += s[0] == "Z"
        try:
            st = os.stat(f"/proc/{pid}/ns/net")
            in_client += (st.st_dev, st.st_ino) in ns_ids
        except OSError:
            pass
    return {"stray_children": stray, "zombies": zombies, "client_ns_procs": in_client}


class SoakSweep(sweep.Sweep):
    """A sweep that calls ``sample(self)`` after every ``every`` load attempts."""

    def __init__(self, *a, every: int, sample, **kw):
        super().__init__(*a, **kw)
        self.every, self.sample, self.loads = every, sample, 0
        self.link_stats: list[dict] = []  # each closed runner's final emulator statistics

    def _close(self, key):
        pr = self.live.get(key)
        super()._close(key)
        if pr is not None and pr.topo.link_stats:
            self.link_stats.append(pr.topo.link_stats)

    def _attempt(self, it, attempt):
        row = super()._attempt(it, attempt)
        self.loads += 1
        if self.loads % self.every == 0:
            self.sample(self)
        return row


def servers(sw: sweep.Sweep) -> dict:
    """pid of every live runner's replay server and link emulator (none with netem)."""
    out = {}
    for pr in sw.live.values():
        if pr.replay and pr.replay.proc:
            out[f"replay {pr.topo.run_id}"] = pr.replay.proc.pid
        proc = getattr(pr.topo.link, "proc", None)
        if proc is not None:
            out[f"link {pr.topo.run_id}"] = proc.pid
    return out


def growth(series: list[dict]) -> tuple[float, int]:
    """(RSS growth ratio, fd change), last sample vs first."""
    a, b = series[0], series[-1]
    return b["rss_kb"] / a["rss_kb"] - 1, b["fds"] - a["fds"]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loads", type=int, default=10_000)
    ap.add_argument("--every", type=int, default=500, help="loads between samples (the first is warm-up)")
    ap.add_argument("--rtt", default="1ms")
    ap.add_argument(
        "--tracemalloc", action="store_true", help="also the control process's traced Python memory (slower)"
    )
    ap.add_argument("--quick", action="store_true", help="40 loads sampled every 20 (plumbing check)")
    args = ap.parse_args()
    if args.quick:
        args.loads, args.every = 40, 20
    if args.loads < 2 * args.every:
        ap.error("--loads must be at least 2 x --every (a warm-up sample and one more)")
    with record.Bench(META, quick=args.quick) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            soak(b, args)
    return b.exit_code


def soak(b, args) -> None:
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):  # unwind: runner down, tmp removed
        signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(128 + s)))
    if args.tracemalloc:
        tracemalloc.start()
    samples: list[dict] = []
    run_ids: set[str] = set()
    t0 = time.monotonic()

    def sample(sw: SoakSweep) -> None:
        gc.collect()
        srv = servers(sw)
        run_ids.update(pr.topo.run_id for pr in sw.live.values())
        s = {
            "loads": sw.loads,
            "t": time.monotonic() - t0,
            "control": proc_figures(os.getpid()),
            "db_mb": sum(os.path.getsize(f) for f in (sw.res.path, sw.res.path + "-wal") if os.path.exists(f)) / 1e6,
            "load1": os.getloadavg()[0],
            **leftovers(set(srv.values()), [pr.topo.client_ns for pr in sw.live.values()]),
        }
        if args.tracemalloc:
            s["traced"] = tracemalloc.get_traced_memory()[0]
        s["servers"] = {k: proc_figures(pid) for k, pid in srv.items()}
        samples.append(s)
        prev = samples[-2] if len(samples) > 1 else {"loads": 0, "t": 0.0}
        per_load = (s["t"] - prev["t"]) / (s["loads"] - prev["loads"]) * 1000
        srv_txt = "  ".join(
            f"{k.split()[0]} {v['rss_kb'] / 1024:.2f} MB/{v['fds']} fds" for k, v in s["servers"].items() if v
        )
        print(
            f"{s['loads']:>6} {s['t']:>8.1f} {per_load:>7.1f} {s['control']['fds']:>4} "
            f"{s['control']['rss_kb'] / 1024:>7.1f} "
            + (f"{s['traced'] / 1e6:>7.2f} " if args.tracemalloc else "")
            + f"{s['db_mb']:>6.1f} {s['stray_children']:>3}/{s['zombies']}/{s['client_ns_procs']} "
            f"{s['load1']:>5.2f}  {srv_txt}",
            flush=True,
        )

    with tempfile.TemporaryDirectory(prefix="bench-soak-") as d:
        page = os.path.join(d, "soak.har")
        write_page(generate(objects=4, total_bytes=12_000, origins=2, depth=2, seed=12, domain="soak"), page)
        exp = spec.from_dict(
            {
                "name": "soak",
                "pages": ["soak.har"],
                "rtt": args.rtt,
                "tfo": ["off", "on"],
                "repetitions": math.ceil(args.loads / 2),
                "seed": 1,
            },
            "soak",
            d,
        )
        out = os.path.join(d, "out")
        sweep.prepare(exp, out, False)
        print(
            f"soak: {exp.n_runs} loads of a 4-object page at RTT {args.rtt} in one sweep, sampled every "
            f"{args.every}; machine load {os.getloadavg()[0]:.2f} on {os.cpu_count()} cpus"
        )
        print(
            "  load   time s ms/load  fds ctl MB "
            + ("traced " if args.tracemalloc else "")
            + "  db MB stray/Z/client  load1  data-plane processes"
        )
        with open(os.devnull, "w") as null:
            sw = SoakSweep(exp, out, Console(file=null, width=100), every=args.every, sample=sample)
            stats = sw.run()
        wall = time.monotonic() - t0
        after_children = leftovers(set(), [])["stray_children"]
    left_ns = (
        [n for n in os.listdir(nsutil.NETNS_DIR) if any(n.startswith(names.run_prefix(r)) for r in run_ids)]
        if os.path.isdir(nsutil.NETNS_DIR)
        else []
    )
    left_dirs = [r for r in run_ids if os.path.exists(names.workdir(r))]

    print(
        f"soak: {stats['runs']} ok, {stats['failed']} failed, {stats['invalid']} invalid; wall {wall:.0f} s "
        f"= {wall / exp.n_runs * 1000:.1f} ms per load (sweep loop {stats['wall_s'] / exp.n_runs * 1000:.1f} ms; "
        f"sum of PLTs {stats['plt_sum_ms'] / exp.n_runs:.1f} ms per load)"
    )
    ok = stats["failed"] == 0
    on = f"{exp.n_runs:,} loads of a 4-object page at RTT {args.rtt}, one sweep"
    b.figure("failed", stats["failed"], on=f"{on}; {stats['invalid']} invalid")
    b.figure("ms_per_load", wall / exp.n_runs * 1000, on=f"{on}: {wall:.0f} s")
    series = {"control": [s["control"] for s in samples]}
    for s in samples:
        for k, v in s["servers"].items():
            if v:
                series.setdefault(k, []).append(v)
    for k, ser in series.items():
        pids = {v["pid"] for v in ser}
        what = k.split()[0]
        if len(ser) < 2 or len(pids) > 1:
            print(f"soak: {k}: {len(ser)} sample(s), {len(pids)} pid(s): restarted, not compared")
            b.figure("rss_growth", None, name=f"RSS growth, {what}", on=f"{len(pids)} pid(s): restarted, not compared")
            ok = False
            continue
        g, dfd = growth(ser)
        span = f"{what}, loads {samples[0]['loads']:,} -> {samples[-1]['loads']:,}"
        b.figure(
            "rss_growth",
            g * 100,
            name=f"RSS growth, {what}",
            on=f"{span}: {ser[0]['rss_kb'] / 1024:.1f} -> {ser[-1]['rss_kb'] / 1024:.1f} MB",
        )
        b.figure("fds_change", dfd, name=f"open fds change, {what}", on=f"{span}: {ser[0]['fds']} -> {ser[-1]['fds']}")
        met = g <= RSS_TARGET and dfd == 0
        ok &= met
        print(
            f"soak: {k.split()[0]:8s} loads {samples[0]['loads']} -> {samples[-1]['loads']}: RSS "
            f"{ser[0]['rss_kb'] / 1024:.1f} -> {ser[-1]['rss_kb'] / 1024:.1f} MB ({g:+.1%}, target <= "
            f"+{RSS_TARGET:.0%}), fds {ser[0]['fds']} -> {ser[-1]['fds']} (flat: {dfd == 0}): "
            f"{'met' if met else 'NOT met'}"
        )
    if args.tracemalloc:
        a, b = samples[0], samples[-1]
        print(
            f"soak: control traced Python memory {(b['traced'] - a['traced']) / (b['loads'] - a['loads']):+.1f} "
            f"B per load after warm-up"
        )
    worst = max((s["stray_children"], s["client_ns_procs"]) for s in samples)
    print(
        f"soak: leftover processes between loads: at most {worst[0]} stray children, {worst[1]} in the "
        f"client namespace; after the sweep: {after_children} children, namespaces left {left_ns or 'none'}, "
        f"work folders left {left_dirs or 'none'}"
    )
    for st in sw.link_stats:
        ev = st.get("late_events") or {}
        if ev:  # kept in the emulator's memory until it exits
            print(
                f"soak: link emulator logged {ev.get('count')} late events (>= {ev.get('threshold_us')} us), "
                f"{len(ev.get('events') or [])} kept"
            )
    clean = worst == (0, 0) and after_children == 0 and not left_ns and not left_dirs
    b.check(
        "leftovers",
        clean,
        on=f"between loads at most {worst[0]} stray children, {worst[1]} in the client namespace; after: "
        f"{after_children} children, namespaces {left_ns or 'none'}, work folders {left_dirs or 'none'}",
    )
    ok &= clean
    print(
        f"soak target (fds flat, RSS growth <= {RSS_TARGET:.0%} in every process, nothing left over): "
        f"{'met' if ok else 'NOT met'}"
    )


if __name__ == "__main__":
    sys.exit(main())
