"""`pt2doctor.explain(fn)(*args, **kwargs)`: torch's `explain`, with the cookbook's rewrite for each break.

Contract: built on `torch._dynamo.explain` (through `torch_compat.dynamo_explain`), so `graph_count`,
`graph_break_count`, `op_count`, `ops_per_graph`, `out_guards` and the break reasons are exactly torch's.
What we add is `hints`: for each break, the cookbook recipe (cause and rewrite) when one matches.
`str(result)` prints like torch's `ExplainOutput`, with a `Hint:` line under each break.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pt2doctor.analysis.cookbook import Recipe, advice_for
from pt2doctor.capture import torch_compat
from pt2doctor.model import GraphBreak, SourceLoc


@dataclass(frozen=True, slots=True)
class BreakReason:
    """One graph break as torch's explain reports it, plus the cookbook's advice."""

    reason: str
    user_stack: tuple[SourceLoc, ...]
    recipe: Recipe | None = None

    @property
    def hint(self) -> str | None:
        return f"{self.recipe.cause}: {self.recipe.rewrite}" if self.recipe else None


@dataclass(frozen=True, slots=True)
class Explanation:
    graph_count: int
    graph_break_count: int
    op_count: int
    break_reasons: tuple[BreakReason, ...]
    ops_per_graph: tuple[tuple[Any, ...], ...] | None
    out_guards: tuple[Any, ...] | None
    compile_times: str | None
    graphs: tuple[Any, ...] = ()
    torch_output: Any = None

    def __str__(self) -> str:
        out = [f"Graph Count: {self.graph_count}", f"Graph Break Count: {self.graph_break_count}",
               f"Op Count: {self.op_count}", "Break Reasons:"]
        for i, br in enumerate(self.break_reasons, 1):
            out += [f"  Break Reason {i}:", f"    Reason: {br.reason}", "    User Stack:"]
            out += [f"      <FrameSummary file {f.file}, line {f.line} in {f.function}>" for f in br.user_stack]
            if br.hint:
                out.append(f"    Hint (pt2doctor): {br.hint}")
        if self.ops_per_graph is not None:
            out.append("Ops per Graph:")
            for i, ops in enumerate(self.ops_per_graph, 1):
                out += [f"  Ops {i}:", *(f"    {op}" for op in ops)]
        if self.out_guards is not None:
            out.append("Out Guards:")
            for i, guard in enumerate(self.out_guards, 1):
                out += [f"  Guard {i}:", f"    {guard}"]
        if self.compile_times is not None:
            out.append(f"Compile Times: {self.compile_times}")
        return "\n".join(out) + "\n"


def explain(fn: Callable[..., Any]) -> Callable[..., Explanation]:
    """Like `torch._dynamo.explain(fn)`: returns a callable that runs `fn` once and explains it."""
    inner = torch_compat.dynamo_explain(fn)

    def run(*args: Any, **kwargs: Any) -> Explanation:
        return from_torch(inner(*args, **kwargs))

    return run


def from_torch(output: Any) -> Explanation:
    reasons = tuple(_break_reason(r) for r in output.break_reasons)
    return Explanation(
        graph_count=output.graph_count, graph_break_count=output.graph_break_count, op_count=output.op_count,
        break_reasons=reasons,
        ops_per_graph=tuple(tuple(ops) for ops in output.ops_per_graph) if output.ops_per_graph is not None else None,
        out_guards=tuple(output.out_guards) if output.out_guards is not None else None,
        compile_times=output.compile_times, graphs=tuple(output.graphs), torch_output=output,
    )


def _break_reason(reason: Any) -> BreakReason:
    stack = tuple(SourceLoc(f.filename, f.lineno or 0, f.name, (f.line or "").strip()) for f in reason.user_stack)
    last = stack[-1] if stack else SourceLoc("<unknown>", 0)
    probe = GraphBreak(reason=str(reason.reason), file=last.file, line=last.line, function=last.function,
                       count=1, code=last.code, explanation=str(reason.reason))
    return BreakReason(str(reason.reason), stack, advice_for(probe))
