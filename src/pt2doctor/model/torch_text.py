"""The few names and wrapper lines of torch's text that more than one stage reads, parsed in one place.

Contract: pure functions of strings, no torch. Capture uses them to take torch's messages apart,
analysis and the renderers to name what capture recorded; nobody else spells these patterns.
Checked against torch 2.11 and 2.13 (torch/_dynamo/resume_execution.py, output_graph.py, exc.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# torch's compiler configs, by short name: what the config diff reports and a script may set (`X.key = value`).
CONFIG_MODULES = {"dynamo": "torch._dynamo.config", "inductor": "torch._inductor.config",
                  "functorch": "torch._functorch.config", "compiler": "torch.compiler.config"}

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
