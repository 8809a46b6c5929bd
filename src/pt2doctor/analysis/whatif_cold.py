"""What if the compile caches were cold: compile time per frame and per phase, cold against warm.

Contract: `compare_cold_warm(cold, warm)` is pure; `cold` is a run with every compile cache disabled
(`TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`, as PyTorch's compile-time guide does), `warm` a run of the
same script whose caches an earlier run filled. Frames are matched by compile id (same script, same
inputs: the same frames compile in the same order); a frame only one run compiled shows 0 s in the other.
"""

from __future__ import annotations

from dataclasses import dataclass

from pt2doctor.analysis.compile_time import phase_totals
from pt2doctor.model import Phases, Session


@dataclass(frozen=True, slots=True)
class ColdWarmRow:
    compile_id: str
    function: str
    cold_s: float
    warm_s: float
    cold_phases: Phases
    warm_phases: Phases


@dataclass(frozen=True, slots=True)
class ColdWarm:
    rows: tuple[ColdWarmRow, ...]
    cold_total: float
    warm_total: float
    cold_phases: dict[str, float]
    warm_phases: dict[str, float]


def compare_cold_warm(cold: Session, warm: Session) -> ColdWarm:
    warm_by_id = {str(c.compile_id): c for c in warm.compiles}
    cold_by_id = {str(c.compile_id): c for c in cold.compiles}
    rows = []
    for cid in sorted(set(cold_by_id) | set(warm_by_id)):
        c, w = cold_by_id.get(cid), warm_by_id.get(cid)
        any_ = c or w
        rows.append(ColdWarmRow(cid, any_.function if any_ else "?", (c.time_s or 0.0) if c else 0.0,
                                (w.time_s or 0.0) if w else 0.0, c.phases if c else Phases(),
                                w.phases if w else Phases()))
    rows.sort(key=lambda r: -r.cold_s)
    return ColdWarm(tuple(rows), cold.compile_time_s, warm.compile_time_s, phase_totals(cold), phase_totals(warm))
