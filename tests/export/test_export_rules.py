"""The pure parts of the export diagnosis: the failure kinds, the categories, the fix candidates."""

from __future__ import annotations

from pt2doctor.diagnose.export_verdict import category_of, failure_kind
from pt2doctor.model import Category
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportStep, Phase

Kind = ExportFailureKind


def _failed(step: ExportStep, error_type: str, message: str = "") -> ExportEvent:
    return ExportEvent(0, step, Phase.FAILED, error_type, message)


def test_failure_kinds_from_the_error() -> None:
    trace = ExportStep.NON_STRICT_TRACE
    assert failure_kind(_failed(trace, "torch._dynamo.exc.UserError", "Constraints violated (b)!")) is Kind.CONSTRAINT_VIOLATION
    assert failure_kind(_failed(trace, "torch.fx.experimental.symbolic_shapes.GuardOnDataDependentSymNode")) \
        is Kind.DATA_DEPENDENT
    assert failure_kind(_failed(ExportStep.STRICT_TRACE, "torch._dynamo.exc.Unsupported", "Data-dependent branching")) \
        is Kind.DATA_DEPENDENT
    assert failure_kind(_failed(ExportStep.STRICT_TRACE, "torch._dynamo.exc.Unsupported", "graph_break()")) \
        is Kind.UNSUPPORTED
    assert failure_kind(_failed(trace, "torch._export.verifier.SpecViolationError")) is Kind.EXPORT_INTERNAL
    assert failure_kind(_failed(trace, "ValueError", "bad input")) is Kind.USER_CODE
    assert failure_kind(None) is Kind.WRONG_RESULT


def test_aoti_steps_are_kinds_of_their_own_and_a_death_in_the_package_is_a_crash() -> None:
    compile_error = _failed(ExportStep.AOTI_COMPILE, "torch._inductor.exc.InductorError", "CppCompileError")
    assert (failure_kind(compile_error), category_of(Kind.AOTI_COMPILE, compile_error)) == (
        Kind.AOTI_COMPILE, Category.KERNEL_FAILURE)
    died = ExportEvent(3, ExportStep.AOTI_RUN, Phase.STARTED)
    assert (failure_kind(died), category_of(Kind.AOTI_RUNTIME, died)) == (Kind.AOTI_RUNTIME, Category.RUNTIME_CRASH)
    assert category_of(Kind.WRONG_RESULT, None) is Category.ACCURACY
