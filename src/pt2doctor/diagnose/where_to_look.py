"""Where to look in PyTorch's source for what the diagnosis found (issue #27, point 4).

Contract: `look_where(found, run_dir, out_dir)` never raises; it fills `found.where_to_look` and adds a
note when a look-up fails. Five things are looked up, each only where the diagnosis found it:
- the compiler settings the settings search found to remove the failure (`found.settings`): where the installed
  torch's config defines each, the one verified on the whole program first;
- the culprits of a verified repro (aten ops; a reduced program's torch-level calls by their aten name,
  `aten_names`; an op's Inductor lowering only where the failing stage is Inductor's or a backend's) and the
  `CompilerBisector` result: in the installed torch, in a
  child interpreter (`capture.source_lookup`; a child forked from the minifier's warm workers where they are still
  open), which resolves what it can and skips the rest (a torch-level culprit of a reduced program, `torch.relu`,
  resolves to nothing);
- for a failure at the Dynamo stage with a verified reduced program, the trackers of Dynamo's that traced its lines
  (`torch_compat.dynamo_trackers`, run on repro.py in the look-up's child: one run of the small program), in place
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

from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.analysis.failures import dynamo_raise_site, torch_raise_site
from pt2doctor.capture.process_meta import RunPaths
from pt2doctor.capture.source_lookup import look_up
from pt2doctor.capture.trace import events as ev
from pt2doctor.capture.trace.trace_reader import TraceError, read_trace
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.stages import REFERENCE
from pt2doctor.model.category_policy import policy
from pt2doctor.model.compiler_settings import Setting
from pt2doctor.model.diagnosis import FailingStage, SourceLookup, SourceLookupResult, SourceRef
from pt2doctor.model.serialize import RecordError, dumps, read_record

if TYPE_CHECKING:
    from pt2doctor.processes.pool import WorkerPool

_OP_NAMESPACES = ("aten.", "prims.", "higher_order.")  # ops torch registers lowerings and decompositions for


def look_where(found: Found, run_dir: Path, out_dir: Path, pool: WorkerPool | None = None) -> None:
    """`pool`: warm workers still open (the minifier's), where the look-up is one forked child rather than a new
    interpreter importing torch."""
    chosen = found.chosen_repro()
    dynamo = found.stage is FailingStage.DYNAMO
    # a failure no graph shows: what of the compiler its reduced program reached (at the Dynamo stage no
    # decomposition or lowering ran, eager fails: the trackers that traced it, in place of its calls' decompositions)
    reached_by = next((backend for backend, stage in REFERENCE if stage is found.stage), "")
    p = found.program
    program = p.repro_path if reached_by and p and p.verified and (chosen is p or dynamo) else ""
    ops = aten_names(found.culprit_ops()) if chosen and chosen.verified and not dynamo else ()
    b = found.bisection
    settings = tuple(s.name for s in _verified_settings(found))
    refs: list[SourceRef] = []
    if ops or (b is not None and b.subsystem) or settings or program:
        request = SourceLookup(str(out_dir / "where_to_look.json"), ops, b.backend if b else None,
                               b.subsystem if b else None, b.debug_info if b else None, settings,
                               lowerings=found.stage is None or found.stage in _LOWERED, program=program,
                               reached_by=reached_by)
        # the program runs in a fresh interpreter, never in a warm worker that later jobs share
        result = _in_pool(pool, request) if pool is not None and not program else look_up(request)
        refs += result.refs
        if result.note:
            found.notes.append(f"where to look: {result.note}")
    if (dynamo or not refs) and not policy(found.category).wrong_result:  # a wrong result's raise is the script's check
        site = _raise_site(found, run_dir, dynamo)
        if site is not None:
            refs.append(site)
    found.where_to_look = refs


_LOWERED = (FailingStage.INDUCTOR, FailingStage.BACKEND)  # stages whose failure may be in Inductor's lowering


def _verified_settings(found: Found) -> list[Setting]:
    """The settings the search found to remove the failure on the minimal graph, the one verified on the whole program
    first."""
    verified = {w.change for w in found.workarounds if w.verified and w.kind == "config"}
    rows = found.settings.passed_settings if found.settings else ()
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
