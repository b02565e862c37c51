"""The progress bar's columns shared by `pltlab run` (pltlab.cli.progress) and sweeps
(pltlab.experiments.sweep): description, bar, done/total, elapsed, ETA. Kept apart from sweep so
the CLI can use it without importing the sweep machinery."""

from __future__ import annotations

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    ProgressColumn,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)


def bar_columns(*extra: ProgressColumn) -> tuple[ProgressColumn, ...]:
    """The shared columns, then ``extra``."""
    return (
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("ETA"),
        TimeRemainingColumn(),
        *extra,
    )
