import pytest

from pltlab import units
from pltlab.errors import PltError
from pltlab.net import names
from pltlab.net.wan import LinkSpec, TcpKnobs, TopologySpec


@pytest.mark.parametrize(
    "text,us", [("100ms", 100_000), ("250us", 250), ("1.5s", 1_500_000), ("20", 20_000), (0, 0), ("0ms", 0)]
)
def test_durations(text, us):
    assert units.duration_us(text) == us


@pytest.mark.parametrize(
    "text,bps", [("4mbit", 4_000_000), ("256kbit", 256_000), ("1gbit", 10**9), ("4Mbps", 4_000_000), ("2.5", 2_500_000)]
)
def test_rates(text, bps):
    assert units.rate_bps(text) == bps


def test_unlimited_rate():
    assert units.rate_bps(None) is None and units.rate_bps("unlimited") is None


@pytest.mark.parametrize("text,frac", [("1%", 0.01), ("0.05", 0.05), ("100%", 1.0), (0, 0.0)])
def test_loss(text, frac):
    assert units.loss_fraction(text) == pytest.approx(frac)


@pytest.mark.parametrize(
    "call,msg",
    [
        (lambda: units.duration_us("-5ms", "rtt"), "must not be negative"),
        (lambda: units.duration_us("5 parsecs", "rtt"), "unknown unit"),
        (lambda: units.loss_fraction("101%"), "between 0 and 100%"),
        (lambda: units.loss_fraction("1.5"), "between 0 and 100%"),
        (lambda: units.rate_bps("0mbit"), "must be positive"),
        (lambda: units.rate_bps("fast"), "invalid rate"),
        (lambda: TcpKnobs(cc="vegas"), "unknown congestion control"),
        (lambda: TcpKnobs(initcwnd=0), "1 to 1024"),
        (lambda: TcpKnobs(mtu=100), "mtu"),
        (lambda: TopologySpec(origins=0), "origins"),
        (lambda: TopologySpec(backend="mininet"), "unknown backend"),
    ],
)
def test_bad_values_raise_clear_errors(call, msg):
    with pytest.raises(PltError, match=msg):
        call()


def test_link_spec_splits_rtt_and_defaults():
    spec = LinkSpec.build(rtt="101ms", rate="4mbit", rate_up="256kbit", loss="1%")
    assert spec.delay_up_us + spec.delay_down_us == 101_000
    assert (spec.rate_down_bps, spec.rate_up_bps) == (4_000_000, 256_000)
    assert spec.loss_up == spec.loss_down == pytest.approx(0.01)
    assert spec.queue_packets == 1000
    assert LinkSpec.build(queue="64KB").queue_bytes == 64_000


def test_names_carry_run_prefix_and_fit_ifnamsiz():
    rid = names.new_run_id()
    for n in (names.client_ns(rid), names.server_ns(rid), names.tun_name(rid), names.veth_name(rid, 999)):
        assert n.startswith(f"plt-{rid}-") and names.run_id_of(n) == rid
    assert len(names.veth_name(rid, 999)) <= 15 and len(names.tun_name(rid)) <= 15
    assert names.run_id_of("plt-zzzzzz-c") is None and names.run_id_of("other") is None


def test_origin_addresses_are_unique_and_in_benchmark_range():
    ips = [names.origin_ip(i) for i in range(600)]
    assert len(set(ips)) == 600
    assert all(ip.startswith("198.19.") and not ip.endswith((".0", ".255")) for ip in ips)
