"""Shared paths for the archive tests (the real corpus lives next to the repository)."""

import os
import shutil

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED = os.path.join(os.path.dirname(ROOT), "shared", "corpus")
CS244 = os.path.join(SHARED, "cs244-2013")
HARS = os.path.join(SHARED, "har")

needs_cs244 = pytest.mark.skipif(not os.path.isdir(CS244), reason=f"{CS244} absent")
needs_hars = pytest.mark.skipif(not os.path.isdir(HARS), reason=f"{HARS} absent")


def copy_writable(src: str, dst) -> None:
    """Copy a file or folder of the corpus (read-only) so that a test may change the copy, as any
    user: copies do not keep the corpus's modes (as root the modes would not matter)."""
    if not os.path.isdir(src):
        shutil.copyfile(src, dst)
        return
    shutil.copytree(src, dst, copy_function=shutil.copyfile)
    for folder, _, _ in os.walk(dst):
        os.chmod(folder, 0o755)
