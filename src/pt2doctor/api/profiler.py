"""`CompileProfiler`: the recompilation profiler the PyTorch docs show, working on current torch.

Contract (the docs' usage, unchanged):

    with CompileProfiler() as prof:
        profiler_model = torch.compile(my_model, backend=prof)
        profiler_model(x)
    print(prof.report())

`prof` is a backend that compiles nothing: it counts frames and ops and returns `gm.forward`, so the
program runs eagerly. Inside the block the recompile limits are lifted and the structured trace is
watched (`api.watch`), so every guard failure of every frame is recorded, not only the first one.
Why lifted and not 1: torch 2.13 stops checking a frame's guards once it hits its limit, so a literal
limit of 1 would hide all but the first failure. The report then takes the worst case the docs
describe (limit 1): every frame listed under "Recompilation" would fall back to eager after its first
compile. The torch class this replaces was removed (pytorch#135133).
"""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any

from pt2doctor.analysis.cookbook import advice_for
from pt2doctor.analysis.recompiles import pretty_function, recompile_chains
from pt2doctor.api.watch import Watch, watch
from pt2doctor.capture import torch_compat
from pt2doctor.model import Session

_UNLIMITED = 1 << 16


class CompileProfiler:
    """An observation-only `torch.compile` backend that reports graph breaks and guard failures."""

    def __init__(self) -> None:
        self.frame_count = 0
        self.op_count = 0
        self._stack: ExitStack | None = None
        self._watch: Watch | None = None

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.frame_count += 1
        self.op_count += sum(1 for node in gm.graph.nodes if "call" in node.op)
        return gm.forward

    def __enter__(self) -> CompileProfiler:
        stack = ExitStack()
        stack.enter_context(torch_compat.dynamo_config().patch(
            recompile_limit=_UNLIMITED, accumulated_recompile_limit=_UNLIMITED))
        self._watch = stack.enter_context(watch())
        self._stack = stack
        return self

    def __exit__(self, *exc: object) -> None:
        if self._stack is not None:
            self._stack.close()
            self._stack = None

    @property
    def session(self) -> Session | None:
        """The observed session; complete once the `with` block has ended."""
        return self._watch.session if self._watch is not None else None

    def get_metrics(self) -> dict[str, Any]:
        s = self.session
        return {"frame_count": self.frame_count, "op_count": self.op_count,
                "graph_breaks": s.graph_break_count if s else 0, "recompiles": len(s.recompiles) if s else 0}

    def report(self) -> str:
        return render_profile(self.session, self.frame_count, self.op_count)


def render_profile(session: Session | None, frame_count: int, op_count: int) -> str:
    lines = ["pt2doctor Compile Profiler Report", "=================================", "",
             f"Frames compiled: {frame_count}   ops: {op_count}"]
    if session is None:
        return "\n".join(lines + ["", "(report() is complete once the `with CompileProfiler()` block has ended)"]) + "\n"
    lines += ["", "Graph Breaks", "------------"]
    if not session.graph_breaks:
        lines.append("No graph breaks detected.")
    for gb in session.graph_breaks:
        recipe = advice_for(gb)
        lines.append(f"{gb.file}:{gb.line} in {gb.function} (x{gb.count}): {gb.reason.splitlines()[0][:200]}")
        if recipe is not None:
            lines.append(f"    fix: {recipe.rewrite}")
    lines += ["", "Recompilation", "-------------",
              "Each frame below recompiled; with recompile_limit=1 (the worst case) it would run eagerly"
              " after its first compile."]
    if not session.recompiles:
        lines.append("No recompilation detected.")
    for chain in recompile_chains(session):
        lines.append(f"{pretty_function(chain.function)} ({chain.file}:{chain.line}): {len(chain.steps)} recompile(s)")
        for step in chain.steps:
            lines.append(f"  [{step.recompile.compile_id}] {step.cause.text if step.cause else step.recompile.reason}")
            lines += [f"      also failed: {other}" for other in step.also_failed]
        lines += [f"  fix: {fix}" for fix in chain.fixes]
    return "\n".join(lines) + "\n"
