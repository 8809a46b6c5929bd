"""The tree keeps the pipeline's shape: layers import only downward, no import cycles, a torch-free
model, and private torch APIs only behind `capture/torch_compat` (STYLE.md: capture -> model ->
analysis / processes / reduce -> report). These read the source; nothing is imported or run."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[1] / "src" / "pt2doctor"

# layer -> the layers of ours it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "model": set(),
    "capture": {"model"},
    "analysis": {"model"},
    "processes": {"model", "capture"},
    "reduce": {"model", "capture", "processes"},
    "report": {"model", "analysis"},
    "diagnose": {"model", "capture", "analysis", "processes", "reduce", "bisect", "versions"},
    "bisect": {"model", "capture", "analysis", "processes", "reduce"},
    "workflows": {"model", "capture", "analysis", "processes", "reduce"},
    "versions": {"model", "capture", "analysis", "processes"},
    "api": {"model", "capture", "analysis", "reduce", "report", "workflows"},
    "cli": {"model", "capture", "analysis", "processes", "reduce", "report", "diagnose", "bisect", "api",
            "workflows", "versions"},
    "examples": set(),
    "export": set(),  # the package's own __init__: its contract, nothing else
}
# Feature packages that keep the pipeline's layers inside them: `export/capture/` is the export side of
# `capture/` and keeps its rules (it may import what capture may, the export side of those, and capture).
NESTED = {"export"}
# How a child process starts (`processes.launch`, `processes.group`: stdlib only): any layer may start one,
# the user's script under capture included, and no other module starts a process itself.
LAUNCH = {"pt2doctor.processes.launch", "pt2doctor.processes.group"}
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
            # `from pkg import mod` depends on `mod` (and on `pkg`'s __init__ only for a name defined there)
            names = {f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in MODULES else node.module
                     for a in node.names}
            yield from ((n, node.lineno) for n in sorted(names) if n in MODULES)
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if a.name in MODULES)


def _package(module: str) -> str:
    """`analysis` for `pt2doctor.analysis.x`; `export.capture` for `pt2doctor.export.capture.x`; `(top)` for a
    module of the package's root."""
    parts = module.split(".")
    if not (len(parts) > 2 or (len(parts) == 2 and f"{module}.__init__" not in MODULES
                               and (PACKAGE / parts[1]).is_dir())):
        return "(top)"
    if parts[1] in NESTED and len(parts) > 2 and (PACKAGE / parts[1] / parts[2]).is_dir():
        return f"{parts[1]}.{parts[2]}"
    return parts[1]


def _layer(package: str) -> str:
    """The layer whose rules a package keeps: `capture` for `export.capture`."""
    return package.rsplit(".", 1)[-1]


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_go_down_the_pipeline(module: str) -> None:
    own = _package(module)
    if own == "(top)":
        return
    layer = _layer(own)
    wrong = [f"{target} (line {line})" for target, line in _imports(MODULES[module])
             if _layer(_package(target)) not in ALLOWED[layer] | {layer} and target not in LAUNCH]
    assert not wrong, f"{module} ({own}) may import only {sorted(ALLOWED[layer])}: {wrong}"


def test_starting_a_process_needs_nothing_of_ours() -> None:
    for module in LAUNCH:
        assert {target for target, _ in _imports(MODULES[module])} <= LAUNCH, module


_STARTS_A_PROCESS = {"subprocess.Popen", "subprocess.run", "subprocess.call", "subprocess.check_call",
                     "subprocess.check_output", "subprocess.getoutput", "os.fork", "os.forkpty", "os.system",
                     "os.popen", "os.posix_spawn", "os.posix_spawnp", "os.spawnv", "os.spawnve",
                     "multiprocessing.Process", "multiprocessing.Pool"}


def test_every_child_process_starts_in_processes() -> None:
    """`processes/` starts every child (its own process group, killed whole at a timeout); elsewhere a
    process is started through it, never with subprocess or os.fork directly."""
    wrong = []
    for module, path in MODULES.items():
        if _package(module) == "processes":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and _dotted(node.func) in _STARTS_A_PROCESS:
                wrong.append(f"{module}:{node.lineno} {_dotted(node.func)}")
    assert not wrong, f"start these through pt2doctor.processes (launch.start / launch.run): {wrong}"


def test_every_package_has_a_layer() -> None:
    packages = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert packages <= set(ALLOWED), f"add the new package's layer to ALLOWED: {packages - set(ALLOWED)}"
    nested = {f"{n}.{p.name}" for n in NESTED for p in (PACKAGE / n).iterdir() if (p / "__init__.py").exists()}
    assert {_layer(p) for p in nested} <= set(ALLOWED) - NESTED, f"a nested package names no layer: {nested}"


@pytest.mark.parametrize(("importer", "imported", "allowed"), [
    ("pt2doctor.export.capture.observer", "pt2doctor.capture.process_meta", True),
    ("pt2doctor.export.capture.observer", "pt2doctor.export.analysis.fixes", False),  # capture sees no analysis
    ("pt2doctor.export.analysis.issues", "pt2doctor.capture.runner", False),
    ("pt2doctor.export.diagnose.steps", "pt2doctor.diagnose.found", True),
    ("pt2doctor.capture.child.__main__", "pt2doctor.export.capture.observer", True),
    ("pt2doctor.report.issue", "pt2doctor.export.diagnose.verdict", False),  # a renderer decides nothing
    ("pt2doctor.model.session", "pt2doctor.export.capture.draft", False),
])
def test_a_nested_package_keeps_its_layers_rules(importer: str, imported: str, allowed: bool) -> None:
    layer, target = _layer(_package(importer)), _layer(_package(imported))
    assert (target in ALLOWED[layer] | {layer}) is allowed


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
    users = {m for m, p in MODULES.items()
             if any(t.startswith("pt2doctor.analysis.guard_words") for t, _ in _imports(p))}
    assert {_package(m) for m in users} <= {"analysis"}, users


def _is_private_torch(dotted: str) -> bool:
    """`torch._x` or a private module at any depth (`torch.utils._pytree`, `torch.fx._symbolic_trace`); an op's
    handle under `torch.ops` (`torch.ops.aten._to_copy`) is the operator's public name, not a private API."""
    parts = dotted.split(".")
    return parts[0] == "torch" and parts[1:2] != ["ops"] and any(
        p.startswith("_") and not p.startswith("__") for p in parts[1:])


def _dotted(node: ast.expr) -> str | None:
    names = []
    while isinstance(node, ast.Attribute):
        names.append(node.attr)
        node = node.value
    return ".".join([node.id, *reversed(names)]) if isinstance(node, ast.Name) else None


def _private_torch(source: str) -> Iterator[tuple[str, int]]:
    """Private torch reached in code (imports and attribute chains; strings and docstrings do not count)."""
    tree = ast.parse(source)
    inner = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Attribute)}  # report a chain once, whole
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            yield from ((n, node.lineno) for n in names if _is_private_torch(n))
        elif isinstance(node, ast.Import):
            yield from ((a.name, node.lineno) for a in node.names if _is_private_torch(a.name))
        elif isinstance(node, ast.Attribute) and id(node) not in inner:
            dotted = _dotted(node)
            if dotted is not None and _is_private_torch(dotted):
                yield dotted, node.lineno


@pytest.mark.parametrize("source", [
    "import torch._dynamo", "import torch.utils._pytree as pytree", "from torch.utils._pytree import tree_map",
    "from torch.utils import _pytree", "from torch._inductor import config", "torch._dynamo.reset()",
    "x = torch.utils._pytree.tree_leaves(y)", "torch.fx._symbolic_trace.wrap(f)",
])
def test_the_private_torch_rule_sees_nested_modules(source: str) -> None:
    assert list(_private_torch(source)), source


@pytest.mark.parametrize("source", [
    "import torch.utils.checkpoint", "from torch.export import Dim", "torch.ops.aten._to_copy.default",
    "torch.compile(f)", "x.__class__", "'torch._dynamo' in text",
])
def test_the_private_torch_rule_passes_public_torch(source: str) -> None:
    assert not list(_private_torch(source)), source


def test_private_torch_apis_only_behind_torch_compat() -> None:
    wrong = [f"{path.relative_to(PACKAGE)}:{line} {name}" for path in MODULES.values()
             if not str(path.relative_to(PACKAGE)).startswith(PRIVATE_TORCH_ALLOWED)
             for name, line in _private_torch(path.read_text())]
    assert not wrong, "use capture/torch_compat for these: " + ", ".join(wrong)


def _public_types(path: Path) -> Iterator[str]:
    """The module's public classes and type aliases (`Name = Other`, `Name = Callable[...]`)."""
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
            yield node.name
        elif isinstance(node, ast.Assign):
            yield from (t.id for t in node.targets if isinstance(t, ast.Name) and t.id[:1].isupper()
                        and not t.id.isupper())


def test_no_two_public_types_share_a_name() -> None:
    """A name means one thing: `Outcome` is the oracle's answer (`reduce.core`), a what-if trial's is
    `TrialOutcome`; `Reporter` takes status lines (`capture.runner`), the reducer's `ProgressReporter` counts."""
    where: dict[str, list[str]] = {}
    for module, path in MODULES.items():
        for name in _public_types(path):
            where.setdefault(name, []).append(module)
    twice = {name: modules for name, modules in where.items() if len(modules) > 1}
    assert not twice, twice
