"""Minify an AOTInductor failure in `diagnose`: the recorded exported program's graph, AOTInductor the oracle.

Contract: `minify_export(options, run_dir, found, finding)` is called by `export.diagnose.steps` once an
AOTInductor failure is AOTInductor's (the exported program run eagerly passes) and the whole program's
repro is written. It reduces the graph the failing run kept (`reduce.aoti_minify`; the kept program
and inputs, `export.capture.record`), a wrong result under the accuracy rule, and sets
`found.minify`: its verified `repro.py` is the diagnosis' repro. The whole program's repro moves to
`repro_program.py` beside it (the finding says so); it stays `repro.py` when nothing was minified.
A minifier failure is a note: the diagnosis so far stands.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from pt2doctor.capture.runner import Reporter
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.model.export import RECORDING_DIR, ExportFailureKind, ExportFinding

PROGRAM_REPRO = "repro_program.py"
_MIN_QUERY_TIMEOUT_S = 600.0  # a query exports and AOT-compiles a C++ package: minutes on a busy 2-core CPU


def minify_export(options: DiagnoseOptions, run_dir: Path, found: Found, finding: ExportFinding,
                  reporter: Reporter, minify_reporter: object = None) -> ExportFinding:
    """Minify (see the module docstring); returns `finding` with the whole program's repro where it now is."""
    from pt2doctor.reduce.aoti_minify import minify_program
    from pt2doctor.reduce.fx_minify import CannotReproduce, MinifyOptions

    whole = Path(finding.repro) if finding.repro else None
    if not options.minify or whole is None or not finding.repro_verified:
        return finding  # no recording to reduce, or one that does not fail alone: nothing to keep failing
    moved = whole.replace(whole.with_name(PROGRAM_REPRO))
    reporter.status("minifying the exported program's graph, AOTInductor the oracle")
    minify_options = MinifyOptions(options.out_dir, options.jobs, max(options.query_timeout_s, _MIN_QUERY_TIMEOUT_S),
                                   graph_name="exported program")
    with found.timed("minify"):
        try:
            found.minify = minify_program(run_dir / RECORDING_DIR, minify_options,
                                          accuracy=finding.kind is ExportFailureKind.WRONG_RESULT,
                                          reporter=minify_reporter).result  # type: ignore[arg-type]
        except CannotReproduce as exc:
            found.notes.append(f"not minified: {exc}")
        except Exception as exc:  # the diagnosis so far must survive a minifier failure
            found.notes.append(f"the minifier failed: {type(exc).__name__}: {exc}")
    m = found.minify
    if m is None:
        moved.replace(whole)
        return finding
    word = "verified" if m.verified else "NOT verified"
    reporter.status(f"minified {m.nodes_before} -> {m.nodes_after} nodes {list(m.ops)} ({word})")
    return replace(finding, repro=str(moved))
