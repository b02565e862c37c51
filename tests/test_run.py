"""`pltlab run`: replay servers + built-in loader over the emulated link, TFO proven per load."""

import json
import threading

import pytest

from pltlab.archive.generate import generate
from pltlab.archive.har import write_page
from pltlab.archive.model import Obj
from pltlab.errors import PltError
from pltlab.run.point import Point
from pltlab.run.runner import PageRunner, RunConfig, run_page
from tests.conftest import leaked, pltlab_cmd, project_state


def chain(n: int, scheme: str = "http"):
    """1 origin, n objects each discovered by the previous one: PLT = (n + 1) RTT, TFO: n RTT."""
    return generate(objects=n, total_bytes=n * 2000, origins=1, depth=n - 1, seed=3, scheme=scheme)


@pytest.mark.root
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_sequential_page_matches_analytic_plt_and_tfo_saves_one_rtt(scheme):
    runs = run_page(chain(4, scheme), RunConfig(rtt="50ms", reps=1))
    by = {r["tfo"]: r for r in runs}
    assert all(r["valid"] for r in runs), [r["invalid_reason"] for r in runs]
    tls_rtts = 1 if scheme == "https" else 0  # TLS 1.3 handshake: one more round trip
    assert by[False]["plt_ms"] == pytest.approx((5 + tls_rtts) * 50, rel=0.05, abs=5)
    assert by[True]["plt_ms"] == pytest.approx((4 + tls_rtts) * 50, rel=0.05, abs=5)
    assert by[True]["tfo_counters"]["client"]["TCPFastOpenActive"] == 1
    assert by[True]["tfo_counters"]["server"]["TCPFastOpenPassive"] == 1
    assert by[False]["tfo_counters"]["client"]["TCPFastOpenActive"] == 0
    reqs = by[True]["requests"]
    assert [r["status"] for r in reqs] == [200] * 4 and len({r["conn_id"] for r in reqs}) == 1
    assert sum(r["new_conn"] for r in reqs) == 1 and reqs[0]["tfo"]
    # what the replay server saw: one SYN-data connection; over https rustls' ClientHello fits
    srv = by[True]["server_tfo"]
    assert srv["tfo_connections"] == 1 and srv["tfo_tls_connections"] == (scheme == "https")
    assert srv["tfo_tls_hello_split"] == 0 and by[True]["tfo_note"] is None
    assert by[False]["server_tfo"]["tfo_connections"] == 0


@pytest.mark.root
def test_emulator_lateness_is_recorded_per_load():
    runs = run_page(chain(3), RunConfig(rtt="20ms", reps=2, tfo_modes=(False,)))
    counts = [r["emulator_lateness_us"]["parts"]["downlink_lateness"]["count"] for r in runs]
    # each load's own downlink packets (the interval restarts per load), not a running total
    assert all(c > 3 for c in counts) and abs(counts[1] - counts[0]) <= 0.2 * counts[0], counts
    assert all(0 <= r["emulator_lateness_us"]["p50"] <= r["emulator_lateness_us"]["max"] for r in runs)


@pytest.mark.root
def test_connection_limit_keepalive_and_dependency_order():
    page = generate(objects=31, total_bytes=31 * 3000, origins=1, depth=1, seed=5)
    runs = run_page(page, RunConfig(rtt="20ms", reps=1, tfo_modes=(False,)))
    reqs = runs[0]["requests"]
    conns = {r["conn_id"] for r in reqs}
    assert len(conns) <= 6 and sum(r["new_conn"] for r in reqs) == len(conns)
    assert len(reqs) == 31 and all(r["status"] == 200 for r in reqs)
    main_done = reqs[0]["last_byte_ms"]
    assert all(r["request_ms"] >= main_done for r in reqs[1:])  # children after their parent


@pytest.mark.root
def test_unknown_url_is_a_counted_404():
    page = chain(2)
    with PageRunner(page, RunConfig(rtt="10ms")) as pr:
        extra = Obj(
            url=page.objects[0].url + "missing.js",
            mime="application/javascript",
            size=10,
            initiator=page.objects[0].url,
        )
        pr.page.objects.append(extra)  # requested by the loader, absent from the replay
        r = pr.load(Point(), 1)
        stats = pr.replay.stop()
    assert r["not_found"] == 1
    assert stats["not_found"]["count"] == 1 if isinstance(stats.get("not_found"), dict) else stats


@pytest.mark.root
def test_server_killed_mid_load_fails_clearly_and_tears_down():
    before = project_state()
    page = chain(8)
    with pytest.raises(PltError, match="page load failed"):
        with PageRunner(page, RunConfig(rtt="200ms")) as pr:
            threading.Timer(0.5, pr.replay.proc.kill).start()
            pr.load(Point(), 1)
    assert not leaked(before)


@pytest.mark.root
def test_cli_run_json(tmp_path):
    har = tmp_path / "chain.har"
    write_page(chain(3), str(har))
    cp = pltlab_cmd("run", str(har), "--rtt", "40ms", "--reps", "2", "--json", timeout=120)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    assert len(res["runs"]) == 4 and res["invalid_runs"] == 0
    for r in res["runs"]:
        for key in (
            "page",
            "rtt_ms",
            "rate_mbit",
            "loss",
            "tfo",
            "icw",
            "cc",
            "client",
            "rep",
            "plt_ms",
            "valid",
            "invalid_reason",
            "tfo_counters",
            "requests",
        ):
            assert key in r
    s = {x["tfo"]: x for x in res["summary"]}
    assert s[False]["n"] == 2 and s[True]["n"] == 2
    assert s[False]["median_ms"] - s[True]["median_ms"] == pytest.approx(40, abs=4)
    assert "Experiment 1" in cp.stderr and "took" in cp.stderr


def test_cli_run_bad_input_is_one_line():
    cp = pltlab_cmd("run", "/nonexistent.har", "--rtt", "10ms")
    assert cp.returncode != 0 and cp.stderr.strip().count("\n") == 0 and "pltlab: error:" in cp.stderr
    cp = pltlab_cmd("run", "nytimes", "--tfo", "maybe")
    assert cp.returncode != 0 and "invalid --tfo" in cp.stderr
