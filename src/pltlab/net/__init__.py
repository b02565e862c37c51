"""Emulated WAN: network namespaces, the link between them, and per-namespace TCP knobs."""

from pltlab.net.spec import LinkSpec, OriginOverride, TcpKnobs, TopologySpec
from pltlab.net.topology import Topology

__all__ = ["LinkSpec", "OriginOverride", "TcpKnobs", "TopologySpec", "Topology"]
