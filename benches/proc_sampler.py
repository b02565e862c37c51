"""CPU of the processes of a page load, sampled from /proc (issue 27: what makes 20 ms hard).

    python3 benches/proc_sampler.py --out FILE.jsonl [--interval 0.1]

Runs beside `pltlab sweep` / `pltlab calibrate` (benches/chromium_pageset.py starts it) and
watches, without touching them, every Chromium browser pltlab starts (its temp profile,
`pltlab-chromium-*`, on the command line; its renderers, GPU and utility processes are its
descendants) and every built-in loader process (`pltlab-dp load`). Per thread it reads /proc/PID/task/TID/schedstat: the time it ran, the time it waited on a
run queue while runnable (the CPUs were busy: contention), and its timeslices (one per wake-up,
about). When a browser (or a loader process) is gone, one JSON line is written: its samples
(epoch seconds) and, per process type and thread, the cumulative figures at each sample, so CPU
up to any instant of the load (its load event) can be read by interpolation. Reads only what it
needs each tick (a new pid's command line once), ~1 % of a core at 10 samples a second.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time

PROFILE = b"pltlab-chromium-"


def _read(path: str, binary: bool = False):
    try:
        with open(path, "rb" if binary else "r") as f:
            return f.read()
    except OSError:
        return None


def _ppid(pid: str) -> int | None:
    st = _read(f"/proc/{pid}/stat")
    try:
        return int(st.rsplit(")", 1)[1].split()[1]) if st else None
    except (IndexError, ValueError):
        return None


def _netns(pid: str) -> str | None:
    """The name (ip netns) of the network namespace ``pid`` runs in: pltlab's are plt-RUNID-c/-s, so a
    load is matched to its runner (results column runner_id) even when other runs share the machine."""
    try:
        ino = os.stat(f"/proc/{pid}/ns/net").st_ino
        for name in os.listdir("/run/netns"):
            if os.stat(os.path.join("/run/netns", name)).st_ino == ino:
                return name
    except OSError:
        pass
    return None


def _args(raw: bytes) -> list[bytes]:
    """A command line's words: NUL-separated, or one string (a renderer's title, set by the zygote)."""
    return raw.replace(b"\0", b" ").split() or [b""]


def _ptype(cmd: list[bytes]) -> str:
    """The Chromium process's role from its --type (browser: none); utility processes by sub-type."""
    typ = next((a[7:].decode() for a in cmd if a.startswith(b"--type=")), "browser")
    if typ == "utility":
        sub = next((a.split(b"=", 1)[1].decode() for a in cmd if a.startswith(b"--utility-sub-type=")), "")
        return "network" if "NetworkService" in sub else f"utility:{sub.rsplit('.', 1)[-1]}"
    return typ


class Watch:
    """One watched group: a browser and its descendants, or one pltlab-dp process."""

    def __init__(self, key: str, kind: str, t: float):
        self.key, self.kind, self.first = key, kind, t
        self.netns: str | None = None
        self.pids: dict[str, str] = {}  # pid -> process type
        self.names: dict[tuple[str, str], str] = {}  # (pid, tid) -> thread label (main: tid == pid)
        self.times: list[float] = []
        self.series: dict[str, list[list[float]]] = {}  # "type/thread" -> [[run_ms, wait_ms, slices] per sample]
        self.last: dict[tuple[str, str], tuple[float, float, int]] = {}

    def sample(self, t: float) -> bool:
        alive = False
        for pid in list(self.pids):
            st, tids = _read(f"/proc/{pid}/stat"), None
            if not st or st.rsplit(")", 1)[1].split()[0] == "Z":  # gone, or a zombie left to its parent
                continue
            try:
                tids = os.listdir(f"/proc/{pid}/task")
            except OSError:
                pass
            if not tids:
                continue
            alive = True
            for tid in tids:
                s = _read(f"/proc/{pid}/task/{tid}/schedstat")
                if not s:
                    continue
                run, wait, slices = s.split()[:3]
                k = (pid, tid)
                if k not in self.names:
                    comm = (_read(f"/proc/{pid}/task/{tid}/comm") or "?").strip()
                    self.names[k] = "main" if tid == pid else comm
                self.last[k] = (int(run) / 1e6, int(wait) / 1e6, int(slices))
        if alive:
            self.times.append(t)
            agg: dict[str, list[float]] = {}
            for k, v in self.last.items():  # threads gone keep their last figures (cumulative)
                a = agg.setdefault(f"{self.pids[k[0]]}/{self.names[k]}", [0.0, 0.0, 0])
                a[0] += v[0]
                a[1] += v[1]
                a[2] += v[2]
            n = len(self.times) - 1
            for name, a in agg.items():
                self.series.setdefault(name, [[0.0, 0.0, 0]] * n).append([round(a[0], 2), round(a[1], 2), a[2]])
            for s in self.series.values():
                if len(s) < len(self.times):
                    s.append(s[-1])
        return alive

    def record(self) -> dict:
        return {
            "key": self.key,
            "kind": self.kind,
            "first_seen": self.first,
            "netns": self.netns,
            "types": sorted(set(self.pids.values())),
            "times": [round(t, 3) for t in self.times],
            "threads": self.series,
        }


def classify(pid: str, watches: dict, owner: dict) -> bool:
    """Attach a new pid to the watch it belongs to (or to none); False: its command line cannot be
    read yet (a process in the middle of its exec reads as empty: ask again next time)."""
    raw = _read(f"/proc/{pid}/cmdline", binary=True)
    if not raw:
        return False
    cmd = _args(raw)
    exe = os.path.basename(cmd[0].decode(errors="replace"))
    t = time.time()
    ppid = _ppid(pid)
    if ppid is not None and str(ppid) in owner:  # a descendant of a watched browser (its type: retype)
        root = owner[str(ppid)]
        w = watches.get(root)
        if w is not None and w.kind == "chromium":
            w.pids[pid] = _ptype(cmd)
            owner[pid] = root
        return True
    if exe == "pltlab-dp" and len(cmd) > 1 and cmd[1] == b"load":  # the built-in loader (one per load)
        w = watches[pid] = Watch(f"dp:load:{pid}", "dp:load", t)
        w.pids[pid] = "load"
        w.netns = _netns(pid)
        owner[pid] = pid
        return True
    prof = next((a for a in cmd if a.startswith(b"--user-data-dir=") and PROFILE in a), None)
    if prof is not None and not any(a.startswith(b"--type=") for a in cmd):
        key = prof.split(b"=", 1)[-1].decode(errors="replace")
        w = watches[pid] = Watch(key, "chromium", t)
        w.pids[pid] = "browser"
        w.netns = _netns(pid)
        owner[pid] = pid
    return True


def retype(w: Watch, root: str) -> None:
    """A child seen right after its fork still shows its parent's command line (the browser's, or
    the zygote's before it names itself a renderer): read it again until it says what it is."""
    for pid, ptype in w.pids.items():
        if pid != root and ptype in ("browser", "zygote"):
            raw = _read(f"/proc/{pid}/cmdline", binary=True)
            if raw:
                w.pids[pid] = _ptype(_args(raw))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--interval", type=float, default=0.1)
    a = ap.parse_args(argv)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    signal.signal(signal.SIGINT, lambda *_: stop.append(1))
    seen: set[str] = set()
    tries: dict[str, int] = {}
    watches: dict[str, Watch] = {}
    owner: dict[str, str] = {}
    with open(a.out, "a", encoding="utf-8") as out:
        while not stop:
            t = time.time()
            pids = [p for p in os.listdir("/proc") if p.isdigit()]
            for pid in sorted((p for p in pids if p not in seen), key=int):  # parents before children
                tries[pid] = tries.get(pid, 0) + 1
                if classify(pid, watches, owner) or tries[pid] >= 20:  # (kernel threads: no command line)
                    seen.add(pid)
                    tries.pop(pid, None)
            for root, w in list(watches.items()):
                if w.kind == "chromium":
                    retype(w, root)
                if not w.sample(t) and w.times:
                    out.write(json.dumps(w.record()) + "\n")
                    out.flush()
                    del watches[root]
                elif not w.times and t - w.first > 5:
                    del watches[root]
            live = set(pids)
            seen &= live  # a reused pid is a new process
            tries = {p: n for p, n in tries.items() if p in live}
            for p in [p for p in owner if p not in live]:
                del owner[p]
            time.sleep(max(0.0, a.interval - (time.time() - t)))
        for w in watches.values():
            if w.times:
                out.write(json.dumps(w.record()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
