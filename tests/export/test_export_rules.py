"""The pure parts of the export diagnosis: the failure kinds, the categories, the fix candidates."""

from __future__ import annotations

from pt2doctor.export.analysis.fixes import apply_edits, cond_candidates, dim_candidates, guard_candidates
from pt2doctor.export.diagnose.repro import render_repro
from pt2doctor.export.diagnose.verdict import category_of, failure_kind
from pt2doctor.model import Category
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportRecording, ExportStep, Phase

Kind = ExportFailureKind


def _failed(step: ExportStep, error_type: str, message: str = "") -> ExportEvent:
    return ExportEvent(0, step, Phase.FAILED, error_type, message)


def test_failure_kinds_from_the_error() -> None:
    trace = ExportStep.NON_STRICT_TRACE
    assert failure_kind(_failed(trace, "torch._dynamo.exc.UserError", "Constraints violated (b)!")) \
        is Kind.CONSTRAINT_VIOLATION
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


SOURCE = """import torch
class M(torch.nn.Module):
    def forward(self, x):
        n = x.sum().item()
        if n > 2 and n < 9:
            return x
        return x + 1
"""


def test_guard_candidates_check_the_condition_and_its_negation_before_the_branch() -> None:
    candidates = guard_candidates(SOURCE, 5)
    assert [text for text, _ in candidates] == ["torch._check(n > 2 and n < 9)", "torch._check(not (n > 2 and n < 9))"]
    fixed = apply_edits(SOURCE, candidates[0][1])
    assert "        torch._check(n > 2 and n < 9)\n        if n > 2 and n < 9:\n" in fixed
    compile(fixed, "fixed", "exec")
    assert guard_candidates(SOURCE, 4) == []  # not a branch: nothing to check


def test_cond_candidates_rewrite_a_two_way_branch_as_one_torch_cond() -> None:
    [(text, edits)] = cond_candidates(SOURCE, 5)
    assert text == "return torch.cond(n > 2 and n < 9, lambda: x, lambda: x + 1)"
    assert apply_edits(SOURCE, edits).endswith("        n = x.sum().item()\n        " + text + "\n")
    assigned = "def f(x):\n    if x.sum() > 0:\n        y = x\n    else:\n        y = -x\n    return y\n"
    [(text, edits)] = cond_candidates(assigned, 2)
    assert apply_edits(assigned, edits) == ("def f(x):\n    y = torch.cond(x.sum() > 0, lambda: x, lambda: -x)\n"
                                            "    return y\n")
    one_sided = "def f(x):\n    if x.sum() > 0:\n        y = x\n    y = -x\n    return y\n"
    assert cond_candidates(one_sided, 2) == []  # not a choice between two values


def test_dim_candidates_replace_the_scripts_definitions_and_add_new_ones() -> None:
    source = "import torch\nb = torch.export.Dim('b', max=64)\nc = torch.export.Dim('c')\nspec = {'x': {0: b}}\n"
    message = ("Constraints violated (b)!\nSuggested fixes:\n  _b = Dim('_b', max=31)\n  b = 2*_b\n  "
               "c = Dim('c', min=3)\n\nThe error above occurred")
    [(text, edits)] = dim_candidates(source, message)
    assert text == "_b = torch.export.Dim('_b', max=31); b = 2*_b; c = torch.export.Dim('c', min=3)"
    assert apply_edits(source, edits) == ("import torch\n_b = torch.export.Dim('_b', max=31)\nb = 2*_b\n"
                                          "c = torch.export.Dim('c', min=3)\nspec = {'x': {0: b}}\n")
    assert dim_candidates(source, "no suggestions") == []


def test_the_aoti_repro_sets_inductors_config_only_and_checks_the_package_against_eager() -> None:
    recording = ExportRecording(program="program.pt2", inputs="inputs.pt", inductor_configs="{'max_autotune': False}",
                                config_lines=("import torch._inductor.config",
                                              "torch._inductor.config.cpp.inject_relu_bug_TESTING_ONLY = 'accuracy'",
                                              "torch._inductor.config.aot_inductor.metadata = {}",
                                              "import torch._dynamo.config",
                                              "torch._dynamo.config.specialize_int = False"))
    text = render_repro(recording, with_inputs=True)
    assert "inject_relu_bug_TESTING_ONLY = 'accuracy'" in text and "dynamo" not in text and "metadata" not in text
    assert "aoti_compile_and_package(ep, inductor_configs={'max_autotune': False})" in text
    assert "assert_close(package(*args, **kwargs), expected)" in text
    compile(text, "repro.py", "exec")
    assert "inputs.pt\"" not in render_repro(recording, with_inputs=False)  # a compile failure: never called
