"""What the CLI prints where it is not a terminal (a CI log, a file): whole lines, no hard wrapping."""

from __future__ import annotations

from clihelp import FIXTURES, pt2doctor


def test_output_that_is_not_a_terminal_is_not_hard_wrapped() -> None:
    run = pt2doctor("report", str(FIXTURES / "traces" / "toy_and_recompiles.log"))
    assert run.code == 0, run.stderr
    reason = ("Failed to trace builtin operator: Dynamo does not know how to trace builtin operator `print` with "
              "argument types ['str'] (has_kwargs False)")
    assert any(line.strip() == reason for line in run.stdout.splitlines())
