"""The handshake study's experiments: per loader, one over TCP (the TCP protocols x TLS x TFO
off/on, TFO the compared knob: its two modes back to back) and one over QUIC (h3 x TLS, TLS the
compared knob; TFO does not apply), at every page x RTT x loss x repetition. Every origin is
served over https: the built-in loader is told so (knob schemes "https"), Chromium takes the
pages recorded over https with its own schemes. Warm TFO cookies and, for resume and 0-RTT,
session tickets from a prior visit. No rate limit: the round trips are what is measured."""

from __future__ import annotations

import json

from pltlab import protocols
from pltlab.experiments.spec import Config, resolve_pages
from pltlab.loaders.registry import LOADERS
from pltlab.studies.engine import StudyExperiment, config
from pltlab.studies.handshakes.study_file import SECONDS_PER_LOAD, Params, points


def _transports(p: Params, client: str) -> list[tuple[str, tuple, tuple, tuple]]:
    """(folder suffix, protocols, TLS modes, TFO modes) of a loader's experiments: TCP's
    protocols cross TFO off/on, QUIC's do not (pltlab.protocols: TFO is TCP's)."""
    planned = LOADERS[client].planned
    protos = p.protocols if planned else p.chromium_protocols
    tls = p.tls if planned else p.chromium_tls
    quic_tls = p.tls if planned else p.chromium_quic_tls
    tcp = tuple(x for x in protos if protocols.applies(x, "tfo"))
    udp = tuple(x for x in protos if not protocols.applies(x, "tfo"))
    out = []
    if tcp:
        out.append(("tcp", tcp, tls, (False, True)))
    if udp:
        out.append(("quic", udp, quic_tls, (False,)))
    return out


def configurations(p: Params, client: str) -> int:
    """Loads per page, RTT, loss and repetition of a loader."""
    return sum(len(pr) * len(t) * len(m) for _, pr, t, m in _transports(p, client))


def n_loads(p: Params) -> dict[str, int]:
    """Loads per loader: pages x RTTs x losses x repetitions x the handshake configurations (TCP
    protocols x TLS x TFO off/on, QUIC's x TLS)."""
    out = {}
    for client in p.clients:
        pages, rtts, losses, reps = points(p, client)
        out[client] = len(pages) * len(rtts) * len(losses) * reps * configurations(p, client)
    return out


def estimate_s(p: Params) -> float:
    """The run's duration as SECONDS_PER_LOAD estimates it."""
    return sum(n * SECONDS_PER_LOAD[LOADERS[c].planned] for c, n in n_loads(p).items())


def size(p: Params) -> str:
    """'4860 builtin + 792 chromium loads, ~5.6 h' (the help and the report say it)."""
    n = n_loads(p)
    parts = " + ".join(f"{v} {c}" for c, v in n.items())
    s = estimate_s(p)
    return f"{parts} loads, ~{s / 3600:.1f} h" if s >= 5400 else f"{parts} loads, ~{s / 60:.0f} min"


def folder(client: str, transport: str) -> str:
    """An experiment's folder under the study's output folder: tcp, quic, chromium-tcp, ..."""
    return transport if LOADERS[client].planned else f"{client}-{transport}"


def _toml(v) -> str:
    return json.dumps(list(v) if isinstance(v, tuple) else v)


def experiments(p: Params) -> list[tuple[str, StudyExperiment]]:
    out = []
    for client in p.clients:
        pages, rtts, losses, reps = points(p, client)
        if not pages:
            continue  # (Chromium: none of the pages is one of its own)
        entries = resolve_pages(list(pages))
        https = {} if LOADERS[client].upgrades_itself else {"schemes": "https"}  # (a browser: its own schemes)
        for transport, protos, tls, tfo in _transports(p, client):
            configs = [
                Config(**{**config(r, loss=lo, client=client, warm=True).values(), "protocol": pr, "tls": t})
                for r in rtts
                for lo in losses
                for pr in protos
                for t in tls
            ]
            # the compared knob runs back to back: TFO where it applies, else the TLS modes
            compare = "tfo" if len(tfo) == 2 else "tls" if len(tls) > 1 else None
            sub = folder(client, transport)
            name = f"handshakes-{sub}"
            src = "\n".join(
                [
                    f"# pltlab reproduce handshakes{' --quick' if p.quick else ''}: {client} over {transport}",
                    f'name = "{name}"',
                    f"pages = {_toml(pages)}",
                    f"rtt = {_toml([f'{r:g}ms' for r in rtts])}",
                    f"loss = {_toml([f'{lo * 100:g}%' for lo in losses])}",
                    f"protocol = {_toml(protos)}",
                    f"tls = {_toml(tls)}",
                    f"tfo = {_toml(['off', 'on'] if len(tfo) == 2 else ['off'])}",
                    f'client = "{client}"',
                    'warmup = "warm"',
                    *(f'{k} = "{v}"' for k, v in https.items()),
                    *([f'compare = "{compare}"'] if compare else []),
                    f"repetitions = {reps}",
                    f"seed = {p.seed}",
                ]
            )
            exp = StudyExperiment(
                name=name,
                pages=entries,
                configs=configs,
                tfo_modes=tfo,
                repetitions=reps,
                seed=p.seed,
                settings=https,
                source=src + "\n",
                compare=compare if compare != "tfo" else None,  # (tfo: the default axis)
            )
            out.append((sub, exp))
    return out
