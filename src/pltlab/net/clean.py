"""Removing what a killed run left behind, found by the project's name prefix alone.

A run whose owner (the process that made its Topology, recorded in its work folder: names.py)
still runs is live and is left alone unless asked by id with force. Leftovers without an owner
record (older versions, or a work folder already gone) count as dead, except a work folder
younger than CLAIM_GRACE_S without one: a run being created writes its record just after it.
"""

import os
import shutil
import tempfile
import time

from pltlab.net import names, nsutil
from pltlab.net.topology import kill_netns_processes

CLAIM_GRACE_S = 10.0


def _found(run_id: str | None) -> dict[str, list[str]]:
    """Namespaces, host links and work directories carrying the prefix (of one run, or all)."""
    prefix = names.run_prefix(run_id) if run_id else names.PREFIX
    found = {"namespaces": [], "links": [], "workdirs": []}
    if os.path.isdir(nsutil.NETNS_DIR):
        found["namespaces"] = sorted(
            n for n in os.listdir(nsutil.NETNS_DIR) if n.startswith(prefix) and names.run_id_of(n)
        )
    from pyroute2 import IPRoute  # noqa: PLC0415 (heavy: loaded only to set up links)

    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME") or ""
            if name.startswith(prefix) and names.run_id_of(name):
                found["links"].append(name)
    tmp = tempfile.gettempdir()
    found["workdirs"] = sorted(
        os.path.join(tmp, d) for d in os.listdir(tmp) if d.startswith(prefix) and names.run_id_of(d)
    )
    return found


def alive(run_id: str) -> bool:
    """Run ``run_id``'s owner still runs (or the run is being created right now)."""
    if names.owner_alive(run_id) is not None:
        return True
    try:  # a run claiming its work folder right now has not written its record yet
        young = time.time() - os.stat(names.workdir(run_id)).st_mtime < CLAIM_GRACE_S
    except OSError:
        return False
    return young and names.read_owner(run_id) is None


def settle(run_id: str) -> None:
    """Wait until run ``run_id``, if it has a work folder but no owner record, is past its claim
    grace: a run killed between claiming its folder and recording its owner, or while its folder
    was being removed, looks like one being created until then (`alive`)."""
    if names.read_owner(run_id) is not None:
        return
    try:
        age = time.time() - os.stat(names.workdir(run_id)).st_mtime
    except OSError:
        return
    if 0 <= age < CLAIM_GRACE_S:
        time.sleep(CLAIM_GRACE_S - age + 0.1)


def leftovers(run_id: str | None = None, force: bool = False) -> dict[str, list[str]]:
    """What `clean` removes: everything of dead runs (of run ``run_id``, or of every run; with
    PLTLAB_RUN_ID_PREFIX set, every run of that session tag), and under "live" the ids of the
    live runs it leaves alone (``force``: none, everything goes)."""
    found = _found(run_id)
    tag = os.environ.get("PLTLAB_RUN_ID_PREFIX", "").lower() if run_id is None else ""
    ids = {names.run_id_of(os.path.basename(x)) for items in found.values() for x in items}
    keep = {r for r in ids if not r.startswith(tag)}
    live = set() if force else {r for r in ids - keep if alive(r)}
    out = {k: [x for x in v if names.run_id_of(os.path.basename(x)) not in keep | live] for k, v in found.items()}
    out["live"] = sorted(live)
    return out


def clean(run_id: str | None = None, force: bool = False) -> dict[str, int]:
    """Kill processes in, and delete, every namespace/link/workdir of dead runs of ours; report
    counts (and how many live runs were left alone)."""
    found = leftovers(run_id, force)
    killed = 0
    for ns in found["namespaces"]:
        killed += kill_netns_processes(ns)
    for ns in found["namespaces"]:
        try:
            nsutil.remove_netns(ns)
        except OSError:
            pass
    if found["links"]:
        from pyroute2 import IPRoute  # noqa: PLC0415 (heavy: loaded only to set up links)

        with IPRoute() as ipr:
            for name in found["links"]:
                idx = ipr.link_lookup(ifname=name)
                if idx:
                    ipr.link("del", index=idx[0])
    for d in found["workdirs"]:
        shutil.rmtree(d, ignore_errors=True)
    return {
        "namespaces": len(found["namespaces"]),
        "links": len(found["links"]),
        "processes": killed,
        "workdirs": len(found["workdirs"]),
        "live runs kept": len(found["live"]),
    }
