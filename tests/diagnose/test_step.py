"""diagnose's step loop (`diagnose.step`): results passed by name, steps skipped or stopped, progress and
timings, and what runs in the background closed however the procedure ends."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass, field

import pytest

from pt2doctor.diagnose.endings import Diagnosed
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.frozen import freeze
from pt2doctor.diagnose.procedure import STEPS
from pt2doctor.diagnose.reported import STEP_OF, ExportConcluded, HandOver, Replayed, Reported
from pt2doctor.diagnose.step import STOP, Concluded, Context, Step, UndeclaredWrite, run_steps
from pt2doctor.model import SourceLoc
from pt2doctor.model.diagnosis import Control, Workaround
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.export import EntryPoint, ExportFailureKind, ExportFinding
from pt2doctor.model.runtime import RuntimeTriage
from pt2doctor.model.settings import STRICT
from pt2doctor.model.source_refs import SourceRef


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        self.lines.append(text)


@dataclass
class _Running:
    closed: list[bool] = field(default_factory=list)

    def close(self) -> None:
        self.closed.append(True)


def _context() -> Context:
    return Context(options=None, runner=None, reporter=_Said())  # type: ignore[arg-type]


def _found() -> Found:
    return Found(command=("x.py",))


def test_each_step_gets_the_earlier_results_it_names_and_its_time_and_progress_are_kept():
    def first(ctx, found):
        return 2

    def second(ctx, found, first):
        return first * 10

    ctx, found = _context(), _found()
    results = run_steps((Step("first", first), Step("second", second, "multiplying")), ctx, found)
    assert results == {"first": 2, "second": 20}
    assert set(found.timings) == {"first", "second"} and ctx.reporter.lines == ["multiplying"]


def test_a_step_whose_input_was_not_established_or_that_does_not_apply_is_skipped_untimed():
    def nothing(ctx, found):
        return None

    def needs_it(ctx, found, nothing):
        raise AssertionError("ran without its input")

    def never(ctx, found):
        return False

    def runs(ctx, found):
        return "ran"

    found = _found()
    results = run_steps((Step("nothing", nothing), Step("needs_it", needs_it), Step("later", runs, when=never),
                         Step("last", runs)), _context(), found)
    assert (results == {"nothing": None, "last": "ran"} and "needs_it" not in found.timings
            and "later" not in found.timings)


def test_stop_ends_the_procedure_and_what_runs_in_the_background_is_closed():
    running = _Running()

    def start(ctx, found):
        return running

    def conclude(ctx, found):
        found.ending = Diagnosed()
        return STOP

    def after(ctx, found):
        raise AssertionError("ran after the conclusion")

    found = _found()
    run_steps((Step("start", start), Step("conclude", conclude, writes="ending"), Step("after", after)), _context(),
              found)
    assert found.ending == Diagnosed() and running.closed == [True]


def test_an_interrupt_propagates_after_closing_what_runs():
    running = _Running()

    def start(ctx, found):
        return running

    def interrupted(ctx, found):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_steps((Step("start", start), Step("interrupted", interrupted)), _context(), _found())
    assert running.closed == [True]


class _StoppedRunner:
    """What a step sees of the runner once a stop's handler closed it (`diagnose.stopping`)."""

    closed = True

    def step(self, name):
        return nullcontext()


def test_a_stop_a_step_kept_its_best_on_or_met_as_an_error_ends_the_procedure(monkeypatch):
    """The budget's stop closes the runner, then raises in whatever the main thread runs: a minifier keeps its best
    and returns; a `finally` submitting the next run meets the closed runner (RuntimeError). Either way no later
    step runs and the stop reaches `diagnose`, not counted as an error of ours (seen: the stage's ladder stopped, its
    `finally` starting the second run, then every step running on and the command exiting 70 with no bundle)."""
    def kept_its_best(ctx, found):
        return "the best so far"

    def met_the_closed_runner(ctx, found):
        raise RuntimeError("cannot schedule new futures after shutdown")

    def after(ctx, found):
        raise AssertionError("ran after the stop")

    monkeypatch.delenv(STRICT)
    ctx = Context(options=None, runner=_StoppedRunner(), reporter=_Said())  # type: ignore[arg-type]
    for step in (Step("kept", kept_its_best), Step("met", met_the_closed_runner)):
        found, results = _found(), {}
        with pytest.raises(KeyboardInterrupt):
            run_steps((step, Step("after", after)), ctx, found, results)
        assert found.internal_errors == [] and "after" not in found.timings


def test_a_step_taking_what_no_earlier_step_returns_is_refused():
    def later(ctx, found, missing):
        return 1

    with pytest.raises(AssertionError, match="missing"):
        run_steps((Step("later", later),), _context(), _found())


def test_diagnoses_steps_are_read_off_one_tuple_each_taking_only_earlier_results():
    names = [s.name for s in STEPS]
    assert names[:3] == ["reproduce", "classify", "export"] and names[-1] == "conclude"
    for i, step in enumerate(STEPS):
        assert set(step.wants()) <= set(names[:i]), step.name


def test_a_step_sets_only_the_verdicts_fields_it_declares_and_reads_all():
    def declared(ctx, found):
        found.ending = Diagnosed()
        found.notes.append("noted")
        return found.error

    def undeclared_field(ctx, found):
        found.category = None

    def undeclared_list(ctx, found):
        found.user_frames.append(SourceLoc("x.py", 1))

    found = _found()
    found.error = "boom"
    assert run_steps((Step("declared", declared, writes="ending notes"),), _context(), found) == {"declared": "boom"}
    assert found.ending == Diagnosed() and found.notes == ["noted"]
    for step in (undeclared_field, undeclared_list):
        with pytest.raises((UndeclaredWrite, AttributeError)):
            run_steps((Step("undeclared", step),), _context(), found)
    assert found.user_frames == []


def test_for_a_user_a_slip_in_a_steps_declaration_costs_nothing(monkeypatch):
    """Outside the tests (no PT2DOCTOR_STRICT) the view passes every write through: the step's work stands."""
    def undeclared(ctx, found):
        found.user_frames.append(SourceLoc("x.py", 1))
        found.category = None

    monkeypatch.delenv(STRICT)
    found = _found()
    run_steps((Step("undeclared", undeclared),), _context(), found)
    assert found.user_frames == [SourceLoc("x.py", 1)] and not found.internal_errors


def test_a_step_may_only_declare_the_verdicts_fields():
    with pytest.raises(AssertionError, match="endin"):
        run_steps((Step("typo", lambda ctx, found: None, writes="endin"),), _context(), _found())


def test_a_step_that_raises_is_kept_and_the_procedure_goes_on_without_its_result(monkeypatch):
    """pt2doctor's own error in one step loses nothing the others found: the diagnosis goes on, says which
    step failed, and exits with the internal-error status; under PT2DOCTOR_STRICT (the tests) it propagates."""
    def broken(ctx, found):
        raise TypeError("a bug of ours")

    def needs_broken(ctx, found, broken):
        raise AssertionError("ran without its input")

    def concludes(ctx, found):
        found.ending = Diagnosed()

    steps = (Step("broken", broken), Step("needs_broken", needs_broken), Step("conclude", concludes, writes="ending"))
    with pytest.raises(TypeError):
        run_steps(steps, _context(), _found())
    monkeypatch.delenv(STRICT)
    found = _found()
    assert run_steps(steps, _context(), found) == {"conclude": None}
    assert found.ending == Diagnosed() and found.internal_errors == ["step 'broken': TypeError: a bug of ours"]
    assert freeze(found).exit_code == ExitCode.INTERNAL


def test_a_diagnosis_a_bug_of_ours_stopped_says_so_in_its_headline_and_keeps_what_it_found(tmp_path, monkeypatch):
    """Through `diagnose` itself, with a real script: the conclusion's own step raising leaves a headline that
    names the step, the runs made before it, and the internal-error exit status."""
    from pt2doctor.diagnose import procedure
    from pt2doctor.diagnose.options import DiagnoseOptions

    def broken(ctx, found):
        raise RuntimeError("a bug of ours")

    script = tmp_path / "fails.py"
    script.write_text("import torch\ntorch.compile(lambda x: x.sin(), backend='eager')(torch.ones(2))\n"
                      "raise SystemExit(3)\n")
    monkeypatch.delenv(STRICT)
    repeated = next(s for s in procedure.STEPS if s.name == "repeated")  # the second run: does it repeat?
    monkeypatch.setattr(procedure, "STEPS", (*procedure.STEPS[:2], repeated, Step("conclude", broken)))
    d = procedure.diagnose(DiagnoseOptions(script=script, args=(), out_dir=tmp_path / "out", timeout_s=120,
                                           jobs=1, minify=False, bisect=False, workarounds=False))
    assert d.exit_code == ExitCode.INTERNAL and len(d.attempts) >= 2
    assert d.headline.startswith("pt2doctor's own error in its step 'conclude': RuntimeError: a bug of ours")
    assert any("please report it with this bundle" in note for note in d.notes)


def test_every_step_of_diagnose_declares_only_the_verdicts_fields():
    fields = set(Found.__dataclass_fields__)
    for step in STEPS:
        assert step.fields() <= fields, step.name


def test_the_design_docs_table_of_steps_is_the_tuple():
    """docs/design/diagnose.md lists the steps in order with what each takes (`?`: read where there is one, not
    waited for) and writes, as `STEPS` says."""
    from pathlib import Path

    doc = (Path(__file__).parents[2] / "docs" / "design" / "diagnose.md").read_text()
    table = doc[doc.index("| step | module | takes | returns | writes"):].split("\n\n")[0].splitlines()[2:]
    rows = [[cell.strip() for cell in row.strip("|").split("|")] for row in table]
    assert [(r[0], r[2], r[4]) for r in rows] == [
        (s.name, ", ".join(w if w in s.needs() else f"{w}?" for w in s.wants()), " ".join(sorted(s.fields())))
        for s in STEPS]


def test_a_result_taken_with_a_default_is_passed_where_there_is_one_and_does_not_hold_the_step_back():
    def nothing(ctx, found):
        return None

    def something(ctx, found):
        return 3

    def reads(ctx, found, something, nothing=None):
        return (something, nothing)

    step = Step("reads", reads)
    assert step.wants() == ("something", "nothing") and step.needs() == ("something",)
    results = run_steps((Step("nothing", nothing), Step("something", something), step), _context(), _found())
    assert results["reads"] == (3, None)


def test_a_step_that_concludes_with_a_result_keeps_it_and_ends_the_procedure():
    def concludes(ctx, found):
        return Concluded("what it found")

    def after(ctx, found):
        raise AssertionError("ran after the conclusion")

    results = run_steps((Step("concludes", concludes), Step("after", after)), _context(), _found())
    assert results == {"concludes": "what it found"}


def test_what_the_report_reads_off_the_results_is_each_the_result_of_a_step_of_the_procedure():
    """`Reported` reads each field by the name of the step that returns it; a failure that did not repeat hands no
    hand-over over; the export path's own hand-over and where to look stand where the procedure's steps did not run."""
    names = {s.name for s in STEPS}
    assert {step for steps in STEP_OF.values() for step in steps} <= names
    tried = HandOver((Workaround("a change", "", True, "ran to the end"),))
    ref = SourceRef("lowering", "torch/_inductor/lowering.py", 1, "f")
    results = {"hand_over": tried, "replay": Replayed("replay.py", True), "where_to_look": (ref,)}
    reported = Reported.of(results)
    assert reported.hand_over is tried and reported.replay.verified and reported.where_to_look == (ref,)
    assert Reported.of(results, set_aside=True).hand_over == HandOver()
    exported = Reported.of({"export": ExportConcluded(hand_over=tried, where_to_look=(ref,))})
    assert exported.workarounds == tried.workarounds and exported.where_to_look == (ref,)
    diagnosis = freeze(_found(), reported=reported)
    assert diagnosis.workarounds == tried.workarounds and diagnosis.replay == "replay.py" and diagnosis.replay_verified
    # the runtime triage: its step's, else that of a flaky failure, which the first run's repeat concluded with
    triaged, flaky = RuntimeTriage(seconds=1.0), RuntimeTriage(seconds=2.0)
    assert Reported.of({"runtime_triage": triaged, "repeated": flaky}).runtime is triaged
    assert Reported.of({"reproduce": None, "repeated": flaky}).runtime is flaky
    assert freeze(_found(), reported=Reported.of({"reproduce": flaky})).runtime == flaky
    # the one-op control: the control step's, else the export path's; not where the failure did not repeat
    ran = Control("torch.compile(torch.add)", "control.py", True, "failed the same way")
    assert Reported.of({"control": ran}).control is ran
    assert Reported.of({"control": ran}, set_aside=True).control is None
    assert freeze(_found(), reported=Reported.of({"export": ExportConcluded(control=ran)})).control == ran
    # what the export path found is its result too
    finding = ExportFinding(EntryPoint.EXPORT_NON_STRICT, None, ExportFailureKind.WRONG_RESULT)
    assert freeze(_found(), reported=Reported.of({"export": ExportConcluded(finding)})).export == finding
