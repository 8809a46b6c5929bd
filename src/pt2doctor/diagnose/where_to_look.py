"""Where to look in PyTorch's source for what the diagnosis found (issue #27, point 4).

Contract: `look_where(found, run_dir, out_dir, hand_over, pool, reached)` never raises; it returns the references
found and adds a note when a look-up fails. Five things are looked up, each only where the diagnosis found it:
- the compiler settings the settings search found to remove the failure (`HandOver.settings`): where the installed
  torch's config defines each, the one verified on the whole program first;
- the culprits of a verified repro (aten ops; a reduced program's torch-level calls by their aten name,
  `aten_names`; an op's Inductor lowering only where the failing stage is Inductor's or a backend's) and the
  `CompilerBisector` result: in the installed torch, in a
  child interpreter (`capture.source_lookup`; a child forked from the minifier's warm workers where they are still
  open), which resolves what it can and skips the rest (a torch-level culprit of a reduced program, `torch.relu`,
  resolves to nothing);
- for a failure at the Dynamo stage with a verified reduced program, the trackers of Dynamo's that traced its lines
  (`torch_compat.dynamo_trackers`, run on repro.py in a look-up child started beside the hand-over, `start_reached`:
  one run of the small program), in place
  of its calls' decompositions, which the failing stage never ran; at an AOTAutograd stage, where the reduced
  program is the repro (no graph verified), the AOTAutograd code it reached that a plain compile with that stage's
  backend does not (`torch_compat.aot_paths`: one run of the program and of a plain one);
- for a failure at the Dynamo stage (not a wrong result: its raise is the script's own check), where Dynamo raised
  it: the innermost torch/_dynamo frame of the `dynamo_error` artifacts in the run's trace (the one of the
  failure's compile first), else of the failure's traceback (Dynamo trims its own frames from the exception it
  raises; the artifact, logged before the trimming, keeps them); where no frame is Dynamo's, or at any stage where
  nothing else was found, the innermost frame of torch's own in the failure's traceback (an export step's raise,
  the frame a fatal signal stopped, as faulthandler printed it).
Nothing is run when there is nothing to look up.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.analysis.failures import dynamo_raise_site, torch_raise_site
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.source_lookup import look_up
from pt2doctor.capture.trace import events as ev
from pt2doctor.capture.trace.trace_reader import TraceError, read_trace
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.reported import HandOver
from pt2doctor.diagnose.stages import REFERENCE
from pt2doctor.model.category_policy import policy
from pt2doctor.model.compiler_settings import Setting
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.export import ExportFinding
from pt2doctor.model.serialize import RecordError, dumps, read_record
from pt2doctor.model.source_refs import SourceLookup, SourceLookupResult, SourceRef

if TYPE_CHECKING:
    from pt2doctor.processes.pool import WorkerPool

_OP_NAMESPACES = ("aten.", "prims.", "higher_order.")  # ops torch registers lowerings and decompositions for


class Reached:
    """What of the compiler a failure's reduced program reached (`torch_compat.dynamo_trackers`, `aot_paths`), looked
    up in a fresh interpreter beside the hand-over (one run of the small program, and of a plain one at an
    AOTAutograd stage; the program never runs in a warm worker that later jobs share): `start_reached` starts it once
    the program is reduced (`request` None: nothing to look up), `look_where` takes its places."""

    def __init__(self, request: SourceLookup | None) -> None:
        self._side = ThreadPoolExecutor(1, thread_name_prefix="pt2doctor-reached")
        self._lookup = self._side.submit(look_up, request) if request is not None else None

    def result(self) -> SourceLookupResult:
        try:
            return self._lookup.result() if self._lookup is not None else SourceLookupResult()
        finally:
            self._side.shutdown(wait=False)

    def close(self) -> None:
        self._side.shutdown(wait=False, cancel_futures=True)


def start_reached(found: Found, out_dir: Path) -> Reached:
    """The look-up of what the reduced program reached, started; nothing where there is no such program: a failure a
    graph shows, a stage past AOTAutograd's (its lowerings and passes are looked up by op), a torch.export program
    (every export reaches AOTAutograd code a `torch.compile` does not: the difference would name export's own entry,
    not the failure's)."""
    reached_by = next((backend for backend, stage in REFERENCE if stage is found.stage), "")
    p = found.program
    if not (reached_by and p and p.verified and p.reason != "export"  # export reaches AOTAutograd its own way
            and (found.chosen_repro() is p or found.stage is FailingStage.DYNAMO)):
        return Reached(None)
    return Reached(SourceLookup(str(out_dir / "where_to_look.reached.json"), program=p.repro_path,
                                reached_by=reached_by))


def look_where(found: Found, run_dir: Path, out_dir: Path, hand_over: HandOver | None = None,
               pool: WorkerPool | None = None, reached: Reached | None = None, export: ExportFinding | None = None
               ) -> tuple[SourceRef, ...]:
    """`hand_over`: what the bisection blamed, the settings the search found; `pool`: warm workers still open (the
    minifier's), where the look-up is one forked child rather than a new interpreter importing torch; `reached`: the
    look-up of what the reduced program reached, started earlier; `export`: what the export path found."""
    hand_over = hand_over or HandOver()
    chosen = found.chosen_repro()
    dynamo = found.stage is FailingStage.DYNAMO
    # at the Dynamo stage no decomposition or lowering ran (eager fails): what the program reached stands for its calls
    ops = aten_names(found.culprit_ops()) if chosen and chosen.verified and not dynamo else ()
    b = hand_over.bisection
    settings = tuple(s.name for s in _verified_settings(hand_over))
    # a package that ran on inputs its exported program rejects: AOTInductor's checks of its inputs
    unchecked = export is not None and export.unchecked_inputs
    refs: list[SourceRef] = []
    if ops or (b is not None and b.subsystem) or settings or unchecked:
        request = SourceLookup(str(out_dir / "where_to_look.json"), ops, b.backend if b else None,
                               b.subsystem if b else None, b.debug_info if b else None, settings,
                               lowerings=found.stage is None or found.stage in _LOWERED, aoti_input_checks=unchecked)
        result = _in_pool(pool, request) if pool is not None else look_up(request)
        refs += result.refs
        if result.note:
            found.notes.append(f"where to look: {result.note}")
    if reached is not None:  # what the reduced program reached, looked up beside the hand-over
        result = reached.result()
        refs += [r for r in result.refs if r not in refs]
        if result.note:
            found.notes.append(f"where to look: {result.note}")
    if (dynamo or not refs) and not policy(found.category).wrong_result:  # a wrong result's raise is the script's check
        site = _raise_site(found, run_dir, dynamo)
        if site is not None:
            refs.append(site)
    return tuple(refs)


_LOWERED = (FailingStage.INDUCTOR, FailingStage.BACKEND)  # stages whose failure may be in Inductor's lowering


def _verified_settings(hand_over: HandOver) -> list[Setting]:
    """The settings the search found to remove the failure on the minimal graph, the one verified on the whole program
    first."""
    verified = {w.change for w in hand_over.workarounds if w.verified and w.kind == "config"}
    rows = hand_over.settings.passed_settings if hand_over.settings else ()
    return sorted(rows, key=lambda s: not any(f"`{s.line}`" in change for change in verified))


def aten_names(culprits: tuple[str, ...]) -> tuple[str, ...]:
    """The culprits as op names the look-up resolves: an aten or prims op as it is; a torch-level call of a reduced
    program (`torch.searchsorted`, `F.relu`, `x.index_add_`) by its last name as an aten op, the functional one too
    for an in-place method (a name aten lacks resolves to nothing and is skipped)."""
    names: list[str] = []
    for culprit in (c.removeprefix("torch.ops.") for c in culprits):  # `torch.ops.aten.rrelu_with_noise`
        if culprit.startswith(_OP_NAMESPACES):
            names.append(culprit)
            continue
        last = culprit.rsplit(".", 1)[-1].split("(")[0]
        if last.isidentifier() and not last.startswith("__"):
            names += [f"aten.{last}"] + ([f"aten.{last.rstrip('_')}"] if last.endswith("_") else [])
    return tuple(dict.fromkeys(names))


# The look-up as a worker's job: what `python -m pt2doctor.capture.source_lookup REQUEST` runs, in a forked child.
_LOOKUP_JOB = """
def describe_failure(e):
    return f"{{type(e).__name__}}: {{e}}"


def check():
    from pt2doctor.capture.source_lookup import main

    main([{request!r}])
"""


def _in_pool(pool: WorkerPool, request: SourceLookup) -> SourceLookupResult:
    Path(request.out).unlink(missing_ok=True)
    (ran,) = pool.run([_LOOKUP_JOB.format(request=dumps(request).decode())])
    try:
        return read_record(Path(request.out), SourceLookupResult)
    except (OSError, RecordError):  # it died or timed out in the worker: the fresh interpreter's way once more
        return look_up(request) if ran.status != "ok" else SourceLookupResult(note="the source look-up wrote nothing")


def _raise_site(found: Found, run_dir: Path, dynamo: bool) -> SourceRef | None:
    """Where the failure was raised: at the Dynamo stage, the innermost torch/_dynamo frame, from the `dynamo_error`
    artifacts first (the traceback of the exception Dynamo raises ends, unless TORCHDYNAMO_VERBOSE=1, at the frame
    that re-raised it trimmed: eval_frame.py's `compile_wrapper`); else, or where no frame is Dynamo's, the innermost
    frame of torch's own (an export step's, a fatal signal's as faulthandler printed it)."""
    failure = found.session.failures[0] if found.session and found.session.failures else None
    if failure is None:
        return None
    texts = [failure.traceback]
    if dynamo:
        try:
            errors = [e for e in read_trace(RunPaths(run_dir).trace_dir) if isinstance(e, ev.DynamoError)]
        except (OSError, TraceError) as exc:
            found.notes.append(f"where to look: the run's trace could not be read ({exc})")
            errors = []
        errors.sort(key=lambda e: e.compile_id != failure.compile_id)  # the failure's own compile first
        texts = [e.text for e in errors] + texts
        site = next((s for s in map(dynamo_raise_site, texts) if s is not None), None)
        if site is not None:
            return site
    return next((s for s in map(torch_raise_site, texts) if s is not None), None)
