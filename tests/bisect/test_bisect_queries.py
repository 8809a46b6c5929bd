"""The bisector's queries judge the minimal repro as the repro's own check does (`bisect.child`)."""

from __future__ import annotations

import torch

from pt2doctor.bisect.child import _check


def test_a_kernel_error_reported_at_the_next_synchronize_fails_the_query():
    """On a GPU a kernel's error (a misaligned address, a device-side assert) is raised by a later call, which the
    repro's check makes itself (`synchronize()` after each side); the query must make it too, or every query of a
    crash "passes" (four real CUDA crashes had no bisection: "the repro does not fail in the bisection process").
    The GPU is stood in for by a backend whose compiled call leaves an error for the next synchronize to raise."""
    deferred: list[str] = []

    def synchronize():
        if deferred:
            raise RuntimeError(deferred.pop())

    def launching_backend(gm, example_inputs):
        def compiled(*args):
            deferred.append("CUDA error: misaligned address")  # the kernel ran; the GPU reports it later
            return gm(*args)
        return compiled

    class Repro(torch.nn.Module):
        def forward(self, x):
            return (x + 1,)

    ns = {"Repro": Repro, "make_inputs": lambda: [torch.randn(4)], "synchronize": synchronize,
          "describe_failure": lambda exc: f"{type(exc).__name__}: {exc}"}
    assert _check(ns, launching_backend, "CUDA error: misaligned address") == 1
    assert _check(ns, "eager", "CUDA error: misaligned address") == 0  # nothing launched: it passes
