"""Removing what a killed run left behind, found by the project's name prefix alone."""

import os
import shutil
import tempfile

from pyroute2 import IPRoute

from pltlab.net import names, nsutil
from pltlab.net.topology import kill_netns_processes


def leftovers(run_id: str | None = None) -> dict[str, list[str]]:
    """Namespaces, host links and work directories carrying the prefix (of one run, or all)."""
    prefix = names.run_prefix(run_id) if run_id else names.PREFIX
    found = {"namespaces": [], "links": [], "workdirs": []}
    if os.path.isdir(nsutil.NETNS_DIR):
        found["namespaces"] = sorted(n for n in os.listdir(nsutil.NETNS_DIR)
                                     if n.startswith(prefix) and names.run_id_of(n))
    with IPRoute() as ipr:
        for link in ipr.get_links():
            name = link.get_attr("IFLA_IFNAME") or ""
            if name.startswith(prefix) and names.run_id_of(name):
                found["links"].append(name)
    tmp = tempfile.gettempdir()
    found["workdirs"] = sorted(os.path.join(tmp, d) for d in os.listdir(tmp)
                               if d.startswith(prefix) and names.run_id_of(d))
    return found


def clean(run_id: str | None = None) -> dict[str, int]:
    """Kill processes in, and delete, every namespace/link/workdir of ours; report counts."""
    found = leftovers(run_id)
    killed = 0
    for ns in found["namespaces"]:
        killed += kill_netns_processes(ns)
    for ns in found["namespaces"]:
        try:
            nsutil.remove_netns(ns)
        except OSError:
            pass
    if found["links"]:
        with IPRoute() as ipr:
            for name in found["links"]:
                idx = ipr.link_lookup(ifname=name)
                if idx:
                    ipr.link("del", index=idx[0])
    for d in found["workdirs"]:
        shutil.rmtree(d, ignore_errors=True)
    return {"namespaces": len(found["namespaces"]), "links": len(found["links"]),
            "processes": killed, "workdirs": len(found["workdirs"])}
