"""Hand the minimal graph over in PyTorch's idiom: repro.py a short script, test_repro.py a regression test.

Contract: `hand_over_short(found, out_dir, target_signature, timeout_s)` is called once the graph's repro
is verified (`found.minify`). The minifier wrote the short form and the test beside it, from the same
minimal case (`reduce.short_repro`); here the short form is verified both ways in fresh interpreters, as a
reduced program is (`reduce.program.verify_program`): as written it fails with the script's failure
identity (for a wrong result: `assert_close`'s), and with compilation off it passes; the test is run once
and must fail now. When the short form verifies, it becomes repro.py and the harness form is kept as
repro_graph.py (the bisector's input, `found.minify.repro_path`); else repro.py stays the harness form
and a note says why. `found.short` records what was handed over.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path

from pt2doctor.diagnose.found import Found
from pt2doctor.model.diagnosis import ShortForm
from pt2doctor.model.minify import FailureKind, FailureSignature
from pt2doctor.reduce.program import ProgramJob, verify_program
from pt2doctor.reduce.short_repro import MISMATCH
from pt2doctor.processes.fresh import verify

# what the short form's `torch.testing.assert_close` raises for a wrong result, whatever the dtype
_ASSERT_CLOSE = "AssertionError: " + MISMATCH.strip()


def hand_over_short(found: Found, out_dir: Path, signature: str, timeout_s: float) -> None:
    m = found.minify
    if m is None or not m.verified or m.short_repro is None:
        return
    accuracy = m.signature.kind is FailureKind.ACCURACY
    short = Path(m.short_repro)
    job = ProgramJob(short, (), _ASSERT_CLOSE if accuracy else signature, None, out_dir / "short", 0.0, timeout_s,
                     reason="fallback", type_only=accuracy)
    with ThreadPoolExecutor(1) as thread:  # the test beside the short form's runs: it costs no wall time
        tested = thread.submit(_verified_test, Path(m.test_repro), timeout_s) if m.test_repro else None
        runs = verify_program(short, job, force=False)
        test = tested.result() if tested else None
    if runs is None or not runs.every_time:
        found.notes.append(f"the short form of the repro ({short.name}) did not reproduce both ways ("
                           + (str(runs) if runs else "it fails with compilation off too, or not the same way")
                           + "): repro.py is the minifier's harness form")
        return
    repro, graph = Path(m.repro_path), Path(m.repro_path).with_name("repro_graph.py")
    os.replace(repro, graph)
    os.replace(short, repro)
    found.minify = replace(m, repro_path=str(graph), short_repro=str(repro))
    found.short = ShortForm(repro=str(repro), graph=str(graph), lines=_lines(repro), runs=runs,
                            test=str(test) if test else None)


def _verified_test(test: Path, timeout_s: float) -> Path | None:
    """The regression test, when it fails now in a fresh interpreter (unittest exits 1)."""
    ran = verify(test, FailureSignature(FailureKind.EXCEPTION, "exit status 1"), timeout_s=timeout_s, runs=1)
    return test if ran.verified else None


def _lines(path: Path) -> int:
    return len(path.read_text().splitlines())
