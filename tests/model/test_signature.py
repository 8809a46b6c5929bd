"""A failure's identity: the same failure compares equal whatever the numbers in its text."""

from __future__ import annotations

import pytest

from pt2doctor.model.signature import normalize


@pytest.mark.parametrize(("a", "b"), [
    ("AssertionError: max abs diff 1", "AssertionError: max abs diff 0.7738"),
    ("AssertionError: Tensor-likes are not close! Mismatched elements: 3 / 16 (18.8%)",
     "AssertionError: Tensor-likes are not close! Mismatched elements: 12 / 16 (75.0%)"),
    ("RuntimeError: expected 1e-05 got -3.5E+02", "RuntimeError: expected 0.1 got 7"),
    ("IndexError: index 17 is out of bounds for dimension 0 with size 16",
     "IndexError: index 255 is out of bounds for dimension 0 with size 16"),
    # one device assert, noticed by Triton's launcher or at the next sync: the same CUDA error
    ("RuntimeError: CUDA driver error: device-side assert triggered",
     "AcceleratorError: CUDA error: device-side assert triggered"),
    ("torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
     "RuntimeError: CUDA error: an illegal memory access was encountered"),
])
def test_the_same_failure_with_other_numbers_is_equal(a: str, b: str) -> None:
    assert normalize(a) == normalize(b)


@pytest.mark.parametrize(("a", "b"), [
    ("RuntimeError: mat1 and mat2 shapes cannot be multiplied", "RuntimeError: size mismatch"),
    ("LoweringException: AssertionError: aten.bartlett_window", "LoweringException: AssertionError: aten.eye"),
    ("CppCompileError: error: float8 unsupported", "InductorError: error: float8 unsupported"),
    ("RuntimeError: expected int8 got int64", "RuntimeError: expected int8 got int32"),  # digits in a name stay
    ("AcceleratorError: CUDA error: device-side assert triggered",
     "AcceleratorError: CUDA error: an illegal memory access was encountered"),
])
def test_different_failures_stay_different(a: str, b: str) -> None:
    assert normalize(a) != normalize(b)


def test_normalize_is_idempotent() -> None:
    text = "AssertionError: max abs diff 0.7738 at /tmp/x/y.py:12 (0x7f00)"
    assert normalize(normalize(text)) == normalize(text)


def test_names_with_digits_are_kept() -> None:
    assert "fp64" in normalize("AccuracyMismatch: compiled differs beyond the fp64-referenced tolerance")
