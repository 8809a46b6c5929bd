"""The issue bundle of `diagnose`: `diagnosis.json`, `issue.md` (ready to paste into a PyTorch issue), `report.html`.

Contract: `write_bundle(diagnosis, session, out_dir)` writes what applies and returns the paths
written (`load_bundle(out_dir)` reads a bundle back, for `pt2doctor report DIR`); `diagnosis.json` is written first and
always, so nothing found is lost if a later file fails. `render_issue(diagnosis, session)` is pure apart from reading
the repro and the user's source lines it quotes. `issue.md` follows PyTorch's bug template: a title, the one-line error,
the minimal repro inline, expected vs actual, how it was narrowed down (the stage table, the bisection), and the
versions with the non-default compiler config.
"""

from __future__ import annotations

import functools
import linecache
import os
import platform
import re
import sys
from pathlib import Path

import jinja2

from pt2doctor.export.report.issue import export_repro_text, export_stage, export_summary, export_title_tag
from pt2doctor.model import Session
from pt2doctor.model.category_policy import policy
from pt2doctor.model.diagnosis import SCHEMA, STAGE_TITLES, Diagnosis, FailingStage, handed_over, verified_upgrade
from pt2doctor.model.report_inputs import HtmlInputs
from pt2doctor.model.serialize import dumps, loads
from pt2doctor.report.versions import versions_markdown

_STAGE_TAGS = {FailingStage.DYNAMO: "dynamo", FailingStage.AOT_AUTOGRAD: "aotautograd",
               FailingStage.DECOMP_PARTITION: "aotautograd", FailingStage.INDUCTOR: "inductor",
               FailingStage.BACKEND: "custom backend"}


@functools.cache
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("pt2doctor", "report/templates"), autoescape=False,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    return env.get_template("issue.md.j2")


def write_bundle(diagnosis: Diagnosis, session: Session | None, out_dir: Path,
                 inputs: HtmlInputs | None = None) -> list[Path]:
    written = [write_diagnosis(diagnosis, out_dir)]
    workaround = handed_over(diagnosis.workarounds)
    if workaround is not None and workaround.patch:  # the user's file changed as the workaround changes a copy
        written.append(_write(out_dir / "workaround.patch", workaround.patch.encode()))
    issue = ""
    # interrupted: what was found so far; flaky: only with a repro that fails some of the time (the rate is told)
    flaky_repro = diagnosis.repro_runs is not None and diagnosis.repro_runs.flaky
    environment = diagnosis.control is not None and diagnosis.control.fails_the_same_way  # not the program's bug
    if (diagnosis.failed and (flaky_repro or not diagnosis.flaky) and not environment
            and policy(diagnosis.category).issue):
        issue = render_issue(diagnosis, session)
        written.append(_write(out_dir / "issue.md", issue.encode()))
    if session is not None:
        written.append(write_diagnosis_html(diagnosis, session, out_dir / "report.html", inputs or HtmlInputs(), issue))
    return written


def write_diagnosis(diagnosis: Diagnosis, out_dir: Path) -> Path:
    """diagnosis.json alone, replaced at once (a reader never sees half a file): also what a diagnosis in progress
    writes as soon as it has a verdict (`Diagnosis.pending` names the steps still to come)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return _write(out_dir / "diagnosis.json", dumps(diagnosis, pretty=True))


def write_diagnosis_html(diagnosis: Diagnosis, session: Session, path: Path, inputs: HtmlInputs,
                         issue: str | None = None) -> Path:
    """The run's page with the diagnosis section (stage table, runs, repro.py, issue.md) added."""
    from dataclasses import replace

    import msgspec

    from pt2doctor.report.document import build_report
    from pt2doctor.report.html import write_html_report
    from pt2doctor.report.html_diagnosis import diagnosis_section

    if issue is None:
        issue_path = Path(diagnosis.repro).parent / "issue.md" if diagnosis.repro else path.parent / "issue.md"
        issue = issue_path.read_text() if issue_path.exists() else ""
    section = diagnosis_section(diagnosis, _repro_text(diagnosis), issue)
    extras = msgspec.structs.replace(session.extras, diagnosis=section)
    return write_html_report(build_report(replace(session, extras=extras)), path, inputs)


def load_bundle(out_dir: Path) -> tuple[Diagnosis, Session | None]:
    """A diagnose directory read back: its `diagnosis.json` and the first reproduction's session."""
    import msgspec

    from pt2doctor.report.document import ReportInputError

    raw = (out_dir / "diagnosis.json").read_bytes()
    try:
        diagnosis = loads(raw, Diagnosis)
    except msgspec.DecodeError as exc:  # ValidationError is one
        try:
            schema = msgspec.json.decode(raw, type=dict).get("schema")
        except msgspec.DecodeError:
            schema = None
        if isinstance(schema, str) and schema.startswith("pt2doctor.diagnosis/") and schema != SCHEMA:
            raise ReportInputError(f"{out_dir / 'diagnosis.json'} was written by another pt2doctor (schema {schema}; "
                                   f"this one reads {SCHEMA}): run pt2doctor diagnose again") from exc
        raise ReportInputError(f"{out_dir / 'diagnosis.json'} is not a pt2doctor diagnosis: {exc}") from exc
    return diagnosis, bundle_session(out_dir, diagnosis)


def bundle_session(out_dir: Path, diagnosis: Diagnosis | None = None) -> Session | None:
    """The first reproduction's session (the page is drawn from it), or None when there is none; of a job,
    the session of the rank diagnosed (its `rank-N/` in the run)."""
    from pt2doctor.analysis import enrich
    from pt2doctor.report.document import ReportInputError, read_session_json

    first = diagnosis.attempts[0] if diagnosis is not None and diagnosis.attempts else None
    recorded = Path(first.run_dir) / "session.json" if first is not None and first.run_dir else None
    path = recorded if recorded is not None and recorded.exists() else out_dir / "runs" / "original-1" / "session.json"
    try:
        return enrich(read_session_json(path)) if path.exists() else None
    except (ReportInputError, OSError):
        return None


def _repro_text(d: Diagnosis) -> str:
    return _read(d.repro)


def _read(path: str | None) -> str:
    return Path(path).read_text() if path and Path(path).exists() else ""


def _write(path: Path, data: bytes) -> Path:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def render_issue(d: Diagnosis, session: Session | None) -> str:
    stage = export_stage(d.export) if d.export else STAGE_TITLES[d.stage] if d.stage else "an unknown stage"
    repro_text = _repro_text(d)
    frame = d.user_frames[0] if d.user_frames else None
    return _template().render(
        d=d, verdict=_verdict(d), workaround=handed_over(d.workarounds), upgrade=verified_upgrade(d.workarounds),
        releases=versions_markdown(d.versions) if d.versions else "", test_text=_read(d.test), title=_title(d),
        repro_text=repro_text, program=_program(d) if not repro_text else "", summary=_summary(d, stage),
        job=_job(d), expected=_expected(d), actual=_actual(d, stage), export_repro=export_repro_text(d),
        bisection=d.bisection.describe() if d.bisection else "",
        source=_source(frame.file, frame.line) if frame and not repro_text else "",
        traceback=_traceback(session), versions=_versions(d), config=sorted(d.environment.config_diff.items()),
    )


def _verdict(d: Diagnosis) -> str:
    """How repro.py fared where it was verified, in the issue's words."""
    runs = f" ({d.repro_runs} in fresh interpreters)" if d.repro_runs else ""
    if d.repro_verified:
        return f"verified: `python repro.py` fails the same way in a fresh interpreter{runs}"
    if d.repro_runs and d.repro_runs.flaky:
        return f"flaky: `python repro.py` fails the same way only sometimes{runs}"
    return "NOT verified in a fresh interpreter"


_PATH = re.compile(r"(?:/[\w.\-+@]+){2,}")


def _title(d: Diagnosis) -> str:
    tag = export_title_tag(d.export) if d.export else _STAGE_TAGS[d.stage] if d.stage else "torch.compile"
    ops = f" on {', '.join(d.culprit_ops)}" if d.culprit_ops else ""
    error = _PATH.sub("<path>", (d.error.splitlines() or [""])[0])
    return f"[{tag}] {error[:120]}{ops}"


_PROGRAM_LINES = 150  # a script this short is the best repro of a Dynamo wrong result: the call, the check


def _program(d: Diagnosis) -> str:
    """The whole script, for a wrong result Dynamo itself causes (no graph shows it: the program does)."""
    if d.stage is not FailingStage.DYNAMO or not policy(d.category).wrong_result or not d.command:
        return ""
    try:
        text = Path(d.command[0]).read_text()
    except OSError:
        return ""
    return text if text.count("\n") <= _PROGRAM_LINES else ""


def _summary(d: Diagnosis, stage: str) -> str:
    backend = f"backend={d.original_backend!r}" if d.original_backend else "its backend"
    if d.export is not None:
        return export_summary(d.export)
    if d.stage is FailingStage.DYNAMO and policy(d.category).wrong_result:
        return ("`torch.compile` changes what the program computes: its own check fails when compiled, also with "
                "`backend='eager'` (so no backend is involved), and passes with compilation off "
                "(`torch.compiler.set_stance('force_eager')`).")
    if d.stage is FailingStage.DYNAMO:
        return "`torch.compile` fails while Dynamo traces the program (it fails with `backend='eager'` too)."
    if policy(d.category).wrong_result:
        return (f"`torch.compile` with {backend} gives different results from eager; the first stage that "
                f"shows it is {stage}.")
    return f"`torch.compile` with {backend} fails in {stage}; the simpler backends below it pass."


def _job(d: Diagnosis) -> str:
    if d.torchrun is None:
        return ""
    command = " ".join(("torchrun", *d.torchrun, *(Path(d.command[0]).name, *d.command[1:])))
    which = (f": {d.rank} failed first, and this is its failure (from its own trace and recorded graphs)" if d.rank
             else "")
    return f"The program runs as a job of {d.ranks or 'several'} ranks (`{command}`){which}."


def _expected(d: Diagnosis) -> str:
    if policy(d.category).wrong_result:
        return "the compiled program's results match eager within the fp64-referenced tolerance."
    return "the compiled program runs and computes what eager computes."


def _actual(d: Diagnosis, stage: str) -> str:
    if policy(d.category).wrong_result:
        return f"the results differ ({d.error or 'accuracy check failed'})."
    return f"it fails in {stage} with `{d.error}`."


def _source(file: str, line: int) -> str:
    lines = [linecache.getline(file, n) for n in range(max(1, line - 2), line + 3)]
    return "".join(lines)


def _traceback(session: Session | None) -> str:
    if session is None or not session.failures:
        return ""
    text = session.failures[0].traceback or session.stderr_tail
    return "\n".join(text.strip().splitlines()[-25:])


def _versions(d: Diagnosis) -> list[tuple[str, str]]:
    e = d.environment
    rows = [("torch", e.torch or "unknown"), ("Python", e.python or sys.version.split()[0]),
            ("OS", e.platform or platform.platform()), ("C++ compiler", e.compiler or "not found")]
    if e.cuda:
        rows.append(("CUDA", e.cuda))
    if e.gpu:
        rows.append(("GPU", e.gpu))
    return rows
