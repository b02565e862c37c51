"""pltlab: a page-load-time lab for TCP latency features over emulated WANs."""

__version__ = "0.1.0"
