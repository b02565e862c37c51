"""Pausing Python's cyclic garbage collector while a step builds many objects at once.

A 20,000-object page is a few million containers (its HAR as JSON data, the Objs, the plan or
manifest documents): every few thousand new containers the collector runs, and its full
collections walk all of them, which made the import and the manifest of such a page take about a
third longer (benches/bench_scale.py). Nothing these steps build is a cycle that must be freed
meanwhile; the collector runs again as usual afterwards."""

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside; nested uses and an already disabled collector are left
    as they were (only the outermost use that disabled it enables it again)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
