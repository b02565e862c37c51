"""Names and addresses of everything a run creates.

Every namespace, link and TUN carries the per-run prefix ``plt-<id>-``, so runs can coexist and
``pltlab clean`` finds leftovers by prefix alone. Addresses come from 198.18.0.0/15 (RFC 2544,
reserved for benchmarking) and exist only inside the run's namespaces.
"""

import ipaddress
import os
import re
import secrets
import tempfile

from pltlab import files
from pltlab.net.nsutil import NETNS_DIR

PREFIX = "plt-"
_ID_RE = re.compile(r"^[0-9a-f]{6}$")

CLIENT_IP = "198.18.0.1"
CLIENT_NET = "198.18.0.0/16"
ORIGIN_NET = "198.19.0.0/16"
ROUTER_IP = "198.18.255.254"  # server-side router's own address (per-origin namespace mode)
MAX_ORIGINS = 65_000


def new_run_id() -> str:
    """A run id no namespace or work folder of a live run on this machine has.

    PLTLAB_RUN_ID_PREFIX (hex, <= 4 digits) tags the runs of one session, e.g. a test session
    telling its own leftovers from those of other runs on the machine; every digit it takes
    leaves 16 times fewer ids, hence the check for ids in use (a sweep keeps up to 16 runners)."""
    tag = os.environ.get("PLTLAB_RUN_ID_PREFIX", "").lower()
    if not re.fullmatch(r"[0-9a-f]{0,4}", tag):
        tag = ""
    for _ in range(10_000):
        rid = (tag + secrets.token_hex(3))[:6]
        if not in_use(rid):
            return rid
    raise RuntimeError("no free run id")


def in_use(run_id: str) -> bool:
    """Some namespace or the work folder of run ``run_id`` exists."""
    if os.path.exists(workdir(run_id)):
        return True
    try:
        return any(n.startswith(run_prefix(run_id)) for n in os.listdir(NETNS_DIR))
    except OSError:
        return False


def valid_run_id(run_id: str) -> bool:
    return bool(_ID_RE.match(run_id))


def run_prefix(run_id: str) -> str:
    return f"{PREFIX}{run_id}-"


def workdir(run_id: str) -> str:
    """The run's work folder (plans, CA, emulator config, statistics)."""
    return os.path.join(tempfile.gettempdir(), run_prefix(run_id) + "run")


# ---- the run's owner: the process whose Topology made it (`pltlab clean` spares live runs) ----
OWNER_FILE = "owner"  # in the run's work folder: "<pid> <start time in clock ticks>"


def owner_path(run_id: str) -> str:
    return os.path.join(workdir(run_id), OWNER_FILE)


def proc_start(pid: int) -> int | None:
    """Process ``pid``'s start time (/proc/PID/stat field 22, clock ticks since boot), or None if
    there is no such process: with the pid it names one process, even after pid reuse."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": field 3 onwards
    try:
        return int(fields[19])
    except (IndexError, ValueError):
        return None


def write_owner(run_id: str, pid: int | None = None) -> None:
    """Record this process (or ``pid``) as the owner of run ``run_id`` (its work folder exists)."""
    pid = os.getpid() if pid is None else pid
    files.write_text(owner_path(run_id), f"{pid} {proc_start(pid)}\n")


def read_owner(run_id: str) -> tuple[int, int] | None:
    """(pid, start time) of the run's owner as recorded, or None (no record: an older version's
    run, or one whose work folder is gone)."""
    try:
        with open(owner_path(run_id)) as f:
            pid, start = f.read().split()
        return int(pid), int(start)
    except (OSError, ValueError):
        return None


def owner_alive(run_id: str) -> int | None:
    """The pid of the run's owner if that process still runs, else None (dead, or no record)."""
    rec = read_owner(run_id)
    if rec is None:
        return None
    pid, start = rec
    return pid if proc_start(pid) == start else None


def client_ns(run_id: str) -> str:
    return f"{PREFIX}{run_id}-c"


def server_ns(run_id: str) -> str:
    return f"{PREFIX}{run_id}-s"


def origin_ns(run_id: str, i: int) -> str:
    return f"{PREFIX}{run_id}-o{i}"


def tun_name(run_id: str) -> str:
    return f"{PREFIX}{run_id}-t"  # same name on both sides; each lives in its own namespace


def veth_name(run_id: str, i: int) -> str:
    return f"{PREFIX}{run_id}-v{i}"  # <= 15 bytes for i < 1000


def origin_ip(i: int) -> str:
    """Address of origin i (0-based): 198.19.0.1, 198.19.0.2, ... skipping .0 and .255."""
    if not 0 <= i < MAX_ORIGINS:
        raise ValueError(f"origin index {i} out of range")
    base = int(ipaddress.IPv4Address("198.19.0.0"))
    hi, lo = divmod(i, 254)
    return str(ipaddress.IPv4Address(base + hi * 256 + lo + 1))


def run_id_of(name: str) -> str | None:
    """The run id of a project-created name, or None if the name is not ours."""
    m = re.match(r"^plt-([0-9a-f]{6})-", name)
    return m.group(1) if m else None
