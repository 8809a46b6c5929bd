"""The report document: a session plus what analysis concluded, as one value renderers format.

Contract: `build_report(session)` enriches and analyzes (pure): renderers read the report's `analysis`
for everything beyond the session's raw facts, and decide nothing themselves; `to_json_bytes` writes the session
schema (docs/reference/session-json.md) with `findings` and `verdict` added; `read_session_json` reads one back
(a raw TORCH_TRACE is read by capture: `cli.output.load_session` takes either).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from pt2doctor.analysis import analyze_session
from pt2doctor.model import Analysis, FailureExplanation, Finding, RecompileChain, Session, Verdict
from pt2doctor.model.job import JOB_SCHEMA, Job
from pt2doctor.model.serialize import dumps, loads, to_builtins


@dataclass(frozen=True, slots=True)
class Report:
    session: Session
    analysis: Analysis

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.analysis.findings

    @property
    def verdict(self) -> Verdict:
        return self.analysis.verdict

    @property
    def recompiles(self) -> tuple[RecompileChain, ...]:
        return self.analysis.recompiles

    @property
    def failures(self) -> tuple[FailureExplanation, ...]:
        return self.analysis.failures


class ReportInputError(Exception):
    """The path given to `report` is neither a session nor a trace."""


def build_report(session: Session) -> Report:
    return Report(*analyze_session(session))


def to_builtins_document(report: Report) -> dict[str, Any]:
    doc = to_builtins(report.session)
    doc["findings"] = to_builtins(list(report.findings))
    doc["verdict"] = {"ok": report.verdict.ok, "headline": report.verdict.headline,
                      "exit_code": report.verdict.exit_code,
                      "category": report.verdict.category.value if report.verdict.category else None}
    return doc


def to_json_bytes(report: Report) -> bytes:
    return msgspec.json.format(dumps(to_builtins_document(report)), indent=2)


def save_report(report: Report, path: Path) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(to_json_bytes(report))
    tmp.replace(path)


def session_json_of(path: Path) -> Path | None:
    """The session.json that `path` names (itself, or inside a run directory), if it is one."""
    session_file = path / "session.json" if path.is_dir() else path
    return session_file if session_file.suffix == ".json" and session_file.exists() else None


class _Schema(msgspec.Struct):
    schema: str = ""


def read_job_json(path: Path) -> Job | None:
    """The job (one session per rank) that a session.json of `run --nproc-per-node` holds; None for one process."""
    data = path.read_bytes()
    try:
        if msgspec.json.decode(data, type=_Schema).schema != JOB_SCHEMA:
            return None
        return loads(data, Job)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReportInputError(f"{path} is not a pt2doctor job: {exc}") from exc


def read_session_json(path: Path) -> Session:
    try:
        return loads(path.read_bytes(), Session)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise ReportInputError(f"{path} is not a pt2doctor session: {exc}") from exc
