"""The first bad kernel and the needs-the-compiler finding, as runtime triage decided them, in issue.md, the
HTML data and diagnosis.json (round trip): renderers format what analysis wrote, nothing more."""

from __future__ import annotations

from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Diagnosis, FailingStage
from pt2doctor.model.minify import NodeOrigin
from pt2doctor.model.runtime import FaultKind, KernelFault, NeedsCompiler, RuntimeTriage, SanitizerFinding
from pt2doctor.model.serialize import dumps, loads
from pt2doctor.report.html_diagnosis import diagnosis_section
from pt2doctor.report.issue import render_issue

FAULT = KernelFault("g0001", "cpp_fused_add_neg_sqrt_0", ("mul", "neg", "sqrt", "add"),
                    ("aten.mul.Tensor", "aten.neg.default", "aten.sqrt.default", "aten.add.Tensor"),
                    (NodeOrigin(op="", call="torch.sqrt", file="/u/nan.py", line=17, code="y = torch.sqrt(-(x * x))"),),
                    FaultKind.NAN_FROM_FINITE, "kernel cpp_fused_add_neg_sqrt_0 made NaN from finite inputs (...)")
DIAGNOSIS = Diagnosis(
    command=("nan.py",), category=Category.ACCURACY, stage=FailingStage.INDUCTOR,
    stages={"eager": "fail", "inductor": "fail"}, error="AssertionError: NaN in the compiled result",
    runtime=RuntimeTriage(fault=FAULT, sanitizer=SanitizerFinding("not_run", "not run: the script ran on the CPU"),
                          seconds=12.5, budget_s=120.0, run="kernels-checked"),
    needs_compiler=NeedsCompiler("AssertionError: NaN in the compiled result",
                                 (("eager", "RuntimeError: DefaultCPUAllocator: not enough memory"),), "out of memory"),
)


def test_issue_md_names_the_kernel_its_nodes_and_the_users_line():
    issue = render_issue(DIAGNOSIS, None)
    assert "**The first kernel that goes wrong:** `cpp_fused_add_neg_sqrt_0` (graph g0001, nan from finite)" in issue
    assert "mul, neg, sqrt, add" in issue and "torch.sqrt at nan.py:17 (y = torch.sqrt(-(x * x)))" in issue
    assert "**Without the compiler:** the program cannot run without the compiler (out of memory" in issue


def test_the_html_data_shows_the_same_kernel():
    section = diagnosis_section(DIAGNOSIS)
    assert section["first bad kernel"].startswith("cpp_fused_add_neg_sqrt_0 (graph g0001, nan_from_finite)")
    assert section["its fused ops"] == list(FAULT.ops)
    assert "cannot run without the compiler" in section["needs the compiler"]


def test_diagnosis_json_round_trips_the_triage():
    again = loads(dumps(DIAGNOSIS), Diagnosis)
    assert again.runtime == DIAGNOSIS.runtime and again.needs_compiler == DIAGNOSIS.needs_compiler
    assert again.runtime is not None and again.runtime.fault is not None
    assert again.runtime.fault.kind is FaultKind.NAN_FROM_FINITE


def test_a_bundle_an_older_pt2doctor_wrote_is_said_so(tmp_path):
    """diagnosis/1 held `runtime.sanitizer` as words: reading it with this pt2doctor says which wrote it."""
    import pytest

    from pt2doctor.report.document import ReportInputError
    from pt2doctor.report.issue import load_bundle

    old = dumps(DIAGNOSIS).replace(b'"schema":"pt2doctor.diagnosis/2"', b'"schema":"pt2doctor.diagnosis/1"')
    old = old.replace(b'{"said":"not_run","words":"not run: the script ran on the CPU"}', b'"not run"')
    (tmp_path / "diagnosis.json").write_bytes(old)
    with pytest.raises(ReportInputError, match=r"written by another pt2doctor \(schema pt2doctor.diagnosis/1; this "
                                               r"one reads pt2doctor.diagnosis/2\): run pt2doctor diagnose again"):
        load_bundle(tmp_path)
