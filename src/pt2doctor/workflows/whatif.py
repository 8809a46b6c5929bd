"""Run the unchanged script once per proposed configuration change and measure the effect.

Contract: `baseline_options(options)` returns the options of the first run, with output recording and
seeding on (`capture/child/overrides.py`), so every trial is compared with a run that drew the same random
inputs. `try_fixes(baseline, options, trials, reporter)` re-runs the script under each trial's
overrides in `<out>/whatif/<name>/`, then judges each (`analysis.whatif.judge`). Output equality is
measured on the return values of the first calls of every `torch.compile`d callable (summaries
written by the child), not on stdout: stdout often prints timings or progress that differ run to run.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import msgspec

from pt2doctor.analysis.whatif import Trial, TrialResult, judge, outputs_equal
from pt2doctor.capture.process_meta import records
from pt2doctor.capture.runner import Reporter, RunOptions, run_script
from pt2doctor.model import Session
from pt2doctor.model.child import Overrides
from pt2doctor.model.outputs import OutputRecord
from pt2doctor.model.serialize import loads

OUTPUTS = "outputs.jsonl"
SEED = 0


def _with_overrides(options: RunOptions, overrides: Overrides, out_dir: Path) -> RunOptions:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / OUTPUTS).unlink(missing_ok=True)
    spec = msgspec.structs.replace(overrides, seed=SEED, record_outputs=str((out_dir / OUTPUTS).resolve()))
    return replace(options, out_dir=out_dir, hooks=msgspec.structs.replace(options.hooks, overrides=spec))


def baseline_options(options: RunOptions) -> RunOptions:
    return _with_overrides(options, Overrides(), options.out_dir)


def read_outputs(run_dir: Path) -> list[OutputRecord]:
    """The outputs the child recorded (none when it recorded none, or died writing one)."""
    return records(run_dir / OUTPUTS, OutputRecord)


def try_fixes(baseline: Session, options: RunOptions, trials: list[Trial],
              reporter: Reporter | None = None) -> list[TrialResult]:
    before = read_outputs(options.out_dir)
    results = []
    for trial in trials:
        out = options.out_dir / "whatif" / re.sub(r"[^\w.-]+", "_", trial.name)
        if reporter is not None:
            reporter.status(f"what-if: {trial.change}")
        session = run_script(_with_overrides(options, loads(trial.overrides, Overrides), out), reporter)
        results.append(judge(trial, baseline, session, outputs_equal(before, read_outputs(out)), str(out)))
    return results
