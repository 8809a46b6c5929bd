"""Where the installed torch handles what a diagnosis found, looked up in a fresh interpreter.

Contract: `look_up(request, timeout_s)` never raises. It runs `python -m pt2doctor.capture.source_lookup
REQUEST` (a `SourceLookup`, encoded with the codec) in a child interpreter, since the look-up imports
Inductor's lowerings and decompositions (seconds, and state the diagnosing process keeps out of itself),
and returns the `SourceLookupResult` the child wrote to `request.out`; when there is none (a timeout, a
crash, a torch that moved its registries) an empty result whose `note` says why. The child's work is
`torch_compat.where_to_look`, then, for a failure no graph shows, what of the compiler its reduced program reached
(`torch_compat.dynamo_trackers`, `torch_compat.aot_paths`; the program run in its own directory).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pt2doctor.capture.bytecode_cache import worker_env
from pt2doctor.capture.runner import with_package_path
from pt2doctor.model.serialize import RecordError, dumps, loads, read_record, write_record
from pt2doctor.model.source_refs import SourceLookup, SourceLookupResult
from pt2doctor.processes import launch


def look_up(request: SourceLookup, timeout_s: float = 120.0) -> SourceLookupResult:
    out = Path(request.out)
    out.unlink(missing_ok=True)
    try:
        proc = launch.run([sys.executable, "-m", __spec__.name, dumps(request).decode()], timeout_s=timeout_s,
                          env=with_package_path(worker_env()),
                          cwd=Path(request.program).parent if request.program else None)
    except OSError as exc:
        return SourceLookupResult(note=f"the source look-up did not start: {exc}")
    if proc.timed_out:
        return SourceLookupResult(note=f"the source look-up stopped after {timeout_s:.0f}s")
    try:
        return read_record(out, SourceLookupResult)
    except (OSError, RecordError):
        tail = (proc.stderr.strip().splitlines() or [""])[-1]
        return SourceLookupResult(note=f"the source look-up died (exit {proc.returncode}){': ' + tail if tail else ''}")


def main(argv: list[str]) -> int:
    from pt2doctor.capture import torch_compat

    request = loads(argv[0], SourceLookup)
    try:
        refs = torch_compat.where_to_look(request.ops, request.backend, request.subsystem, request.debug_info,
                                          request.settings, request.lowerings)
        if request.aoti_input_checks:
            refs += [ref for ref in (torch_compat.aoti_input_checks_ref(),) if ref is not None]
        if request.program:  # last: it runs the program, which may leave this interpreter in any state
            program = Path(request.program)
            refs += (torch_compat.dynamo_trackers(program) if request.reached_by == "eager" else
                     torch_compat.aot_paths(program, request.reached_by))
        result = SourceLookupResult(tuple(refs))
    except Exception as exc:  # a torch whose registries moved: say so, the diagnosis goes on
        result = SourceLookupResult(note=f"the source look-up failed: {type(exc).__name__}: {exc}")
    write_record(Path(request.out), result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
