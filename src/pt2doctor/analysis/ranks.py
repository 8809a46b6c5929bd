"""How the processes of one job differ: each against the reference process (the lowest rank).

Contract: `job_of(processes, command, exit) -> Job` with `divergence` filled: one `RankDivergence` per
process that differs from the reference (`analysis.compare`, the same comparison as run vs run), and
the consequence when the difference is in what was compiled. Ranks of a data-parallel job are meant to
run the same graphs: a graph break, a recompile or a frame only some ranks have means those ranks run
other graphs, so collectives inside compiled code (and any issued between graphs) no longer line up:
the job hangs in a collective or slows down waiting for the rank that is still compiling. Between ranks
(not between spawned workers) the graphs both compiled are compared too (`analysis.rank_graphs`: the inputs'
metadata, the collectives issued, cache hit or miss). A job stopped at
its timeout gets `at_timeout`: each rank's place from the stack it dumped just before (a collective, the
compiler, or the user's own code), so the rank that is elsewhere stands out.
"""

from __future__ import annotations

import re
from dataclasses import replace

from pt2doctor.analysis import enrich
from pt2doctor.analysis.collectives import first_parting, pending, unrecorded
from pt2doctor.analysis.compare import compare, place
from pt2doctor.analysis.coverage import compiled_little
from pt2doctor.analysis.rank_graphs import consequences, graph_changes, parity_gaps
from pt2doctor.model.compare import ChangeKind, Comparison
from pt2doctor.model.job import JOB_SCHEMA, CompiledLittle, Job, ProcessSession, RankAtTimeout, RankDivergence
from pt2doctor.model.session import ExitInfo

_GRAPH_CHANGES = (ChangeKind.GRAPH_BREAK, ChangeKind.RECOMPILE, ChangeKind.FRAME)


def job_of(processes: tuple[ProcessSession, ...], command: tuple[str, ...] = (), exit: ExitInfo | None = None) -> Job:
    exit = exit if exit is not None else ExitInfo(code=None)
    if not processes:
        return Job(JOB_SCHEMA, command, exit, ())
    processes = tuple(replace(p, session=enrich(p.session)) for p in processes)  # failures classified
    reference = processes[0]
    found = []
    for other in processes[1:]:
        comparison = compare(reference.session, other.session, (reference.label, other.label))
        ranks = reference.rank is not None and other.rank is not None  # spawned workers need not agree
        changes = (*(c for c in comparison.changes if c.kind is not ChangeKind.TORCH),
                   *(graph_changes(reference.session, other.session) if ranks else ()))
        comparison = Comparison(comparison.before, comparison.after, changes)
        if not comparison.same:
            found.append(_divergence(reference, other, comparison) if ranks else RankDivergence(other.label,
                                                                                                 comparison))
    stopped = tuple(filter(None, map(_at_timeout, processes))) if exit.timed_out else ()
    parity = tuple(gap for p in processes for gap in parity_gaps(p.label, p.session))
    little = tuple(CompiledLittle(p.label, text) for p in processes
                   if (text := compiled_little(p.session)) is not None)
    return Job(JOB_SCHEMA, command, exit, processes, tuple(found), stopped, _first_failure(processes), parity,
               little, first_parting(processes), unrecorded(processes, hung=exit.timed_out))


def _first_failure(processes: tuple[ProcessSession, ...]) -> str | None:
    """The process that failed first, by when it ended; the others' failures (a peer that closed its
    connection, a collective that timed out) often follow from it."""
    failed = [p for p in processes if p.session.failures and p.ended_at is not None and not p.session.exit.ok]
    return min(failed, key=lambda p: p.ended_at or 0.0).label if failed else None


_FRAME = re.compile(r'File "([^"]+)", line \d+ in (\S+)')  # faulthandler's frame lines, innermost first
_COLLECTIVES = ("torch/distributed/",)
_COMPILER = ("torch/_dynamo/", "torch/_inductor/", "torch/_functorch/", "torch/fx/")
_GRAPH_CODE = ("<eval_with_key>", "/torchinductor_")  # a compiled graph's own code: FX's, Inductor's output code


def _at_timeout(process: ProcessSession) -> RankAtTimeout | None:
    """Where the rank's script thread was, and the collective it had issued and not completed (on NCCL a rank
    waits for one in `torch.cuda.synchronize()` or `.item()`, not in the collective's call)."""
    place = _stack_place(process)
    return replace(place, pending=pending(process.collectives)) if place is not None else None


def _stack_place(process: ProcessSession) -> RankAtTimeout | None:
    failure = next((f for f in process.session.failures if f.origin == "timeout"), None)
    if failure is None:
        return None
    if process.ended_at is not None:  # it wrote its sidecar: it had ended before the others were stopped
        return RankAtTimeout(process.label, "ended", "before the job was stopped")
    where = failure.user_frames[0] if failure.user_frames else None
    frames = _FRAME.findall(failure.traceback)
    collective = next((fn for file, fn in frames if any(part in file for part in _COLLECTIVES)
                       and fn not in ("wrapper", "_fn")), None)
    if collective is not None:
        return RankAtTimeout(process.label, "collective", collective, where)
    inner = next((file for file, _ in frames if any(part in file for part in (*_GRAPH_CODE, *_COMPILER))), "")
    # a compiled graph runs (Dynamo's frames around it are not a compile)
    if any(part in inner for part in _GRAPH_CODE):
        waiting = pending(process.collectives)
        # the compiled function's own frame stands at its first line: its caller says where it ran
        called = failure.user_frames[1] if len(failure.user_frames) > 1 else where
        return RankAtTimeout(process.label, "collective" if waiting else "graph",
                             f"{waiting.op} (in a compiled graph)" if waiting else "a compiled graph", called)
    compiling = next((f"{fn} ({file.rsplit('torch/', 1)[-1]})" for file, fn in frames
                      if any(part in file for part in _COMPILER)), None)
    if compiling is not None:
        return RankAtTimeout(process.label, "compiling", compiling, where)
    return RankAtTimeout(process.label, "user code" if where else "unknown", where.code if where else "", where)


def _divergence(reference: ProcessSession, other: ProcessSession, comparison: Comparison) -> RankDivergence:
    """The difference, with the one consequence most likely for what was found and its fix; the others in `more`."""
    said = consequences(comparison.changes)
    # other collectives in a graph both compiled is the likeliest hang; then other graphs compiled; then the rest
    found = [*((text, fix) for kind, text, fix in said if kind is ChangeKind.COLLECTIVES),
             *filter(None, [_compiled_otherwise(reference, other, comparison)]),
             *((text, fix) for kind, text, fix in said if kind is not ChangeKind.COLLECTIVES)]
    if not found:
        return RankDivergence(other.label, comparison)
    (consequence, fix), rest = found[0], found[1:]
    return RankDivergence(other.label, comparison, consequence, fix, tuple(text for text, _ in rest))


def _compiled_otherwise(reference: ProcessSession, other: ProcessSession,
                        comparison: Comparison) -> tuple[str, str] | None:
    changed = {c.subject for c in comparison.changes if c.kind in _GRAPH_CHANGES}
    if not changed:
        return None
    if not (reference.session.graphs or other.session.graphs):  # both ran eagerly: no graph issues a collective
        return (f"{other.label} compiles what {reference.label} does not, though neither ran a compiled graph: the "
                "other ranks wait for it at the next collective while it compiles (a straggler)",
                "give every rank the same shapes (pad, or torch._dynamo.mark_dynamic)")
    issued = dict.fromkeys(name for p in (reference, other) for c in p.session.compiles
                           if place(c.function, c.file, c.line) in changed for name in c.collectives)
    collectives = (f"the graphs that differ issue {', '.join(issued)}, which {other.label} will call with other "
                   "shapes or in another order than the rest: " if issued else
                   "collectives in or between them no longer line up across ranks: ")
    return (f"{other.label} runs other compiled graphs than {reference.label}: {collectives}a hang in a collective, "
            "or every rank waiting while this one recompiles",
            "give every rank the same shapes (pad, or torch._dynamo.mark_dynamic) and no rank-dependent branch in "
            "compiled code")
