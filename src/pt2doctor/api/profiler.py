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

from pt2doctor.api.watch import Watch, watch
from pt2doctor.capture import torch_compat
from pt2doctor.model import Session
from pt2doctor.report.profile import render_profile

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
