"""Whether a diagnosis's later runs of the script fork from a warm interpreter that has imported torch (issue #38).

Contract: `Forking` (one per diagnosis, shared by a copy's runner) says which runs fork and whether a run forked before
the control ended stands (`diagnose.runs.VariantRunner` asks it for every run); `sets_environment(script)` says
whether a script must start in a new interpreter.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from concurrent.futures import Future, wait
from dataclasses import dataclass
from pathlib import Path

from pt2doctor.model.diagnosis import Attempt
from pt2doctor.processes.fresh_forks import FreshForks


@dataclass
class Forking:
    """Whether a diagnosis's later runs of the script start forked from a warm interpreter that has imported torch
    (`processes.fresh_forks`: seconds less each on a few cores) or anew. Never the first run (it reads and writes the
    user's autotuning); `server` once the first run failed, where the script sets no environment variable of its own
    (`sets_environment`: torch read them on its import, in the server, before the script ran). The first run's repeat
    is forked at once, as the `control`; the other runs fork once it runs and once it ended as the first did. A run
    forked before the control ended stands only once it has (`vouched`): where the control ended otherwise, the run is
    made again anew (`VariantRunner`), so a fork is never the difference reported. `_anew` turns forking off (`server`
    None): the runs start anew from then on."""

    server: FreshForks | None = None
    control: Future[Attempt] | None = None  # the first run's repeat, forked (`diagnose.repeat.SecondRun`)
    hurry: Callable[[], None] | None = None  # the control, started at low priority, at normal priority from then on
    first: str | None = None  # the first run's failure signature, which the control must end with

    def for_run(self, is_control: bool, user_autotuning: bool) -> FreshForks | None:
        """Forks for a run (`Variant.fork_control`, `Variant.user_autotuning`): the control's, and the others' once
        the control has started (a run that waits for a control queued behind it would wait for ever) and while
        nothing says forks change the outcome."""
        control = self.control
        started = control is not None and (control.running() or control.done())
        wanted = is_control or started and self.trusted() is not False
        return self.server if wanted and not user_autotuning else None

    def trusted(self) -> bool | None:
        """Whether forks stand for new interpreters: the control, forked, ended as the first run did; None while it
        runs."""
        control = self.control
        if control is None or not control.done():
            return None if control is not None else False
        if control.cancelled() or control.exception() is not None:
            return False
        repeat = control.result()
        return repeat.forked and repeat.signature == self.first

    def vouched(self) -> bool:
        """A run forked by this: whether it stands, once the control has ended (waited for)."""
        if self.control is not None:
            if not self.control.done() and self.hurry is not None:
                self.hurry()  # awaited now
            wait([self.control])
        return self.trusted() is True


_SETS_ENVIRONMENT = re.compile(r"\b(environ|putenv|unsetenv|load_dotenv)\b")


def sets_environment(script: Path) -> bool:
    """The script, or a module of its own folder it imports, may set environment variables (`os.environ`,
    `os.putenv`, dotenv): torch reads some as it is imported, so the script must start in a new interpreter."""
    own = [script, *(script.parent / f"{name}.py" for name in _imported_names(script))]
    for path in own:
        try:
            if _SETS_ENVIRONMENT.search(path.read_text(errors="replace")):
                return True
        except OSError:
            continue
    return False


def _imported_names(script: Path) -> set[str]:
    try:
        tree = ast.parse(script.read_bytes())
    except (OSError, SyntaxError, ValueError):
        return set()
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module.split(".")[0])
    return names
