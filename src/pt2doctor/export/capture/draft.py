"""Every issue `torch.export.draft_export` reports for an export call of the script, in an `explain` run.

Contract: `DraftRecorder(log, log_dir).draft(index, export, args, kwargs)` is called by the export
observer right after the script's own `torch.export.export(*args, **kwargs)` call (the `index`-th
step) returned or raised, so the script's export runs first, exactly as written. It runs
`draft_export` with the same arguments on a deep copy of the module and its inputs, under the
RNG guard of the accuracy rule (draft_export runs the program on real tensors too), and appends one
`DraftReport` to `log`: its issues, each with the user's frames (torch's own frames dropped), or why
there is none (the copy failed; draft_export raised). Observing never changes the program: nothing
of the script's is touched, torch's warnings are kept off the script's stderr, and an error here is
recorded, never raised.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.capture.process_meta import is_user_file
from pt2doctor.capture.torch_compat import export as compat
from pt2doctor.model.export_draft import DraftIssue, DraftIssueKind, DraftReport
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.serialize import append_line

_MAX_TEXT = 2000
_KINDS = {"DATA_DEPENDENT_ERROR": DraftIssueKind.DATA_DEPENDENT, "GUARD_ADDED": DraftIssueKind.GUARD_ADDED,
          "MISSING_FAKE_KERNEL": DraftIssueKind.MISSING_FAKE_KERNEL,
          "MISMATCHED_FAKE_KERNEL": DraftIssueKind.MISMATCHED_FAKE_KERNEL}


class DraftRecorder:
    def __init__(self, log: str, log_dir: str) -> None:
        self._log = log
        self._log_dir = log_dir

    def draft(self, index: int, export: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        try:
            report = self._report(index, export, args, kwargs)
        except Exception as exc:  # never the script's problem: say why there is no report
            report = DraftReport(index, error=f"{type(exc).__name__}: {exc}"[:_MAX_TEXT])
        with open(self._log, "a") as handle:
            append_line(handle, report)

    def _report(self, index: int, export: Callable[..., Any], args: tuple[Any, ...],
                kwargs: dict[str, Any]) -> DraftReport:
        call = compat.export_arguments(export, args, kwargs)
        strict = bool(call.get("strict", False))
        try:
            mod, example, named = copy.deepcopy((call["mod"], call["args"], call.get("kwargs")))
        except Exception as exc:
            return DraftReport(index, strict, error=f"the module and its inputs could not be copied: {exc}"[:_MAX_TEXT])
        with torch_compat.kept_state():
            try:
                failures, files = compat.draft_failures({**call, "mod": mod, "args": example, "kwargs": named},
                                                        self._log_dir)
            except Exception as exc:  # what draft_export cannot trace either (an unsupported construct)
                return DraftReport(index, strict, error=f"draft_export raised {type(exc).__name__}: "
                                                        f"{str(exc).strip()}"[:_MAX_TEXT])
        issues = tuple(issue for issue in (_issue(f, files) for f in failures) if issue is not None)
        violated = any(i.kind is DraftIssueKind.GUARD_ADDED for i in issues)  # torch reports guards only then
        return DraftReport(index, strict, issues, constraint_violation=violated)


def _issue(failure: compat.DraftFailure, files: dict[int, str]) -> DraftIssue | None:
    kind = _KINDS.get(failure.kind)
    if kind is None:
        return None
    data = failure.data
    frame_locals = data.get("frame_locals") or {}
    names = [f"{name}: {', '.join(map(str, values))}" for name, values in (frame_locals.get("locals") or {}).items()]
    sources = {**(frame_locals.get("symbols") or {}), **(data.get("symbol_to_sources") or {})}
    names += [f"{symbol}: {source}" for symbol, source in sources.items() if source is not None]
    return DraftIssue(
        kind=kind, expr=_text(data.get("expr")), result=_text(data.get("result")),
        names=tuple(dict.fromkeys(names)), op=_text(data.get("op")), reason=_text(data.get("reason")),
        dynamic_shapes=_text(data.get("new_dynamic_shapes")), user_stack=_user_frames(data.get("user_stack"), files),
        occurrences=int(data.get("occurrences") or 1),
    )


def _user_frames(stack: Any, files: dict[int, str]) -> tuple[SourceLoc, ...]:
    frames = []
    for frame in stack or ():
        file = files.get(frame.get("filename"), "")
        if is_user_file(file):
            frames.append(SourceLoc(file, int(frame.get("line") or 0), str(frame.get("name") or ""),
                                    str(frame.get("loc") or "").strip()))
    return tuple(frames)


def _text(value: Any) -> str:
    return "" if value is None else str(value)[:_MAX_TEXT]
