"""One pcap per load (`pltlab run --pcap DIR`, experiment key ``pcap``).

A runner's link emulator writes one trace for the runner's whole life (warm-up visits, every
load, the time between); when the runner closes, each measured load is cut out into its own file
in the folder the user named:

    <page>_rtt<RTT>ms_<config hash>_tfo-<on|off>_rep<N>.pcap

(the hash: 8 hex digits of the configuration's results columns, so two configurations of one
sweep never share a name). A load's file holds the TCP connections the client opened (its SYN)
between the load's start and its end (the same interval as the load's emulator lateness), every
packet of them (their closing packets too), and other packets sent within the interval; nothing
of the warm-up visits or of another load. Same format as the emulator's (rust/src/link/pcap.rs):
nanosecond timestamps, raw IP."""

from __future__ import annotations

import bisect
import dataclasses
import hashlib
import json
import os
import re
import shutil
import tempfile

from pltlab import files
from pltlab.errors import PltError
from pltlab.net import names
from pltlab.run.pcaptrace import ACK, SYN, records, tcp_of

FOLDER = "pcap"  # an experiment's per-load pcaps: OUT_DIR/pcap (experiment key pcap = true)


def file_name(page_label: str, cfg, tfo: bool, rep: int, ext: str = "pcap") -> str:
    cols = json.dumps(cfg.columns(), sort_keys=True, default=str)
    h = hashlib.sha256(cols.encode()).hexdigest()[:8]
    name = page_label.split("://", 1)[1] if "://" in page_label else os.path.basename(page_label)  # (file#page)
    slug = re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-.")[:60] or "page"
    return f"{slug}_rtt{cfg.rtt_us / 1000:g}ms_{h}_tfo-{'on' if tfo else 'off'}_rep{rep}.{ext}"


def out_folder(path) -> str | None:
    """The folder a run's ``pcap`` setting names, made if missing (its parent exists: the knob
    checked it); None: no pcaps. A file there is refused."""
    if not path:
        return None
    if path is True:
        raise PltError("pcap = true names an experiment's output folder: only in experiment files (pltlab sweep)")
    if os.path.exists(path) and not os.path.isdir(path):
        raise PltError(f"invalid --pcap {path}: a file exists there; name a folder (one pcap per load)")
    os.makedirs(path, exist_ok=True)
    return path


class LoadPcaps:
    """The per-load cut of a runner's trace: ``attach`` gives the topology its whole-trace file,
    ``add`` notes a load's interval (returns its file's path), ``split`` writes the files."""

    def __init__(self, folder: str):
        self.folder = folder
        self.whole: str | None = None
        self.loads: dict[str, tuple[float, float]] = {}  # file path -> (start, end), wall clock

    def attach(self, spec) -> tuple[object, str]:
        """(topology spec writing the whole trace, run id): the trace lives in a folder named for
        the run (`pltlab clean` removes it if the run is killed)."""
        rid = names.new_run_id()
        tmp = os.path.join(tempfile.gettempdir(), names.run_prefix(rid) + "pcap")
        os.makedirs(tmp, exist_ok=True)
        self.whole = os.path.join(tmp, "whole.pcap")
        return dataclasses.replace(spec, pcap=self.whole), rid

    def add(self, name: str, start: float, end: float) -> str:
        path = os.path.join(self.folder, name)
        self.loads[path] = (start, end)  # a re-run load replaces its earlier try
        return path

    def split(self) -> list[str]:
        """Write every noted load's file (the emulator has stopped: its trace is complete)."""
        try:
            if self.whole is None or not self.loads or not os.path.exists(self.whole):
                return []
            return split(self.whole, self.loads)
        finally:
            if self.whole:
                shutil.rmtree(os.path.dirname(self.whole), ignore_errors=True)


def split(whole: str, loads: dict[str, tuple[float, float]]) -> list[str]:
    """Cut ``whole`` (a raw-IP pcap) into one file per (start, end) interval, as the module says:
    its file header and records copied as they are (pltlab.run.pcaptrace.records, dpkt)."""
    head, recs = records(whole)
    order = sorted(loads.items(), key=lambda kv: kv[1][0])
    starts = [iv[0] for _, iv in order]
    chunks: list[list[bytes]] = [[] for _ in order]

    def load_at(t: float) -> int | None:
        i = bisect.bisect_right(starts, t) - 1
        return i if i >= 0 and t <= order[i][1][1] else None

    owner: dict[tuple, int | None] = {}  # TCP connection (either direction) -> load
    for t, rec, pkt in recs:
        tcp = _tcp_key(pkt)
        if tcp is None:
            i = load_at(t)
        else:
            key, flags = tcp
            if flags & SYN and not flags & ACK:  # a new connection: the load it is opened in
                owner[key] = load_at(t)
            i = owner.get(key)
        if i is not None:
            chunks[i].append(rec)
    out = []
    for (path, _), kept in zip(order, chunks):
        with files.replaced(path) as tmp, open(tmp, "wb") as f:
            f.write(head)
            f.writelines(kept)
        out.append(path)
    return out


def _tcp_key(p: bytes) -> tuple[tuple, int] | None:
    """(the connection's key, the same both ways; TCP flags) of an IPv4 TCP packet, else None."""
    got = tcp_of(p)
    if got is None:
        return None
    ip, tcp = got
    a, b = (ip.src, tcp.sport), (ip.dst, tcp.dport)
    return (min(a, b), max(a, b)), tcp.flags & 0x3F
