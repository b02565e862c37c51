"""The 2011 set-ups as presets, pure: a preset is a plain combination of knobs, --knob overrides
one, the studies' experiments carry them, bad values are refused in one line, and today's
experiments are what they were (same digests, so older results folders still resume)."""

import pytest

from pltlab.errors import PltError
from pltlab.run import knobs
from pltlab.studies import presets, tfo
from pltlab.studies.icw import parts
from pltlab.studies.icw import study_file as icw


def test_every_preset_is_a_valid_combination_of_knobs_with_sources():
    for p in presets.PRESETS.values():
        assert p.knobs and all(why for _, why in p.knobs.values()), p.name
        knobs.parse({k: v for k, (v, _) in p.knobs.items()}, where=p.name)  # raises if not


def test_paper2011_expands_to_2_6_34s_tcp():
    v = presets.values("paper2011")
    # Linux 2.6.34 had neither RACK (4.4) nor tail loss probes (3.10); cubic was its default
    assert (v["rack"], v["tlp"], v["cc"], v["icw"]) == ("off", "off", "cubic", 10)
    point, exp = presets.split(v)
    assert point["rack"] == "off" and point["icw"] == 10
    assert exp == {"client_rmem": 87380, "max_conns_per_host": 6}


def test_knob_overrides_the_preset_and_is_checked():
    assert presets.values("paper2011", ["rack=on", "icw=3"])["rack"] == "on"
    assert presets.values("paper2011", ["icw=3"])["icw"] == 3
    assert presets.values(None, ["loss_burst=4"]) == {"loss_burst": 4}
    for item, msg in (
        ("rack", r"^invalid --knob 'rack': NAME=VALUE"),
        ("rack=maybe", r"^set-up paper2011: invalid rack 'maybe': on or off$"),
        ("nope=1", r"^invalid --knob 'nope=1': 'nope' is not a knob a set-up sets"),
        ("tfo=on", r"^invalid --knob 'tfo=on': 'tfo' is not a knob"),
    ):
        with pytest.raises(PltError, match=msg):
            presets.values("paper2011", [item])
    with pytest.raises(PltError, match=r"^--knob rack given twice$"):
        presets.values("paper2011", ["rack=on", "rack=off"])
    with pytest.raises(PltError, match=r"^unknown set-up 'paper1999' \(choose from today, paper2011, 2011\)$"):
        presets.values("paper1999")


def test_tfo_setup_paper2011():
    exp = tfo.experiment(**tfo.options({"quick": True, "setup": "paper2011", "knob": ["tlp=on"]}))
    assert {(c.rack, c.tlp, c.icw, c.cc) for c in exp.configs} == {("off", "on", 10, "cubic")}
    assert (exp.client_rmem, exp.max_conns_per_host) == (87380, 6)
    assert 'rack = "off"' in exp.source and 'tlp = "on"' in exp.source and "--setup paper2011" in exp.source
    rc = exp.run_config(0)
    assert dict(rc.tcp().sysctls)["net.ipv4.tcp_recovery"] == 0 and rc.client_rmem == 87380
    with pytest.raises(PltError, match=r"^invalid --knob 'rtt=50ms': the study sets rtt itself"):
        tfo.options({"knob": ["rtt=50ms"]})
    with pytest.raises(PltError, match=r"^invalid --setup '2011': today or paper2011$"):
        tfo.options({"setup": "2011"})


def test_tfo_today_is_the_experiment_it_was():
    plain = tfo.experiment(**tfo.options({"quick": True}))
    today = tfo.experiment(**tfo.options({"quick": True, "setup": "today"}))
    assert today.digest() == plain.digest() and today.source == plain.source
    assert "setup" not in tfo.options({"quick": True, "setup": "today"})  # (study.json as before)
    # a set-up is another experiment: a resume with another set-up is refused
    assert tfo.experiment(**tfo.options({"quick": True, "setup": "paper2011"})).digest() != plain.digest()


def test_icw_stack_2011_and_knob():
    p = icw.options({"quick": True, "stack": "2011", "knob": ["loss_burst=4"]})
    exps = dict(parts.experiments(p))
    fair = exps["fairness"]
    c = fair.configs[0]
    assert (c.rack, c.tlp, c.wscale, c.timestamps, c.loss_burst, c.loss) == ("off", "off", "off", "off", 4.0, 0.25)
    assert [c.icw for c in fair.configs] == list(p.fairness_icws)  # ICW per experiment: the study's own
    link = fair.run_config(0).link()
    assert link.loss_burst == 4.0
    assert all(e.client_rmem is None for e in exps.values())  # the 2011 clients' kernel buffer, as before
    assert "loss_burst = 4" in fair.source
    # the study's --cc is its own: the stack's cubic does not override it
    p = icw.options({"quick": True, "stack": "2011", "cc": "reno"})
    assert {c.cc for _, e in parts.experiments(p) for c in e.configs} == {"reno"}


def test_icw_stack_errors_are_one_line():
    for given, msg in (
        ({"stack": "1999"}, r"^unknown stack '1999' \(choose from today, 2011\)$"),
        ({"knob": ["icw=3"]}, r"^invalid --knob 'icw=3': the study sets icw itself"),
        ({"knob": ["cc=reno"]}, r"^invalid --knob 'cc=reno': the study sets cc itself"),
        # 60 % loss cannot come in bursts of 1.2 packets on average (at most 1.2 / 2.2 of packets)
        ({"loss": [60], "knob": ["loss_burst=1.2"]}, r"^loss 0.6 in bursts of 1.2 packets: at most 0.5455"),
    ):
        with pytest.raises(PltError, match=msg) as e:
            parts.experiments(icw.options({"quick": True, **given}))
        assert "\n" not in str(e.value)


def test_icw_today_is_the_study_it_was():
    plain = parts.experiments(icw.options({"quick": True}))
    today = parts.experiments(icw.options({"quick": True, "stack": "today"}))
    assert [e.digest() for _, e in today] == [e.digest() for _, e in plain]
    assert [e.source for _, e in today] == [e.source for _, e in plain]


def test_icw_file_keys(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[icw]\nstack = "2011"\nknobs = ["rack=on"]\n')
    p = icw.options({"config": str(f)})
    assert p.stack == "2011" and p.setup()["rack"] == "on"
    f.write_text('[icw]\nknobs = ["rack=sometimes"]\n')
    with pytest.raises(PltError, match=r"key 'icw.knobs': --knob: invalid rack 'sometimes'"):
        icw.options({"config": str(f)})
