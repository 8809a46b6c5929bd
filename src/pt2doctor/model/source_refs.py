"""Places in PyTorch's own source worth reading for a failure (`Diagnosis.where_to_look`), and the look-up that finds
them in the installed torch: what it is asked (`SourceLookup`) and what it answers (`SourceLookupResult`), values that
cross to the look-up's child interpreter (`capture.source_lookup`). Torch-free."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class SourceRef:
    """A place in PyTorch's own source worth reading for this failure, found in the installed torch:
    `what` it is (`Inductor lowering of aten.relu.default`), `file` relative to the directory holding the
    torch package, as PyTorch's repository has it (`torch/_inductor/lowering.py`), the `line` and the
    `function` (a qualified name)."""

    what: str
    file: str
    line: int
    function: str

    def describe(self) -> str:
        return f"{self.what}: {self.file}:{self.line} ({self.function})"


@dataclass(frozen=True, slots=True)
class SourceLookup:
    """What the look-up process (`capture.source_lookup`) is asked: where the installed torch defines
    the handling of `ops` (aten op names, `aten.relu.default`; names that do not resolve are skipped) and
    of the `CompilerBisector` result (`backend`, `subsystem`, `debug_info` as `Bisection` holds them)
    and of the compiler `settings` the settings search found to remove the failure
    (`torch._inductor.config.split_reductions`); it writes a `SourceLookupResult` to `out`. `lowerings`: whether an
    op's Inductor lowering is a place to look (not for a failure in a stage before Inductor's: an export's
    `run_decompositions`, AOTAutograd). `program` (empty: none): a reduced program run there to name what of the
    compiler it reached, with `reached_by` the stage's backend (`torch_compat.dynamo_trackers`, `aot_paths`)."""

    out: str
    ops: tuple[str, ...] = ()
    backend: str | None = None
    subsystem: str | None = None
    debug_info: str | None = None
    settings: tuple[str, ...] = ()
    lowerings: bool = True
    program: str = ""
    reached_by: str = "eager"
    aoti_input_checks: bool = False  # AOTInductor's input checks (a package ran on inputs its program rejects)


@dataclass(frozen=True, slots=True)
class SourceLookupResult:
    """The places found, in the order asked (ops first, then the bisection's subsystem), without repeats;
    `note` says what could not be looked up."""

    refs: tuple[SourceRef, ...] = ()
    note: str = ""
