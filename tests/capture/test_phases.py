"""Compile phases are named by what torch measured. The metrics are torch 2.13's `compilation_metrics` of
real compiles (CPU): a custom backend that sleeps 0.5 s, Inductor cold, and Inductor with cache hits."""

from __future__ import annotations

import pytest

from pt2doctor.capture.trace.session_builder import phase_times
from pt2doctor.model.session import Phases

CUSTOM = {"entire_frame_compile_time_s": 1.351012, "backend_compile_time_s": 0.580096,
          "dynamo_cumulative_compile_time_us": 1351012, "aot_autograd_cumulative_compile_time_us": 580096}
INDUCTOR = {"entire_frame_compile_time_s": 18.60555, "backend_compile_time_s": 18.449227,
            "dynamo_cumulative_compile_time_us": 18605550, "aot_autograd_cumulative_compile_time_us": 18449227,
            "inductor_cumulative_compile_time_us": 16552420, "inductor_code_gen_cumulative_compile_time_us": 16276726,
            "inductor_fx_local_cache_miss_count": 1, "aotautograd_local_cache_miss_count": 1}
AOT_HIT = {"dynamo_cumulative_compile_time_us": 2_000_000, "aot_autograd_cumulative_compile_time_us": 1_810_000,
           "aotautograd_local_cache_hit_count": 1}
FX_HIT = {"dynamo_cumulative_compile_time_us": 2_000_000, "aot_autograd_cumulative_compile_time_us": 1_500_000,
          "inductor_cumulative_compile_time_us": 300_000, "inductor_fx_local_cache_hit_count": 1}


@pytest.mark.parametrize(("metrics", "expected"), [
    (CUSTOM, Phases(dynamo=0.770916, backend=0.580096)),
    (INDUCTOR, Phases(dynamo=0.156323, aot=1.896807, inductor=0.275694, codegen=16.276726)),
    (AOT_HIT, Phases(dynamo=0.19, cache_load=1.81)),
    (FX_HIT, Phases(dynamo=0.5, aot=1.2, cache_load=0.3)),
], ids=["custom backend", "inductor", "aot autograd cache hit", "fx graph cache hit"])
def test_phases_are_what_torch_measured(metrics: dict, expected: Phases) -> None:
    got = phase_times(metrics)
    for name in Phases.__dataclass_fields__:
        assert getattr(got, name) == pytest.approx(getattr(expected, name), abs=1e-6), name
