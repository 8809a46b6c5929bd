"""Which input properties a verified minimal repro's failure needs: each taken away alone, the same
oracle asked. PyTorch's minifier test program, whose backend fails only on a non-leaf input."""

from __future__ import annotations

from pathlib import Path

import pytest

from pt2doctor.capture.recorded_run import record_script
from pt2doctor.reduce.fx_load import load_failing
from pt2doctor.reduce.fx_minify import MinifyOptions, minify_case

REALBUGS = Path(__file__).parents[1] / "realbugs"


@pytest.mark.slow
def test_a_backend_that_fails_on_a_non_leaf_input_needs_the_non_leaf(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    assert record_script(REALBUGS / "minifier_dynamo_non_leaf_compile_error.py", run_dir) != 0
    recorded = load_failing(run_dir)
    outcome = minify_case(recorded.case, recorded.context, MinifyOptions(tmp_path / "out", jobs=1,
                                                                         expected=recorded.expected))
    result = outcome.result
    assert result.verified
    assert [(n.input, n.property) for n in result.input_needs] == [(0, "non-leaf")]
    assert "must be a non-leaf tensor (with autograd history): as a leaf tensor that requires grad it passes" in \
        result.input_needs[0].describe()
