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
import logging
from collections import deque

import ray
from ray.exceptions import GetTimeoutError, RayActorError
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from pltlab.cluster.node import NodeWorker, refusal
from pltlab.errors import PltError
from pltlab.experiments.sweep import MAX_ATTEMPTS, Item, Sweep

SLOT = "pltlab_slot"  # custom resource: a node offers as many as it runs loads at once
OBJECT_STORE_BYTES = 100 * 1024**2  # a local cluster's object store (pages are small)
PROBE_TIMEOUT_S = 900.0  # a node's self-check (about a minute; more on a busy machine)


def connect(address: str, slots: int = 1) -> bool:
    """Join the cluster at ``address`` ("local": start one on this machine with ``slots`` slots).
    Returns whether this call started Ray (then the caller shuts it down)."""
    if ray.is_initialized():
        return False
    try:
        if address == "local":
            ray.init(
                num_cpus=1,
                resources={SLOT: slots},
                object_store_memory=OBJECT_STORE_BYTES,
                include_dashboard=False,
                log_to_driver=False,
                logging_level=logging.WARNING,
            )
        else:
            ray.init(address=address, log_to_driver=False, logging_level=logging.WARNING)
    except (ConnectionError, RuntimeError, ValueError) as e:
        raise PltError(f"--cluster {address}: cannot join the Ray cluster: {e}") from e
    return True


def slot_nodes() -> list[dict]:
    """The live nodes offering slots: Ray's node records."""
    return [n for n in ray.nodes() if n.get("Alive") and n.get("Resources", {}).get(SLOT, 0) >= 1]


def node_label(node: dict) -> str:
    return f"{node.get('host')} ({str(node.get('node_id'))[:8]})"


class ClusterExecutor:
    """Runs a sweep's loads on a Ray cluster (pltlab.experiments.sweep.Sweep's ``executor``).

    ``slots``: loads at once per node (at most what the node offers; a local cluster offers
    this many). ``check``: run the link self-check on each node first (off only with fake loads).
    ``fake_load_s``: loads that only wait this long (benches, tests). ``inject``: see NodeWorker."""

    def __init__(
        self,
        address: str = "local",
        slots: int = 1,
        check: bool = True,
        fake_load_s: float | None = None,
        inject: dict | None = None,
        max_live: int = 4,
        keep_up: bool = False,
    ):
        if slots < 1:
            raise PltError(f"invalid --slots {slots}: must be at least 1")
        self.address, self.slots, self.check = address, slots, check
        self.fake, self.inject, self.max_live = fake_load_s, inject, max_live
        self.actors: list = []  # index -> actor handle (None once lost)
        self.node_of: list[dict] = []  # index -> its node's description
        self.nodes: dict[str, dict] = {}  # node id -> what the meta table records
        self.base: dict | None = None
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
        self.started |= connect(self.address, self.slots)
        try:
            self._admit(sweep)
            self._dispatch(sweep, todo, seen, finish, retrying)
        finally:
            try:
                self._close(sweep)
            finally:
                self.actors, self.node_of, self.nodes, self.base = [], [], {}, None
                if not self.keep_up:
                    self.close()

    def close(self) -> None:
        """Shut down the Ray this executor started (`--cluster local`)."""
        if self.started:
            ray.shutdown()
            self.started = False

    def _dispatch(self, sweep: Sweep, todo: list[Item], seen: dict, finish, retrying) -> None:
        pages: dict[int, list] = {}  # page index -> [its object reference] (put once)
        cfgs = {}
        queue = deque((it, len(seen.get(it.key, [])) + 1) for it in todo)
        idle = deque(range(len(self.actors)))
        inflight: dict = {}  # object ref -> (actor index, item, attempt)
        node_json = [json.dumps(n, sort_keys=True) for n in self.node_of]
        while queue or inflight:
            while queue and idle:
                i = idle.popleft()
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
        if self.nodes:
            self._save(sweep)
