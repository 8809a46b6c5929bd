"""The words of a diagnosis are said from its facts each time it is frozen (`diagnose.conclusions.said`): the verdict so
far while steps are pending, the ending's words once one concluded it, and a stop's on top; no step writes them."""

from __future__ import annotations

from pt2doctor.diagnose.conclusions import conclude, flaky, stopped
from pt2doctor.diagnose.endings import Diagnosed, EnvironmentFails
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.procedure import STEPS
from pt2doctor.diagnose.reported import SET_ASIDE, HandOver, Reported
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Attempt, Control, FailingStage, Workaround
from pt2doctor.model.minify import BackendKind, BackendSpec
from pt2doctor.model.runtime import FaultKind, KernelFault, RuntimeTriage

ERROR = "BackendCompilerFailed: NotImplementedError: no softmax"


def _found(**facts) -> Found:
    verdict = {"category": Category.BACKEND_FAILURE, "stage": FailingStage.BACKEND, "error": ERROR,
               "backend": BackendSpec(BackendKind.SOURCE, "my_backend"),
               "stages": {"eager": "pass", "aot_eager": "pass", "my_backend": "fail"}}
    return Found(command=("bug.py",), **{**verdict, **facts})


def _run(label: str, outcome: str, error: str = "", backend: str | None = None) -> Attempt:
    failed = outcome == "fail"
    return Attempt(label, backend, outcome, error or None if failed else None,  # type: ignore[arg-type]
                   Category.BACKEND_FAILURE if failed else None, int(failed), 1.0, f"runs/{label}", error)


def test_a_partial_diagnosis_says_the_verdict_so_far_and_the_conclusion_says_what_to_do():
    found = _found()
    partial = freeze(found, pending=("minify", "conclude"))
    assert partial.headline == f"backend_failure in the custom backend: {ERROR}" and partial.next_steps == ()
    conclude(found)
    assert found.ending == Diagnosed()
    final = freeze(found)
    assert final.headline == partial.headline
    inside = "The failure is inside my_backend: fix it there; repro.py defines it from your source."
    assert inside in final.next_steps, final.next_steps
    assert freeze(Found(command=("x.py",)), pending=("classify",)).headline == ""  # nothing known yet


def test_the_verified_workaround_comes_first_and_the_ones_that_did_not_hold_are_noted():
    found = _found()
    conclude(found)
    tried = HandOver((Workaround("backend='aot_eager'", "", False, "it failed the same way"),
                      Workaround("`@torch.compiler.disable` on `f`", "--- a\n+++ b\n", True, "ran to the end")))
    d = freeze(found, reported=Reported(hand_over=tried))
    assert d.next_steps[0].startswith("Workaround, verified on a copy of your script: `@torch.compiler.disable`")
    assert "workaround tried and not kept: backend='aot_eager': it failed the same way" in d.notes
    assert "workaround tried and not kept" not in " ".join(found.notes)  # said, not written into the record


def test_a_flaky_failure_leads_with_a_kernel_that_reads_outside_its_buffers():
    found = _found()
    flaky(found, _run("original-1", "fail", "RuntimeError: illegal memory access"), _run("original-2", "pass"))
    fault = KernelFault("g0001", "triton_poi_fused_add_0", ("add",), ("aten.add.Tensor",), (), FaultKind.OUT_OF_BOUNDS,
                        "it indexed past the end of its input")
    d = freeze(found, reported=Reported(runtime=RuntimeTriage(fault=fault)))
    assert d.flaky and d.headline.startswith("flaky: the same command gave two different outcomes")
    assert "A likely cause: kernel triton_poi_fused_add_0 (out of bounds)" in d.headline
    assert d.next_steps[0].startswith("The first kernel that goes wrong is triton_poi_fused_add_0 (graph g0001)")
    assert d.next_steps[1].startswith("Look for nondeterminism")


def test_a_stop_keeps_what_the_ending_said_and_says_how_to_finish():
    found = _found()
    control = Control("one op through Inductor", "control/one_op.py", True, "failed the same way")
    found.ending = EnvironmentFails(control)
    found.stopped_by = "SIGTERM"
    stopped(found)
    d = freeze(found)
    assert d.headline.startswith("the environment, not your program: one op through Inductor fails the same way")
    assert d.next_steps[-1].startswith("Run `pt2doctor diagnose` again to finish")


def test_a_budget_that_ran_out_after_the_verdict_concludes_on_what_was_found():
    found = _found(stage=None, stages={})  # stopped before the stage runs were read: blamed from the runs that ended
    found.attempts += [_run("original-1", "fail", "E: x")] + [
        _run(b, "pass", backend=b) for b in ("eager", "aot_eager", "aot_eager_decomp_partition")]
    found.stopped_by = "budget"
    stopped(found)
    assert found.ending == Diagnosed(cut_short=True) and found.stage is FailingStage.BACKEND
    d = freeze(found)
    assert d.headline.startswith(f"stopped at its --budget: backend_failure in the custom backend: {ERROR}")
    assert d.next_steps[-1].startswith("Run `pt2doctor diagnose` again with a larger --budget")
    assert d.exit_code == 1 and not d.interrupted


def test_pt2doctors_own_error_is_the_headline_only_once_nothing_is_pending():
    found = _found()
    found.internal_errors.append("step 'minify': TypeError: a bug of ours")
    assert freeze(found, pending=("conclude",)).headline.startswith("backend_failure in the custom backend")
    assert freeze(found).headline.startswith("pt2doctor's own error in its step 'minify': TypeError: a bug of ours")


def test_what_a_failure_that_did_not_repeat_drew_is_set_aside_by_step_name():
    assert set(SET_ASIDE) <= {s.name for s in STEPS}
    upgrade = Workaround("upgrade torch to 2.14.1", "", True, "repro.py passes", kind="upgrade", verified_on="repro")
    tried = HandOver((upgrade,))
    assert Reported.of({"hand_over": tried}).workarounds == (upgrade,)
    assert Reported.of({"hand_over": tried}, set_aside=True).workarounds == ()
