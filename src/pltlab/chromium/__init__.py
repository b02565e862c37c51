"""Debian's headless Chromium driven through Playwright + CDP (recorder and page loader)."""

from pltlab.chromium.collect import Request
from pltlab.chromium.driver import Chromium, LoadResult, load
from pltlab.chromium.flags import find_executable, parse_host_rules, spki_hash

__all__ = ["Chromium", "LoadResult", "Request", "load", "find_executable", "parse_host_rules",
           "spki_hash"]
