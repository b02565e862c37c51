"""`pltlab reproduce tfo`: the TFO paper's page-load experiment (Radhakrishnan et al., "TCP Fast
Open", CoNEXT 2011, Table 1) on its four pages as recorded in 2013.

Link: RTT 20/100/200 ms, 4 Mbit/s down, 256 kbit/s up: the profile the 2013 CS244 reproduction
(jfbastien/tcp-fastopen) names for the paper's emulation. cubic, warm TFO cookies (a prior visit),
TFO off vs on, built-in loader unless --client chromium.

Schemes: the paper's pages were loaded over http, as recorded, with no TLS. The built-in loader
does so by itself; Chromium would upgrade most of them to https (their names are on its HSTS
preload list), so with `--client chromium` every preloaded name is renamed out of that list
(knob hosts "unpreloaded", pltlab.archive.rename: one character, same length, in URLs, headers
and bodies) and a load that went over https anyway is invalid (pltlab.run.schemes).

`--schemes https` measures today's conditions instead, as their own experiment
("reproduce-tfo-today"): the names as recorded, the schemes as Chromium's HSTS preload list
makes them (Chromium: its own upgrades, with its ~2 KB post-quantum ClientHello; built-in loader:
schemes "chromium", the same upgrades with its own small ClientHello). On a 256 kbit/s uplink the
ClientHellos of connections opened together queue behind each other, the more so without TFO:
such a table measures the uplink, not the round trip TFO saves (docs/loaders.md).

`--protocol h1|h2` reruns the table on today's web: every origin over https (schemes "https"),
HTTP/1.1 or h2, TLS 1.3 as `--tls` says (full, resume, 0rtt); built-in loader only (Chromium
loads these http pages on their recorded schemes). What remains of TFO's gain over h2, where
one connection per origin is opened, is the question.
"""

import os

from pltlab import protocols, units
from pltlab.archive import bundled, formats
from pltlab.errors import PltError
from pltlab.experiments import stats
from pltlab.experiments.spec import Config, Experiment, PageEntry, page_label
from pltlab.loaders.registry import get as loader_of
from pltlab.net.wan import DEFAULT_CLIENT_RMEM
from pltlab.run.knobs import UNPRELOADED
from pltlab.studies import paper_gaps, presets
from pltlab.studies.engine import JSON, OUTPUT, QUICK, RESUME, Param, config, lines, table, values

NAME = "tfo"
HELP = "The TFO paper's experiment: RTT 20/100/200 ms, 4 Mbit/s down, 256 kbit/s up, TFO off vs on."
CLIENTS = ("builtin", "chromium")
TLS = ("full", "resume", "0rtt")
FIXED = ("rtt", "rate", "rate_up")  # the paper's link: --knob refuses these
SETUPS = (presets.TODAY, "paper2011")  # --setup: today's defaults, or the paper's testbed (studies.presets)
SCHEMES = ("recorded", "https")  # --schemes: the paper's (http as recorded) or today's (HSTS upgrades)
# `pltlab reproduce tfo`'s options, in their order (pltlab.studies.engine.Param)
PARAMS = (
    QUICK.but(help="Fewer repetitions (the README's main job)."),
    Param("client", str, "builtin", "builtin or chromium.", CLIENTS),
    Param("corpus", str, None, "cs244-2013 folder: real bodies instead of the bundled pages."),
    Param("pages", str, None, "Only these pages (amazon,nytimes,wsj,wikipedia)."),
    Param("reps", int, None, "Repetitions (default 5, --quick 2)."),
    JSON,
    OUTPUT,
    RESUME,
    Param(
        "protocol",
        str,
        "recorded",
        "recorded (http, as in 2013), or today's web: h1 or h2, every origin over https.",
        protocols.CHOICES,
    ),
    Param("tls", str, "full", "With --protocol h1/h2: TLS 1.3 full, resume or 0rtt.", TLS),
    Param(
        "schemes",
        str,
        "recorded",
        "recorded (the paper's: http, Chromium with the names renamed out of its HSTS preload list) or https "
        "(today's: the HSTS preload list's upgrades, Chromium's own).",
        SCHEMES,
    ),
    Param(
        "setup",
        str,
        presets.TODAY,
        "today (every knob at its default) or paper2011: the TFO paper's testbed as knobs "
        '(Linux 2.6.34: no RACK, no TLP, cubic, initcwnd 10, its 87 KB receive buffer; docs/knobs.md "Presets").',
        SETUPS,
    ),
    Param(
        "knob",
        str,
        None,
        "NAME=VALUE: one knob set otherwise than the set-up sets it (repeatable), e.g. rack=on.",
        many=True,
    ),
)
TABLE = "pltlab: PLT with and without TFO (means)"  # the seeds table `reproduce tfo` prints

RTTS = ("20ms", "100ms", "200ms")
REPS, QUICK_REPS = 5, 2
# We know the paper's range reliably, not every cell of its Table 1: compare against the range.
PAPER = {
    "source": "Radhakrishnan et al., TCP Fast Open, CoNEXT 2011, Table 1",
    "improvement_range": [0.04, 0.41],
    "trend": "growing with RTT",
}
# why ours differ from the paper's: measured by `reproduce ablations --paper tfo` (the committed
# results folder's sentences), else "not measured" (pltlab.studies.paper_gaps)
WHY_TITLE = f"Why results can differ (measured by the ablations, {paper_gaps.DOC})"


def _corpus_pages(path: str) -> list[PageEntry]:
    """The paper's pages of the cs244-2013 corpus: its Paper.pages list, read as the archive
    formats read a seed list (pltlab.archive.formats)."""
    seed = formats.BY_NAME["seed"]
    cands = [path, os.path.join(path, "Paper.pages"), os.path.join(path, "cs244-2013", "Paper.pages")]
    pf = next((c for c in cands if os.path.isfile(c) and seed.claims(formats.Archive(c))), None)
    if pf is None:
        raise PltError(f"--corpus {path}: no Paper.pages there (expected the cs244-2013 folder)")
    return [PageEntry(page_label(p.url), p) for p in formats.load(pf, seed).pages]


def options(given: dict) -> dict:
    """The study's parameters from its options' values (``PARAMS``; what study.json records:
    the parameters of today's web only when they are not the 2013 table's, so earlier studies'
    stay as they were)."""
    v = values(PARAMS, given)
    if v["reps"] is not None:
        units.repetitions(v["reps"], "--reps")
    params = {k: v[k] for k in ("quick", "client", "corpus", "pages", "reps")}
    if v["protocol"] != "recorded" or v["tls"] != "full":
        params.update(protocol=v["protocol"], tls=v["tls"])
    if v["schemes"] != "recorded":
        params.update(schemes=v["schemes"])
    if v["setup"] not in SETUPS:
        raise PltError(f"invalid --setup {v['setup']!r}: {' or '.join(SETUPS)}")
    if v["setup"] != presets.TODAY or v["knob"]:
        presets.values(v["setup"], v["knob"] or (), FIXED)  # (checked now: one line, before anything runs)
        params.update(setup=v["setup"], knob=list(v["knob"] or ()))
    return params


def announce(params: dict, exps: list[tuple[str, Experiment]], out_dir: str, resume: bool) -> str:
    """The line `reproduce tfo` starts with (on stderr)."""
    ((_, exp),) = exps
    protocol, tls = params.get("protocol", "recorded"), params.get("tls", "full")
    today = params.get("schemes", "recorded") != "recorded"
    return (
        f"reproduce tfo: {', '.join(e.label for e in exp.pages)} x RTT 20/100/200 ms, 4 Mbit/s down, "
        f"256 kbit/s up, cubic, warm cookies, {exp.repetitions} repetition(s), {params['client']} loader"
        f"{f', https + {protocol}, TLS {tls}' if protocol != 'recorded' else ''}"
        f"{', today: https by the HSTS preload list' if today else ''}"
        f"{', set-up ' + params['setup'] if params.get('setup', presets.TODAY) != presets.TODAY else ''}"
        f"{', knobs ' + ' '.join(params['knob']) if params.get('knob') else ''} -> {out_dir}"
    )


def experiment(
    quick: bool = False,
    client: str = "builtin",
    corpus: str | None = None,
    pages: str | None = None,
    reps: int | None = None,
    protocol: str = "recorded",
    tls: str = "full",
    schemes: str = "recorded",
    setup: str = presets.TODAY,
    knob: list | tuple = (),
) -> Experiment:
    if setup not in SETUPS:
        raise PltError(f"invalid --setup {setup!r}: {' or '.join(SETUPS)}")
    if client not in CLIENTS:
        raise PltError(f"invalid --client {client!r}: builtin or chromium")
    if protocol not in protocols.CHOICES:
        raise PltError(f"invalid --protocol {protocol!r}: recorded (http, as in 2013), h1 or h2 (https)")
    if tls not in TLS:
        raise PltError(f"invalid --tls {tls!r}: full, resume or 0rtt")
    if protocol == "recorded" and tls != "full":
        raise PltError(f"--tls {tls} needs https: add --protocol h1 or h2 (the 2013 pages are http)")
    if schemes not in SCHEMES:
        raise PltError(f"invalid --schemes {schemes!r}: recorded (http, as in 2013) or https (today's HSTS upgrades)")
    if schemes != "recorded" and protocol != "recorded":
        raise PltError(f"--schemes {schemes} and --protocol {protocol} both choose https: give one of them")
    if protocol != "recorded" and not loader_of(client).planned:
        raise PltError(
            f"--protocol {protocol} is for the built-in loader (Chromium loads the 2013 http pages on their "
            "recorded schemes)"
        )
    entries = _corpus_pages(corpus) if corpus else [PageEntry(n, bundled.load(n)) for n in bundled.PAPER]
    if pages:
        want = [p.strip() for p in pages.split(",") if p.strip()]
        known = [e.label for e in entries]
        bad = [w for w in want if w not in known]
        if bad or not want:
            raise PltError(
                f"--pages {pages!r}: unknown page {', '.join(bad) or '(none)'} (choose from {', '.join(known)})"
            )
        entries = [e for e in entries if e.label in want]
    configs = [config(int(r[:-2]), rate="4mbit", rate_up="256kbit", cc="cubic", client=client, warm=True) for r in RTTS]
    setup_values = presets.values(setup, knob, FIXED)  # the set-up's knobs, --knob's over them
    point, exp_level = presets.split(setup_values)
    configs = presets.configure(configs, point)
    n = reps or (QUICK_REPS if quick else REPS)
    today = protocol != "recorded"
    if today:  # TLS and the protocol are knobs of each configuration; every origin over https
        configs = [Config(**{**c.values(), "protocol": protocol, "tls": tls}) for c in configs]
    renamed = loader_of(client).upgrades_itself and schemes == "recorded"  # the paper's http in Chromium
    if renamed:
        configs = [Config(**{**c.values(), "hosts": UNPRELOADED}) for c in configs]
    hsts = schemes == "https"  # today's: the HSTS preload list's upgrades (Chromium's own)
    name = "reproduce-tfo-today" if hsts else "reproduce-tfo"
    flags = f"{' --protocol ' + protocol if today else ''}{' --tls ' + tls if tls != 'full' else ''}"
    flags += " --schemes https" if hsts else ""
    flags += f" --setup {setup}" if setup != presets.TODAY else ""
    flags += "".join(f" --knob {k}" for k in knob)
    settings = (
        {"schemes": "https"}
        if today
        else {"schemes": "chromium"}
        if hsts and not loader_of(client).upgrades_itself
        else {}
    )
    src = (
        f"# pltlab reproduce tfo{' --quick' if quick else ''}{' --client ' + client if client != 'builtin' else ''}"
        f"{' --corpus ' + corpus if corpus else ''}{flags}\n" + f'name = "{name}"\n'
        f'pages = {[e.label for e in entries]!r}\nrtt = {list(RTTS)!r}\nrate = "4mbit"\n'
        f'rate_up = "256kbit"\ncc = "{configs[0].cc}"\nwarmup = "warm"\ntfo = ["off", "on"]\n'
        f'client = "{client}"\nrepetitions = {n}\nseed = 1\n'
        + (f'protocol = "{protocol}"\ntls = "{tls}"\n' if today else "")
        + "".join(f'{k} = "{v}"\n' for k, v in settings.items())
        + (f'hosts = "{UNPRELOADED}"\n' if renamed else "")
        + presets.toml_lines({k: v for k, v in setup_values.items() if k != "cc"})
    ).replace("'", '"')
    if hsts:  # (its own words: after the quotes were made TOML's)
        src = src.replace("\n", f"\n# {CONDITIONS['today']}\n", 1)
    return Experiment(
        name=name,
        pages=entries,
        configs=configs,
        tfo_modes=(False, True),
        repetitions=n,
        seed=1,
        source=src,
        settings=settings,
        client_rmem=exp_level.get("client_rmem", DEFAULT_CLIENT_RMEM),
        max_conns_per_host=exp_level.get("max_conns_per_host", 6),
    )


CONDITIONS = {
    "paper": "the paper's conditions: the pages over http as recorded in 2013, no TLS",
    "paper-renamed": (
        "the paper's conditions: the pages over http as recorded in 2013, no TLS; Chromium loads them "
        "with the names on its HSTS preload list renamed out of it (one character, same length), and a "
        "load that went over https anyway is invalid"
    ),
    "today": (
        "today's conditions, not the paper's: the names as recorded, so the hosts on the HSTS preload list "
        "and what they load go over https (Chromium: TLS 1.3 with a ~2 KB post-quantum ClientHello); on "
        "a 256 kbit/s uplink the ClientHellos of connections opened together queue behind each other, the "
        "more so without TFO (the report measures each load's uplink queue)"
    ),
    "https": "today's web: every origin over https",
}


def condition(analysis: dict) -> str:
    """Which conditions the rows' loads were measured in (CONDITIONS), from their run rows."""
    runs = [r for g in analysis["rows"] for side in (False, True) for r in g["runs"][side]]
    if any(r.get("schemes") == "https" for r in runs):
        return CONDITIONS["https"]
    chromium = any(r.get("client") == "chromium" for r in runs)
    if chromium and all(r.get("hosts") == UNPRELOADED for r in runs):
        return CONDITIONS["paper-renamed"]
    if chromium or any(r.get("schemes") == "chromium" for r in runs):
        return CONDITIONS["today"]
    return CONDITIONS["paper"]


def experiments(params: dict) -> list[tuple[str, Experiment]]:
    """The study's one experiment, run into the study's output folder itself."""
    return [("", experiment(**params))]


def rows(analysis: dict) -> list[dict]:
    """The table's rows as `reproduce tfo` prints them (--json, the console, the report's section):
    the improvement's interval only where both sides have MIN_N loads (stats.shown: the report's
    rule), else [None, None]."""
    out = []
    for g in analysis["rows"]:
        shown = stats.shown(g["base"]["n"], g["alt"]["n"])
        out.append(
            {
                "page": g["page"],
                "rtt_ms": g["rtt_ms"],
                "plt_notfo_ms": _r(g["base"]["mean"]),
                "plt_tfo_ms": _r(g["alt"]["mean"]),
                "improvement": _r(g["improvement"], 4),
                "improvement_ci": [_r(x, 4) if shown else None for x in g["improvement_ci"]],
                "n": min(g["base"]["n"], g["alt"]["n"]),
            }
        )
    return out


def summary(analysis: dict) -> dict:
    """What `reproduce tfo --json` prints (with the output folder)."""
    return {"rows": rows(analysis), "invalid_runs": len(analysis["invalid"]) + len(analysis["failed_final"])}


def conclusions(analysis: dict, checks: list[str]) -> list[str]:
    """What `reproduce tfo` prints below its table: the published range, the CIs, where ours
    departs from the paper, the report's checks and why results can differ."""
    rs = rows(analysis)
    lo, hi = PAPER["improvement_range"]
    ci = ", ".join(f"{r['page']}@{r['rtt_ms']:g}: {_ci(r)}" for r in rs if r["improvement"] is not None)
    return [
        f"Published ({PAPER['source']}): improvements from {lo:.0%} to {hi:.0%}, {PAPER['trend']}.",
        f"{stats.INTERVAL}s of the improvement: {ci}",
        "Differences from the paper: " + "; ".join(differences(rs)),
        *(f"Check: {c}" for c in checks),  # savings the handshakes cannot account for, uplink queueing
        f"{WHY_TITLE}:",
        *(f"  - {w}" for w in paper_gaps.why(NAME)),
    ]


def _ci(r: dict) -> str:
    """A row's interval as text, or why none is shown (n < MIN_N, stats.shown; or BCa had none)."""
    lo, hi = r["improvement_ci"]
    if not stats.shown(r["n"]):
        return stats.NO_CI
    return "-" if lo is None else f"[{lo:.1%}, {hi:.1%}]"


def _r(x, nd: int = 1):
    return None if x is None else round(x, nd)


def differences(rs: list[dict]) -> list[str]:
    """Where our table departs from the published one."""
    lo, hi = PAPER["improvement_range"]
    out = []
    imps = [r["improvement"] for r in rs if r["improvement"] is not None]
    if imps:
        out.append(f"ours range from {min(imps):.1%} to {max(imps):.1%} (paper: {lo:.0%} to {hi:.0%})")
    for r in rs:
        i = r["improvement"]
        if i is not None and not lo <= i <= hi:
            out.append(f"{r['page']} @ {r['rtt_ms']:g} ms: {i:.1%} is outside the paper's {lo:.0%}..{hi:.0%}")
    for page in sorted({r["page"] for r in rs}):
        mine = [r for r in sorted(rs, key=lambda r: r["rtt_ms"]) if r["page"] == page]
        imps = [r["improvement"] for r in mine]
        if None not in imps and any(_falls(a, b) for a, b in zip(mine, mine[1:])):
            out.append(f"{page}: the improvement does not grow with RTT ({' -> '.join(f'{x:.1%}' for x in imps)})")
    return out


def _falls(a: dict, b: dict) -> bool:
    """The improvement falls from row ``a`` to row ``b`` (a larger RTT) beyond b's 95 % CI (without
    one: at all)."""
    hi = b["improvement_ci"][1]
    return (hi if hi is not None else b["improvement"]) < a["improvement"]


def sections(analysis: dict) -> list[dict]:
    """The report's comparison with the paper: the improvements with their CIs, the published
    range, where ours departs from it and why results can differ."""
    rs = rows(analysis)
    lo, hi = PAPER["improvement_range"]
    ci = [
        [
            r["page"],
            f"{r['rtt_ms']:g}",
            "-" if r["improvement"] is None else f"{r['improvement']:.1%}",
            "-" if r["improvement"] is None else _ci(r),
            str(r["n"]),
        ]
        for r in rs
    ]
    return [
        table(f"TFO improvement with its {stats.INTERVAL}", ["page", "RTT ms", "improvement", stats.INTERVAL, "n"], ci),
        lines(
            f"Published: {PAPER['source']}",
            [f"improvements from {lo:.0%} to {hi:.0%}, {PAPER['trend']}"]
            + [f"measured in {condition(analysis)}"]
            + [f"difference: {d}" for d in differences(rs)]
            + [f"why results can differ: {w}" for w in paper_gaps.why(NAME)],
            bad=["difference: "],
        ),
    ]
