import os
import shutil
import subprocess
import sys

import pytest

from pltlab.net import names

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")


def pltlab_cmd(*args: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    """Run the CLI as a user would (python -m pltlab, same interpreter)."""
    return subprocess.run([sys.executable, "-m", "pltlab", *args], capture_output=True, text=True,
                          timeout=timeout, **kw)


def project_state() -> dict:
    """Everything of ours that a leak would leave: namespaces, host links, data-plane processes."""
    nss = sorted(n for n in (os.listdir("/run/netns") if os.path.isdir("/run/netns") else [])
                 if names.run_id_of(n))
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    ours = sorted(line.split(":")[1].strip() for line in links.splitlines()
                  if names.run_id_of(line.split(":")[1].strip()))
    procs = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv0 = f.read().split(b"\0")[0]
            except OSError:
                continue
            if argv0.endswith(b"pltlab-dp"):
                procs.append(int(pid))
    return {"namespaces": nss, "links": ours, "dataplane_processes": sorted(procs)}


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


@pytest.fixture(scope="session", autouse=True)
def require_root():
    if os.geteuid() != 0:
        pytest.exit("the tests need root (network namespaces, TUN)", returncode=2)


def have_tshark() -> bool:
    return shutil.which("tshark") is not None
