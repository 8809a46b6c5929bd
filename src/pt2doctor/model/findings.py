"""Findings: what an analysis concluded, with its evidence and the fix it suggests.

Contract: renderers only format findings; they never decide severity or wording of advice.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from pt2doctor.model.ids import CompileId, SourceLoc


class Severity(str, Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@dataclass(frozen=True, slots=True)
class Finding:
    kind: str
    severity: Severity
    title: str
    evidence: tuple[str, ...] = ()
    fix: tuple[str, ...] = ()
    where: SourceLoc | None = None
    compile_id: CompileId | None = None
    weight: float = 0.0
