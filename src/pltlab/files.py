"""Files written whole or not at all: a temporary file next to the target, renamed over it."""

import contextlib
import errno
import os
from collections.abc import Iterator

from pltlab.errors import PltError

NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


def no_space(e: BaseException) -> bool:
    """An OSError that says the file system (or the user's quota) is full."""
    return isinstance(e, OSError) and e.errno in NO_SPACE


def no_space_error(path: str, what: str = "") -> PltError:
    """The one line for a file that could not be written for want of space."""
    return PltError(
        f"{path}: disk full: could not write {what or 'this file'} (no space left on its file system); "
        "the earlier file, if any, is kept: free space and run the command again"
    )


@contextlib.contextmanager
def replaced(path: str, suffix: str = ".tmp") -> Iterator[str]:
    """A temporary path next to ``path`` to write; leaving without an error renames it over
    ``path`` (readers see the old file or the whole new one), an error removes it; a full disk is
    a PltError naming ``path``."""
    tmp = path + suffix
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if no_space(e):
            raise no_space_error(path) from None
        raise


def write_text(path: str, text: str, encoding: str | None = None) -> None:
    """``text`` into ``path``, whole or not at all."""
    with replaced(path) as tmp, open(tmp, "w", encoding=encoding) as f:
        f.write(text)
