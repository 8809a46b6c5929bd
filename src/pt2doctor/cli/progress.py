"""Progress on stderr, kept apart from results on stdout."""

from __future__ import annotations

import time

from rich.console import Console


class TerminalReporter:
    def __init__(self, quiet: bool = False) -> None:
        self._console = Console(stderr=True, highlight=False)
        self._quiet = quiet
        self._started = time.monotonic()

    def status(self, text: str) -> None:
        if not self._quiet:
            elapsed = time.monotonic() - self._started
            # `text` quotes error messages: never read as markup (`[/bold]` in a message is text)
            self._console.print(f"pt2doctor [{elapsed:5.1f}s] {text}", style="dim", markup=False)
