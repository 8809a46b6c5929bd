"""The tree keeps the pipeline's shape: layers import only downward, no import cycles, a torch-free
model, and private torch APIs only behind `capture/torch_compat` (STYLE.md: capture -> model ->
analysis / processes / reduce -> report). These read the source; nothing is imported or run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "src" / "pt2doctor"

# package -> the packages of ours it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "capture": {"model"},
    "analysis": {"model"},
    "processes": {"model", "capture"},
    "reduce": {"model", "capture", "processes"},
    "report": {"model", "analysis"},
    "diagnose": {"model", "capture", "analysis", "processes", "reduce", "bisect"},
    "bisect": {"model", "capture", "analysis", "processes", "reduce"},
    "workflows": {"model", "capture", "analysis", "processes", "reduce"},
    "api": {"model", "capture", "analysis", "reduce", "report", "workflows"},
    "cli": {"model", "capture", "analysis", "processes", "reduce", "report", "diagnose", "bisect", "api",
            "workflows"},
    "examples": set(),
}
# Source that becomes a standalone repro or runs inside a fresh interpreter as plain torch.
PRIVATE_TORCH_ALLOWED = ("capture/torch_compat/", "reduce/repro_templates/")


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


MODULES = _modules()


def _imports(path: Path) -> Iterator[tuple[str, int]]:
    """Every module of ours `path` imports, at any depth (lazy imports count: they are dependencies too)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            yield from ((n, node.lineno) for n in names if n in MODULES)
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name in MODULES)


def _package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 2 or (len(parts) == 2 and f"{module}.__init__" not in MODULES
                                          and (PACKAGE / parts[1]).is_dir()) else "(top)"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_pipeline(module: str) -> None:
    own = _package(module)
    if own == "(top)":
        return
    wrong = [f"{target} (line {line})" for target, line in _imports(MODULES[module])
             if _package(target) not in ALLOWED[own] | {own}]
    assert not wrong, f"{module} ({own}) may import only {sorted(ALLOWED[own])}: {wrong}"


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(ALLOWED), f"add the new package's layer to ALLOWED: {packages - set(ALLOWED)}"


def test_no_import_cycles() -> None:
    graph = {m: {t for t, _ in _imports(p) if t != m} for m, p in MODULES.items()}
    # a package's __init__ re-exporting its own modules is not a cycle between modules
    graph = {m: {t for t in deps if not (m.startswith(f"{t}.") and t in MODULES)} for m, deps in graph.items()}
    cycles = _strongly_connected(graph)
    assert not cycles, f"import cycles: {cycles}"


def _strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_the_model_imports_no_torch() -> None:
    for module, path in MODULES.items():
        if _package(module) == "model":
            tree = ast.parse(path.read_text())
            names = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module] + [
                a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names]
            assert not [n for n in names if n.split(".")[0] == "torch"], module


def test_capture_has_no_place_to_word_a_guard_failure() -> None:
    """Capture parses torch's guard text into facts; the sentence is analysis's (`analysis/guard_words.py`):
    a guard failure has no field for words, and only analysis imports the wording."""
    tree = ast.parse((PACKAGE / "model" / "session.py").read_text())
    guard = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == "GuardFailure")
    fields = {n.target.id for n in guard.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    assert not fields & {"text", "words", "sentence", "message", "explanation"}, fields
    users = {m for m, p in MODULES.items() if any(t.startswith("pt2doctor.analysis.guard_words") for t, _ in _imports(p))}
    assert {_package(m) for m in users} <= {"analysis"}, users


def _private_torch(path: Path) -> Iterator[tuple[str, int]]:
    """`torch._x` reached in code (imports and attribute chains; strings and docstrings do not count)."""
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torch._"):
            yield node.module, node.lineno
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name.startswith("torch._"))
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") \
                and isinstance(node.value, ast.Name) and node.value.id == "torch":
            yield f"torch.{node.attr}", node.lineno


def test_private_torch_apis_only_behind_torch_compat() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{line} {name}" for path in MODULES.values()
             if not str(path.relative_to(PACKAGE)).startswith(PRIVATE_TORCH_ALLOWED)
             for name, line in _private_torch(path)]
    assert not wrong, "use capture/torch_compat for these: " + ", ".join(wrong)
