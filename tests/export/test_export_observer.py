"""The child's export observer on real torch.export runs: which step ran, which failed, and the what-if
options (AOTInductor off, the tracing mode forced) — tiny CPU programs, no AOTInductor compile."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.runner import RunOptions, run_script
from pt2doctor.model.child import Hooks, Overrides
from pt2doctor.model.export import EntryPoint, ExportEvent, ExportStep, Phase, entry_point, failing_step, steps_passed
from pt2doctor.model.serialize import read_lines

SCRIPTS = Path(__file__).parent / "scripts"


def _events(tmp_path: Path, script: str, *args: str, overrides: Overrides | None = None) -> list[ExportEvent]:
    options = RunOptions(SCRIPTS / script, args, tmp_path / script, timeout_s=300, hooks=Hooks(overrides=overrides),
                         echo=False)
    run_script(options)
    return read_lines(RunPaths(options.out_dir).export_log, ExportEvent)


def test_a_data_dependent_guard_fails_the_non_strict_trace(tmp_path: Path) -> None:
    events = _events(tmp_path, "item_branch.py")
    failed = failing_step(events)
    assert failed is not None and failed.step is ExportStep.NON_STRICT_TRACE and failed.phase is Phase.FAILED
    assert failed.error_type.endswith("GuardOnDataDependentSymNode")
    assert "u0 > 2" in failed.message
    assert entry_point(events) is EntryPoint.EXPORT_NON_STRICT


def test_strict_trace_and_decompositions_are_recorded_and_forcing_non_strict_passes(tmp_path: Path) -> None:
    strict = _events(tmp_path, "strict_only.py")
    assert [(e.step, e.phase) for e in strict] == [(ExportStep.STRICT_TRACE, Phase.STARTED),
                                                   (ExportStep.STRICT_TRACE, Phase.FAILED)]
    relaxed = _events(tmp_path / "relaxed", "strict_only.py", overrides=Overrides(export_strict=False))
    assert failing_step(relaxed) is None
    # run_decompositions calls nothing we observe twice: one step each, outermost only
    assert steps_passed(relaxed) == (ExportStep.NON_STRICT_TRACE, ExportStep.RUN_DECOMPOSITIONS)
    assert entry_point(relaxed) is EntryPoint.EXPORT_NON_STRICT


def test_aoti_off_runs_the_exported_program_eagerly_and_records_every_step(tmp_path: Path) -> None:
    # the planted compile error would fail a real AOTInductor compile: with it off, nothing is compiled
    events = _events(tmp_path, "aoti_relu_bug.py", "compile_error", overrides=Overrides(export_eager=True))
    assert failing_step(events) is None
    assert steps_passed(events) == (ExportStep.NON_STRICT_TRACE, ExportStep.AOTI_COMPILE, ExportStep.AOTI_LOAD,
                                    ExportStep.AOTI_RUN)


def test_running_the_module_first_tells_a_broken_program_from_an_export_failure(tmp_path: Path) -> None:
    events = _events(tmp_path, "module_fails_eagerly.py", overrides=Overrides(export_runs_module=True))
    failed = failing_step(events)
    assert failed is not None and failed.step is ExportStep.NON_STRICT_TRACE
    assert failed.error_type.endswith("ModuleFailsEagerly")
    assert "raises when called with its inputs eagerly: RuntimeError" in failed.message
    # a module that runs is exported as before, and run_decompositions turned off returns the program as it was
    events = _events(tmp_path / "off", "decomp_mutation.py", "check",
                     overrides=Overrides(export_runs_module=True, decompositions_off=True))
    assert failing_step(events) is None
    assert steps_passed(events) == (ExportStep.NON_STRICT_TRACE, ExportStep.RUN_DECOMPOSITIONS)


def test_export_off_makes_the_exported_program_the_module_itself(tmp_path: Path) -> None:
    options = RunOptions(SCRIPTS / "global_specialized.py", (), tmp_path / "off", timeout_s=300,
                         hooks=Hooks(overrides=Overrides(export_off=True)), echo=False)
    session = run_script(options)
    assert session.exit.code == 0  # ep.module() is the module: the check after the global changed passes
    events = read_lines(RunPaths(options.out_dir).export_log, ExportEvent)
    assert steps_passed(events) == (ExportStep.NON_STRICT_TRACE,) and failing_step(events) is None
    assert _events(tmp_path / "on", "global_specialized.py")[-1].phase is Phase.PASSED  # as written: traced, then fails


def test_a_step_left_started_is_where_the_process_died() -> None:
    events = [ExportEvent(0, ExportStep.NON_STRICT_TRACE, Phase.STARTED),
              ExportEvent(0, ExportStep.NON_STRICT_TRACE, Phase.PASSED),
              ExportEvent(1, ExportStep.AOTI_RUN, Phase.STARTED)]
    assert failing_step(events) == events[-1]
    assert failing_step(events[:2]) is None
    assert entry_point([]) is EntryPoint.COMPILE


@pytest.mark.slow
def test_a_planted_aoti_compile_error_fails_the_aoti_compile_step(tmp_path: Path) -> None:
    events = _events(tmp_path, "aoti_relu_bug.py", "compile_error")
    failed = failing_step(events)
    assert failed is not None and failed.step is ExportStep.AOTI_COMPILE
    assert "CppCompileError" in failed.message


def test_a_run_that_never_exports_writes_no_export_log(tmp_path: Path) -> None:
    options = RunOptions(SCRIPTS / "compile_only.py", (), tmp_path, timeout_s=300, echo=False)
    session = run_script(options)
    assert session.compiles and not RunPaths(options.out_dir).export_log.exists()
