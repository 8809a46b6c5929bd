"""Export failures are named with the torch.compile stage that does their step's work, and an error torch
raises itself (a builtin type from torch's own code) is torch's, not the user's."""

from __future__ import annotations

from pt2doctor.analysis.failures import raised_in_torch
from pt2doctor.export.diagnose.verdict import STEP_STAGES, category_of, failure_kind
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.export import ExportEvent, ExportFailureKind, ExportStep, Phase

TORCH_FRAME = ('File "/usr/lib/python3/site-packages/torch/_subclasses/functional_tensor.py", line 300, '
               'in __torch_dispatch__\n')
USER_FRAME = 'File "/w/export_it.py", line 25, in <module>\n'


def test_each_step_has_the_stage_that_does_its_work():
    assert set(STEP_STAGES) == set(ExportStep)
    assert STEP_STAGES[ExportStep.RUN_DECOMPOSITIONS] is FailingStage.AOT_AUTOGRAD
    assert STEP_STAGES[ExportStep.AOTI_COMPILE] is FailingStage.INDUCTOR


def test_a_runtime_error_from_torchs_own_code_in_run_decompositions_is_a_backend_failure():
    # pytorch#180354: "Attempting to use FunctionalTensor on its own", a RuntimeError raised inside torch
    event = ExportEvent(0, ExportStep.RUN_DECOMPOSITIONS, Phase.FAILED, "RuntimeError",
                        "Attempting to use FunctionalTensor on its own.")
    stack = "Traceback (most recent call last):\n  " + USER_FRAME + "  " + TORCH_FRAME
    notes = "RuntimeError: Attempting to use FunctionalTensor on its own.\nOriginal traceback:\n" + USER_FRAME
    assert raised_in_torch(stack + notes)  # torch's note after the exception names a user frame: not a frame
    assert not raised_in_torch("Traceback (most recent call last):\n  " + TORCH_FRAME + "  " + USER_FRAME + notes)
    kind = failure_kind(event, in_torch=True)
    assert kind is ExportFailureKind.EXPORT_INTERNAL
    assert category_of(kind, event) is Category.BACKEND_FAILURE
    assert failure_kind(event, in_torch=False) is ExportFailureKind.USER_CODE  # the script's own RuntimeError
