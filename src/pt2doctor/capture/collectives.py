"""Torch's Flight Recorder dump (one rank's collectives) turned into `model.collectives` values.

Contract: `calls_of(dump) -> tuple[CollectiveCall, ...]` takes the dict torch's Flight Recorder dumps
(`{"version", "pg_config", "entries": [...]}`, the format torch's own `fr_trace` analyser reads: each entry with
`collective_seq_id`, `profiling_name` (`gloo:all_reduce`), `input_sizes`, `input_dtypes`, `state` and `retired`,
`process_group` (name, description), `is_p2p` and the Python `frames` that issued it, innermost first), keeps the
collectives (not point-to-point sends), and names the user's innermost line. It never raises for a field missing
or of another shape (the format has versions): such an entry is skipped. `read_rank(paths)` is what a rank left:
the child's `collectives.json`, else the dump torch's NCCL watchdog wrote on a collective timeout
(`NCCL_DUMP_PREFIX` + rank, the pickle format torch writes), read with an unpickler that builds only plain
values.
"""

from __future__ import annotations

import io
import pickle
from collections.abc import Iterable
from typing import Any

from pt2doctor.capture.process_meta import RunPaths, is_user_file
from pt2doctor.model.collectives import COLLECTIVES_FILE, CallState, CollectiveCall, RankCollectives
from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.serialize import RecordError, read_record

NCCL_DUMP_PREFIX = "nccl-flight-recorder-"  # TORCH_FR_DUMP_TEMP_FILE's prefix in a rank's directory
_STATES: dict[str, CallState] = {"scheduled": "scheduled", "started": "started", "completed": "completed"}
# a compiled graph's frames: Dynamo's generated code and FX's (`<eval_with_key>.3`), Inductor's output code
_COMPILED = ("<eval_with_key>", "torch/_dynamo/", "torch/fx/", "torchinductor_", "torch/_inductor/")


def calls_of(dump: object) -> tuple[CollectiveCall, ...]:
    entries = dump.get("entries") if isinstance(dump, dict) else None
    calls = (_call(e) for e in entries if isinstance(e, dict)) if isinstance(entries, list) else ()
    return tuple(sorted((c for c in calls if c is not None), key=lambda c: (c.group, c.seq)))


def _call(entry: dict[str, Any]) -> CollectiveCall | None:
    seq, name = entry.get("collective_seq_id"), entry.get("profiling_name")
    if entry.get("is_p2p") or not isinstance(seq, int) or not isinstance(name, str) or seq <= 0:
        return None
    group = entry.get("process_group")
    frames = [SourceLoc(str(f.get("filename", "")), int(f.get("line") or 0), str(f.get("name", "")))
              for f in entry.get("frames") or () if isinstance(f, dict)]
    compiled = any(part in f.file for f in frames for part in _COMPILED)
    where, graph = _issued_by(frames) if compiled else (next((f for f in frames if is_user_file(f.file)), None), "")
    return CollectiveCall(
        seq=seq, group=str(group[0]) if isinstance(group, (list, tuple)) and group else str(entry.get("pg_id", "")),
        op=name.split(":", 1)[-1], input_sizes=_sizes(entry.get("input_sizes")),
        dtypes=tuple(str(d) for d in entry.get("input_dtypes") or ()),
        # a finished call is `retired`; gloo's entries stay `scheduled` to the end (torch 2.13: no event to query)
        state="completed" if entry.get("retired") is True else _STATES.get(str(entry.get("state")), "scheduled"),
        where=where, compiled=compiled, graph=graph,
        issued_at=created / 1e9 if isinstance(created := entry.get("time_created_ns"), int) and created > 0 else None,
    )


def _issued_by(frames: list[SourceLoc]) -> tuple[SourceLoc | None, str]:
    """For a call from a compiled graph: where the compiled function was called, and the function (`step
    (train.py:11)`). Its own frame, the innermost user frame, stands at its first line, not at the collective."""
    user = [f for f in frames if is_user_file(f.file)]
    if not user:
        return None, ""
    function = f"{user[0].function} ({user[0].file.rsplit('/', 1)[-1]}:{user[0].line})"
    return (user[1] if len(user) > 1 else user[0]), function


def _sizes(value: object) -> tuple[tuple[int, ...], ...]:
    if not isinstance(value, list):
        return ()
    return tuple(tuple(int(n) for n in shape) for shape in value if isinstance(shape, list))


def rank_record(dump: object, source: str, when: str, capacity: int | None) -> RankCollectives:
    calls = calls_of(dump)
    entries = dump.get("entries") if isinstance(dump, dict) else None
    full = capacity is not None and isinstance(entries, list) and len(entries) >= capacity
    return RankCollectives(calls, source, when, dropped=full)


def read_rank(paths: RunPaths) -> RankCollectives | None:
    """The collectives a rank's child recorded, else those torch's NCCL watchdog dumped for it; None: neither."""
    try:
        return read_record(paths.root / COLLECTIVES_FILE, RankCollectives)
    except (OSError, RecordError):
        pass
    for dump in sorted(paths.root.glob(f"{NCCL_DUMP_PREFIX}*")):
        try:
            data = _PlainUnpickler(io.BytesIO(dump.read_bytes())).load()
        except (OSError, pickle.UnpicklingError, EOFError, ValueError, TypeError):
            continue
        return rank_record(data, "flight recorder (NCCL watchdog dump)", "at the collective's timeout", None)
    return None


def _same(value: object, *_: object) -> object:
    return value


# torch's C++ pickler marks typed lists with these builders (torch/jit/_pickle.py), each the identity
_LIST_BUILDERS = {("torch.jit._pickle", name) for name in ("build_intlist", "build_doublelist", "build_boollist",
                                                         "build_tensorlist", "restore_type_tag")}


class _PlainUnpickler(pickle.Unpickler):
    """Only dicts, lists, tuples, strings and numbers (and torch's list builders, which return their list): any
    other class a dump names is refused, so reading one runs no code of its choosing."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _LIST_BUILDERS:
            return _same
        raise pickle.UnpicklingError(f"a Flight Recorder dump names no class ({module}.{name})")


def merged(dumps: Iterable[object]) -> dict[str, Any]:
    """One dump of the entries of several (torch keeps NCCL's recorder apart from the CPU backends')."""
    entries: list[Any] = []
    for dump in dumps:
        if isinstance(dump, dict) and isinstance(dump.get("entries"), list):
            entries += dump["entries"]
    return {"entries": entries}
