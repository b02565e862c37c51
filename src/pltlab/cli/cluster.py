"""CLI: `--cluster`/`--slots` of `pltlab sweep` and `reproduce tfo|icw` (the executor they give the
sweep engine), and `pltlab cluster up|status|down`. Ray is imported only when a cluster is asked
for (docs/cluster.md)."""

import json
import os
import sys
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pltlab.errors import PltError

ClusterOpt = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Run the loads on a Ray cluster: its address (HOST:PORT, from `pltlab cluster up`) or "
        "local (one started on this machine for the run). Each node is self-checked first (docs/cluster.md).",
    ),
]
SlotsOpt = Annotated[
    int,
    typer.Option(
        "--slots",
        help="With --cluster: loads at once per node (default 1; more only if the node's check passes with that many).",
    ),
]
CONNECT_TIMEOUT_S = 20.0  # (pltlab.cluster.connect.CONNECT_TIMEOUT_S: Ray is not imported here)
ConnectTimeoutOpt = Annotated[
    float,
    typer.Option(
        "--connect-timeout",
        help="Seconds to join the cluster before giving up with one line (slow networks: more). Ray's own "
        "messages meanwhile go to a log (PLTLAB_CLUSTER_VERBOSE=1: to the terminal).",
    ),
]


def _token_auth() -> None:
    """Clusters started by `ray start` (pltlab cluster up) ask for Ray's token: send it when this
    machine has one (RAY_AUTH_TOKEN, or the file `ray start` wrote: ~/.ray/auth_token). Ray reads
    the mode when it is imported: set before."""
    if "RAY_AUTH_MODE" not in os.environ and "ray" not in sys.modules:
        if os.environ.get("RAY_AUTH_TOKEN") or os.path.exists(os.path.expanduser("~/.ray/auth_token")):
            os.environ["RAY_AUTH_MODE"] = "token"


def _driver():
    _token_auth()
    try:
        from pltlab.cluster import driver
    except ImportError as e:
        raise PltError(f"--cluster needs Ray ({e}): run `make setup` (it installs pltlab[cluster])") from e
    return driver


def require_root_here(cluster: str | None, kinds: list[str]) -> None:
    """Loads of these measurement kinds that run on this machine (no --cluster) and build
    emulated WANs need root: refused in one line before anything runs."""
    from pltlab.run import kinds as registry

    if cluster is None and any(registry.needs_root(k) for k in kinds):
        from pltlab.net.topology import require_root

        require_root()


def executor(cluster: str | None, slots: int, connect_timeout: float = CONNECT_TIMEOUT_S, keep_up: bool = False):
    """The sweep's executor: None (this machine) without --cluster. ``keep_up``: for several
    experiments in a row (the caller closes it)."""
    if cluster is None:
        if slots != 1:
            raise PltError("--slots needs --cluster")
        if connect_timeout != CONNECT_TIMEOUT_S:
            raise PltError("--connect-timeout needs --cluster")
        return None
    if slots < 1:
        raise PltError(f"invalid --slots {slots}: must be at least 1")
    if not connect_timeout > 0:
        raise PltError(f"invalid --connect-timeout {connect_timeout:g}: must be more than 0 seconds")
    return _driver().ClusterExecutor(cluster, slots, keep_up=keep_up, connect_timeout=connect_timeout)


def _local():
    _driver()
    from pltlab.cluster import local

    return local


def up(
    slots: Annotated[int, typer.Option("--slots", help="Loads at once on this machine (default 1).")] = 1,
    address: Annotated[
        str | None, typer.Option("--address", help="Join the cluster at HOST:PORT instead of starting a head.")
    ] = None,
    port: Annotated[int, typer.Option("--port", help="The head's port.")] = 6379,
    node_ip: Annotated[
        str | None,
        typer.Option(
            "--node-ip",
            help="The address this machine is reached at by the others (default: Ray's choice, the address of "
            "the interface of the default route). 127.0.0.1: a head for this machine alone.",
        ),
    ] = None,
    connect_timeout: ConnectTimeoutOpt = CONNECT_TIMEOUT_S,
):
    """Start Ray on this machine offering pltlab's slots: a cluster's head, or a node joining one."""
    addr = _local().up(slots, address, port, node_ip, connect_timeout)
    if address:
        print(f"joined the cluster at {addr}: pltlab sweep FILE --cluster {addr} (on a node of it)")
    elif addr.startswith(("127.", "[::1]")):
        print(f"cluster at {addr} (this machine alone): pltlab sweep FILE --cluster {addr}")
    else:
        print(
            f"cluster at {addr}: pltlab sweep FILE --cluster {addr}   (other machines: pltlab cluster up --address {addr})"
        )


def status(
    address: Annotated[str, typer.Argument(help="The cluster's address (HOST:PORT; auto: this machine's).")] = "auto",
    results: Annotated[
        str | None, typer.Option("--results", help="A cluster sweep's output folder: runs and checks per node.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    connect_timeout: ConnectTimeoutOpt = CONNECT_TIMEOUT_S,
):
    """Each node of a cluster: its slots and, with --results, its runs done and check figures."""
    got = _local().status(address, results, connect_timeout)
    if as_json:
        print(json.dumps(got))
        return
    nodes = got["nodes"]
    t = Table(title=f"cluster {escape(got['address'])}")
    for col in ("node", "host", "slots", "state", "runs", "RTT p99 err (ms)", "rate err"):
        t.add_column(col)
    for n in nodes:
        chk = n.get("check")
        chk = chk[0] if isinstance(chk, list) else chk
        rtt = rate = "-"
        if isinstance(chk, dict) and "rtt" in chk:
            rtt = " / ".join(f"{r['p99_err_without_stalls_ms']:g}" for r in chk["rtt"])
            rate = f"{chk['rate_error']:+.2%}"
        elif isinstance(chk, dict) and chk.get("error"):
            rtt = "check failed"
        state = "up" if n["alive"] else "gone"
        if n.get("admitted") is False:
            state = f"left out: {n['reason']}"
        t.add_row(
            n["node_id"][:8], n["host"] or "-", str(n["slots"]), escape(state), str(n.get("runs", "-")), rtt, rate
        )
    Console().print(t)


def down(
    everything: Annotated[
        bool,
        typer.Option(
            "--all", help="Every Ray process of this machine (ray stop), not only those of pltlab cluster up."
        ),
    ] = False,
):
    """Stop the Ray processes `pltlab cluster up` started on this machine."""
    n = _local().down(everything)
    if everything:
        print("cluster: every Ray process of this machine stopped (ray stop)")
    elif n:
        print(f"cluster: Ray stopped on this machine ({n} `pltlab cluster up`)")
    else:
        print("cluster: nothing of `pltlab cluster up` runs on this machine (--all: every Ray process, ray stop)")


def register(app: typer.Typer) -> None:
    grp = typer.Typer(no_args_is_help=True, help="A Ray cluster for sweeps: up, status, down (docs/cluster.md).")
    grp.command()(up)
    grp.command()(status)
    grp.command()(down)
    app.add_typer(grp, name="cluster")
