"""From the experiments' results databases to the study's results: every load's final attempt
with its handshake round trips on the critical path, the effects (effects.rows), the answer
paragraph per loader, one sentence per page from `pltlab explain`.

`pltlab explain` sits above the studies (pltlab.explain), so the report hands in an
``explainer`` (pltlab.report.why.StudyExplainer): ``handshake_rtts(folder, runs)`` and
``saved(folder, alt_id, base_id)``; without one (tests) round trips and sentences are left out."""

from __future__ import annotations

import os
import statistics
from collections import Counter

from pltlab.experiments.results import DB_NAME, Results
from pltlab.studies.handshakes import effects, parts
from pltlab.studies.handshakes.parts import size
from pltlab.studies.handshakes.study_file import Params

# The comparison each page's sentence explains, in order of preference: TFO over h2 with 0-RTT
# (the study's question), else with full TLS, else any TFO pair; at the page's largest RTT.
EXPLAINED = ({"protocol": "h2", "tls": "0rtt"}, {"protocol": "h2", "tls": "full"}, {})


def _final(runs: list[dict]) -> list[dict]:
    """Per run key its ok attempt, else its last attempt."""
    out: dict[str, dict] = {}
    for r in sorted(runs, key=lambda r: r["attempt"]):
        if out.get(r["run_key"], {}).get("status") != "ok":
            out[r["run_key"]] = r
    return list(out.values())


def load_of(r: dict, folder: str) -> dict:
    """A run row as effects takes a load."""
    return {
        "id": r["id"],
        "folder": folder,
        "page": r["page"],
        "client": r["client"],
        "protocol": r["protocol"],
        "tls": r["tls"],
        "tfo": bool(r["tfo"]),
        "rtt_ms": r["rtt_ms"],
        "loss": r["loss"] or 0.0,
        "rep": r["rep"],
        "plt_ms": r["plt_ms"],
        "valid": r["status"] == "ok" and bool(r["valid"]),
        "why": r.get("failure_reason") or r.get("invalid_reason"),
        "hs_rtts": None,
    }


def read_loads(p: Params, out_dir: str, explainer=None) -> list[dict]:
    out = []
    for sub, _ in parts.experiments(p):
        folder = os.path.join(out_dir, sub)
        if not os.path.isfile(os.path.join(folder, DB_NAME)):
            continue  # not run (yet)
        res = Results(folder)
        try:
            runs = _final(res.rows("runs"))
        finally:
            res.close()
        mine = [load_of(r, folder) for r in runs]
        if explainer is not None:
            rts = explainer.handshake_rtts(folder, [x for x in mine if x["valid"]])
            for x in mine:
                x["hs_rtts"] = rts.get(x["id"])
        out += mine
    return out


def _median(loads: list[dict]) -> dict:
    """The median load by PLT (the lower of the two middle ones)."""
    s = sorted(loads, key=lambda x: (x["plt_ms"], x["id"]))
    return s[(len(s) - 1) // 2]


def page_sentences(loads: list[dict], clients: tuple, explainer) -> list[dict]:
    """Per page (first loader that has one): `pltlab explain`'s sentence on its median TFO load
    against its median load without, in the first EXPLAINED context measured, at its largest RTT
    and lowest loss."""
    out = []
    for page in dict.fromkeys(x["page"] for x in loads):
        mine = [x for x in loads if x["page"] == page and x["valid"] and x["plt_ms"] is not None]
        got = None
        for client in clients:
            for ctx in EXPLAINED:
                pair = [x for x in mine if x["client"] == client and all(x[k] == v for k, v in ctx.items())]
                ps = effects.pairs(pair, effects.BY_NAME["tfo"])
                if not ps:
                    continue
                (cl, cx, rtt, loss) = max(ps, key=lambda k: (k[2], -k[3]))
                chosen = ps[(cl, cx, rtt, loss)]
                off, on = _median([b for b, _ in chosen]), _median([a for _, a in chosen])
                said = explainer.saved(on["folder"], on["id"], off["id"]) if explainer else None
                if said:
                    where = f"{on['protocol']}, TLS {on['tls']}, RTT {rtt:g} ms, loss {loss * 100:g} %, {client}"
                    got = {
                        "page": page,
                        "client": client,
                        "context": where,
                        "runs": [on["id"], off["id"]],
                        "folder": os.path.basename(on["folder"]),
                        "sentence": f"{page} ({where}): TFO on vs off (run #{on['id']} vs #{off['id']}) {said}.",
                    }
                break
            if got:
                break
        if got:
            out.append(got)
    return out


def results(p: Params, out_dir: str, explainer=None) -> dict:
    """The study's results from its experiments' databases under ``out_dir``."""
    loads = read_loads(p, out_dir, explainer)
    rows = effects.rows(loads, p.seed)
    invalid = Counter(x["why"] or "?" for x in loads if not x["valid"])
    by_client = Counter(x["client"] for x in loads)
    return {
        "size": size(p),
        "loads": dict(by_client),
        "valid_loads": sum(1 for x in loads if x["valid"]),
        "invalid": [{"reason": k, "n": v} for k, v in invalid.most_common()],
        "mean_plt_ms": statistics.fmean(x["plt_ms"] for x in loads if x["valid"])
        if any(x["valid"] for x in loads)
        else None,
        "rows": rows,
        "answer": {c: effects.answer(rows, c) for c in p.clients if c in by_client},
        "pages": page_sentences(loads, p.clients, explainer),
    }
