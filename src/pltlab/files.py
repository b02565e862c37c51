"""Files written whole or not at all: a temporary file next to the target, renamed over it."""

import contextlib
import os
from collections.abc import Iterator


@contextlib.contextmanager
def replaced(path: str, suffix: str = ".tmp") -> Iterator[str]:
    """A temporary path next to ``path`` to write; leaving without an error renames it over
    ``path`` (readers see the old file or the whole new one), an error removes it."""
    tmp = path + suffix
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_text(path: str, text: str, encoding: str | None = None) -> None:
    """``text`` into ``path``, whole or not at all."""
    with replaced(path) as tmp, open(tmp, "w", encoding=encoding) as f:
        f.write(text)
