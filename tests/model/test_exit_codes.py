"""One table of pt2doctor's own exit statuses (`model.exit_codes.ExitCode`), the one the reference page lists.
Reads source and docs; no torch."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from pt2doctor.model.exit_codes import ExitCode

ROOT = Path(__file__).parents[2]
PAGE = ROOT / "docs" / "reference" / "exit-codes.md"


def test_every_exit_code_is_on_the_reference_page() -> None:
    listed = {int(code) for code in re.findall(r"^\| (\d+)(?:, \d+)? \|", PAGE.read_text(), re.M)}
    listed |= {int(c) for line in PAGE.read_text().splitlines() if line.startswith("| 64, 70") for c in (64, 70)}
    assert {int(code) for code in ExitCode} <= listed, sorted({int(c) for c in ExitCode} - listed)


def test_commands_exit_through_the_enum() -> None:
    """No command module spells a status as a bare number (`sys.exit(3)`) or keeps its own `EXIT_*`
    constant: the meaning of a number is named once, in `ExitCode`. (The child interpreter's `sys.exit(1)`
    after an uncaught exception is the script's status, as `python SCRIPT` gives it, not one of ours.)"""
    wrong = []
    for path in sorted((ROOT / "src" / "pt2doctor").rglob("*.py")):
        if path.parent.name == "child":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id.startswith("EXIT_")
                                                    for t in node.targets):
                wrong.append(f"{path.name}:{node.lineno} an EXIT_ constant")
            elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "exit" and node.args \
                    and isinstance(node.args[0], ast.Constant):
                wrong.append(f"{path.name}:{node.lineno} exit({node.args[0].value!r})")
    assert not wrong, wrong


def test_a_member_is_the_number_the_process_exits_with() -> None:
    assert ExitCode.FLAKY == ExitCode.NOTHING_FAILED == 3 and ExitCode.INTERRUPTED == 130
    assert f"{ExitCode.TIMEOUT}" == "124"  # format() gives the number, as the messages print it
