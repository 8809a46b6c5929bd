"""Exported programs judged inside the run (`export.capture.checks`): a `run_decompositions` result
against the program it decomposed, an AOTInductor package's first call against the exported program run
eagerly, on copies; and what `diagnose` concludes from a wrong one without a run with compilation off."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.export.diagnose.verdict import failure_kind
from pt2doctor.model import Session
from pt2doctor.model.child import Hooks
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportStep, Phase

SCRIPTS = Path(__file__).parent / "scripts"


def _session(tmp_path: Path, script: str, *args: str) -> Session:
    options = RunOptions(SCRIPTS / script, args, tmp_path / script, timeout_s=600, hooks=Hooks(export_checks=True),
                         echo=False)
    return run_script(options)


def test_a_decomposition_that_changes_the_programs_interface_is_judged_wrong_and_a_clean_one_passes(
        tmp_path: Path) -> None:
    session = _session(tmp_path, "decomp_mutation.py")
    assert session.exit.code == 0  # the script ran as written: "1 2", then the clean one
    assert (tmp_path / "decomp_mutation.py" / "stdout.txt").read_text().splitlines()[0] == "1 2"
    wrong, clean = session.export_checks
    assert (wrong.step, wrong.verdict) == (ExportStep.RUN_DECOMPOSITIONS, "fail")
    assert "mutated user inputs none -> ['noise']" in wrong.detail
    assert (clean.step, clean.verdict) == (ExportStep.RUN_DECOMPOSITIONS, "pass")  # ran on copies and matched


@pytest.mark.slow
def test_a_package_computing_otherwise_than_its_exported_program_is_judged_wrong_at_its_first_call(
        tmp_path: Path) -> None:
    session = _session(tmp_path, "aoti_relu_bug.py", "accuracy")
    (check,) = session.export_checks
    assert (check.step, check.verdict) == (ExportStep.AOTI_RUN, "fail") and "outputs differ" in check.detail


def test_a_spec_that_does_not_fit_a_module_torch_made_is_torchs_and_one_that_does_not_fit_the_users_is_theirs(
        ) -> None:
    message = ("Detected mismatch between the structure of `inputs` and `dynamic_shapes`: `inputs[0]` is a "
               "<class 'tuple'>, but `dynamic_shapes[0]` is a <class 'dict'>")
    event = ExportEvent(0, ExportStep.NON_STRICT_TRACE, Phase.FAILED, "torch._dynamo.exc.UserError", message,
                        module="torch.export.unflatten.UnflattenedModule")
    assert failure_kind(event) is ExportFailureKind.EXPORT_INTERNAL
    users = ExportEvent(0, ExportStep.NON_STRICT_TRACE, Phase.FAILED, "torch._dynamo.exc.UserError", message,
                        module="__main__.Model")
    assert failure_kind(users) is ExportFailureKind.INVALID_SPEC


def test_the_module_a_tracing_step_exports_is_recorded_so_torchs_own_signature_is_told_apart(tmp_path: Path) -> None:
    session = _session(tmp_path, "unflatten_reexport.py")
    failed = [e for e in session.export_steps if e.phase is Phase.FAILED]
    assert [e.module for e in session.export_steps if e.phase is Phase.STARTED] == [
        "__main__.Model", "torch.export.unflatten.UnflattenedModule"]
    assert failed[0].module == "torch.export.unflatten.UnflattenedModule"
    assert failure_kind(failed[0]) is ExportFailureKind.EXPORT_INTERNAL


def test_a_package_that_computes_on_inputs_its_program_rejects_is_said_to_check_none_and_where(tmp_path: Path):
    """pytorch#141115's shape: the exported program's guard rejects a batch the package was not compiled for, the
    package runs on it. The check says so (a typed flag, not only words); the diagnosis names AOTInductor's checks of a
    package's inputs in the installed torch and the switch that runs them."""
    import torch

    from pt2doctor.diagnose.found import Found
    from pt2doctor.diagnose.where_to_look import look_where
    from pt2doctor.export.capture.checks import _Raised, judge_package
    from pt2doctor.export.diagnose.verdict import unchecked_inputs_steps
    from pt2doctor.model.export import EntryPoint, ExportFinding

    check = judge_package(0, _Raised(AssertionError("Guard failed: x.size()[0] == 1")), torch.ones(1, 1), 1e-4)
    assert (check.verdict, check.rejected) == ("fail", True) and "rejects these inputs" in check.detail
    finding = ExportFinding(EntryPoint.EXPORT_NON_STRICT, None, ExportFailureKind.WRONG_RESULT, unchecked_inputs=True)
    assert "AOTI_RUNTIME_CHECK_INPUTS=1" in unchecked_inputs_steps(finding)[0]
    refs = look_where(Found(command=("aoti.py",)), tmp_path, tmp_path, export=finding)
    assert any(r.function.endswith("generate_input_output_runtime_checks") and "AOTI_RUNTIME_CHECK_INPUTS" in r.what
               for r in refs), refs
