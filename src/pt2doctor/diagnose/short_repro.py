"""Hand the minimal graph over in PyTorch's idiom: repro.py a short script, test_repro.py a regression test.

Contract: `hand_over_short(found, out_dir, target_signature, timeout_s)` is called once the graph's repro is
verified (`found.minify`). The minifier wrote the short form and the test beside it, from the same minimal case
(`reduce.short_repro`); here the short form is verified both ways in fresh interpreters, as a reduced program is
(`reduce.program.verify_program`): as written it fails with the script's failure identity (for a wrong result:
`assert_close`'s), and with compilation off it passes; the test is judged by `reduce.regression_test.verified_test`
(it fails in a test now and passes with compilation off; not where PyTorch's test utilities cannot import: a note
says so). The form with public torch functions for aten ops (`reduce.short_repro.at_torch_level`) is tried first,
the aten form where it does not reproduce, then the aten form whose graph Inductor compiles alone
(`reduce.short_repro.inductor_alone`: no AOTAutograd pass over it, as in the minifier's harness); the forms and
tests not handed over are removed. When a short form verifies, it becomes repro.py and the harness form is kept as
repro_graph.py (the bisector's input, `found.minify.repro_path`); else repro.py stays the harness form, a note says
why, and its own check is the regression test (`reduce.regression_test.write_harness_test`, `found.harness_test`).
A graph with no short form at all (a higher-order op, functorch's private calls) has the program reduced instead, where
it verified (`found.program`, reason "short", reduced before the hand-over): it becomes repro.py and its test
test_repro.py (`hand_over_program`); so does a program reduced after the hand-over because no short form reproduced
and the harness form is longer than a maintainer reads (`diagnose.reduction.program_for_short`). `found.short`
records what was handed over.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.diagnose.found import Found
from pt2doctor.model.diagnosis import ShortForm
from pt2doctor.model.minify import FailureKind, MinifyResult, Stage, VerifyRuns
from pt2doctor.reduce.program import ProgramJob, program_runs, verify_program
from pt2doctor.reduce.regression_test import missing_dependencies, no_test_note, verified_test, write_harness_test
from pt2doctor.reduce.short_repro import MISMATCH, at_torch_level, inductor_alone

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks

# what the short form's `torch.testing.assert_close` raises for a wrong result, whatever the dtype
_ASSERT_CLOSE = "AssertionError: " + MISMATCH.strip()


def hand_over_short(found: Found, out_dir: Path, signature: str, timeout_s: float,
                    forks: FreshForks | None = None) -> None:
    """`forks`: where the fresh runs that verify are forked from (`processes.fresh_forks`), else new interpreters."""
    m = found.minify
    if m is None or not m.verified:
        return
    if m.short_repro is None and hand_over_program(found):
        return
    if m.short_repro is None or not _short(found, m, out_dir, signature, timeout_s, forks):
        _harness_test(found, m, timeout_s, forks)


def hand_over_program(found: Found) -> bool:
    """The program reduced where the graph has no short form (`diagnose.program`, reason "short"), handed over as the
    short form where it verified (True): repro.py, its test test_repro.py (else the harness form's test, where it has
    one), the graph's harness form repro_graph.py."""
    p = found.program
    if p is None or p.reason != "short" or not p.verified or p.verify_runs is None:
        return False
    test = p.test or found.harness_test
    _hand_over(found, Path(p.repro_path), Path(test) if test else None, p.verify_runs)
    assert found.short is not None
    found.program = replace(p, repro_path=found.short.repro, test=found.short.test)
    return True


def _harness_test(found: Found, m: MinifyResult, timeout_s: float, forks: FreshForks | None) -> None:
    """repro.py stays the harness form: its regression test is the harness's own check in a test."""
    test = None if missing_dependencies() else write_harness_test(Path(m.repro_path), timeout_s, dies_of=m.signature,
                                                                  forks=forks)
    if test is None:
        found.notes.append(no_test_note())
    found.harness_test = str(test) if test else None


def _short(found: Found, m: MinifyResult, out_dir: Path, signature: str, timeout_s: float,
           forks: FreshForks | None) -> bool:
    """The short forms in order; the first that reproduces both ways is handed over (True)."""
    assert m.short_repro is not None
    accuracy = m.signature.kind is FailureKind.ACCURACY
    target = _ASSERT_CLOSE if accuracy else signature
    forms = _forms(Path(m.short_repro), Path(m.test_repro) if m.test_repro else None, m.stage is Stage.AOT)
    for short, test in forms:
        job = ProgramJob(short, (), target, None, out_dir / "short", 0.0, timeout_s, reason="fallback",
                         type_only=accuracy)
        testable = test if test is not None and not missing_dependencies() else None
        with ThreadPoolExecutor(1) as thread:  # the test beside the short form's runs: it costs no wall time
            tested = (thread.submit(verified_test, testable, *program_runs(job, testable, force=False), timeout_s,
                                    dies_of=m.signature, forks=forks) if testable else None)
            runs = verify_program(short, job, force=False, forks=forks)
            test_verified = tested.result() if tested else False
        if runs is not None and runs.every_time:
            _hand_over(found, short, test if test_verified else None, runs)
            if test is not None and not test_verified:
                found.notes.append(no_test_note())
            assert found.short is not None
            _discard(forms, {Path(p) for p in (found.short.repro, found.short.test) if p})
            return True
        found.notes.append(f"the short form of the repro ({short.name}) did not reproduce both ways ("
                           + (str(runs) if runs else "it fails with compilation off too, or not the same way")
                           + ")" + ("" if short is forms[-1][0] else ": the next form is tried"))
    found.notes[-1] += ": repro.py is the minifier's harness form"
    _discard(forms, set())
    return False


def _discard(forms: list[tuple[Path, Path | None]], kept: set[Path]) -> None:
    """The forms and tests not handed over leave the bundle: an unverified test_repro.py must not pass for one."""
    for path in {p for form in forms for p in form if p is not None} - kept:
        path.unlink(missing_ok=True)


def _forms(short: Path, test: Path | None, aten: bool) -> list[tuple[Path, Path | None]]:
    """The torch-level form first (`reduce.short_repro.at_torch_level`), where it differs, then the aten form, then
    the aten form with Inductor alone compiling its graph (`reduce.short_repro.inductor_alone`; `aten`: an after-AOT
    graph, compiled as written), where it has one."""
    forms: list[tuple[Path, Path | None]] = []
    for rewrite, suffix in ((at_torch_level, "_torch"), (None, ""), (partial(inductor_alone, aten=aten), "_alone")):
        if rewrite is None:
            forms.append((short, test))
            continue
        text = rewrite(short.read_text())
        if text is None:
            continue
        written = short.with_name(f"repro_short{suffix}.py")
        written.write_text(text)
        test_text = rewrite(test.read_text()) if test is not None else None
        written_test = test.with_name(f"test_repro{suffix}.py") if test is not None and test_text else None
        if written_test is not None and test_text is not None:
            written_test.write_text(test_text)
        forms.append((written, written_test))
    return forms


def _hand_over(found: Found, short: Path, test: Path | None, runs: VerifyRuns) -> None:
    """`short` becomes repro.py (the harness form kept as repro_graph.py), `test` test_repro.py."""
    m = found.minify
    assert m is not None
    repro, graph = Path(m.repro_path), Path(m.repro_path).with_name("repro_graph.py")
    os.replace(repro, graph)
    os.replace(short, repro)
    if test is not None and test != repro.with_name("test_repro.py"):
        test = test.replace(repro.with_name("test_repro.py"))
    found.minify = replace(m, repro_path=str(graph), short_repro=str(repro))
    found.short = ShortForm(repro=str(repro), graph=str(graph), lines=repro_lines(repro), runs=runs,
                            test=str(test) if test else None)


def repro_lines(path: Path | str) -> int:
    """A repro's lines, its docstring included (what the reader of the issue sees); 0 for a file that is not there."""
    try:
        return len(Path(path).read_text().splitlines())
    except OSError:
        return 0
