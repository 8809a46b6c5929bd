"""pt2doctor's data model: frozen values, no torch, no other pt2doctor imports."""

from pt2doctor.model.findings import (
    Analysis,
    FailureExplanation,
    Finding,
    RecompileChain,
    RecompileStep,
    Severity,
    Verdict,
)
from pt2doctor.model.ids import CompileId, SourceLoc
from pt2doctor.model.session import (
    SCHEMA,
    Category,
    Compile,
    Environment,
    ExitInfo,
    Extras,
    Failure,
    GraphBreak,
    GuardFailure,
    GuardKind,
    LimitHit,
    Phases,
    Recompile,
    Session,
    TraceStats,
)

__all__ = [
    "SCHEMA", "Analysis", "FailureExplanation", "RecompileChain", "RecompileStep", "Verdict", "Category", "Compile",
    "CompileId", "Environment", "ExitInfo", "Extras", "Failure", "Finding",
    "GraphBreak", "GuardFailure", "GuardKind", "LimitHit", "Phases", "Recompile", "Session",
    "Severity", "SourceLoc", "TraceStats",
]
