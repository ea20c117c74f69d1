"""Tables and progress bars on a terminal, with rich; plain, stable text when not on one."""

from __future__ import annotations

import contextlib
import io
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any


def is_tty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], *, color: bool | None = None) -> str:
    """Columns padded to their widths, two spaces apart, no borders, no trailing spaces.

    Never wrapped or cut (a script reads every cell). Bold headers only when
    ``color`` (default: stdout is a terminal); None cells print empty.
    """
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    color = is_tty(sys.stdout) if color is None else color
    grid = Table(
        box=None,
        show_edge=False,
        pad_edge=False,
        padding=(0, 1),
        header_style="bold" if color else "",
        highlight=False,
    )
    for header in headers:
        grid.add_column(header, no_wrap=True, overflow="ignore")
    for row in rows:
        grid.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    buffer = io.StringIO()
    console = Console(
        file=buffer,
        width=1_000_000,
        force_terminal=color,
        color_system="standard" if color else None,
        no_color=not color,
        highlight=False,
        markup=False,
        emoji=False,
    )
    console.print(grid)
    return "\n".join(line.rstrip() for line in buffer.getvalue().rstrip("\n").split("\n"))


def progress_bar(description: str, total: float | None, *, unit: str = "records") -> Any:
    """A rich progress bar on stderr when stderr is a terminal, else None (nothing is drawn)."""
    if not is_tty(sys.stderr):
        return None
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskProgressColumn,
        TextColumn,
        TimeRemainingColumn,
        TransferSpeedColumn,
    )

    counter = TransferSpeedColumn() if unit == "bytes" else MofNCompleteColumn()
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        counter,
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    bar.add_task(description, total=total)
    return bar


@contextlib.contextmanager
def steps(first: str) -> Iterator[Callable[[str], None]]:
    """Long work in named steps: on a terminal a spinner showing the current step and the time
    elapsed; elsewhere one ``... step`` line per step on stderr (a log a script can keep)."""
    if not is_tty(sys.stderr):

        def line(text: str) -> None:
            print(f"... {text}", file=sys.stderr, flush=True)

        line(first)
        yield line
        return
    from rich.console import Console
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as spinner:
        task = spinner.add_task(first, total=None)
        yield lambda text: spinner.update(task, description=text)
