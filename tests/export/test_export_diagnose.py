"""`pt2doctor diagnose` on scripts that export (and AOT-compile): the entry point, the step, the kind, the
category and the verified fix, on real torch.export runs of tiny CPU programs (one diagnose per script,
shared through the `diagnosed` fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

SCRIPTS = Path(__file__).parent / "scripts"


def test_a_data_dependent_branch_is_a_non_strict_tracing_failure_at_the_users_line(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "item_branch.py")
    assert run.code == 1, run.stderr[-2000:]
    export = d["export"]
    assert (d["category"], d["stage"]) == ("graph_break", None)
    assert (export["entry"], export["step"], export["kind"]) == ("torch.export (non-strict)", "non_strict_trace",
                                                                 "data_dependent")
    assert (Path(export["user_line"]["file"]).name, export["user_line"]["line"]) == ("item_branch.py", 10)
    assert export["other_mode_passes"] is False  # strict export hits the same guard
    labels = [a["label"] for a in d["attempts"]]
    assert "export-strict" in labels and "force_eager" not in labels


def test_a_bad_dim_range_is_the_scripts_error(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "bad_dim.py")
    export = d["export"]
    assert (d["category"], export["kind"], export["step"]) == ("user_error", "constraint_violation", "non_strict_trace")
    assert run.code == 2  # the script's own spec is wrong, as for any user error


def test_a_strict_only_failure_says_non_strict_exports_it(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "strict_only.py")
    export = d["export"]
    assert (d["category"], export["entry"], export["step"], export["kind"]) == (
        "graph_break", "torch.export (strict)", "strict_trace", "unsupported")
    assert export["other_mode_passes"] is True
    assert any("strict=False" in step and "verified" in step for step in d["next_steps"])
    issue = (run.out_dir / "issue.md").read_text()
    assert issue.startswith("# [export]") and "`torch.export (strict)` fails in strict tracing" in issue


@pytest.mark.slow
def test_a_planted_aoti_compile_error_is_aotinductors_not_the_users(diagnosed) -> None:
    run, d = diagnosed(SCRIPTS / "aoti_relu_bug.py", "compile_error")
    export = d["export"]
    assert (d["category"], export["step"], export["kind"], export["eager_passes"]) == (
        "kernel_failure", "aoti_compile", "aoti_compile", True)
    off = next(a for a in d["attempts"] if a["label"] == "force_eager")
    assert off["outcome"] == "pass"  # compilation off, AOTInductor included: the exported program runs eagerly
    assert (run.out_dir / "issue.md").read_text().startswith("# [AOTInductor]")
