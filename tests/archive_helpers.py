"""Shared paths for the archive tests (the real corpus lives next to the repository)."""

import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
CS244 = os.path.join(SHARED, "cs244-2013")
HARS = os.path.join(SHARED, "har")

needs_cs244 = pytest.mark.skipif(not os.path.isdir(CS244), reason=f"{CS244} absent")
needs_hars = pytest.mark.skipif(not os.path.isdir(HARS), reason=f"{HARS} absent")
