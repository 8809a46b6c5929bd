"""What `torch.export.draft_export` reported for each export call of a script, and what the child judged
of the exported programs the script ran.

Contract: torch-free values written by the child as JSON lines, read back into the `Session`.
- `DraftReport` (`draft-export.jsonl`, one line per `torch.export.export` call of an `explain` run):
  draft_export run on copies of the same module and inputs (`export.capture.draft`), every issue
  it reported (`DraftIssue`: data-dependent errors, guards it added for a constraint violation,
  missing or mismatched fake kernels), each with the user's frames; `index` is the call's
  `ExportEvent.index`; `error`: why draft_export gave no report.
- `ExportCheck` (`export-checks.jsonl`): a program the script produced or ran, judged on copies of its
  inputs by the accuracy rule against the program it came from: a `run_decompositions` result against
  the exported program, an AOTInductor package's first call with each input shape against the exported
  program run eagerly (`export.capture.checks`). `verdict` "fail" names what differs in `detail`.
"""

from __future__ import annotations

from enum import Enum
from typing import Literal

import msgspec

from pt2doctor.model.export import ExportStep
from pt2doctor.model.ids import SourceLoc

DRAFT_FILE = "draft-export.jsonl"
CHECKS_FILE = "export-checks.jsonl"


class DraftIssueKind(str, Enum):
    """draft_export's failure types (`torch.export._draft_export.FailureType`)."""

    DATA_DEPENDENT = "data_dependent_error"  # a condition on a value known only at run time, specialized
    GUARD_ADDED = "guard_added"  # a guard on an input size the dynamic_shapes spec did not allow
    MISSING_FAKE_KERNEL = "missing_fake_kernel"  # a custom op with no fake (meta) implementation
    MISMATCHED_FAKE_KERNEL = "mismatched_fake_kernel"  # a fake implementation that disagrees with the real one
    CONSTRAINT_VIOLATION = "constraint_violation"  # the script's spec failed, and draft_export named no guard


class DraftIssue(msgspec.Struct, frozen=True, omit_defaults=True):
    """One failure of a draft_export report. `expr`: the condition torch could not decide, or the guard
    it added (symbols such as `u0`, `s77`); `result`: what the example inputs made it (`True`);
    `names`: the user's local variables that hold each symbol (`total: u0`), and for a guard the input
    size each symbol stands for; `op`: the custom op; `reason`: a mismatch's reason; `dynamic_shapes`:
    the spec draft_export used instead of the script's (Dim.AUTO), as torch printed it;
    `user_stack`: the user's frames, innermost last; `occurrences`: how often torch met it."""

    kind: DraftIssueKind
    expr: str = ""
    result: str = ""
    names: tuple[str, ...] = ()
    op: str = ""
    reason: str = ""
    dynamic_shapes: str = ""
    user_stack: tuple[SourceLoc, ...] = ()
    occurrences: int = 1


class DraftReport(msgspec.Struct, frozen=True, omit_defaults=True):
    index: int
    strict: bool = False
    issues: tuple[DraftIssue, ...] = ()
    constraint_violation: bool = False  # the script's spec failed; draft_export retried with Dim.AUTO
    error: str = ""


class ExportCheck(msgspec.Struct, frozen=True, omit_defaults=True):
    """`step`'s result (the `index`-th step) judged against `against` on copies of `inputs`."""

    index: int
    step: ExportStep
    verdict: Literal["pass", "fail", "error"]
    against: str  # what it was judged against, in words
    inputs: str = ""  # which inputs, in words
    detail: str = ""  # what differs (verdict "fail") or why it could not be judged ("error")
    max_abs_err: float | None = None
    rejected: bool = False  # an AOTInductor package's inputs, which the exported program it was compiled from rejects


def failed_checks(checks: list[ExportCheck] | tuple[ExportCheck, ...]) -> list[ExportCheck]:
    return [c for c in checks if c.verdict == "fail"]
