"""A search over torch releases, in words and tables (the terminal, issue.md, the HTML report).

Contract: pure; `release_rows(result)` is one row per release run (oldest first), `conclusions(result)` the
sentences for what the search found (fixed in, regressed in, not fixed in the newest run, why it stopped),
`versions_markdown(result)` the section issue.md embeds. They format `VersionsResult`'s fields: the
boundaries were drawn by `analysis.versions.conclude`.
"""

from __future__ import annotations

from pathlib import Path

from pt2doctor.model.versions import OUTCOME_WORDS, Boundary, ReleaseOutcome, ReleaseRun, VersionsResult

COLUMNS = ("torch", "build", "outcome", "detail", "install s", "run s")


def release_rows(result: VersionsResult) -> list[dict[str, str]]:
    return [_row(run, run.release == result.user_release) for run in result.runs]


def _row(run: ReleaseRun, yours: bool) -> dict[str, str]:
    detail = run.why or (run.signature if run.outcome is ReleaseOutcome.FAILS_SAME else "")
    return {"torch": run.release + (" (yours)" if yours else ""), "build": run.build or "-",
            "outcome": OUTCOME_WORDS[run.outcome], "detail": detail,
            "install s": _install(run, yours),
            "run s": f"{run.run_s:.1f}" if run.outcome is not ReleaseOutcome.CANNOT_RUN else "-"}


def _install(run: ReleaseRun, yours: bool) -> str:
    """Seconds spent installing it now; `reused` for an environment that was there (cached, or given)."""
    if yours or run.outcome is ReleaseOutcome.CANNOT_RUN:
        return "-"
    return "reused" if run.install_s is None else f"{run.install_s:.0f}"


def conclusions(result: VersionsResult) -> list[str]:
    out: list[str] = []
    if result.fixed is not None:
        out.append(f"fixed in torch {result.fixed.after}: {_name(result)} passes there and fails under "
                   f"{result.fixed.before}{_between(result.fixed)}; upgrading torch is the fix (verified on the repro)")
    newest = _newest_run(result)
    if result.fixed is None and newest is not None and newest.release != result.user_release:
        out.append(f"not fixed in torch {newest.release}, the newest release run: it {OUTCOME_WORDS[newest.outcome]}")
    if result.regressed is not None:
        r = result.regressed
        out.append(f"regressed in torch {r.after}: passes under {r.before}, fails the same way from {r.after}"
                   f"{_between(r)}")
    if result.stopped:
        out.append(result.stopped)
    return out + list(result.notes)


def _name(result: VersionsResult) -> str:
    return Path(result.repro).name or "the repro"


def _between(boundary: Boundary) -> str:
    return "" if boundary.exact else " (the releases between them were not run)"


def _newest_run(result: VersionsResult) -> ReleaseRun | None:
    ran = [r for r in result.runs if r.outcome is not ReleaseOutcome.CANNOT_RUN]
    return ran[-1] if ran else None


def versions_markdown(result: VersionsResult) -> str:
    lines = ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    for row in release_rows(result):
        lines.append("| " + " | ".join(_cell(row[c]) for c in COLUMNS) + " |")
    lines.append("")
    lines += [f"- {line}" for line in conclusions(result)]
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
