"""The graph-break cookbook: common causes, and the rewrite that removes each.

Contract: `advice_for(graph_break)` returns the first matching `Recipe` (or None). Recipes are data:
a matcher over the break's type, explanation and source line, a cause in one line and a
"do this instead" rewrite. Torch's own registry hints are kept next to them, never replaced.
`action_items(session)` is the deduplicated action list of `pt2doctor explain`: one item per user
line, ordered by impact (how many graphs the line splits, then how often it is hit).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pt2doctor.model import GraphBreak, Session, SourceLoc
from pt2doctor.model.torch_text import ResumeName


@dataclass(frozen=True, slots=True)
class Recipe:
    name: str
    pattern: re.Pattern[str]
    cause: str
    rewrite: str
    config: str | None = None


def _p(text: str) -> re.Pattern[str]:
    return re.compile(text, re.I | re.S)


RECIPES: tuple[Recipe, ...] = (
    Recipe("print", _p(r"builtin operator `print`|\bprint\(|reorderable_logging"),
           "print() inside the compiled function splits the graph",
           "move the print out of the compiled code, or log after the call; to keep it, add "
           "`torch._dynamo.config.reorderable_logging_functions.add(print)` (printed after the graph runs)",
           "torch._dynamo.config.reorderable_logging_functions"),
    Recipe("logging", _p(r"\blogging\b|\blogger\.|\blog\.(info|debug|warning)"),
           "a logging call inside the compiled function splits the graph",
           "log outside the compiled region, or add the logger method to "
           "`torch._dynamo.config.reorderable_logging_functions`",
           "torch._dynamo.config.reorderable_logging_functions"),
    Recipe("item", _p(r"\.item\(\)|Tensor\.item|scalar output|capture_scalar_outputs|Unsupported Tensor\.item"),
           "`.item()` turns a tensor into a Python number, which Dynamo cannot keep in the graph",
           "keep the value as a 0-d tensor (e.g. `t.sum()` instead of `t.sum().item()`), or set "
           "`torch._dynamo.config.capture_scalar_outputs = True`",
           "torch._dynamo.config.capture_scalar_outputs"),
    Recipe("data_dependent_branch", _p(r"Data-dependent branching|generic_jump|data dependent"),
           "an `if`/`while` on a tensor's value needs the value on the host",
           "compute both sides and select: `x = torch.where(cond, a, b)`; for real control flow use "
           "`torch.cond(pred, true_fn, false_fn, (x,))`"),
    Recipe("dynamic_shape_op", _p(r"dynamic shape operator|dynamic output shape|capture_dynamic_output_shape_ops|"
                                  r"aten\.(nonzero|unique|masked_select)"),
           "an op whose output shape depends on data (nonzero, unique, boolean masking)",
           "use a fixed-shape form (`torch.where(mask, x, 0)` instead of `x[mask]`), or set "
           "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`",
           "torch._dynamo.config.capture_dynamic_output_shape_ops"),
    Recipe("numpy", _p(r"numpy|\bnp\.|\.numpy\(\)"),
           "a NumPy call or `.numpy()` leaves the tensor world",
           "use the torch equivalent (`torch.from_numpy` once, outside; `torch.*` ops inside); "
           "`.numpy()` / `.tolist()` always break the graph"),
    Recipe("tolist", _p(r"\.tolist\(\)|Tensor\.tolist"),
           "`.tolist()` copies tensor data to Python",
           "keep the data as a tensor; index or reduce with torch ops instead of Python lists"),
    Recipe("skipped_function", _p(r"marked as skipped|skip_files|Attempted to call function marked|"
                                  r"call_function.*skip|disallowed"),
           "the call goes into code Dynamo will not trace (a C extension or a skipped library)",
           "wrap it with `torch.compiler.disable` to run it eagerly on purpose, or, if it is a pure tensor "
           "function, `torch._dynamo.allow_in_graph(fn)`"),
    Recipe("compiler_disable", _p(r"Skip calling `torch.compiler.disable\(\)`d function|disable\(\)d function"),
           "the call goes to a function wrapped in `torch.compiler.disable`, which always runs eagerly",
           "if the function is pure tensor code, drop the `torch.compiler.disable`; otherwise keep it and "
           "call it once, outside the hot compiled loop"),
    Recipe("builtin", _p(r"Failed to trace builtin operator|builtin"),
           "a Python builtin Dynamo cannot model with these argument types",
           "use the torch equivalent of the builtin, or move the call outside the compiled function"),
    Recipe("container_mutation", _p(r"\b(list|dict|set)\b.*(mutat|append|pop|update|side effect)|"
                                    r"(mutat|side effect).*\b(list|dict|set)\b"),
           "a list/dict that escapes the function is mutated in a way Dynamo cannot replay",
           "build a new container and return it instead of mutating one that outlives the call"),
    Recipe("tensor_print", _p(r"__repr__|__str__|format|tensor printing"),
           "formatting a tensor as text needs its values on the host",
           "format after the compiled call returns"),
)


def advice_for(graph_break: GraphBreak) -> Recipe | None:
    text = "\n".join((graph_break.break_type, graph_break.explanation, graph_break.reason, graph_break.code))
    return next((r for r in RECIPES if r.pattern.search(text)), None)


def with_advice(graph_break: GraphBreak) -> GraphBreak:
    recipe = advice_for(graph_break)
    if recipe is None:
        return graph_break
    line = f"pt2doctor: {recipe.rewrite}"
    return graph_break if line in graph_break.hints else _replace_hints(graph_break, (line, *graph_break.hints))


def _replace_hints(graph_break: GraphBreak, hints: tuple[str, ...]) -> GraphBreak:
    from dataclasses import replace

    return replace(graph_break, hints=hints)


@dataclass(frozen=True, slots=True)
class ActionItem:
    """One user line to change: what breaks there, why, the rewrite, and what the break costs: the frames
    it splits, how often it is hit, and how often the code resumed after it recompiled (and the time)."""

    where: SourceLoc
    reasons: tuple[str, ...]
    graphs_split: int
    hits: int
    cause: str
    rewrite: str
    torch_hints: tuple[str, ...]
    fatal: bool = False
    resumed_recompiles: int = 0
    resumed_compile_s: float = 0.0
    weight: float = 0.0  # `BreakImpact.weight`: the order of the action list


@dataclass(frozen=True, slots=True)
class BreakImpact:
    """What a graph break at one line costs, measured: the code Dynamo resumes after it (a frame of its own,
    `torch_dynamo_resume_in_f_at_LINE`) is compiled, and recompiled when a value carried across changes."""

    recompiles: int = 0
    compile_s: float = 0.0

    def weight(self, hits: int, frames: int) -> float:
        """The one ranking of breaks: recompiles of the resumed code, then frames split, then hits, then the
        resumed code's compile time (a tie-break), folded into one number for `Finding.weight`."""
        return self.recompiles * 1e12 + frames * 1e6 + hits + min(self.compile_s, 999.0) / 1e3


def break_impact(session: Session, file: str, line: int) -> BreakImpact:
    resumed = [c for c in session.compiles if c.file == file and (r := ResumeName.parse(c.function)) and r.line == line]
    return BreakImpact(recompiles=sum(1 for c in resumed if c.compile_id.is_recompile),
                       compile_s=sum(c.time_s or 0.0 for c in resumed))


def action_items(session: Session) -> list[ActionItem]:
    """One item per user line that breaks, fatal first, then by measured impact (see `BreakImpact`)."""
    by_line: dict[tuple[str, int], list[GraphBreak]] = {}
    for gb in session.graph_breaks:
        by_line.setdefault((gb.file, gb.line), []).append(gb)
    items = [_item(breaks, break_impact(session, *line)) for line, breaks in by_line.items()]
    return sorted(items, key=lambda i: (not i.fatal, -i.weight, i.where.file, i.where.line))


def _item(breaks: list[GraphBreak], impact: BreakImpact) -> ActionItem:
    first = max(breaks, key=lambda b: b.count)
    recipe = next((r for r in (advice_for(b) for b in breaks) if r is not None), None)
    frames = {cid.frame_key for b in breaks for cid in b.compile_ids}
    hints = tuple(dict.fromkeys(h for b in breaks for h in b.hints if not h.startswith("pt2doctor:")))
    return ActionItem(
        where=SourceLoc(first.file, first.line, first.function, first.code),
        reasons=tuple(dict.fromkeys(b.reason.splitlines()[0] for b in breaks)),
        graphs_split=len(frames) or 1, hits=sum(b.count for b in breaks),
        cause=recipe.cause if recipe else (first.explanation or first.reason.splitlines()[0]),
        rewrite=recipe.rewrite if recipe else (hints[0] if hints else "see the reason; `torch.compiler.disable` "
                                               "keeps code that must stay in Python out of the graph on purpose"),
        torch_hints=hints, fatal=any(b.fatal for b in breaks), resumed_recompiles=impact.recompiles,
        resumed_compile_s=impact.compile_s, weight=impact.weight(sum(b.count for b in breaks), len(frames) or 1),
    )
