"""`pltlab cluster up|status|down`: a Ray node on this machine offering pltlab's slots (the head
of a small cluster, or a node joining one), and what each node of a cluster looks like.

A node's address (the one the others and the driver reach it at) is --node-ip, else Ray's choice:
the address of the interface this machine's default route leaves by. A head on loopback
(--node-ip 127.0.0.1) is a cluster of this machine alone.

`up` starts `ray start` in a process group of its own, which its Ray processes keep, and notes it
(STATE_DIR); `down` stops those groups only, not other Ray processes of the machine (--all:
`ray stop`, every one)."""

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import ray

from pltlab.cluster import connect as conn
from pltlab.cluster.driver import OBJECT_STORE_BYTES, SLOT, connect, slot_nodes
from pltlab.errors import PltError
from pltlab.experiments.results import DB_NAME, Results

DEFAULT_PORT = 6379
STATE_DIR = os.path.join(tempfile.gettempdir(), "pltlab-cluster")  # <process group>.json per `up`
STOP_GRACE_S = 5.0  # `down`: SIGTERM, then SIGKILL for what is left after this long


def ray_processes() -> set[int]:
    """Ray's daemons and workers on this machine, by command line (one left after a shutdown is a
    leak: the tests and benches/local_cluster.py check none is)."""
    out = set()
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if any(k in cmd for k in (b"raylet", b"gcs_server", b"default_worker.py", b"ray::")):
            out.add(int(p))
    return out


def _ray_cli() -> list[str]:
    """Ray's command line through this interpreter (its `ray` script's first line may name a
    Python this user cannot run)."""
    return [sys.executable, "-m", "ray.scripts.scripts"]


def up(
    slots: int = 1,
    address: str | None = None,
    port: int = DEFAULT_PORT,
    node_ip: str | None = None,
    timeout: float = conn.CONNECT_TIMEOUT_S,
) -> str:
    """Start Ray on this machine: the head (``address`` None) or a node joining ``address``; it
    offers ``slots`` loads at once and is reached at ``node_ip`` (default: Ray's choice). Returns
    the cluster's address for `--cluster`."""
    if slots < 1:
        raise PltError(f"invalid --slots {slots}: must be at least 1")
    env = dict(os.environ)
    if node_ip is not None:
        conn.parse(f"{node_ip}:1", f"--node-ip {node_ip}")
    if address:
        host, head_port = conn.parse(address, f"cluster up --address {address}")
        if conn.is_loopback(host) or (node_ip and conn.is_loopback(node_ip)):
            raise PltError(
                f"cluster up --address {address}: a node joins by the head's network address, not over loopback "
                f"(Ray's rule); on the head's machine, --slots N gives more loads at once"
            )
        conn.check_port(host, head_port, timeout, f"cluster up --address {address}")
    elif node_ip and conn.is_loopback(node_ip):
        env["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"  # else Ray replaces loopback by the node address
    cmd = _ray_cli() + [
        "start",
        "--resources",
        json.dumps({SLOT: slots}),
        "--num-cpus",
        "1",
        "--object-store-memory",
        str(OBJECT_STORE_BYTES),
        "--disable-usage-stats",
    ]
    cmd += ["--address", address] if address else ["--head", "--port", str(port), "--include-dashboard", "false"]
    cmd += ["--node-ip-address", node_ip] if node_ip else []
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True
    )
    os.makedirs(STATE_DIR, exist_ok=True)
    note = os.path.join(STATE_DIR, f"{p.pid}.json")
    with open(note, "w") as f:  # (before it can fail: `down` stops what a failed start left)
        json.dump({"pgid": p.pid, "address": address, "port": None if address else port, "at": time.time()}, f)
    try:
        stdout, stderr = p.communicate(timeout=180)
    except BaseException as e:  # did not end in 180 s, or interrupted: what it started stopped
        _stop_group(p.pid)
        os.unlink(note)
        if isinstance(e, subprocess.TimeoutExpired):
            raise PltError("ray start did not end within 180 s (what it started is stopped)") from None
        raise
    if p.returncode != 0:
        _stop_group(p.pid)
        os.unlink(note)
        last = (stderr.strip() or stdout.strip()).splitlines()[-1:] or ["no output"]
        raise PltError(f"ray start failed: {last[0]}")
    if address:
        return address
    m = re.search(r"Local node IP: (\S+)", stdout + stderr)
    host = m.group(1) if m else (node_ip or ray.util.get_node_ip_address())
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` that are Ray's (its daemons keep the group of the
    `ray start` that made them)."""
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                fields = f.read().rpartition(")")[2].split()
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if int(fields[2]) == pgid and fields[0] != "Z" and (b"/ray/" in cmd or cmd.startswith(b"ray::")):
            out.append(int(d))
    return out


def _stop_group(pgid: int) -> int:
    """SIGTERM to the Ray processes of group ``pgid``, SIGKILL to those left after STOP_GRACE_S
    (a GCS server can take minutes over SIGTERM). Returns how many there were."""
    pids = _group(pgid)
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + (STOP_GRACE_S if sig == signal.SIGTERM else 5.0)
        while (left := _group(pgid)) and time.monotonic() < deadline:
            time.sleep(0.1)
        if not left:
            break
        pids = left
    return len(pids)


def down(everything: bool = False) -> int:
    """Stop the Ray processes `pltlab cluster up` started on this machine (``everything``: every
    Ray process of the machine, `ray stop`). Returns how many `up`s were stopped."""
    if everything:
        cp = subprocess.run(_ray_cli() + ["stop"], capture_output=True, text=True, timeout=120)
        if cp.returncode != 0:
            raise PltError(f"ray stop failed: {cp.stderr.strip().splitlines()[-1:]}")
        return 0
    try:
        notes = sorted(n for n in os.listdir(STATE_DIR) if n.endswith(".json"))
    except FileNotFoundError:
        notes = []
    stopped = 0
    for n in notes:
        path = os.path.join(STATE_DIR, n)
        try:
            with open(path) as f:
                pgid = int(json.load(f)["pgid"])
        except (OSError, ValueError, KeyError, TypeError):
            pgid = None
        if pgid is not None and _group(pgid):
            _stop_group(pgid)
            stopped += 1
        os.unlink(path)
    return stopped


def status(address: str, results: str | None = None, timeout: float = conn.CONNECT_TIMEOUT_S) -> dict:
    """{"address": the address joined, "nodes": each node offering slots: host, id, slots and,
    from a results folder of a cluster sweep, its runs done, check verdict and whether it was left
    out (and why)}. Ray's messages while joining go to a temporary log, named in the error line
    when joining fails (removed otherwise)."""
    if results is not None and not os.path.exists(os.path.join(results, DB_NAME)):
        raise PltError(f"{results}: no {DB_NAME} here (a sweep's output folder is needed)")
    if address == "local":
        raise PltError("cluster status: give the cluster's address (HOST:PORT), or auto for this machine's")
    what = f"cluster status {address}"
    if address == "auto":
        address = conn.auto_address(what)
    else:
        conn.parse(address, what, " or auto")
    fd, log = tempfile.mkstemp(prefix="pltlab-cluster-status-", suffix=".log")
    os.close(fd)
    try:
        started = connect(address, timeout=timeout, log=log, what=what)
    except BaseException:
        if os.path.getsize(log) == 0 or conn.verbose():
            os.unlink(log)
        raise
    os.unlink(log)
    try:
        nodes = [
            {
                "node_id": n["NodeID"],
                "host": n.get("NodeManagerHostname"),
                "address": n.get("NodeManagerAddress"),
                "slots": int(n["Resources"][SLOT]),
                "alive": True,
            }
            for n in slot_nodes()
        ]
        joined = ray.get_runtime_context().gcs_address
    finally:
        if started:
            conn.leave()
    if results is not None:
        res = Results(results)
        try:
            known = res.meta().get("cluster", {}).get("nodes", {})
        finally:
            res.close()
        seen = {n["node_id"] for n in nodes}
        for nid, v in known.items():
            if nid not in seen:  # a node of the sweep no longer in the cluster
                nodes.append(
                    {
                        "node_id": nid,
                        "host": v["node"].get("host"),
                        "address": None,
                        "slots": v["slots"],
                        "alive": False,
                    }
                )
        for n in nodes:
            v = known.get(n["node_id"])
            if v is not None:
                n.update(
                    runs=v.get("runs_total", 0),
                    admitted=v.get("admitted"),
                    reason=v.get("reason"),
                    check=v.get("check"),
                )
    return {"address": joined, "nodes": nodes}
