"""`pltlab check --json`: one JSON object with the environment and the link's fidelity."""

import json

import pytest

from tests.conftest import pltlab_cmd

# ~30 s (`pltlab check --quick`: 3 RTTs, rate and loss): CI's test-slow step; the cluster tests run it too
pytestmark = [pytest.mark.root, pytest.mark.slow]


def test_check_json_reports_environment_and_fidelity():
    cp = pltlab_cmd("check", "--quick", "--json", timeout=300)
    assert cp.returncode == 0, cp.stderr
    res = json.loads(cp.stdout)
    env = res["env"]
    assert env["tun"] is True and env["netem"] in (True, False) and "cubic" in env["cc_available"]
    assert env["tcp_fastopen_new_netns"] == "1" and env["dataplane"]
    assert [r["configured_ms"] for r in res["rtt"]] == [20, 100, 200]
    for r in res["rtt"]:
        assert r["samples"] == 50
        assert 0 <= r["p50_err_ms"] < 1.0 and r["p99_err_ms"] >= r["p50_err_ms"]
        # the application's RTT adds the endpoints' wake-ups to the link's
        assert r["app_p50_err_ms"] >= r["p50_err_ms"]
        # stalls (samples the emulator's logged delays explain) are counted and set apart
        assert 0 <= r["stalls"] <= r["samples"] and r["flows"] >= 1
        assert r["p99_err_without_stalls_ms"] <= r["max_err_ms"]
        assert r["emulator_lateness"]["late_event_us"] == 50
    assert res["rate"]["configured_mbit"] == 4
    assert abs(res["rate"]["error"]) < 0.03
    assert res["loss"]["configured"] == 0.05 and abs(res["loss"]["measured"] - 0.05) < 0.01
    assert res["throughput_gbit"] > 0.5
    assert "stall_rule" in res and res["sched_fifo"] in (True, False)
    assert res["verdict"] in ("ok", "degraded") and (res["verdict"] == "ok") == (not res["problems"])
