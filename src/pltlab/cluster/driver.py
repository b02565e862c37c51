"""The driver of a cluster sweep: the executor `pltlab sweep --cluster` gives the sweep engine.

The sweep's seeded interleaved order is the queue: each free slot (a NodeWorker actor holding one
unit of the node's `pltlab_slot` resource, so a node runs as many loads at once as it has slots,
one by default) takes the next run. The driver alone writes the results database (Sweep.record_ok /
record_failed), one row per attempt, each with the node that ran it. A node lost mid-load: its
load goes back to the head of the queue and runs on another node; nothing of it was recorded, so
it is recorded once. The driver killed: the loads in flight are lost unrecorded, and `--resume`
runs them (the sweep's own resume: runs without an ok or a second failed attempt).

Before a node takes runs it is admitted: same pltlab and data plane as the driver, and its link
self-check (`pltlab check`, all its slots at once) within the targets; otherwise it is left
out with one line saying why (`pltlab check`, about a minute per node). What each node is and its check figures go into the meta table
(key `cluster`), runs done per node included.
"""

import json
import os
import signal
from collections import deque

import ray
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pltlab.cluster.connect import CONNECT_TIMEOUT_S, join, leave, note_sigterm, parse, terminated
from pltlab.cluster.node import NodeWorker, clean_after, refusal
from pltlab.errors import PltError
from pltlab.experiments.sweep import MAX_ATTEMPTS, Item, Sweep

SLOT = "pltlab_slot"  # custom resource: a node offers as many as it runs loads at once
OBJECT_STORE_BYTES = 100 * 1024**2  # a local cluster's object store (pages are small)
PROBE_TIMEOUT_S = 900.0  # a node's self-check (about a minute; more on a busy machine)
ABORT_CLEAN_S = 20.0  # interrupted: each node's clean-up after its slots were killed
# loads handed to each slot at once: the next one waits in the slot's queue, so a slot does not
# sit idle while its result travels to the driver and the next load travels back
PIPELINE = 2
LOG_NAME = "cluster.log"  # in the output folder: Ray's messages while joining the cluster


def connect(
    address: str, slots: int = 1, timeout: float = CONNECT_TIMEOUT_S, log: str | None = None, what: str | None = None
) -> bool:
    """Join the cluster at ``address`` ("local": start one on this machine with ``slots`` slots)
    within ``timeout`` seconds, Ray's messages into ``log`` (pltlab.cluster.connect). Returns
    whether this call connected (then the caller shuts Ray down)."""
    local = None
    if address == "local":
        local = {
            "num_cpus": 1,
            "resources": {SLOT: slots},
            "object_store_memory": OBJECT_STORE_BYTES,
            "include_dashboard": False,
        }
    return join(address, what=what or f"--cluster {address}", timeout=timeout, log=log, local=local)


def slot_nodes() -> list[dict]:
    """The live nodes offering slots: Ray's node records."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SLOT, 0) >= 1]


def node_label(node: dict) -> str:
    return f"{node.get('host')} ({str(node.get('node_id'))[:8]})"


class ClusterExecutor:
    """Runs a sweep's loads on a Ray cluster (pltlab.experiments.sweep.Sweep's ``executor``).

    ``slots``: loads at once per node (at most what the node offers; a local cluster offers
    this many). ``check``: run the link self-check on each node first (off only with fake loads).
    ``fake_load_s``: loads that only wait this long (benches, tests). ``inject``: see NodeWorker.
    ``connect_timeout``: seconds to join the cluster (pltlab.cluster.connect; Ray's messages
    meanwhile go to the output folder's cluster.log).

    Interrupted (Ctrl-C, SIGTERM) in any phase, it kills its slots' actors at once and has each
    node remove what their runners left (namespaces, links, work folders), then lets go of Ray:
    a few seconds, nothing of it left."""

    def __init__(
        self,
        address: str = "local",
        slots: int = 1,
        check: bool = True,
        fake_load_s: float | None = None,
        inject: dict | None = None,
        max_live: int = 4,
        keep_up: bool = False,
        connect_timeout: float = CONNECT_TIMEOUT_S,
    ):
        if slots < 1:
            raise PltError(f"invalid --slots {slots}: must be at least 1")
        if not connect_timeout > 0:
            raise PltError(f"invalid --connect-timeout {connect_timeout:g}: must be more than 0 seconds")
        if address != "local":
            parse(address, f"--cluster {address}", " or local")  # (a typo said before the sweep starts)
        self.address, self.slots, self.check, self.connect_timeout = address, slots, check, connect_timeout
        self.fake, self.inject, self.max_live = fake_load_s, inject, max_live
        self.actors: list = []  # index -> actor handle (None once lost)
        self.node_of: list[dict] = []  # index -> its node's description
        self.nodes: dict[str, dict] = {}  # node id -> what the meta table records
        self.base: dict | None = None
        self.made: dict[str, list] = {}  # node id -> [(actor, its process id's reference)]: every actor made
        # a study's experiments one after the other (keep_up): Ray stays up until close(), and
        # each node is checked once (its figures kept by node id)
        self.keep_up, self.started = keep_up, False
        self.checked: dict[str, list] = {}

    # ---- admission ----------------------------------------------------------------------
    def _admit(self, sweep: Sweep) -> None:
        nodes = slot_nodes()
        if not nodes:
            raise PltError(
                f"--cluster {self.address}: no node offers the resource {SLOT!r} "
                f"(start nodes with `pltlab cluster up`, or ray start --resources '{{\"{SLOT}\": 1}}')"
            )
        worker = ray.remote(NodeWorker)
        slots: dict[str, list] = {}
        for n in nodes:
            k = min(self.slots, int(n["Resources"][SLOT]))
            slots[n["NodeID"]] = [
                worker.options(
                    num_cpus=0,
                    resources={SLOT: 1},
                    scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False),
                    max_restarts=0,
                ).remote(sweep.exp.kind, self.max_live, self.fake, self.inject)
                for _ in range(k)
            ]
            # (its process id first: an interrupted sweep waits for exactly these to be gone)
            self.made[n["NodeID"]] = [(a, a.pid.remote()) for a in slots[n["NodeID"]]]
        # every slot of every node checks at once: a node with N slots passes with N at once
        probes = {
            nid: [a.probe.remote(self.check and nid not in self.checked) for a in acts] for nid, acts in slots.items()
        }
        for nid, refs in probes.items():
            try:
                got = ray.get(refs, timeout=PROBE_TIMEOUT_S)
            except (RayActorError, GetTimeoutError) as e:
                self._say(sweep, f"node {nid[:8]}: left out: lost during its self-check ({type(e).__name__})")
                for a in slots[nid]:
                    ray.kill(a)
                continue
            node = got[0]["node"]
            if nid in self.checked:
                for g, f in zip(got, self.checked[nid] * len(got)):
                    g["check"] = f
            elif self.check:
                self.checked[nid] = [g["check"] for g in got]
            figures = [g["check"] for g in got]
            reason = next((r for g in got if (r := refusal(sweep.env, g["node"], g["check"]))), None)
            self.nodes[nid] = {
                "node": node,
                "slots": len(got),
                "check": figures[0] if len(figures) == 1 else figures,
                "admitted": reason is None,
                "reason": reason,
                "runs": 0,
            }
            if reason:
                self._say(sweep, f"node {node_label(node)}: left out: {reason}")
                for a in slots[nid]:
                    ray.kill(a)
                continue
            for a in slots[nid]:
                self.actors.append(a)
                self.node_of.append(node)
        self._save(sweep)
        if not self.actors:
            raise PltError(f"--cluster {self.address}: every node was left out (reasons above); nothing was run")
        self._say(
            sweep,
            f"cluster: {len(self.actors)} slot(s) on {sum(v['admitted'] for v in self.nodes.values())} node(s)",
        )

    def _save(self, sweep: Sweep) -> None:
        """The nodes of every session so far, in the meta table (`pltlab cluster status DIR`)."""
        prev = sweep.res.meta().get("cluster", {}).get("nodes", {})
        if self.base is None:  # runs per node before this session
            self.base = {nid: v.get("runs_total", 0) for nid, v in prev.items()}
        for nid, v in self.nodes.items():
            v["runs_total"] = self.base.get(nid, 0) + v["runs"]
        sweep.res.set_meta(cluster={"address": self.address, "nodes": prev | self.nodes})

    def _say(self, sweep: Sweep, line: str) -> None:
        sweep.out.print(line, highlight=False, markup=False, soft_wrap=True)

    # ---- the queue ----------------------------------------------------------------------
    def run(self, sweep: Sweep, todo: list[Item], seen: dict, finish, retrying) -> None:
        if not todo:
            return
        try:
            log = os.path.join(sweep.out_dir, LOG_NAME)
            self.started |= connect(self.address, self.slots, self.connect_timeout, log)
            note_sigterm()
            try:
                self._admit(sweep)
                self._dispatch(sweep, todo, seen, finish, retrying)
            except Exception:  # (no node left, every node left out, ...): runners closed, then said
                self._close_or_abort(sweep)
                raise
            except BaseException:  # Ctrl-C, SIGTERM: at once
                self._abort(sweep)
                raise
            self._close_or_abort(sweep)
        except SystemExit:
            if terminated():  # (Ray's waits turn the sweep's SystemExit(143) into SystemExit(1))
                raise SystemExit(128 + signal.SIGTERM) from None
            raise
        finally:
            self.actors, self.node_of, self.nodes, self.base, self.made = [], [], {}, None, {}
            if not self.keep_up:
                self.close()

    def close(self) -> None:
        """Shut down the Ray this executor started (`--cluster local`)."""
        if self.started:
            leave()
            self.started = False

    def _dispatch(self, sweep: Sweep, todo: list[Item], seen: dict, finish, retrying) -> None:
        pages: dict[int, list] = {}  # page index -> [its object reference] (put once)
        cfgs = {}
        queue = deque((it, len(seen.get(it.key, [])) + 1) for it in todo)
        idle = deque(i for _ in range(PIPELINE) for i in range(len(self.actors)))  # free places, by slot
        inflight: dict = {}  # object ref -> (actor index, item, attempt)
        node_json = [json.dumps(n, sort_keys=True) for n in self.node_of]
        while queue or inflight:
            while queue and idle:
                i = idle.popleft()
                if self.actors[i] is None:  # (lost since this place was freed)
                    continue
                it, attempt = queue.popleft()
                if it.page not in pages:
                    pages[it.page] = [ray.put(sweep.exp.pages[it.page].page)]
                if it.config not in cfgs:
                    cfgs[it.config] = sweep.exp.run_config(it.config)
                ref = self.actors[i].load.remote(pages[it.page], it.page, cfgs[it.config], it.config, it.point, it.rep)
                inflight[ref] = (i, it, attempt)
            if not inflight:
                raise PltError(
                    f"no node left for the remaining {len(queue)} run(s) (nodes lost): "
                    f"start nodes and continue with --resume"
                )
            ready, rest = ray.wait(list(inflight), num_returns=1)
            if rest:  # everything else already done: recorded in this pass
                ready += ray.wait(rest, num_returns=len(rest), timeout=0)[0]
            lost = []
            try:  # all at once; one by one when a node was lost (to tell which)
                outs = ray.get(ready)
            except RayActorError:
                outs = None
            for k, ref in enumerate(ready):
                i, it, attempt = inflight.pop(ref)
                try:
                    out = outs[k] if outs is not None else ray.get(ref)
                except RayActorError:
                    if self.actors[i] is not None:
                        self._say(sweep, f"node {node_label(self.node_of[i])} lost: its load runs again elsewhere")
                        self.actors[i] = None
                    lost.append((it, attempt))
                    continue
                idle.append(i)
                node = self.node_of[i]
                row = sweep.new_row(it, attempt)
                row.update(
                    started_at=out["started_at"],
                    runner_id=out.get("runner_id"),
                    node=node_json[i],
                    kernel=node["kernel"],
                    pltlab_version=node["pltlab"],
                    dp_version=node["pltlab_dp"],
                )
                if "error" in out:
                    row = sweep.record_failed(row, out["error"], out["wall_ms"])
                    if attempt < MAX_ATTEMPTS:
                        retrying(row)
                        queue.appendleft((it, attempt + 1))
                        continue
                else:
                    row = sweep.record_ok(row, out["result"], out["wall_ms"])
                self.nodes[node["node_id"]]["runs"] += 1
                finish(it, row)
            queue.extendleft(sorted(lost, key=lambda x: -x[0].seq))  # back at the head, in order

    def _close_or_abort(self, sweep: Sweep) -> None:
        try:
            self._close(sweep)
        except BaseException as e:
            if not isinstance(e, Exception):  # interrupted while closing
                self._abort(sweep)
            raise

    def _abort(self, sweep: Sweep) -> None:
        """Interrupted (Ctrl-C, SIGTERM): every actor killed at once (a load or a self-check in
        progress cannot be cut short otherwise), then on each node the namespaces, links and work
        folders of its killed runners removed once their processes are gone (node.clean_after),
        for at most ABORT_CLEAN_S."""
        if not self.made:
            return
        refs = [r for made in self.made.values() for _, r in made]
        ready = set(ray.wait(refs, num_returns=len(refs), timeout=0.5)[0]) if refs else set()
        pids: dict[str, list[int]] = {}
        for nid, made in self.made.items():
            pids[nid] = []
            for a, ref in made:
                if ref in ready:
                    try:
                        pids[nid].append(ray.get(ref, timeout=1))
                    except (RayActorError, GetTimeoutError):
                        pass
                ray.kill(a, no_restart=True)
        clean = ray.remote(clean_after)
        cleaning = [
            clean.options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(nid, soft=False)).remote(p)
            for nid, p in pids.items()
        ]
        done, left = ray.wait(cleaning, num_returns=len(cleaning), timeout=ABORT_CLEAN_S)
        self.made, self.actors = {}, []
        if left:
            self._say(
                sweep, f"cluster: {len(left)} node(s) did not clean up within {ABORT_CLEAN_S:g} s: pltlab clean there"
            )
        if self.nodes:
            self._save(sweep)

    def _close(self, sweep: Sweep) -> None:
        """Runners torn down on every node still there; their link figures stored."""
        live = [a for a in self.actors if a is not None]
        refs = [a.close_all.remote() for a in live]
        for ref in refs:
            try:
                for runner_id, stats in ray.get(ref, timeout=120).items():
                    sweep.res.set_lateness(runner_id, stats)
            except (RayActorError, GetTimeoutError):
                pass  # a node lost at the end: its runs keep their per-load figures
        for a in live:
            ray.kill(a)
        self.made, self.actors = {}, []
        if self.nodes:
            self._save(sweep)
