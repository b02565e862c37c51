import os
import shutil
import signal
import subprocess
import sys

import pytest

from pltlab.net import names

# This session's runs get ids starting with TAG (inherited by the CLI subprocesses), so the leak
# check below sees only what these tests created, even while other runs share the machine.
TAG = os.environ.setdefault("PLTLAB_RUN_ID_PREFIX", os.urandom(2).hex())
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")


def pltlab_cmd(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (python -m pltlab, same interpreter)."""
    return subprocess.run(
        [sys.executable, "-m", "pltlab", *args], capture_output=True, text=True, timeout=timeout, **kw
    )


def _ours(name: str) -> bool:
    rid = names.run_id_of(name)
    return bool(rid) and rid.startswith(TAG)


def _our_process(pid: str) -> bool:
    """A pltlab-dp process started by this test session (it inherited PLTLAB_RUN_ID_PREFIX)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            if not f.read().split(b"\0")[0].endswith(b"pltlab-dp"):
                return False
        with open(f"/proc/{pid}/environ", "rb") as f:
            return f"PLTLAB_RUN_ID_PREFIX={TAG}".encode() in f.read().split(b"\0")
    except OSError:
        return False


def project_state() -> dict:
    """Everything of ours that a leak would leave: namespaces, host links, data-plane processes.
    Works unprivileged too (a normal user sees the namespaces and links, and its own processes)."""
    try:
        nss = sorted(n for n in os.listdir("/run/netns") if _ours(n))
    except OSError:  # no namespace created on this machine yet
        nss = []
    try:
        links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    except OSError:  # no iproute2: nothing of ours can exist either
        links = ""
    ours = sorted(name for line in links.splitlines() if _ours(name := line.split(":")[1].strip()))
    procs = sorted(int(p) for p in os.listdir("/proc") if p.isdigit() and _our_process(p))
    return {"namespaces": nss, "links": ours, "dataplane_processes": procs}


def leaked(before: dict) -> dict:
    """What appeared since ``before`` and is still there (others' runs may come and go meanwhile)."""
    after = project_state()
    return {k: sorted(set(after[k]) - set(before[k])) for k in after if set(after[k]) - set(before[k])}


@pytest.fixture(autouse=True)
def no_leaks():
    """Every test must leave no namespace, link, TUN or data-plane process behind."""
    before = project_state()
    yield
    assert not leaked(before), f"leak: {leaked(before)}"


def pytest_collection_modifyitems(config, items):
    """Tests marked `root` (namespaces, TUN, the data plane's links) are skipped, saying why, when
    not run as root; `pytest -m "not root"` deselects them."""
    if os.geteuid() == 0:
        return
    skip = pytest.mark.skip(reason="needs root (network namespaces, TUN): run as root, or deselect with -m 'not root'")
    for item in items:
        if item.get_closest_marker("root"):
            item.add_marker(skip)


def have_tshark() -> bool:
    return shutil.which("tshark") is not None


def sigint_default() -> None:
    """Popen's preexec_fn for a test that interrupts its child: SIGINT back to its default there (a
    test run started in the background of a shell inherits SIGINT ignored, and Python keeps it so)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
