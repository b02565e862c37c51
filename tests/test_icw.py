"""ICW study (`reproduce icw`): the Yahoo-like page, PLT from a packet trace, the runners."""

import json
import os

import pytest
import typer
from typer.testing import CliRunner

from pltlab.errors import PltError
from pltlab.studies.icw import check_icw, yahoo_page
from pltlab.cli.studies import icw_command
from pltlab.run.pcaptrace import (ACK, FIN, SYN, ipv4_tcp, plt_from_pcap, read_pcap,
                                              trace_plt, write_pcap)
from pltlab.studies.icw.stats import bootstrap_ci, geomean

C, S1, S2 = "198.18.0.1", "198.19.0.1", "198.19.0.2"
PSH = 0x08


def _app() -> typer.Typer:
    app = typer.Typer()
    icw_command(app)

    @app.command()
    def other():  # a second command, so `icw` stays a subcommand (as under `reproduce`)
        pass

    return app


# ---- the page ---------------------------------------------------------------------------
def test_yahoo_page_shape():
    p = yahoo_page()
    assert len(p.objects) == 30
    hosts = [o.host for o in p.objects]
    assert len(set(hosts)) == 2 and hosts.count(hosts[0]) == 15
    assert all(o.initiator == p.url for o in p.objects[1:])  # all discovered from the HTML
    assert 300_000 < sum(o.size for o in p.objects) < 450_000


# ---- PLT from a synthetic trace -----------------------------------------------------------
def test_trace_plt_synthetic(tmp_path):
    """Two connections; the answer is known: first SYN at 10.000, final ACK of the last object
    (on connection 2, whose server sequence numbers wrap around 2**32) at 10.410."""
    isn1, isn2 = 1000, 2**32 - 700  # connection 2 wraps
    pk = []
    # connection 1: port 40001 -> S1:80, 1500 response bytes
    pk += [(10.000, ipv4_tcp(C, S1, 40001, 80, 5, 0, SYN)),
           (10.100, ipv4_tcp(S1, C, 80, 40001, isn1, 6, SYN | ACK)),
           (10.100, ipv4_tcp(C, S1, 40001, 80, 6, isn1 + 1, ACK)),
           (10.101, ipv4_tcp(C, S1, 40001, 80, 6, isn1 + 1, ACK | PSH, 100)),
           (10.200, ipv4_tcp(S1, C, 80, 40001, isn1 + 1, 106, ACK, 1000)),
           (10.201, ipv4_tcp(C, S1, 40001, 80, 106, isn1 + 1001, ACK)),
           (10.250, ipv4_tcp(S1, C, 80, 40001, isn1 + 1001, 106, ACK | PSH, 500)),
           (10.260, ipv4_tcp(C, S1, 40001, 80, 106, isn1 + 1501, ACK))]
    # connection 2: port 40002 -> S2:80, opened later, 3000 bytes, the last segment arrives 10.400
    pk += [(10.050, ipv4_tcp(C, S2, 40002, 80, 77, 0, SYN)),
           (10.150, ipv4_tcp(S2, C, 80, 40002, isn2, 78, SYN | ACK)),
           (10.150, ipv4_tcp(C, S2, 40002, 80, 78, isn2 + 1, ACK | PSH, 90)),
           (10.250, ipv4_tcp(S2, C, 80, 40002, isn2 + 1, 168, ACK, 1448)),
           (10.300, ipv4_tcp(S2, C, 80, 40002, isn2 + 1449, 168, ACK, 1448)),
           (10.301, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 1449, ACK)),  # partial ACK
           (10.400, ipv4_tcp(S2, C, 80, 40002, isn2 + 2897, 168, ACK | PSH, 104)),
           (10.410, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK)),  # the final ACK
           # after the load: a spurious retransmission and its duplicate ACK, FINs
           (10.600, ipv4_tcp(S2, C, 80, 40002, isn2 + 2897, 168, ACK | PSH, 104)),
           (10.601, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK)),
           (10.700, ipv4_tcp(C, S2, 40002, 80, 168, isn2 + 3001, ACK | FIN)),
           (10.800, ipv4_tcp(S2, C, 80, 40002, isn2 + 3001, 169, ACK | FIN))]
    # unrelated traffic on another port is ignored
    pk += [(10.900, ipv4_tcp(C, S1, 40003, 9000, 1, 0, SYN)),
           (11.000, ipv4_tcp(S1, C, 9000, 40003, 9, 2, SYN | ACK)),
           (11.100, ipv4_tcp(S1, C, 9000, 40003, 10, 2, ACK, 1000)),
           (11.200, ipv4_tcp(C, S1, 40003, 9000, 2, 1010, ACK))]
    pk.sort(key=lambda x: x[0])
    path = str(tmp_path / "t.pcap")
    write_pcap(path, pk)
    segs = read_pcap(path)
    assert len(segs) == len(pk)
    r = plt_from_pcap(path)
    assert r["plt_ms"] == pytest.approx(410.0, abs=0.01)
    assert r["connections"] == 2 and r["unacked"] == 0
    assert trace_plt(segs, client_ip=None)["plt_ms"] == pytest.approx(410.0, abs=0.01)
    # without the final ACKs, each connection ends at its last data segment
    no_ack = [s for s in segs if not (s.src == C and round(s.t, 3) in (10.410, 10.601, 10.700))]
    r2 = trace_plt(no_ack, C)
    assert r2["unacked"] == 1 and r2["plt_ms"] == pytest.approx(400.0, abs=0.01)


def test_read_pcap_rejects_other_files(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_bytes(b"not a pcap at all, but long enough")
    with pytest.raises(PltError, match="not a pcap"):
        read_pcap(str(p))


def test_stats_helpers():
    assert geomean([1, 100]) == pytest.approx(10)
    lo, hi = bootstrap_ci([10, 11, 12, 13, 30])
    assert lo <= geomean([10, 11, 12, 13, 30]) <= hi
    assert bootstrap_ci([5.0]) == pytest.approx((5.0, 5.0))


# ---- bad ICW ----------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [0, 1000])
def test_bad_icw_is_one_clear_error(bad, tmp_path):
    with pytest.raises(PltError, match=f"invalid ICW {bad}"):
        check_icw(bad)
    r = CliRunner().invoke(_app(), ["icw", "--quick", "--icw", "1", "--icw", str(bad),
                                    "--out", str(tmp_path / "o")])
    assert r.exit_code == 2
    lines = r.stderr.strip().splitlines()
    assert lines == [f"pltlab: error: invalid ICW {bad}: must be an integer from 1 to 256 segments"]
    assert not os.path.exists(tmp_path / "o")  # refused before running anything


# ---- end to end -------------------------------------------------------------------------
@pytest.mark.slow
def test_mini_study_end_to_end(tmp_path):
    """Two ICWs x two RTTs (and two loss rates), 1 load per point, through the CLI with --json."""
    out = tmp_path / "icw"
    r = CliRunner().invoke(_app(), ["icw", "--json", "--out", str(out), "--reps", "1",
                                    "--icw", "1", "--icw", "16", "--rtt", "20", "--rtt", "60",
                                    "--loss", "0", "--loss", "5", "--only", "rtt", "--only", "loss"])
    assert r.exit_code == 0, r.stderr
    res = json.loads(r.stdout.strip().splitlines()[-1])
    assert set(res) >= {"plt_vs_rtt", "plt_vs_loss", "transfer_rtts", "fairness", "output_dir"}
    assert res["output_dir"] == str(out)
    pts = {(p["icw"], p["rtt_ms"]): p for p in res["plt_vs_rtt"]}
    assert set(pts) == {(1, 20), (16, 20), (1, 60), (16, 60)}
    for rtt in (20, 60):
        assert pts[(16, rtt)]["plt_ms"] < pts[(1, rtt)]["plt_ms"]
        assert len(pts[(1, rtt)]["ci"]) == 2
    # the saving of a larger ICW grows with the RTT
    assert pts[(1, 60)]["plt_ms"] - pts[(16, 60)]["plt_ms"] > pts[(1, 20)]["plt_ms"] - pts[(16, 20)]["plt_ms"]
    assert {(p["icw"], p["loss"]) for p in res["plt_vs_loss"]} == {(1, 0), (16, 0), (1, 0.05), (16, 0.05)}
    ck = res["checks"]
    assert ck["trace_vs_loader"]["ok"], ck
    assert ck["fig19_monotone"]["ok"] and ck["fig19_savings_grow"]["ok"], ck
    full = json.loads((out / "results.json").read_text())
    for p in full["plt_vs_rtt"]:  # both PLTs stored per load; they agree within 1 RTT
        assert len(p["plt_runs_ms"]) == len(p["loader_runs_ms"]) == 1
        assert abs(p["plt_runs_ms"][0] - p["loader_runs_ms"][0]) <= p["rtt_ms"]
    for name in ("fig19_plt_vs_rtt", "fig20_plt_vs_loss"):
        for ext in ("png", "svg"):
            assert (out / f"{name}.{ext}").stat().st_size > 1000
    assert "PLT vs RTT" in (out / "tables.md").read_text()


@pytest.mark.slow
def test_transfer_times_short():
    from pltlab.studies.icw.study import transfer_times

    xs = transfer_times(pages=("google",), icws=(1, 32), rtts=(20,))
    assert set(xs) == {1, 32} and all(len(v) >= 5 for v in xs.values())
    assert all(x >= 0.9 for v in xs.values() for x in v)  # at least one RTT each
    assert sum(xs[32]) < sum(xs[1])


@pytest.mark.slow
def test_fairness_10s():
    from pltlab.studies.icw.study import fairness

    r = fairness(icw=32, seconds=10)
    assert r["icw"] == 32 and r["seconds"] == 10
    assert r["long_kbyte_s"] > 0 and r["short_kbyte_s"] > 0 and r["short_downloads"] >= 1
    assert r["ratio_ci"][0] <= r["ratio"] <= r["ratio_ci"][1]
    assert r["downlink_dropped"] > 0  # the 25 % loss was there


def test_a_failing_load_is_retried_then_left_out_not_fatal(monkeypatch):
    """One load that keeps failing costs its point one sample, not the whole study."""
    from pltlab.errors import PltError
    from pltlab.studies.icw import report, study

    attempts = []

    def fake(page, cfg, rep):
        attempts.append((cfg.icw, rep))
        if rep == 2 and cfg.icw == 3:
            raise PltError("load timed out")
        return {"trace_plt_ms": 100.0 * rep, "loader_plt_ms": 100.0 * rep,
                "trace": {"connections": 2, "unacked": 0}, "requests": []}

    monkeypatch.setattr(study, "traced_load", fake)
    events = []
    pts = study.plt_vs_rtt(None, rtts=(50,), icws=(1, 3), reps=3, on_event=events.append)
    assert attempts.count((3, 2)) == 2  # retried once
    by = {p["icw"]: p for p in pts}
    assert by[1]["n"] == 3 and by[1]["failed_loads"] == []
    assert by[3]["n"] == 2 and by[3]["failed_loads"] == [{"rep": 2, "seed": 1, "error": "load timed out"}]
    assert [e["attempt"] for e in events if "error" in e] == [1, 2]
    chk = report.checks({"plt_vs_rtt": pts})["all_loads_done"]
    assert not chk["ok"] and chk["failed"] == [{"fig": "plt_vs_rtt", "icw": 3, "rtt_ms": 50, "reps": 2}]
    monkeypatch.setattr(study, "traced_load", lambda *a: (_ for _ in ()).throw(PltError("down")))
    with pytest.raises(PltError, match="every load failed"):
        study.plt_vs_rtt(None, rtts=(50,), icws=(1,), reps=1)
