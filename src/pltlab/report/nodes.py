"""The machines behind a cluster sweep's loads (runs' `node` column, pltlab.cluster): a note for
each configuration whose loads come from machines that differ (kernel, CPU model, pltlab or data
plane version), and its statistics split by node (nodes.md / nodes.csv, a section of the report).
Results of one machine (no `node`) get neither."""

import json
import statistics

from pltlab.run import knobs

HEADERS = ["page", "configuration", "TFO", "node", "kernel", "CPU", "n", "mean (ms)", "median (ms)"]
MACHINE = ("kernel", "cpu", "pltlab", "pltlab_dp")  # what makes two nodes' loads not alike


def _node(r: dict) -> dict | None:
    try:
        return json.loads(r["node"]) if r.get("node") else None
    except ValueError:
        return None


def _label(n: dict) -> str:
    return f"{n.get('host')} ({str(n.get('node_id'))[:8]})"


def _configs(runs: list[dict]) -> dict[str, str]:
    """config key -> a readable name: the knob columns that vary between the runs (RTT at least)."""
    cols = [k for k in knobs.columns() if k == "rtt_ms" or len({r.get(k) for r in runs}) > 1]
    return {
        r["config_key"]: ", ".join(f"{k}={r[k]:g}" if isinstance(r.get(k), float) else f"{k}={r.get(k)}" for k in cols)
        for r in runs
    }


def _ok(runs: list[dict]) -> list[tuple[dict, dict]]:
    return [(r, n) for r in runs if r.get("status") == "ok" and r.get("valid") and (n := _node(r))]


def on_cluster(runs: list[dict]) -> bool:
    return any(r.get("node") for r in runs)


def notes(runs: list[dict]) -> list[tuple[str, bool]]:
    """One note per (page, configuration) whose loads ran on machines that differ (marked)."""
    groups: dict[tuple, dict[tuple, set]] = {}
    for r, n in _ok(runs):
        machine = tuple(n.get(k) for k in MACHINE)
        groups.setdefault((r["page"], r["config_key"]), {}).setdefault(machine, set()).add(_label(n))
    out, name = [], _configs(runs)
    for (page, cfg), machines in sorted(groups.items()):
        if len(machines) < 2:
            continue
        differ = [
            f"{name} {' / '.join(sorted({str(m[i]) for m in machines}))}"
            for i, name in enumerate(("kernel", "CPU", "pltlab", "data plane"))
            if len({m[i] for m in machines}) > 1
        ]
        out.append(
            (
                f"{page} @ {name[cfg]}: loads from {len(machines)} machines that differ ({'; '.join(differ)}): "
                f"statistics split by node in nodes.md",
                True,
            )
        )
    return out


def rows(runs: list[dict]) -> list[list[str]]:
    """PLT statistics per (page, configuration, TFO, node)."""
    groups: dict[tuple, list[float]] = {}
    info: dict[str, dict] = {}
    for r, n in _ok(runs):
        if r.get("plt_ms") is None:
            continue
        info[_label(n)] = n
        groups.setdefault((r["page"], r["config_key"], bool(r["tfo"]), _label(n)), []).append(r["plt_ms"])
    name = _configs(runs)
    return [
        [
            page,
            name[cfg],
            "on" if tfo else "off",
            node,
            str(info[node].get("kernel")),
            str(info[node].get("cpu")),
            str(len(v)),
            f"{statistics.fmean(v):.1f}",
            f"{statistics.median(v):.1f}",
        ]
        for (page, cfg, tfo, node), v in sorted(groups.items())
    ]


def section(runs: list[dict]) -> dict:
    return {"title": "Loads by node (cluster sweep)", "headers": HEADERS, "rows": rows(runs)}
