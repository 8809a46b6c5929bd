"""The few names and wrapper lines of torch's text that more than one stage reads, parsed in one place.

Contract: pure functions of strings, no torch. Capture uses them to take torch's messages apart,
analysis and the renderers to name what capture recorded; nobody else spells these patterns.
Checked against torch 2.11 and 2.13 (torch/_dynamo/resume_execution.py, output_graph.py, exc.py).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

# torch's compiler configs, by short name: what the config diff reports and a script may set (`X.key = value`).
CONFIG_MODULES = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
                  "functorch": "torch._functorch.config", "compiler": "torch.compiler.config"}

# Python's operators by the name Dynamo gives the call it traces them as (`a // b`: an FX node whose target is
# `operator.floordiv`, a minimal graph's origin call), and the AST's for each.
OPERATORS: dict[str, type[ast.AST]] = {
    "add": ast.Add, "sub": ast.Sub, "mul": ast.Mult, "truediv": ast.Div, "floordiv": ast.FloorDiv, "mod": ast.Mod,
    "pow": ast.Pow, "matmul": ast.MatMult, "lshift": ast.LShift, "rshift": ast.RShift, "and_": ast.BitAnd,
    "or_": ast.BitOr, "xor": ast.BitXor, "neg": ast.USub, "pos": ast.UAdd, "invert": ast.Invert, "lt": ast.Lt,
    "le": ast.LtE, "eq": ast.Eq, "ne": ast.NotEq, "gt": ast.Gt, "ge": ast.GtE,
}
_OPERATOR_NAMES = {op: name for name, op in OPERATORS.items()}


def operator_use(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """An operator's use (`a // b`, `-a`, `a < b`; not a chained comparison) as its `operator` name and operands."""
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[type(node.op)], [node.left, node.right]
    if isinstance(node, ast.UnaryOp) and type(node.op) in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[type(node.op)], [node.operand]
    if isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in _OPERATOR_NAMES:
        return _OPERATOR_NAMES[type(node.ops[0])], [node.left, node.comparators[0]]
    return None


# The exceptions Dynamo raises for a graph break it cannot or may not take (`fullgraph=True`, export).
GRAPH_BREAK_EXCEPTIONS = frozenset({"Unsupported", "UncapturedHigherOrderOpError", "UserError"})

# Dynamo wraps what a backend raised in a message whose first line names the backend.
_BACKEND_LINE = re.compile(r"^backend=(?P<q>['\"])(?P<name>[^'\"]*)(?P=q) raised:$")
_RESUME = re.compile(r"^torch_dynamo_resume_in_(?P<fn>.+)_at_(?P<line>\d+)$")
_TEMPORARY = re.compile(r"___stack\d+")


def backend_of_wrapper(line: str) -> str | None:
    """`backend='inductor' raised:` -> `inductor`; None for any other line."""
    m = _BACKEND_LINE.match(line.strip())
    return m["name"] if m else None


def is_limit_hit(fail_type: str, reason: str) -> bool:
    """A frame's compile stopped at the recompile limit (Dynamo's compilation metrics say so as a failure): a limit
    hit, fatal under `FailOnRecompileLimitHit`, else the frame runs eagerly from then on; not a compile failure."""
    return bool(reason) and ("recompile limit exceeded" in reason.lower() or fail_type == "FailOnRecompileLimitHit")


def compile_failure_line(fail_type: str, reason: str) -> str:
    """What a failed compile raised, in one line: the first line of its `fail_reason` (Dynamo's compilation metrics),
    past the wrapper line that only names the backend (`backend='inductor' raised:`); its type where it says nothing.
    A run's compile failure (`capture.trace.session_builder`) and a candidate program's (`reduce.program_harness`) are
    told alike by it."""
    lines = [line.strip() for line in reason.splitlines() if line.strip()]
    first = lines[0] if lines else fail_type
    if backend_of_wrapper(first) is not None and len(lines) > 1:
        first = f"{first} {lines[1]}"  # Dynamo's wrapper line says nothing: keep what the backend raised
    return first


def without_backend_line(message: str) -> list[str]:
    """The message's non-blank lines, stripped, past the `backend='...' raised:` line Dynamo adds."""
    return [line.strip() for line in message.splitlines() if line.strip() and backend_of_wrapper(line) is None]


@dataclass(frozen=True, slots=True)
class ResumeName:
    """A frame Dynamo made for the code after a graph break: `torch_dynamo_resume_in_f_at_17` resumes `f`
    after the break at line 17."""

    function: str
    line: int

    @classmethod
    def parse(cls, name: str) -> ResumeName | None:
        m = _RESUME.match(name)
        return cls(m["fn"], int(m["line"])) if m else None


def is_dynamo_temporary(name: str) -> bool:
    """`___stack0`: a value Dynamo carried on the stack into the frame it resumed after a graph break."""
    return _TEMPORARY.fullmatch(name) is not None
