"""Bench results: every bench reports its figures through this module, which writes one JSON file
per bench (benches/results/<bench>.json, whole or not at all) and gives the bench its exit code.

    import record

    META = {...}  # the bench's area, command and declared figures (read by performance_md.py)

    with record.Bench(META, quick=args.quick) as b:
        b.figure("import_cs244", statistics.median(times), "s", samples=times, on="...")
    sys.exit(b.exit_code)

A figure is compared with its target here, never by the bench: ``met`` is computed from the value
and the target (see ``Target``). A bench that cannot run here (no corpus, not root, no curl)
calls ``b.skip(reason)``: its file says "skipped" with the reason (unless the file holds an earlier
measurement: a run that measured nothing leaves it untouched), and its exit code is 0. Any
missed target, or an exception inside the ``with`` block, gives a non-zero exit code; an
exception is recorded as status "error" (then raised again). Ctrl-C and SystemExit write nothing.

Whether the machine was quiet: see ``QUIET_RULE`` (numbers recorded, not only the verdict).

Standard library only: the generator of docs/performance.md and the tests import it without
pltlab. Layout of a result file: ``SCHEMA`` and docs/performance.md "How to read it".
"""

from __future__ import annotations

import contextlib
import json
import math
import operator
import os
import platform
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
RESULTS = HERE / "results"
RESULTS_ENV = "PLTLAB_BENCH_RESULTS"  # another results folder (benches/run.py --results, tests)
SCHEMA = 1

# The quiet rule. A bench run is "quiet" when both hold:
#  1. the machine was idle when it began: in the IDLE_S seconds before the bench starts (the
#     bench process sleeping), all processes together used at most 10 % of the CPUs. Measured
#     directly, not from the 1-minute load average, which under `make bench` still carries the
#     previous bench for a minute after it ended (both load averages are recorded beside it), and
#  2. processes outside the bench's own used at most 10 % of the machine's CPU time (all CPUs)
#     during the run: /proc/stat's user+nice+system time minus the bench's own, sampled every
#     SAMPLE_S seconds. The bench's own = the CPU time of its control group (CpuGroup: every
#     process the bench starts is born in it and stays, re-parented or exited; Chromium's zygote
#     and renderers leave the bench's process tree and may end between two samples). Where the
#     bench may not make one: its process tree (the bench, its children and theirs, the children
#     they reaped included: /proc/PID/stat utime+stime+cutime+cstime) and every process in a
#     network namespace that appeared during the run (a namespace that existed before it began
#     belongs to someone else).
# Recorded beside the verdict: the idle share before, both load averages, the others' and the
# bench's share, the others' worst WINDOW_S window, the share of irq/softirq time (network
# processing is accounted there, to no process) and of steal time (the hypervisor ran another
# guest), which are in neither share.
QUIET_MAX_BUSY_BEFORE = 0.10
QUIET_MAX_OTHER_CPU = 0.10
IDLE_S = 3.0
SAMPLE_S = 2.0
WINDOW_S = 10.0
QUIET_RULE = (
    f"quiet = all processes used <= {QUIET_MAX_BUSY_BEFORE:.0%} of all CPUs' time in the {IDLE_S:g} s before "
    f"the bench started, and processes outside the bench's own (its control group, which every process it "
    f"starts is born in; without one, its process tree and the processes of network namespaces created during "
    f"it) used <= {QUIET_MAX_OTHER_CPU:.0%} of all CPUs' time during the run (/proc/stat minus the bench's own "
    f"CPU time, sampled every {SAMPLE_S:g} s)"
)

STATUSES = ("met", "missed", "no target", "skipped", "error")
NO_TARGET = "no target"  # Bench.figure(target=NO_TARGET): this figure has none, whatever META says


# ---------------------------------------------------------------------------------------------
# targets


def _between(v, b) -> bool:
    return b[0] <= v <= b[1]


def _abs_le(v, b) -> bool:
    return abs(v) <= b


OPS = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
    "==": operator.eq,
    "between": _between,  # bound (lo, hi), both included
    "abs<=": _abs_le,  # |value| <= bound: an error that may be either sign
}


class Target:
    """A comparison and its bound: ``Target("<=", 2.0)``, ``Target("between", (0.0, 0.6))``,
    ``Target("abs<=", 4.8)``, ``Target("==", True)``. ``met(value)``: True or False; a missing
    value (None, NaN: nothing measured) misses every target."""

    def __init__(self, op: str, bound):
        if op not in OPS:
            raise ValueError(f"unknown comparison {op!r}: one of {', '.join(OPS)}")
        if op == "between":
            lo, hi = bound
            if lo > hi:
                raise ValueError(f"between {lo} and {hi}: the low bound is above the high one")
            bound = (lo, hi)
        elif isinstance(bound, list | tuple):
            raise ValueError(f"{op} takes one bound, not {bound!r}")
        self.op, self.bound = op, bound

    @classmethod
    def of(cls, spec) -> Target | None:
        """From a Target, a tuple as META writes it (("<=", 2.0), ("between", 0, 0.6)) or None."""
        if spec is None or isinstance(spec, Target):
            return spec
        if isinstance(spec, list | tuple) and spec and spec[0] in OPS:
            op, *rest = spec
            return cls(op, tuple(rest) if op == "between" else rest[0])
        raise ValueError(f"not a target: {spec!r} (e.g. ('<=', 2.0) or ('between', 0.0, 0.6))")

    def met(self, value) -> bool:
        if value is None or (isinstance(value, float) and math.isnan(value)):
            return False
        if self.op != "==" and isinstance(value, bool):
            raise ValueError(f"a yes/no value takes the target ('==', True), not {self.op}")
        return bool(OPS[self.op](value, self.bound))

    def text(self, unit: str = "") -> str:
        u = f" {unit}" if unit else ""
        if self.op == "between":
            return f"{_bound(self.bound[0])}{u} .. {_bound(self.bound[1])}{u}"
        if self.op == "abs<=":
            return f"within ±{_bound(self.bound)}{u}"
        if self.op == "==" and isinstance(self.bound, bool):
            return "yes" if self.bound else "no"
        return f"{self.op} {_bound(self.bound)}{u}"

    def to_json(self) -> dict:
        return {"op": self.op, "bound": list(self.bound) if self.op == "between" else self.bound}

    @classmethod
    def from_json(cls, d: dict | None) -> Target | None:
        return None if d is None else cls(d["op"], d["bound"])

    def __eq__(self, other) -> bool:
        return isinstance(other, Target) and (self.op, self.bound) == (other.op, other.bound)

    def __repr__(self) -> str:
        return f"Target({self.op!r}, {self.bound!r})"


def _bound(v) -> str:
    """A target's bound as written: 2, 0.3, 0.045 (not rounded like a measured value)."""
    if isinstance(v, float) and v.is_integer():
        return f"{int(v):,}"
    return f"{v:,}" if isinstance(v, int) and not isinstance(v, bool) else f"{v:g}"


def fmt(v) -> str:
    """A number as the docs print it: 3 significant digits below 100, whole numbers above."""
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if math.isnan(v):
            return "n/a"
        a = abs(v)
        if a >= 100:
            return f"{v:,.0f}"
        if a >= 10:
            return f"{v:.1f}"
        if a >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def distribution(samples) -> dict:
    """n, min, median, max (and p90/p99 from 20 samples on) of a list of numbers."""
    s = sorted(float(x) for x in samples)
    if not s:
        return {"n": 0}
    d = {"n": len(s), "min": s[0], "median": statistics.median(s), "max": s[-1]}
    if len(s) >= 20:
        for q in (90, 99):
            d[f"p{q}"] = s[min(len(s) - 1, round(q / 100 * (len(s) - 1)))]
    return d


# ---------------------------------------------------------------------------------------------
# the machine and whether it was quiet


def _read(path: str) -> str | None:
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return None


def _cpu_times() -> dict:
    """Machine-wide CPU time (clock ticks) from /proc/stat's cpu line."""
    f = (_read("/proc/stat") or "cpu 0 0 0 0").splitlines()[0].split()[1:]
    v = [int(x) for x in f] + [0] * (10 - len(f))
    user, nice, system, idle, iowait, irq, softirq, steal = v[:8]
    return {
        "busy": user + nice + system,  # guest time is inside user
        "irq": irq + softirq,
        "steal": steal,
        "total": sum(v[:8]),
    }


def _proc_table() -> dict[int, tuple[int, int]]:
    """pid -> (ppid, utime+stime+cutime+cstime) of every process."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        s = _read(f"/proc/{name}/stat")
        if not s:
            continue
        try:
            rest = s.rsplit(")", 1)[1].split()
            out[int(name)] = (int(rest[1]), sum(int(x) for x in rest[11:15]))
        except (IndexError, ValueError):
            continue
    return out


def _tree(root: int, table: dict[int, tuple[int, int]]) -> set[int]:
    """``root`` and its living descendants."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    seen: set[int] = set()
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in table:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, ()))
    return seen


def tree_cpu(root: int, table: dict[int, tuple[int, int]] | None = None) -> int:
    """CPU clock ticks of ``root`` and its descendants, the children they reaped included."""
    table = _proc_table() if table is None else table
    return sum(table[pid][1] for pid in _tree(root, table))


def _netns(pid: int) -> int | None:
    """The inode of a process's network namespace (None: gone or not readable)."""
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def named_netns() -> set[int]:
    """Inodes of the named network namespaces (/run/netns, as `ip netns add` makes them)."""
    out = set()
    try:
        names = os.listdir("/run/netns")
    except OSError:
        return out
    for name in names:
        try:
            out.add(os.stat(f"/run/netns/{name}").st_ino)
        except OSError:
            continue
    return out


class CpuGroup:
    """A control group of the bench's own: every process the bench starts is born in it and stays
    there when re-parented (Chromium's zygote and renderers, `setsid` daemons) or after it exits
    between two samples, so its CPU usage is the bench's exactly (a process tree loses the ticks of
    an orphan that ends unseen). cgroup v2 (cpu.stat) or v1 cpuacct; ``make`` returns None where
    the machine has neither or the bench may not make one (then the tree and namespaces count)."""

    PREFIX = "pltlab-bench-"

    def __init__(self, path: str, home: str, usage: str):
        self.path, self.home, self._usage = path, home, usage

    @classmethod
    def make(cls, pid: int, children: set[int] = frozenset()) -> CpuGroup | None:
        for mount, usage in (
            ("/sys/fs/cgroup", "cpu.stat"),
            ("/sys/fs/cgroup/unified", "cpu.stat"),
            ("/sys/fs/cgroup/cpuacct", "cpuacct.usage"),
        ):
            v2 = usage == "cpu.stat"
            if not os.path.isfile(os.path.join(mount, "cgroup.controllers" if v2 else "cpuacct.usage")):
                continue
            home = cls._current(pid, mount, v2)
            if home is None:
                continue
            cls._remove_stale(home)
            path = os.path.join(home, f"{cls.PREFIX}{pid}")
            try:
                os.makedirs(path, exist_ok=True)
                for p in (pid, *children):  # (already running ones: their future ticks)
                    with contextlib.suppress(ProcessLookupError):
                        Path(path, "cgroup.procs").write_text(f"{p}\n")
            except OSError:
                with contextlib.suppress(OSError):
                    os.rmdir(path)
                continue
            return cls(path, home, os.path.join(path, usage))
        return None

    @staticmethod
    def _current(pid: int, mount: str, v2: bool) -> str | None:
        """The folder of ``pid``'s group in that hierarchy (/proc/PID/cgroup)."""
        try:
            lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
        except OSError:
            return None
        for line in lines:
            _, ctrls, rel = line.split(":", 2)
            if (v2 and ctrls == "" and line.startswith("0::")) or (not v2 and "cpuacct" in ctrls.split(",")):
                return os.path.join(mount, rel.lstrip("/"))
        return None

    @classmethod
    def _remove_stale(cls, home: str) -> None:
        """Groups of benches that ended without removing theirs: rmdir takes only an empty one, so
        a live bench's group (its process is in it) stays."""
        with contextlib.suppress(OSError):
            for name in os.listdir(home):
                if name.startswith(cls.PREFIX):
                    with contextlib.suppress(OSError):
                        os.rmdir(os.path.join(home, name))

    def ticks(self) -> int:
        """The group's CPU time in clock ticks (its processes' user + system, exited ones too)."""
        text = Path(self._usage).read_text()
        if self._usage.endswith("cpuacct.usage"):
            ns = int(text)
        else:
            ns = 1000 * int(next(ln.split()[1] for ln in text.splitlines() if ln.startswith("usage_usec ")))
        return ns * os.sysconf("SC_CLK_TCK") // 1_000_000_000

    def close(self) -> None:
        """Every process still in the group back to where the bench began; the group removed."""
        with contextlib.suppress(OSError):
            for p in Path(self.path, "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    Path(self.home, "cgroup.procs").write_text(f"{p}\n")
        with contextlib.suppress(OSError):
            os.rmdir(self.path)


class QuietSampler:
    """Samples /proc every ``interval`` s in a daemon thread (start() to stop()): the CPU time of
    the machine and of the bench's own processes. ``figures()``: the numbers of the quiet rule."""

    def __init__(self, root: int | None = None, interval: float = SAMPLE_S, idle_s: float = IDLE_S):
        self.root = root or os.getpid()
        self.interval = interval
        self.idle_s = idle_s
        self.cpus = os.cpu_count() or 1
        self.samples: list[tuple[float, dict, int]] = []  # (monotonic, /proc/stat, own ticks)
        self.busy_before: float | None = None  # all processes' share of the CPUs before the start
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.load_start = self.load_end = None
        self._netns_before: set[int] = set()
        self._netns_own: set[int] = set()
        self._adopted: dict[int, int] = {}  # pid -> most ticks seen, of own processes outside the tree
        self.group: CpuGroup | None = None  # made by start()

    def own_cpu(self) -> int:
        """Ticks of the bench's control group (CpuGroup) where it has one; else of the tree plus
        those of processes in namespaces created since the start (a process outside the tree keeps
        the most ticks it was seen with after it exits)."""
        if self.group is not None:
            return self.group.ticks()
        table = _proc_table()
        tree = _tree(self.root, table)
        self._netns_own |= named_netns() - self._netns_before
        if self._netns_own:
            for pid, (_, ticks) in table.items():
                if pid not in tree and _netns(pid) in self._netns_own:
                    self._adopted[pid] = max(ticks, self._adopted.get(pid, 0))
        return sum(table[pid][1] for pid in tree) + sum(t for pid, t in self._adopted.items() if pid not in tree)

    def _sample(self) -> None:
        self.samples.append((time.monotonic(), _cpu_times(), self.own_cpu()))

    def measure_idle(self) -> float:
        """All processes' share of the CPUs over ``idle_s`` seconds, this one sleeping."""
        t0, c0 = time.monotonic(), _cpu_times()
        time.sleep(self.idle_s)
        t1, c1 = time.monotonic(), _cpu_times()
        capacity = max((t1 - t0) * os.sysconf("SC_CLK_TCK") * self.cpus, 1e-9)
        return min(1.0, (c1["busy"] - c0["busy"]) / capacity)

    def start(self) -> QuietSampler:
        self.load_start = os.getloadavg()
        self._netns_before = named_netns()
        if self.idle_s > 0:
            self.busy_before = self.measure_idle()
        self.group = CpuGroup.make(self.root, _tree(self.root, _proc_table()) - {self.root})
        self._sample()
        self._thread = threading.Thread(target=self._run, name="quiet-sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> dict:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._sample()
        self.load_end = os.getloadavg()
        if self.group is not None:
            self.group.close()
        return self.figures()

    def figures(self) -> dict:
        s = self.samples
        wall = s[-1][0] - s[0][0] if len(s) > 1 else 0.0
        ticks = os.sysconf("SC_CLK_TCK")
        capacity = max(wall * ticks * self.cpus, 1e-9)  # clock ticks all CPUs had
        other = own = irq = steal = 0
        intervals = []  # (seconds, others' ticks)
        for (t0, c0, o0), (t1, c1, o1) in zip(s, s[1:]):
            d_own = max(0, o1 - o0)  # a process leaving the tree (reparented) can lower the sum
            d_other = max(0, (c1["busy"] - c0["busy"]) - d_own)
            own += d_own
            other += d_other
            irq += c1["irq"] - c0["irq"]
            steal += c1["steal"] - c0["steal"]
            intervals.append((t1 - t0, d_other))
        worst = 0.0  # the others' share in the worst window of about WINDOW_S seconds
        for i in range(len(intervals)):
            secs = busy = 0.0
            for dt, d in intervals[i:]:
                secs, busy = secs + dt, busy + d
                if secs >= WINDOW_S:
                    break
            if secs > 0:
                worst = max(worst, min(1.0, busy / (secs * ticks * self.cpus)))
        load1 = self.load_start[0] if self.load_start else None
        share = min(1.0, other / capacity) if wall > 0 else 0.0  # clock ticks: coarse on short runs
        before = self.busy_before
        quiet = before is not None and before <= QUIET_MAX_BUSY_BEFORE and share <= QUIET_MAX_OTHER_CPU
        return {
            "quiet": quiet,
            "rule": QUIET_RULE,
            "cpus": self.cpus,
            "busy_before": None if before is None else round(before, 4),
            "idle_s": self.idle_s,
            "load1_start": None if load1 is None else round(load1, 2),
            "load1_end": None if self.load_end is None else round(self.load_end[0], 2),
            "others_cpu_share": round(share, 4),
            "others_cpu_share_worst_window": round(worst, 4),
            "window_s": WINDOW_S,
            "own_cpu_share": round(own / capacity, 4) if wall > 0 else 0.0,
            "own_counted_by": "process tree" if self.group is None else "control group",
            "irq_share": round(irq / capacity, 4) if wall > 0 else 0.0,
            "steal_share": round(steal / capacity, 4) if wall > 0 else 0.0,
            "samples": len(s),
            "sample_s": self.interval,
        }


def _run_out(argv: list[str], timeout: float = 20) -> str | None:
    try:
        cp = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return cp.stdout.strip() or None


def _dp_binary() -> str | None:
    try:
        from pltlab import dataplane

        return dataplane.binary()
    except Exception:  # not installed, or no build: the file says so (None)
        return os.environ.get("PLTLAB_DP") or shutil.which("pltlab-dp")


def _chromium_binary() -> str | None:
    try:
        from pltlab.loaders.browser import flags

        return flags.find_executable()
    except Exception:
        return shutil.which("chromium") or shutil.which("chromium-browser")


def _version(dist: str) -> str | None:
    try:
        from importlib import metadata

        return metadata.version(dist)
    except Exception:
        return None


def machine(chromium: bool = False) -> dict:
    """Where the figures were measured: host, kernel, CPU, memory, versions, the source tree."""
    cpu = next(
        (
            ln.split(":", 1)[1].strip()
            for ln in (_read("/proc/cpuinfo") or "").splitlines()
            if ln.startswith("model name")
        ),
        platform.processor() or None,
    )
    mem = next(
        (ln.split()[1] for ln in (_read("/proc/meminfo") or "").splitlines() if ln.startswith("MemTotal:")), None
    )
    dp = _dp_binary()
    commit = _run_out(["git", "-C", str(REPO), "rev-parse", "--short=12", "HEAD"])
    dirty = _run_out(["git", "-C", str(REPO), "status", "--porcelain", "--untracked-files=no"]) if commit else None
    out = {
        "hostname": socket.gethostname(),
        "kernel": platform.release(),
        "cpu_model": cpu,
        "cpus": os.cpu_count(),
        "memory_gib": round(int(mem) / 2**20, 1) if mem else None,
        "python": platform.python_version(),
        "pltlab": _version("pltlab"),
        "pltlab_dp": _run_out([dp, "--version"]) if dp else None,
        "git_commit": commit,
        "git_dirty": bool(dirty) if commit else None,
        "root": os.geteuid() == 0,
    }
    if chromium:
        exe = _chromium_binary()
        out["chromium"] = _run_out([exe, "--version"], timeout=60) if exe else None
    return out


# ---------------------------------------------------------------------------------------------
# a bench's results


def results_dir(quick: bool = False, base: str | os.PathLike | None = None) -> Path:
    """benches/results (or $PLTLAB_BENCH_RESULTS, or ``base``); a quick run's files go to its
    quick/ subfolder, so a smoke run never replaces a real figure."""
    d = Path(base or os.environ.get(RESULTS_ENV) or RESULTS)
    return d / "quick" if quick else d


def _measured(path: Path) -> dict | None:
    """The result file at ``path`` if it holds a measurement (a status other than skipped), else None."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("status") not in (None, "skipped") else None


def write_atomic(path: Path, data: dict) -> None:
    """``data`` as JSON into ``path``, whole or not at all."""
    write_text_atomic(path, json.dumps(data, indent=1, allow_nan=False) + "\n")


def write_text_atomic(path: Path, text: str) -> None:
    """``text`` into ``path``, whole or not at all: a temporary file in the same folder, flushed
    to disk, renamed over it (readers see the old file or the whole new one); on any error the
    temporary file is removed and the old file stays."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def command_line(argv: list[str] | None = None) -> str:
    """The command as a user types it from the repository: python3 benches/<bench>.py ARGS."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve() if argv else Path("?")
    try:
        script_txt = str(script.relative_to(REPO))
    except ValueError:
        script_txt = str(argv[0]) if argv else "?"
    return shlex.join(["python3", script_txt, *argv[1:]])


def _clean(v):
    """JSON-safe and readable: floats to 6 significant digits, NaN and infinities None (strict
    JSON), tuples lists."""
    if isinstance(v, float):
        return float(f"{v:.6g}") if math.isfinite(v) else None  # 6 significant digits
    if isinstance(v, dict):
        return {str(k): _clean(x) for k, x in v.items()}
    if isinstance(v, list | tuple):
        return [_clean(x) for x in v]
    return v


class Bench:
    """One run of a bench: its figures, then its result file and exit code (``exit_code``).

    ``meta``: the bench's META (name, area, title, command, figures: key -> {name, unit, target,
    on}). ``quick``: a smoke run (small sizes; its file goes to results/quick/). ``chromium``:
    the run uses Chromium (its version is recorded). ``results``: another results folder."""

    def __init__(
        self,
        meta: dict,
        *,
        quick: bool = False,
        chromium: bool = False,
        results: str | os.PathLike | None = None,
        argv: list[str] | None = None,
        sample_s: float = SAMPLE_S,
    ):
        self.meta = meta
        self.name = meta["name"]
        self.quick = quick
        self.chromium = chromium
        self.path = results_dir(quick, results) / f"{self.name}.json"
        self.command = command_line(argv)
        self.argv = list(sys.orig_argv if argv is None else argv)
        self.figures: list[dict] = []
        self.skipped: str | None = None
        self.error: str | None = None
        self.exit_code: int | None = None
        self.data: dict | None = None
        self._sample_s = sample_s
        self._sampler: QuietSampler | None = None
        self._t0 = 0.0
        self._started = ""

    # -- the run --------------------------------------------------------------------------

    def __enter__(self) -> Bench:
        self._sampler = QuietSampler(interval=self._sample_s).start()
        self._t0 = time.monotonic()
        self._started = _now()
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is not None and issubclass(kind, KeyboardInterrupt | SystemExit | GeneratorExit):
            if self._sampler:
                self._sampler.stop()
            return False  # interrupted: nothing written, the earlier file stays
        if exc is not None:
            self.error = f"{kind.__name__}: {exc}".splitlines()[0][:300]
        self.finish()
        return False

    def figure(
        self,
        key: str,
        value,
        unit: str | None = None,
        *,
        target=None,
        name: str | None = None,
        samples=None,
        dist: dict | None = None,
        on: str | None = None,
        note: str | None = None,
        **extra,
    ) -> dict:
        """Record one figure. ``key``: a figure of META (its name, unit and target are the
        defaults) or a new one (then give ``name``). ``target``: overrides META's (a Target, a
        tuple, or NO_TARGET; needed where META's target is a sentence: a bound that depends on the
        page).
        ``samples``: the measurements behind ``value`` (n/min/median/max kept); ``dist``: a
        distribution the bench computed (p50, p99, ...). ``on``: what it was measured on."""
        spec = self.meta.get("figures", {}).get(key, {})
        if not spec and name is None:
            raise KeyError(f"{self.name}: figure {key!r} is not in META['figures']: give its name")
        if isinstance(target, str) and target == NO_TARGET:
            t = None
        elif target is not None:
            t = Target.of(target)
        else:
            t = _meta_target(spec.get("target"))
        if target is None and isinstance(spec.get("target"), str):
            raise ValueError(f"{self.name}: figure {key!r}: its target ({spec['target']}) needs target=")
        if isinstance(value, float) and not math.isfinite(value):
            value = None
        fig = {
            "key": key,
            "name": name or spec.get("name", key),
            "value": value,
            "unit": unit if unit is not None else spec.get("unit", ""),
            "target": t.to_json() if t else None,
            "met": t.met(value) if t else None,
        }
        if samples is not None:
            fig["dist"] = distribution(samples)
        if dist is not None:
            fig["dist"] = {**fig.get("dist", {}), **dist}
        if on or spec.get("on"):
            fig["on"] = on or spec.get("on")
        if note:
            fig["note"] = note
        if extra:
            fig["extra"] = extra
        self.figures.append(_clean(fig))
        return fig

    def check(self, key: str, ok: bool, **kw) -> dict:
        """A yes/no figure whose target is yes."""
        return self.figure(key, bool(ok), "", target=Target("==", True), **kw)

    def skip(self, reason: str, key: str | None = None, name: str | None = None) -> None:
        """A precondition is absent (no corpus, not root, no curl): the whole bench (``key``
        None) or one figure cannot be measured here; recorded with the reason, exit code 0."""
        if key is None:
            self.skipped = reason
            print(f"{self.name}: skipped ({reason})", flush=True)
            return
        spec = self.meta.get("figures", {}).get(key, {})
        self.figures.append(
            {
                "key": key,
                "name": name or spec.get("name", key),
                "value": None,
                "unit": spec.get("unit", ""),
                "target": None,
                "met": None,
                "skipped": reason,
            }
        )

    # -- the file -------------------------------------------------------------------------

    def status(self) -> str:
        if self.error:
            return "error"
        if any(f["met"] is False for f in self.figures):
            return "missed"
        if self.skipped or (self.figures and all(f.get("skipped") for f in self.figures)):
            return "skipped"
        if any(f["met"] is True for f in self.figures):
            return "met"
        return "no target"

    def finish(self) -> int:
        if self.exit_code is not None:
            return self.exit_code
        quiet = self._sampler.stop() if self._sampler else None
        status = self.status()
        self.exit_code = 1 if status in ("missed", "error") else 0
        missed = [f["name"] for f in self.figures if f["met"] is False]
        self.data = _clean(
            {
                "schema": SCHEMA,
                "bench": self.name,
                "area": self.meta.get("area"),
                "title": self.meta.get("title"),
                "status": status,
                "exit_code": self.exit_code,
                "missed": missed,
                "skipped": self.skipped,
                "error": self.error,
                "quick": self.quick,
                "command": self.command,
                "argv": self.argv,
                "started": self._started or _now(),
                "finished": _now(),
                "duration_s": round(time.monotonic() - self._t0, 1) if self._t0 else 0.0,
                "machine": machine(self.chromium),
                "quiet": quiet,
                "figures": self.figures,
            }
        )
        earlier = _measured(self.path) if status == "skipped" else None
        if earlier is not None:  # nothing measured: the earlier measurement stays (its file untouched)
            print(
                f"{self.name}: skipped ({self.skipped or 'every figure'}); kept the earlier result "
                f"({earlier.get('status')}, {earlier.get('finished') or '?'}) -> {_rel(self.path)}",
                flush=True,
            )
            return self.exit_code
        write_atomic(self.path, self.data)
        verdict = {"met": "every target met", "missed": f"MISSED: {'; '.join(missed)}"}.get(status, status)
        q = quiet or {}
        print(
            f"{self.name}: {verdict}; machine {'quiet' if q.get('quiet') else 'NOT quiet'} (load {q.get('load1_start')}, "
            f"others {q.get('others_cpu_share', 0):.0%} of the CPUs); -> {_rel(self.path)}",
            flush=True,
        )
        return self.exit_code


def _meta_target(spec) -> Target | None:
    return None if spec is None or isinstance(spec, str) else Target.of(spec)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _rel(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(REPO))
    except ValueError:
        return str(p)


# ---------------------------------------------------------------------------------------------
# reading


def read_meta(path: str | os.PathLike) -> dict | None:
    """A bench file's META without importing it (its imports need root, Ray, pltlab...)."""
    import ast

    tree = ast.parse(Path(path).read_text(), str(path))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "META" for t in node.targets):
            return ast.literal_eval(node.value)
    return None


def load_results(folder: str | os.PathLike) -> dict[str, dict]:
    """bench name -> its result file (the files of ``folder``, not of quick/)."""
    out = {}
    for p in sorted(Path(folder).glob("*.json")):
        try:
            d = json.loads(p.read_text())
        except (OSError, ValueError) as e:
            out[p.stem] = {"bench": p.stem, "status": "unreadable", "error": str(e), "figures": []}
            continue
        if isinstance(d, dict) and d.get("schema") == SCHEMA:
            out[d.get("bench") or p.stem] = d
    return out


def sections_main(doc: str, meta: dict, sections: dict, quick: dict, default, quick_help: str) -> int:
    """The command line of a bench made of sections (root benches: skipped as a user): SECTION
    names from ``sections`` (default ``default``), --quick taking ``quick``'s version of a section
    where it has one; runs them into one result file and returns the exit code."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument(
        "sections", nargs="*", metavar="SECTION", help=f"of {', '.join(sections)} (default: {' '.join(default)})"
    )
    ap.add_argument("--quick", action="store_true", help=quick_help.replace("%", "%%"))
    a = ap.parse_args()
    bad = [x for x in a.sections if x not in sections]
    if bad:
        ap.error(f"unknown section {bad[0]!r}: one of {', '.join(sections)}")
    table = quick if a.quick else sections
    todo = [table.get(x, sections[x]) for x in a.sections or default]
    with Bench(meta, quick=a.quick) as b:
        if os.geteuid() != 0:
            b.skip("needs root (network namespaces, TUN)")
        else:
            for fn in todo:
                fn(b)
    return b.exit_code
