"""A progress bar on stderr for long runs (rich), shown only when stderr is a terminal."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Callable, Iterator

from runtime.simulation.workload import format_duration


@contextmanager
def progress_bar(expected_end: float, enabled: bool = True) -> Iterator[Callable[[float], None]]:
    """Yields `tick(simulated_time)`. `expected_end` (--until, else the last arrival) sizes the
    bar; a run that goes on past it (jobs still finishing) shows the bar full."""
    if not enabled or not sys.stderr.isatty():
        yield lambda now: None
        return
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    total = max(expected_end, 1.0)
    columns = (TextColumn("simulating"), BarColumn(), TextColumn("{task.fields[clock]}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(file=sys.stderr), transient=True) as progress:
        task = progress.add_task("simulate", total=total, clock="0s")

        def tick(now: float) -> None:
            progress.update(task, completed=min(now, total), clock=f"t={format_duration(now)}")

        yield tick
