"""A diagnosis as it stands: what `diagnose` found, frozen into a `Diagnosis` with its words and its exit code.

Contract: `freeze(found, runs, pending, reported)` is called after every step and at the end (`diagnose.checkpoint`):
the verdict and the repro in hand from `found`, what it cost (`runs`, `diagnose.ledger`), the steps still to come
(`pending`), what the steps returned for the report alone (`reported`: `diagnose.reported.Reported`, the owner's
hand-over, replay.py, where to look, other releases), the headline and next steps said from all of them
(`diagnose.conclusions.said`), and the exit code by one rule (`_exit_code`). Pure: no runs, no I/O.
"""

from __future__ import annotations

from pt2doctor.diagnose.conclusions import said
from pt2doctor.diagnose.endings import GpuHeld
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.reported import Reported
from pt2doctor.diagnose.stopping import BUDGET
from pt2doctor.model import Environment
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import Diagnosis, RunLedger
from pt2doctor.model.exit_codes import ExitCode
from pt2doctor.model.minify import source_calls


def freeze(found: Found, runs: RunLedger | None = None, pending: tuple[str, ...] = (),
           reported: Reported | None = None) -> Diagnosis:
    """The verdict as a value; `runs`: what it cost (`diagnose.ledger`); `pending`: the steps still to come,
    when it is written before the end; `reported`: what the steps returned for the report."""
    m, p = found.minify, found.program
    environment = found.session.environment if found.session else Environment()
    chosen = found.chosen_repro()
    graph = m is not None and chosen is m
    short = found.short if graph else None
    # test_repro.py beside repro.py: the short form's, else the harness form's own check; else the reduced program's
    test = ((short.test if short else found.harness_test) if graph
            else p.test if p is not None and chosen is p else None)
    repro, verified = (short.repro if short else chosen.repro_path, chosen.verified) if chosen else (None, False)
    ops = found.culprit_ops()
    r = reported or Reported()
    b = r.hand_over.bisection
    words = said(found, r, pending)
    return Diagnosis(
        command=found.command, category=found.category, stage=found.stage, stages=dict(found.stages),  # type: ignore[arg-type]
        subsystem=b.subsystem if b else None, flaky=found.flaky,
        repro=repro, repro_verified=verified, repro_runs=chosen.verify_runs if chosen else None,
        replay=r.replay.path if r.replay else None, replay_verified=bool(r.replay and r.replay.verified),
        minified_nodes=m.nodes_after if m and graph else None, culprit_ops=ops,
        culprit_sources=source_calls(m.origins) if m and graph else (),
        input_needs=m.input_needs if m and graph else (), short=short, test=test,
        user_frames=tuple(found.user_frames), headline=words.headline, error=found.error, hint=found.hint,
        original_backend=found.original_backend, attempts=tuple(found.attempts), bisection=b,
        settings=r.hand_over.settings,
        minify=m, program=p, next_steps=words.next_steps, notes=(*found.notes, *words.notes),
        timings=dict(found.timings),
        environment=environment, interrupted=found.interrupted, exit_code=_exit_code(found), export=r.export,
        torchrun=found.torchrun, rank=found.rank.label if found.rank else None,
        ranks=found.rank.ranks if found.rank else None, control=r.control,
        workarounds=r.workarounds, where_to_look=r.where_to_look, runtime=r.runtime,
        needs_compiler=r.needs_compiler, versions=r.upgrade.versions if r.upgrade else None, runs=runs,
        pending=pending, stopped_by=found.stopped_by,
    )


_STOPPED_EXIT = {"SIGINT": ExitCode.INTERRUPTED, "SIGTERM": ExitCode.TERMINATED, "SIGHUP": ExitCode.HUNG_UP}


def _exit_code(found: Found) -> int:
    if found.interrupted:  # as a shell reports a command a signal stopped: 128 + N
        return _STOPPED_EXIT.get(found.stopped_by, ExitCode.INTERRUPTED)
    if found.internal_errors:
        return ExitCode.INTERNAL
    if isinstance(found.ending, GpuHeld):
        return ExitCode.GPU_HELD
    if found.category is None:  # nothing failed; or the budget ran out before anything did: not known
        return ExitCode.TIMEOUT if found.stopped_by == BUDGET else ExitCode.OK
    if found.flaky:
        return ExitCode.FLAKY
    return policy(found.category).exit_code
