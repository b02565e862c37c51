"""Running an experiment's cross product: interleaved order, live runners reused, one DB row per run.

Every measurement kind (pltlab.run.kinds: page loads, traced loads, flows) runs through here: the
same order, retries, progress display, results database and resume. A run is committed with its
requests in one transaction, so a SIGKILL loses only the run in progress, which a resume repeats;
nothing committed is run again.

Order: per repetition, the (page, block) pairs are shuffled with the seed; a block is the
configurations that differ only in the experiment's comparison axis (Experiment.axis(): TFO by
default, or any list knob, `compare = "protocol"`). Within a block the axis's values run back to
back (with TFO: the modes of one configuration; with another knob: its configurations, each with
every TFO mode), their order flipping from one repetition to the next (the first order drawn per
block), so slow drift of the machine biases neither side. Runners (topology +
replay) stay up across repetitions (at most `max_live` at a time, least recently used closed
first), so a load costs one loader process and nothing else.
"""

import os
import platform
import random
import shutil
import signal
import subprocess
import time
from collections import OrderedDict
from dataclasses import dataclass

from rich.console import Console
from rich.progress import Progress, TextColumn

from pltlab import __version__, dataplane, files
from pltlab.errors import PltError
from pltlab.experiments import lock
from pltlab.experiments.progress_columns import bar_columns
from pltlab.experiments.results import DiskFull, Results, export
from pltlab.experiments.spec import NAME_RE, Experiment
from pltlab.net import clean, emulator
from pltlab.run import kinds, knobs, loadhar, loadpcaps
from pltlab.run.config import RunConfig
from pltlab.run.point import Point

MAX_ATTEMPTS = 2  # a failed run is retried once
# the replay's QUIC handshake counts stored per load (results columns of the same names)
QUIC_KEYS = (
    "quic_full",
    "quic_resumed",
    "quic_early_data",
    "quic_full_used",
    "quic_resumed_used",
    "quic_early_used",
    "quic_handshake_errors",
    "quic_initial_bytes_max",
)


@dataclass(frozen=True)
class Item:
    seq: int
    page: int  # index into exp.pages
    config: int  # index into exp.configs
    point: Point  # the load's per-load knobs (its TFO mode)
    rep: int
    key: str

    @property
    def tfo(self) -> bool:
        return self.point.tfo


def schedule(exp: Experiment) -> list[Item]:
    rng = random.Random(exp.seed)
    groups = exp.blocks()
    blocks = [(p, g) for p in range(len(exp.pages)) for g in range(len(groups))]
    flip = {b: rng.random() < 0.5 for b in blocks}
    out: list[Item] = []
    for rep in range(1, exp.repetitions + 1):
        order = blocks[:]
        random.Random(f"{exp.seed}/{rep}").shuffle(order)
        for b in order:
            runs = [(c, Point(tfo=tfo)) for c in groups[b[1]] for tfo in exp.tfo_modes]
            if flip[b] ^ (rep % 2 == 0):
                runs.reverse()
            for c, point in runs:
                out.append(Item(len(out), b[0], c, point, rep, run_key(exp, b[0], c, point, rep)))
    return out


def run_key(exp: Experiment, p: int, c: int, point: Point, rep: int) -> str:
    """``label|url|configuration|tfo=0|rep=N``: every results folder's form. The compared knob's
    value is in the configuration part (a runner's knob) or the point's (TFO), so two runs of an
    experiment never share a key, whatever its axis."""
    e = exp.pages[p]
    return f"{e.label}|{e.page.url}|{exp.configs[c].key()}|{point.key()}|rep={rep}"


def environment() -> dict:
    try:
        dp = subprocess.run(
            [dataplane.binary(), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
    except (PltError, OSError, subprocess.SubprocessError):
        dp = None
    u = platform.uname()
    return {
        "pltlab": __version__,
        "pltlab_dp": dp,
        "kernel": u.release,
        "machine": u.machine,
        "cpus": os.cpu_count(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
    }


def prepare(exp: Experiment, out_dir: str, resume: bool) -> None:
    """Refuse to mix experiments, overwrite results, resume from a damaged database or start
    without the disk space the runs need; nothing is written before the checks."""
    check_out_dir(out_dir)
    db = os.path.join(out_dir, "results.sqlite")
    done = 0
    if os.path.exists(db):
        res = Results(out_dir)  # (checks the database first)
        try:
            meta, n = res.meta(), res.count()
            done = len([k for k, st in res.attempts().items() if "ok" in st])
        finally:
            res.close()
        if not resume and n:
            raise PltError(
                f"{out_dir} already holds {n} run(s): pass --resume to continue that sweep, "
                f"or choose another output folder (-o)"
            )
        if meta.get("digest") not in (None, exp.digest()):
            raise PltError(
                f"{out_dir} holds a different experiment ({meta.get('name')!r}): choose another output folder (-o)"
            )
    elif os.path.isdir(out_dir) and lock.contents(out_dir) and not resume:
        raise PltError(f"{out_dir} exists and is not empty: choose another output folder (-o)")
    check_space(exp, out_dir, max(exp.n_runs - done, 0))


# What one run adds to the results folder, measured on sweeps of the bundled pages (database row,
# request rows and the load's gzip'd HAR; the CSV and Parquet exports about as much again):
# docs/robustness.md "Disk space".
RUN_BYTES, OBJECT_BYTES, SPARE_BYTES = 4096, 1536, 32 << 20


def space_needed(exp: Experiment, runs: int) -> int:
    """Bytes ``runs`` more runs of ``exp`` need in its output folder (estimate, with room to spare):
    database, exports, and the per-load pcaps where the experiment keeps them."""
    if runs <= 0:
        return 0
    objects = sum(len(e.page.objects) for e in exp.pages) / len(exp.pages)
    page_bytes = sum(sum(o.size for o in e.page.objects) for e in exp.pages) / len(exp.pages)
    per_run = 2 * (RUN_BYTES + objects * OBJECT_BYTES)
    pcap_share = sum(1 for c in range(len(exp.configs)) if exp.run_config(c).pcap) / len(exp.configs)
    per_run += pcap_share * (page_bytes * 1.3 + objects * 2048)  # headers, ACKs, handshakes
    return int(runs * per_run) + SPARE_BYTES


def check_space(exp: Experiment, out_dir: str, runs: int) -> None:
    """A PltError when the output folder's file system has less free space than ``runs`` runs need."""
    need = space_needed(exp, runs)
    where = os.path.abspath(out_dir)
    while not os.path.exists(where):
        where = os.path.dirname(where)
    try:
        free = shutil.disk_usage(where).free
    except OSError:
        return  # (a file system that does not say: the writes will tell)
    if free < need:
        raise PltError(
            f"{out_dir}: {runs} run(s) need about {need / 1e6:.0f} MB (database, exports, pcaps), but its file "
            f"system has {free / 1e6:.0f} MB free: free space or choose another output folder (-o) (nothing was run)"
        )


def check_out_dir(out_dir: str) -> None:
    """An output folder that can be made: not a file, its nearest existing parent a writable folder."""
    if os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise PltError(f"{out_dir}: exists and is not a directory: choose another output folder (-o)")
    parent = os.path.abspath(out_dir)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise PltError(f"{out_dir}: {parent} is not a directory: choose another output folder (-o)")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PltError(f"{out_dir}: {parent} is not writable: choose another output folder (-o)")


def all_failed(stats: dict) -> bool:
    """Every run this session failed (none succeeded): the sweep's exit status is non-zero."""
    return stats["runs"] == 0 and stats["failed"] > 0


class Sweep:
    def __init__(
        self, exp: Experiment, out_dir: str, console: Console | None = None, max_live: int = 16, executor=None
    ):
        """``executor``: None runs the loads here; else an object whose ``run(sweep, todo, seen,
        finish, retrying)`` runs them elsewhere (pltlab.cluster.driver), storing each attempt with
        ``record_ok``/``record_failed`` and calling ``finish(item, row)`` with an item's last one."""
        self.exp, self.out_dir = exp, out_dir
        self.executor = executor
        self._cols: dict[int, dict] = {}
        self.out = console or Console(stderr=True)
        self.max_live = max_live
        self.live: OrderedDict[tuple, object] = OrderedDict()  # (page, config) -> a kind's runner
        self.res: Results | None = None
        self.env: dict = {}
        self.aid_warnings = emulator.AidWarnings()  # the link's refused precision aids, said once each

    # ---- runners ----------------------------------------------------------------------
    def _columns(self, c: int) -> dict:
        """A configuration's columns, made once (a row is built per run: a cluster's driver builds
        hundreds a second)."""
        if c not in self._cols:
            self._cols[c] = self._cfg(c).columns()
        return self._cols[c]

    def _cfg(self, c: int) -> RunConfig:
        cfg = self.exp.run_config(c)
        if cfg.pcap is True:  # experiment key pcap = true: one pcap per load in OUT_DIR/pcap
            cfg.pcap = os.path.join(os.path.abspath(self.out_dir), loadpcaps.FOLDER)
        return cfg

    def _runner(self, p: int, c: int):
        key = (p, c)
        if key in self.live:
            self.live.move_to_end(key)
            return self.live[key]
        while len(self.live) >= self.max_live:
            self._close(next(iter(self.live)))
        pr = kinds.runner(self.exp.kind, self.exp.pages[p].page, self._cfg(c))
        self.res.runner_opened(pr.topo.run_id)
        pr.__enter__()
        self.live[key] = pr
        return pr

    def _close(self, key) -> None:
        pr = self.live.pop(key, None)
        if pr is None:
            return
        try:
            pr.__exit__(None, None, None)
        finally:
            try:
                self.res.set_lateness(pr.topo.run_id, pr.topo.link_stats)
                self.res.runner_closed(pr.topo.run_id)
            except DiskFull:
                pass  # bookkeeping only: the runner is gone, a resume finds nothing of it to clean

    def _where(self, c: int) -> str:
        """A configuration as the progress lines name it: its RTT, and its ICW and loss if set."""
        cols = self._cfg(c).columns()
        out = f"{cols['rtt_ms']:g}ms delay"
        if cols.get("icw") is not None:
            out += f", ICW {cols['icw']}"
        if cols.get("loss"):
            out += f", loss {cols['loss'] * 100:g}%"
        return out

    def _variant(self, it: Item) -> str:
        """A run's side as the progress lines name it: its TFO mode, and its value of the
        compared knob when that is not TFO."""
        axis, tfo = self.exp.axis(), "TFO" if it.tfo else "no TFO"
        if axis in (None, "tfo"):
            return tfo
        k = knobs.KNOBS[axis]
        v = getattr(self.exp.configs[it.config], k.field)
        side = k.describe(v) if k.describe else f"{k.name} {v}"
        return side + (f", {tfo}" if len(self.exp.tfo_modes) > 1 else "")

    # ---- one run ----------------------------------------------------------------------
    def _row(self, it: Item, attempt: int) -> dict:
        e, k = self.exp.pages[it.page], self.exp.configs[it.config]
        return {
            "run_key": it.key,
            "attempt": attempt,
            "seq": it.seq,
            "page": e.label,
            "page_id": e.page.id or e.page.url,
            "page_url": e.page.url,
            "objects": len(e.page.objects),
            "page_bytes": sum(o.size for o in e.page.objects),
            "config_key": k.key(),
            **self._columns(it.config),
            "tfo": it.tfo,
            "rep": it.rep,
            "pltlab_version": self.env.get("pltlab"),
            "dp_version": self.env.get("pltlab_dp"),
            "kernel": self.env.get("kernel"),
        }

    def new_row(self, it: Item, attempt: int) -> dict:
        """A run attempt's row before its load: what it is, its start time."""
        row = self._row(it, attempt)
        row["started_at"] = time.time()
        return row

    def _attempt(self, it: Item, attempt: int) -> dict:
        row = self.new_row(it, attempt)
        try:
            pr = self._runner(it.page, it.config)
            row["runner_id"] = pr.topo.run_id
            r = pr.load(it.point, it.rep)
        except (PltError, OSError, subprocess.SubprocessError, ValueError) as e:
            self._close((it.page, it.config))  # a fresh runner for the retry
            return self.record_failed(row, str(e) or type(e).__name__)
        return self.record_ok(row, r)

    def record_failed(self, row: dict, reason: str, wall_ms: float | None = None) -> dict:
        """Store a failed attempt (the executor seam: a load run elsewhere is recorded here too)."""
        if wall_ms is None:
            wall_ms = (time.time() - row["started_at"]) * 1000
        row.update(status="failed", valid=False, failure_reason=reason, wall_ms=wall_ms)
        self.res.add_run(row, [])
        return row

    def record_ok(self, row: dict, r: dict, wall_ms: float | None = None) -> dict:
        """Store a load's result ``r`` (a runner's ``load``) with its requests in one transaction."""
        if wall_ms is None:
            wall_ms = (time.time() - row["started_at"]) * 1000
        c = r["tfo_counters"]
        row.update(
            status="ok",
            plt_ms=r["plt_ms"],
            valid=r["valid"],
            invalid_reason=r["invalid_reason"],
            not_found=r["not_found"],
            tfo_counters=c,
            tfo_active=c["client"].get("TCPFastOpenActive"),
            tfo_passive=c["server"].get("TCPFastOpenPassive"),
            browser=r.get("browser"),
            wall_ms=wall_ms,
            network_plt_ms=r.get("network_plt_ms"),
            tail_ms=r.get("tail_ms"),
            late_reruns=r.get("late_reruns"),
            link_aids_missing=emulator.aids_column(r.get("link_aids_missing")),
            metrics=r.get("metrics"),
            seed=r.get("seed", row.get("seed")),
        )
        tls = r.get("server_tls") or {}
        keys = ("tls_full", "tls_resumed", "tls_early_data", "tls_full_used", "tls_resumed_used", "tls_early_used")
        row.update({k: tls.get(k) for k in keys})
        row.update({k: tls.get(k) for k in QUIC_KEYS})  # (None where no address served QUIC)
        lat = r.get("emulator_lateness_us") or {}
        if lat:  # this load's own figures (else the runner's, filled in at its teardown)
            row.update(lateness_p50_us=lat.get("p50"), lateness_p99_us=lat.get("p99"), lateness_max_us=lat.get("max"))
        self.res.add_run(row, r["requests"], har=self._har(row, r))
        for line in self.aid_warnings.new(r.get("link_aids_missing")):  # (the load stays valid)
            self.out.print(line, markup=False, highlight=False, no_wrap=True, crop=False, overflow="ignore")
        row["summary"] = r.get("summary")  # for the progress display, not stored
        return row

    def _har(self, row: dict, r: dict) -> dict | None:
        """The load's HAR (pltlab.run.loadhar) for a load with requests; None for other kinds. A
        HAR that cannot be built costs the HAR only (said once), never the measurement."""
        if not r.get("requests"):
            return None
        page = next((e.page for e in self.exp.pages if e.label == row["page"]), None)
        if page is None:
            return None
        try:
            return loadhar.build(page, r)
        except Exception as e:  # noqa: BLE001 - the load's figures are stored whatever happens here
            if not getattr(self, "_har_warned", False):
                self._har_warned = True
                _say(self.out, f"[yellow]note: the load's HAR could not be built ({type(e).__name__}: {e})[/]")
            return None

    # ---- the sweep --------------------------------------------------------------------
    def run(self) -> dict:
        with lock.held(self.out_dir, "sweep"):
            return self._run()

    def _run(self) -> dict:
        self.res = Results(self.out_dir)
        self.env = environment()
        meta = self.res.meta()
        if "digest" not in meta:
            self.res.set_meta(
                name=self.exp.name,
                digest=self.exp.digest(),
                experiment=self.exp.source,
                environment=self.env,
                n_runs=self.exp.n_runs,
                compare=self.exp.axis(),  # the report's default --by
                pages=[
                    {
                        "label": e.label,
                        "url": e.page.url,
                        "objects": len(e.page.objects),
                        "bytes": sum(o.size for o in e.page.objects),
                    }
                    for e in self.exp.pages
                ],
            )
            if self.exp.source:
                files.write_text(os.path.join(self.out_dir, "experiment.toml"), self.exp.source)
        self.res.set_meta(last_environment=self.env)
        self._clean_killed()
        old = signal.getsignal(signal.SIGTERM)
        if old in (signal.SIG_DFL, None):  # SIGTERM unwinds: runners torn down, DB consistent
            signal.signal(signal.SIGTERM, lambda s, f: (_ for _ in ()).throw(SystemExit(128 + s)))
        try:
            return self._loop()
        finally:
            try:
                for key in list(self.live):
                    self._close(key)
            finally:
                self.res.close()
                signal.signal(signal.SIGTERM, old if old is not None else signal.SIG_DFL)

    def _clean_killed(self) -> None:
        """Namespaces and work directories of runners a killed sweep left behind (ours only)."""
        for run_id in self.res.open_runners():
            clean.settle(run_id)  # (killed while claiming or removing its folder)
            clean.clean(run_id)
            self.res.runner_closed(run_id)

    def _loop(self) -> dict:
        items = schedule(self.exp)
        seen = self.res.attempts()
        done = lambda st: "ok" in st or len(st) >= MAX_ATTEMPTS  # noqa: E731
        todo = [it for it in items if not done(seen.get(it.key, []))]
        stats = {"runs": 0, "failed": 0, "invalid": 0, "plt_sum_ms": 0.0}
        left: dict[tuple, int] = {}  # runs still to do per runner: closed after its last one
        for it in todo:
            left[(it.page, it.config)] = left.get((it.page, it.config), 0) + 1
        t_start = time.time()
        cols = bar_columns(TextColumn("last PLT {task.fields[last]}"))
        with Progress(*cols, console=self.out, transient=False) as prog:
            task = prog.add_task(self.exp.name, total=len(items), completed=len(items) - len(todo), last="-")

            def finish(it: Item, row: dict) -> None:
                """An item's last attempt: counted, printed, the progress bar advanced."""
                e = self.exp.pages[it.page]
                if row["status"] == "ok":
                    stats["runs"] += 1
                    stats["plt_sum_ms"] += row["plt_ms"] or 0.0
                    stats["invalid"] += not row["valid"]
                    mark = "" if row["valid"] else f"  [red]INVALID: {row['invalid_reason']}[/]"
                    if row["plt_ms"] is None:  # a kind without a PLT (flows) says what it measured
                        _say(prog.console, f"{e.label}: {row.get('summary') or 'done'}.{mark}")
                        last = "-"
                    else:
                        _say(prog.console, f"Fetching {e.label} took {row['plt_ms'] / 1000:.3f}s.{mark}")
                        last = f"{row['plt_ms']:.0f} ms"
                else:
                    stats["failed"] += 1
                    _say(prog.console, f"[red]FAILED twice: {row['failure_reason']}[/]")
                    last = "failed"
                prog.update(task, advance=1, last=last)

            def retrying(row: dict) -> None:
                _say(prog.console, f"[yellow]run failed ({row['failure_reason']}); retrying once[/]")

            if self.executor is not None:  # elsewhere (pltlab.cluster): same queue, rows stored here
                self.executor.run(self, todo, seen, finish, retrying)
            for it in todo if self.executor is None else ():
                e = self.exp.pages[it.page]
                _say(
                    prog.console,
                    f"Experiment {it.rep} {e.label} @ {self._where(it.config)} ({self._variant(it)})",
                )
                attempt = len(seen.get(it.key, [])) + 1
                while True:
                    row = self._attempt(it, attempt)
                    if row["status"] == "ok" or attempt >= MAX_ATTEMPTS:
                        break
                    retrying(row)
                    attempt += 1
                finish(it, row)
                left[(it.page, it.config)] -= 1
                if not left[(it.page, it.config)]:  # its last run: free its namespaces and servers now
                    self._close((it.page, it.config))
        for key in list(self.live):
            self._close(key)
        stats["wall_s"] = time.time() - t_start
        stats["efficiency"] = stats["plt_sum_ms"] / 1000 / stats["wall_s"] if stats["wall_s"] else 0.0
        stats["exported"] = export(self.out_dir)
        return stats


def _say(console: Console, line: str) -> None:
    """A per-load log line, printed as is: wrapping it would put every distinct line into rich's
    width caches (bounded, but ~1 MB filled over the first thousands of loads: a soak's creep)."""
    console.print(line, highlight=False, no_wrap=True, crop=False, overflow="ignore")


def run(exp: Experiment, out_dir: str, resume: bool = False, console: Console | None = None, executor=None) -> dict:
    with lock.held(out_dir, "sweep"):  # before the checks: two sweeps started at once, one refused
        prepare(exp, out_dir, resume)
        return Sweep(exp, out_dir, console, executor=executor).run()


def default_out(exp: Experiment) -> str:
    if not NAME_RE.fullmatch(exp.name):  # a name, never a path (spec.from_dict refuses others)
        raise PltError(f"invalid experiment name {exp.name[:60]!r}: choose an output folder (-o)")
    return os.path.join("results", exp.name)
