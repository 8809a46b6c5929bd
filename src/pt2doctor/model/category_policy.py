"""What `diagnose` does for each failure category: one table (issue #39, point 6).

Contract: `policy(category)` is the row of `POLICIES` for a category (`None`, not classified yet: `UNKNOWN`, which
tries no workaround). The diagnosis's steps and the issue's wording read its columns instead of listing categories of
their own, so a new category is one row here (and its classification rule in `analysis.failures`). Pure data, no
torch. The columns:
- `graph`: the graph recorder sees this failure in a compiled graph: the failing graph is minified while the stage
  runs go on (`diagnose.narrowing.side_runs`);
- `compiler_raised`: the backend raised compiling (a lowering, a C++ or Triton compile): no run without that backend
  can show it, so lower rungs that fail otherwise do not decide the stage (`diagnose.stage_signatures`);
- `environment`: a broken installation gives every program this failure (no C++ compiler, a broken Triton, a
  package that crashes): the one-op control runs beside the steps (`diagnose.control`);
- `not_minified`: why the recorded graphs are not worked on, in words (empty: they are; a hang is not, every query
  would wait for the timeout);
- `reduced`: the program is reduced where no graph gave a verified repro (not a hang, a recompile limit, or the
  script's own error: nothing of the compiler's to shrink towards);
- `workarounds`: changes to a copy of the script are tried (a compiler stage is at fault: not the script's own
  error, not a recompile limit, which is a setting and a rewrite, `pt2doctor run` explains it);
- `issue`: issue.md is written for PyTorch (not for the script's own error), and `exit_code` is `diagnose`'s (the
  script's own error has its own, 2);
- `compilation_off`: at the Dynamo stage, the program runs with compilation off to tell the script's own error from
  Dynamo's (not for a recompile limit, which no run without compiling can hit);
- `wrong_result`: the script's own check found it: two failures are the same by the exception type and a first line
  that names no values (a check prints what it compared), the graph the accuracy check rejected is the one worked
  on, and the issue speaks of a wrong result;
- `at_dynamo` / `past_dynamo`: the category once the stage is known, where it says more (`refined`): a backend's
  failure with `backend='eager'`, which compiles nothing, is Dynamo's own; the script's own exception, which only
  compiled runs raise, is a wrong result its check found;
- `judged_wrong`: the category where the first run's accuracy check judged a compiled graph wrong against eager on
  the values the program passed it (before any stage is known): the script's own exception then is a wrong result
  its check found, and that graph's ladder and minifier are the stage's evidence.
"""

from __future__ import annotations

from dataclasses import dataclass

from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.session import Category


@dataclass(frozen=True, slots=True)
class Policy:
    graph: bool = False
    compiler_raised: bool = False
    environment: bool = False
    not_minified: str = ""
    reduced: bool = True
    workarounds: bool = True
    compilation_off: bool = True
    issue: bool = True
    exit_code: ExitCode = ExitCode.FOUND
    wrong_result: bool = False
    at_dynamo: Category | None = None  # the category once the stage is Dynamo (None: unchanged)
    past_dynamo: Category | None = None  # the category once any stage is found (None: unchanged)
    judged_wrong: Category | None = None  # the category where the first run judged a graph wrong (None: unchanged)


POLICIES: dict[Category, Policy] = {
    Category.KERNEL_FAILURE: Policy(graph=True, compiler_raised=True, environment=True),
    Category.BACKEND_FAILURE: Policy(graph=True, compiler_raised=True, environment=True,
                                     at_dynamo=Category.DYNAMO_INTERNAL),
    Category.RUNTIME_CRASH: Policy(graph=True, environment=True),
    Category.ACCURACY: Policy(graph=True, wrong_result=True),
    Category.DYNAMO_INTERNAL: Policy(),
    Category.GRAPH_BREAK: Policy(),
    Category.RECOMPILATION: Policy(reduced=False, workarounds=False, compilation_off=False),
    Category.USER_ERROR: Policy(reduced=False, workarounds=False, issue=False, exit_code=ExitCode.USER_ERROR,
                                at_dynamo=Category.ACCURACY, past_dynamo=Category.ACCURACY,
                                judged_wrong=Category.ACCURACY),
    Category.TIMEOUT: Policy(not_minified="a hang is not minified: every query would have to wait for the timeout",
                             reduced=False),
    Category.UNCLASSIFIED: Policy(),
}
UNKNOWN = Policy(workarounds=False)  # no category yet: no workaround is tried for it


def policy(category: Category | None) -> Policy:
    return POLICIES[category] if category is not None else UNKNOWN


def refined(category: Category | None, stage: FailingStage | None) -> Category | None:
    """The category once `stage` is known (see `at_dynamo`, `past_dynamo`)."""
    if stage is None or category is None:
        return category
    row = policy(category)
    return (row.at_dynamo if stage is FailingStage.DYNAMO else row.past_dynamo) or category
