"""pt2doctor's own environment variables are read in one place (`model.settings`), at call time. No torch."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from pt2doctor.model import settings as settings_module
from pt2doctor.model.settings import Settings, settings

ROOT = Path(__file__).parents[2]
SOURCE = ROOT / "src" / "pt2doctor"


def test_defaults_when_nothing_is_set() -> None:
    assert settings({}) == Settings(None, False, 600.0, False)


def test_values_are_typed() -> None:
    env = {"PT2DOCTOR_RECORD_ACCURACY": "1e-3", "PT2DOCTOR_MINIFY_SERVERS": "1",
           "PT2DOCTOR_SERVER_WARM_UP_TIMEOUT": "0.2", "PT2DOCTOR_MINIFY_DEBUG": "yes"}
    assert settings(env) == Settings(1e-3, True, 0.2, True)


def test_read_when_asked_not_at_import(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PT2DOCTOR_SERVER_WARM_UP_TIMEOUT", "7")
    assert settings().server_warm_up_timeout_s == 7.0
    monkeypatch.delenv("PT2DOCTOR_SERVER_WARM_UP_TIMEOUT")
    assert settings().server_warm_up_timeout_s == 600.0


def _module_level(tree: ast.Module) -> Iterator[ast.AST]:
    """Every node that runs at import: the module's and its classes' statements, not function bodies."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            stack.extend(node.decorator_list if not isinstance(node, ast.Lambda) else ())
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def test_no_environment_read_at_import() -> None:
    wrong = [f"{path.relative_to(SOURCE)}:{node.lineno}" for path in sorted(SOURCE.rglob("*.py"))
             for node in _module_level(ast.parse(path.read_text()))
             if isinstance(node, ast.Attribute) and node.attr in ("environ", "getenv")]
    assert not wrong, wrong


def test_own_variables_only_in_settings() -> None:
    """A `PT2DOCTOR_*` name in code (not a docstring) anywhere else is a second place that reads it."""
    wrong = []
    for path in sorted(SOURCE.rglob("*.py")):
        tree = ast.parse(path.read_text())
        docstrings = {id(n.body[0].value) for n in ast.walk(tree)
                      if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef)) and n.body
                      and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        wrong += [f"{path.relative_to(SOURCE)}:{n.lineno}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings
                  and n.value.startswith("PT2DOCTOR_") and path != SOURCE / "model" / "settings.py"]
    assert not wrong, wrong


def test_every_variable_is_on_the_reference_page() -> None:
    page = (ROOT / "docs" / "reference" / "environment.md").read_text()
    names = [v for k, v in vars(settings_module).items()  # the constants that name an environment variable
             if k.isupper() and isinstance(v, str) and re.fullmatch(r"[A-Z][A-Z0-9_]+", v)]
    assert names and all(f"`{name}`" in page for name in names), names
