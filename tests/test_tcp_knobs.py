"""The knobs of 2011's TCP and the bursty loss knob, pure: parsing and one-line errors, what a
RunConfig hands the network (sysctls per namespace, the client route's initrwnd, the emulator's
Gilbert-Elliott parameters), and the backends that can and cannot run bursty loss."""

import sqlite3

import pytest

from pltlab import dataplane
from pltlab.errors import PltError
from pltlab.experiments import results
from pltlab.net import backends, netem
from pltlab.net.emulator import link_config
from pltlab.net.loss import gilbert
from pltlab.net.wan import LinkSpec, TcpKnobs, TopologySpec
from pltlab.run.config import RunConfig


def test_sysctl_knobs_write_the_kernel_values():
    # the values each sysctl takes on this kernel (Documentation/networking/ip-sysctl.rst)
    cfg = RunConfig(rack="off", tlp="off", ss_after_idle="off", sack="off", frto="off", wscale="off", timestamps="off")
    assert dict(cfg.tcp().sysctls) == {
        "net.ipv4.tcp_recovery": 0,
        "net.ipv4.tcp_early_retrans": 0,
        "net.ipv4.tcp_slow_start_after_idle": 0,
        "net.ipv4.tcp_sack": 0,
        "net.ipv4.tcp_frto": 0,
        "net.ipv4.tcp_window_scaling": 0,
        "net.ipv4.tcp_timestamps": 0,
    }
    # the defaults are this kernel's own defaults, written all the same (a run does not depend on
    # what a fresh namespace starts with)
    assert dict(RunConfig().tcp().sysctls) == {
        "net.ipv4.tcp_recovery": 1,
        "net.ipv4.tcp_early_retrans": 3,
        "net.ipv4.tcp_slow_start_after_idle": 1,
        "net.ipv4.tcp_sack": 1,
        "net.ipv4.tcp_frto": 2,
        "net.ipv4.tcp_window_scaling": 1,
        "net.ipv4.tcp_timestamps": 1,
    }
    assert RunConfig(rack=False).rack == "off"  # (a TOML boolean reads as on/off)


def test_sysctl_knobs_show_in_results_and_refuse_bad_values():
    cols = RunConfig(rack="off", initrwnd=4, loss="25%", loss_burst=4).columns()
    assert (cols["rack"], cols["tlp"], cols["initrwnd"], cols["loss_burst"]) == ("off", "on", 4, 4.0)
    assert RunConfig(protocol="h3").columns()["rack"] == "n/a"  # QUIC has its own loss recovery
    with pytest.raises(PltError, match=r"^invalid rack 'maybe': on or off$"):
        RunConfig(rack="maybe")
    with pytest.raises(PltError, match=r"^rack does not apply to protocol h3"):
        RunConfig(protocol="h3", rack="off")
    with pytest.raises(PltError, match="^invalid initrwnd 0"):
        RunConfig(initrwnd=0)
    with pytest.raises(PltError, match="not one pltlab sets"):
        TcpKnobs(sysctls=(("net.ipv4.ip_forward", 1),))


def test_initrwnd_goes_to_the_client_route():
    assert RunConfig(initrwnd=4).tcp().initrwnd == 4
    assert RunConfig().tcp().initrwnd is None  # the kernel's


def test_gilbert_parameters_from_loss_and_burst():
    # 25 % in bursts of 4: leave the bad state with 1/4 per packet; p / (p + 1/4) = 0.25 -> p = 1/12
    p, r = gilbert(0.25, 4)
    assert r == 0.25 and p == pytest.approx(1 / 12)
    assert gilbert(0.25, 1) is None and gilbert(0.0, 4) is None  # random loss, as before
    # 90 % in bursts of 2 cannot be: each burst of 2 is followed by at least one packet that passes
    with pytest.raises(PltError, match=r"^loss 0.9 in bursts of 2 packets: at most 0.6667"):
        gilbert(0.9, 2)


def test_loss_burst_knob_errors_are_one_line():
    for bad, msg in (
        (0.5, "invalid loss_burst 0.5: the mean length of a burst"),
        ("often", "invalid loss_burst 'often'"),
        (True, "invalid loss_burst True"),
        (5000, "invalid loss_burst 5000"),
    ):
        with pytest.raises(PltError, match=f"^{msg}") as e:
            RunConfig(loss_burst=bad)
        assert "\n" not in str(e.value)
    with pytest.raises(PltError, match=r"^x.toml: loss 0.9 in bursts of 2 packets"):
        RunConfig.from_knobs({"loss": "90%", "loss_burst": 2}, where="x.toml")
    with pytest.raises(PltError, match="invalid loss burst 0"):
        LinkSpec(loss_burst=0)


def _doc(link: LinkSpec) -> dict:
    cfg = link_config(
        TopologySpec(link=link), client_ns="c", server_ns="s", tun="t", origin_ips=["198.19.0.1"], stats=None
    )
    return dataplane.document(cfg)


def test_link_config_carries_gilbert_instead_of_random_loss():
    down = _doc(RunConfig(loss="20%", loss_burst=5).link())["downlink"]
    assert down["loss"] == 0.0
    assert down["gilbert"] == {"p": pytest.approx(0.05), "r": 0.2, "loss_good": 0.0, "loss_bad": 1.0}
    random = _doc(RunConfig(loss="20%").link())["downlink"]
    assert random["loss"] == 0.2 and "gilbert" not in random  # (the document as before)


def test_only_the_userspace_backend_runs_bursty_loss(monkeypatch):
    monkeypatch.setattr(netem, "_available", True)  # (a kernel with netem: refused all the same)
    bursty = TopologySpec(link=LinkSpec(loss_down=0.1, loss_burst=3), backend="netem")
    assert backends.needs(bursty) == ["bursty_loss"]
    assert backends.needs(TopologySpec(link=LinkSpec(loss_burst=3))) == []  # no loss: nothing bursty
    with pytest.raises(PltError, match="^bursty .Gilbert-Elliott. loss need the userspace backend, not netem"):
        backends.resolve(bursty, "ns")


def test_older_databases_say_what_their_runs_ran_with(tmp_path):
    """A results database from before these knobs gains their columns holding what its runs had:
    the kernel's defaults in fresh namespaces (every sysctl on), random loss, the kernel's initrwnd."""
    new = ("loss_burst", "initrwnd", "rack", "tlp", "ss_after_idle", "sack", "frto", "wscale", "timestamps")
    old = {k: v for k, v in results.RUN_COLUMNS.items() if k not in new}
    db = sqlite3.connect(tmp_path / results.DB_NAME)
    db.execute(f"CREATE TABLE runs (id INTEGER PRIMARY KEY, {', '.join(f'{k} {v}' for k, v in old.items())})")
    db.execute("INSERT INTO runs (run_key, attempt, status, icw) VALUES ('k', 1, 'ok', 10)")
    db.commit()
    db.close()
    res = results.Results(str(tmp_path))
    try:
        (row,) = res.rows()
    finally:
        res.close()
    assert [row[c] for c in new] == [1.0, None, "on", "on", "on", "on", "on", "on", "on"]
