"""The link-backend registry, pure: what each backend supports, `auto` resolution with and
without netem, refusals from declared capabilities in one line."""

import pytest

from pltlab.errors import PltError
from pltlab.net import backends, netem
from pltlab.net.wan import BACKENDS, LinkSpec, OriginOverride, TopologySpec


@pytest.fixture
def kernel(monkeypatch):
    """Set whether 'this kernel' has netem (its probe is cached in netem._available)."""
    return lambda has: monkeypatch.setattr(netem, "_available", has)


def test_choices_and_capabilities():
    assert BACKENDS == backends.CHOICES == ("auto", "netem", "userspace")
    assert backends.BY_NAME["userspace"].supports == set(backends.CAPABILITIES)
    assert backends.BY_NAME["netem"].supports == frozenset()
    with pytest.raises(PltError, match="unknown backend 'mininet'"):
        TopologySpec(backend="mininet")


def test_needs_follow_the_spec():
    assert backends.needs(TopologySpec()) == []
    spec = TopologySpec(
        origins=2,
        overrides=(OriginOverride(origin=1, rtt_us=1000),),
        link=LinkSpec(queue_bytes=3000, trace_up="/t"),
        pcap="/x.pcap",
    )
    assert backends.needs(spec) == ["overrides", "traces", "queue_bytes", "pcap"]


def test_auto_without_netem_is_userspace(kernel):
    kernel(False)
    assert backends.resolve(TopologySpec(), "ns").name == "userspace"
    assert backends.resolve(TopologySpec(pcap="/x.pcap"), "ns").name == "userspace"
    with pytest.raises(PltError, match=r"^--backend netem: this kernel has no netem qdisc \(use --backend userspace"):
        backends.resolve(TopologySpec(backend="netem"), "ns")


def test_auto_with_netem_prefers_it_unless_the_spec_needs_more(kernel):
    kernel(True)
    assert backends.resolve(TopologySpec(), "ns").name == "netem"
    assert backends.resolve(TopologySpec(link=LinkSpec(trace_down="/t")), "ns").name == "userspace"
    assert backends.resolve(TopologySpec(backend="userspace"), "ns").name == "userspace"


@pytest.mark.parametrize(
    "spec,message",
    [
        (
            TopologySpec(origins=2, overrides=(OriginOverride(origin=1, rtt_us=1000),), backend="netem"),
            "per-origin RTT overrides need the userspace backend, not netem",
        ),
        (TopologySpec(link=LinkSpec(queue_bytes=3000), backend="netem"), "queue limits in bytes need the userspace"),
        (TopologySpec(link=LinkSpec(trace_up="/t"), backend="netem"), "delivery traces need the userspace backend"),
        (TopologySpec(pcap="/x.pcap", backend="netem"), "pcaps of the link need the userspace backend"),
    ],
)
def test_netem_refuses_what_it_does_not_support(kernel, spec, message):
    kernel(True)
    with pytest.raises(PltError, match=message) as e:
        backends.resolve(spec, "ns")
    assert "\n" not in str(e.value)
