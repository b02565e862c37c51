"""Debian's headless Chromium driven through Playwright + CDP (recorder and page loader)."""

from pltlab.loaders.browser.collect import Request
from pltlab.loaders.browser.flags import find_executable, parse_host_rules, spki_hash
from pltlab.loaders.browser.headless import Chromium, LoadResult, load

__all__ = ["Chromium", "LoadResult", "Request", "load", "find_executable", "parse_host_rules", "spki_hash"]
