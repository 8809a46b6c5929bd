"""The parts of `issue.md` that differ for a failure in torch.export or AOTInductor (`Diagnosis.export`).

Contract: pure apart from reading the repro. `export_title_tag(finding)` is the title's tag, `export_stage(finding)`
names the step in words, `export_summary(finding)` is the summary paragraph; `report.issue` uses them in place of the
torch.compile stage words when the diagnosis has an export finding; `export_repro_text(d)` is the
AOTInductor repro's source ("" when there is none).
"""

from __future__ import annotations

from pathlib import Path

from pt2doctor.model.diagnosis import Diagnosis
from pt2doctor.model.export import AOTI_STEPS, STEP_TITLES, ExportFailureKind, ExportFinding


def export_title_tag(finding: ExportFinding) -> str:
    if finding.step in AOTI_STEPS or finding.kind is ExportFailureKind.WRONG_RESULT:
        return "AOTInductor"
    return "export"


def export_stage(finding: ExportFinding) -> str:
    return STEP_TITLES[finding.step] if finding.step else "the package's results"


def export_summary(finding: ExportFinding) -> str:
    entry = f"`{finding.entry.value}`"
    if finding.kind is ExportFailureKind.WRONG_RESULT:
        return (f"The AOTInductor package of a program exported with {entry} computes otherwise than the exported "
                "program run eagerly (`ep.module()`): the script's own check fails with the package and passes "
                "without it.")
    if finding.step in AOTI_STEPS:
        return (f"A program exported with {entry} fails in {export_stage(finding)}; with the package replaced by "
                "the exported program run eagerly (`ep.module()`) the script passes.")
    other = {True: " (the other tracing mode exports it)", False: " (the other tracing mode fails too)"}
    return f"{entry} fails in {export_stage(finding)}{other.get(finding.other_mode_passes, '')}."  # type: ignore[arg-type]


def export_repro_text(d: Diagnosis) -> str:
    repro = d.export.repro if d.export else None
    return Path(repro).read_text() if repro and Path(repro).exists() else ""
