"""How much of what a process ran was compiled: Dynamo can start on every frame and still produce no graph
(each frame graph-breaks or fails and runs eagerly), and nothing else in a run says so.

Contract: `compiled_little(session) -> str | None`: None when the frames Dynamo started on produced graphs;
else one sentence for the headline: nothing compiled (frames, but 0 graphs) or far less than it ran (most
frames, at least `FEW_FRAMES`, produced no graph), and why (the most frequent graph break, or the compile
failure, of the frames without a graph, and whose code breaks where it is a known wrapper's: DDP's forward).
"""

from __future__ import annotations

from collections.abc import Iterable

from pt2doctor.model import Session
from pt2doctor.model.ids import CompileId
from pt2doctor.model.session import Compile, GraphBreak

FEW_FRAMES = 2  # one frame without a graph among few says little; more than half of the frames does

# whose code a break is in, where that names the cause better than the break's own reason
_WRAPPERS = {
    "torch/nn/parallel/distributed.py": "DistributedDataParallel's forward graph-breaks",
    "torch/distributed/fsdp/": "FSDP's wrapper graph-breaks",
    "torch/nn/parallel/data_parallel.py": "DataParallel's forward graph-breaks",
}


def compiled_little(session: Session) -> str | None:
    frames: dict[tuple[int, int], list[Compile]] = {}
    for c in session.compiles:
        frames.setdefault(c.compile_id.frame_key, []).append(c)
    empty = [key for key, compiles in frames.items() if not any(_graph(c) for c in compiles)]
    if not frames or not empty:
        return None
    graphs = session.graphs
    if graphs and not (len(empty) >= FEW_FRAMES and 2 * len(empty) > len(frames)):
        return None
    ids = {c.compile_id for key in empty for c in frames[key]}
    why = _why(ids, session.graph_breaks, [c for key in empty for c in frames[key]])
    if not graphs:
        return (f"nothing was compiled: {len(frames)} frame(s) reached Dynamo and produced 0 graphs, so the code "
                f"ran eagerly{why}")
    return (f"little was compiled: {len(empty)} of {len(frames)} frame(s) Dynamo started on produced no graph and "
            f"ran eagerly{why}")


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit - 1]
    return cut[:cut.rfind(" ")].rstrip(" ,;:`") + "…" if " " in cut else cut + "…"


def _graph(c: Compile) -> bool:
    return c.status == "ok" and (c.ops or 0) > 0


def _why(ids: set[CompileId], breaks: Iterable[GraphBreak], compiles: list[Compile]) -> str:
    ours = sorted((b for b in breaks if ids.intersection(b.compile_ids)), key=lambda b: -b.count)
    if ours:
        b = ours[0]
        frames = [(b.file, b.line), *((f.file, f.line) for f in b.user_stack)]
        wrapper = next(((what, file, line) for part, what in _WRAPPERS.items() for file, line in frames
                        if part in file), None)
        lead, file, line = wrapper or ("they graph-break", b.file, b.line)
        place = f"{file.rsplit('/', 1)[-1]}:{line}"
        reason = _clip((b.reason.splitlines() or [""])[0], 120)
        return f": {lead} ({reason}, at {place}{f'; {len(ours)} break(s) in all' if len(ours) > 1 else ''})"
    failed = next((c for c in compiles if c.status != "ok"), None)
    if failed is not None:
        return f": their compiles failed ({failed.fail_type or 'error'}: {(failed.fail_reason or '')[:200]})"
    return ": their graphs were empty (no tensor operation to compile)"
