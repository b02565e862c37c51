"""Progress displays of `pltlab run`, `pltlab report`, `calibrate` and `record`: on stderr, drawn only when stderr is a
terminal (rich draws nothing into a pipe or file), and never touching stdout: what a command
prints there (tables, --json) stays as it is."""

from __future__ import annotations

import contextlib
import sys

from rich.console import Console
from rich.progress import Progress

from pltlab.experiments.progress_columns import bar_columns


def stderr_console() -> Console:
    return Console(stderr=True)


def _bar(err: Console) -> Progress:
    """The shared bar on ``err``: gone when done, drawn only on a terminal."""
    return Progress(
        *bar_columns(),
        console=err,
        transient=True,
        redirect_stdout=False,  # stdout is the command's (tables, JSON)
        redirect_stderr=False,
        disable=not err.is_terminal,
    )


class _Bar:
    """One task's bar on stderr, started and stopped as a context."""

    def __init__(self, what: str, total: int | None):
        self.err = stderr_console()
        self.prog = _bar(self.err)
        self.task = self.prog.add_task(what, total=total)

    def __enter__(self):
        self.prog.start()
        return self

    def __exit__(self, *exc):
        self.prog.stop()
        return False


class LoadProgress(_Bar):
    """A bar of one page's loads (reset per page) with the pages done so far. ``lines``: the
    console for the per-load lines: the bar's own when they are meant for the terminal the bar
    is drawn on (drawn above it), else ``fallback`` (stdout into a pipe or file)."""

    def __init__(self, loads_per_page: int, fallback: Console, json_mode: bool = False):
        super().__init__("loads", loads_per_page)
        self.total = loads_per_page
        self.pages = 0
        # lines for the terminal the bar is on are printed by the bar's console (above the bar)
        shared = self.err.is_terminal and (json_mode or sys.stdout.isatty())
        self.lines = self.err if shared else fallback

    def load_done(self, page: str) -> None:
        self.prog.update(self.task, advance=1, description=f"{page} (pages done: {self.pages})")

    def page_done(self) -> None:
        self.pages += 1
        self.prog.reset(self.task, total=self.total, description=f"pages done: {self.pages}")


@contextlib.contextmanager
def working(what: str):
    """A spinner with ``what`` on stderr while a step runs (nothing when stderr is no terminal)."""
    err = stderr_console()
    if not err.is_terminal:
        yield
        return
    with err.status(what):
        yield


class Steps(_Bar):
    """A bar of ``total`` steps (set later with ``total()`` when not known yet) with elapsed time
    and ETA; ``lines`` prints above it (the bar's console: stderr). Nothing drawn unless stderr
    is a terminal."""

    def __init__(self, what: str, total: int | None = None):
        super().__init__(what, total)
        self.lines = self.err

    def total(self, n: int) -> None:
        self.prog.update(self.task, total=n)

    def advance(self, description: str | None = None) -> None:
        self.prog.update(self.task, advance=1, **({"description": description} if description else {}))
