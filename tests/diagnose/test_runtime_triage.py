"""Runtime triage end to end, real Inductor: the first kernel that faults or makes NaN/Inf, its fused ops, the
user's line and the fault's kind (`diagnose.runtime_triage`); and a program that cannot run without the
compiler (`diagnose.stage_signatures`). CPU cases compile with Inductor (slow); the `gpu` cases need a CUDA
device (Triton kernels: a NaN only compiled, an index out of range that trips a device-side assert)."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from pt2doctor.diagnose.gpu_share import GpuShare
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.runtime_triage import run_sanitizer

HERE = Path(__file__).parent / "scripts"
REALBUGS = Path(__file__).parents[1] / "realbugs"
QUICK = ("--no-bisect", "--no-workarounds")
NO_MINIFY = ("--no-minify", "--no-bisect", "--no-workarounds")


def _fault(d: dict) -> dict:
    assert d["runtime"] is not None and d["runtime"]["fault"] is not None, d["notes"]
    return d["runtime"]["fault"]


def _from_line(fault: dict, script: str, line: int) -> bool:
    return any(s["file"].endswith(script) and s["line"] == line for s in fault["sources"])


@pytest.mark.slow
def test_a_cpp_kernel_that_makes_nan_only_compiled_is_named_with_its_ops_and_line(diagnosed):
    run, d = diagnosed(HERE / "nan_only_compiled.py", options=NO_MINIFY)
    fault = _fault(d)
    assert fault["kind"] == "nan_from_finite" and fault["kernel"].startswith("cpp_")
    assert {"aten.neg.default", "aten.sqrt.default"} <= set(fault["ops"])
    assert _from_line(fault, "nan_only_compiled.py", 17)
    assert "from finite inputs" in fault["words"] and "sqrt of a negative number" in fault["words"]
    assert d["runtime"]["seconds"] <= d["runtime"]["budget_s"]
    issue = (run.out_dir / "issue.md").read_text()
    assert "The first kernel that goes wrong" in issue and fault["kernel"] in issue
    assert "first bad kernel: " + fault["kernel"] in run.stdout  # the summary, on stdout


@pytest.mark.slow
def test_the_real_elu_subnormal_nan_bug_is_tied_to_its_kernel_and_minified_from_it(diagnosed):
    """pytorch/pytorch#189801: compiled F.elu rounds subnormal negatives to 0, so x/0 is NaN instead of -inf."""
    run, d = diagnosed(REALBUGS / "elu_subnormal_div_zero_nan.py", options=QUICK)
    fault = _fault(d)
    assert fault["kind"] == "nan_from_finite" and fault["kernel"].startswith("cpp_")
    assert "aten.div.Tensor" in fault["ops"]
    assert _from_line(fault, "elu_subnormal_div_zero_nan.py", 16)
    assert "0/0" in fault["words"]


@pytest.mark.slow
def test_a_segfault_in_a_compiled_cpu_kernel_names_the_kernel_in_flight(diagnosed):
    """pytorch/pytorch#190856: jacfwd(jacfwd(f)) with trace(t) * eye(n), compiled, dies of SIGSEGV."""
    run, d = diagnosed(REALBUGS / "jacfwd_trace_eye_segfault.py", options=NO_MINIFY)
    assert d["category"] == "runtime_crash"
    fault = _fault(d)
    assert fault["kind"] in ("bad_access", "out_of_bounds", "memory_corruption")
    assert fault["kernel"].startswith("cpp_") and fault["ops"]
    assert "SIGSEGV" in fault["words"] and "ZeroTensor" in fault["words"]  # trace(t) * eye(3): a zero tangent


@pytest.mark.slow
def test_a_program_that_runs_out_of_memory_uncompiled_is_diagnosed_compiled(diagnosed):
    """Eager needs a 4 TB intermediate the fused kernel never makes: not user_error, the compiled program is."""
    run, d = diagnosed(HERE / "oom_uncompiled_nan_compiled.py", options=NO_MINIFY)
    assert d["category"] != "user_error" and d["stage"] == "inductor"
    assert d["needs_compiler"]["resource"] == "out of memory"
    assert any("cannot run without the compiler" in note for note in d["notes"])
    fault = _fault(d)
    assert fault["kind"] == "nan_from_finite" and "aten.sqrt.default" in fault["ops"]
    assert "cannot run without the compiler" in (run.out_dir / "issue.md").read_text()


@pytest.mark.slow
@pytest.mark.gpu
def test_a_triton_kernel_that_makes_nan_only_compiled_is_named_with_its_ops_and_line(diagnosed):
    run, d = diagnosed(HERE / "nan_only_compiled.py", "cuda", options=NO_MINIFY)
    fault = _fault(d)
    assert fault["kind"] == "nan_from_finite" and fault["kernel"].startswith("triton_")
    assert "aten.sqrt.default" in fault["ops"] and _from_line(fault, "nan_only_compiled.py", 17)
    assert d["environment"]["gpu"]


@pytest.mark.slow
@pytest.mark.gpu
def test_an_index_out_of_range_in_a_triton_kernel_is_out_of_bounds_with_its_range(diagnosed):
    run, d = diagnosed(HERE / "gpu_index_out_of_range.py", options=NO_MINIFY)
    fault = _fault(d)
    assert fault["kind"] == "out_of_bounds" and fault["kernel"].startswith("triton_")
    assert "aten.index.Tensor" in fault["ops"] and _from_line(fault, "gpu_index_out_of_range.py", 11)
    assert "indices from 0 to 12 into a dimension of size 10" in fault["words"]
    assert d["runtime"]["sanitizer"]["said"] in ("assert", "not_run")  # the assert, or that it is not installed


@pytest.mark.slow
@pytest.mark.gpu
def test_an_illegal_address_in_a_triton_kernel_is_placed_by_compute_sanitizer_in_the_same_kernel(diagnosed):
    """The same gather with Inductor's bounds check off reads 2**40 elements past the tensor: the checked run names
    the kernel and the index range; compute-sanitizer, a run of its own, the invalid read in that kernel."""
    run, d = diagnosed(HERE / "gpu_illegal_address.py", options=NO_MINIFY)
    fault, sanitizer = _fault(d), d["runtime"]["sanitizer"]
    assert fault["kind"] == "out_of_bounds" and "indices from 0 to 1099511627776 into a dimension of size 10" in \
        fault["words"]
    assert "aten.index.Tensor" in fault["ops"] and _from_line(fault, "gpu_illegal_address.py", 15)
    assert (sanitizer["said"], sanitizer["kernel"], sanitizer["operation"]) == ("access", fault["kernel"], "read"), \
        sanitizer
    assert "compute-sanitizer, in a run of its own, agrees: an invalid global read of 4 bytes" in fault["words"]


@pytest.mark.slow
@pytest.mark.gpu
def test_a_kernel_computing_an_index_out_of_range_is_named_minified_and_worked_around(diagnosed):
    """pytorch/pytorch#186536 (real): a fused searchsorted on a slice computes an index past the end, which
    the kernel's own bounds check catches as a device-side assert; eager's indices are in range. Triton's
    launcher reports it as a CUDA driver error, the graph alone at the next sync as an AcceleratorError: one
    failure, so the graph is minified and verified; the narrowest workaround keeps searchsorted out."""
    run, d = diagnosed(REALBUGS / "cuda" / "searchsorted_slice_offset_device_assert.py")
    fault = _fault(d)
    assert fault["kind"] == "out_of_bounds" and "its own bounds check `index out of bounds:" in fault["words"]
    assert "aten.searchsorted.Tensor" in fault["ops"] and _from_line(fault, "device_assert.py", 16)
    assert d["repro_verified"] and "aten.searchsorted.Tensor" in d["culprit_ops"] and d["minified_nodes"] <= 8
    first = next(w for w in d["workarounds"] if w["verified"])
    assert first["kind"] == "call" and "`torch.searchsorted`" in first["change"]


@pytest.mark.slow
def test_a_segfault_in_a_compiled_cpu_kernel_is_minified_from_the_kernel(diagnosed):
    """pytorch/pytorch#190856 again, minified: the kernel's nodes (named as Inductor named them, found in the
    graph traced again from its code) with the extern call that feeds them the ZeroTensor are the start."""
    run, d = diagnosed(REALBUGS / "jacfwd_trace_eye_segfault.py", options=QUICK)
    assert d["minify"] is not None and d["repro_verified"], d["notes"]
    assert dict(map(tuple, d["minify"]["passes"])).get("kernel_nodes") == 1, d["minify"]["passes"]
    assert set(d["minify"]["ops"]) == {"aten._efficientzerotensor.default", "aten.mul.Tensor"}
    assert any(note.startswith("minified from the first bad kernel (cpp_fused_") for note in d["notes"]), d["notes"]


def test_compute_sanitizer_runs_the_script_as_the_user_runs_it(tmp_path, monkeypatch):
    """The script's path as given and its arguments, from the user's directory (a relative path once ran from the
    script's own directory, where it names nothing, and memcheck said only that Python could not open the file),
    with diagnose's environment for it and compile caches of its own, where the kernel's line is read before they
    are removed. A stand-in for compute-sanitizer runs what it is given; the script prints memcheck's words."""
    tool = tmp_path / "bin" / "compute-sanitizer"
    tool.parent.mkdir()
    tool.write_text('#!/bin/sh\n[ "$1 $2 $3 $4" = "--tool memcheck --print-limit 4" ] || exit 2\nshift 4\nexec "$@"\n')
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tool.parent}{os.pathsep}{os.environ['PATH']}")
    script = tmp_path / "project" / "jobs" / "train.py"
    script.parent.mkdir(parents=True)
    script.write_text(textwrap.dedent('''\
        import os, pathlib, sys
        assert sys.argv[1:] == ["--steps", "3"] and os.environ["CUDA_LAUNCH_BLOCKING"] == "1"
        assert os.environ["TORCHDYNAMO_DEBUG_FUNCTION"] == "step"
        kernels = pathlib.Path(os.environ["TORCHINDUCTOR_CACHE_DIR"]) / "ab"
        kernels.mkdir(parents=True)
        (kernels / "cabc.py").write_text("def triton_poi_fused_cat_3(in_ptr0):\\n    tl.store(out_ptr0 + x0, tmp0)\\n")
        print("========= Invalid __global__ write of size 2 bytes")
        print("=========     at triton_poi_fused_cat_3+0x90 in cabc.py:2")
        print("========= ERROR SUMMARY: 1 error")
    '''))
    monkeypatch.chdir(tmp_path / "project")
    options = DiagnoseOptions(Path("jobs/train.py"), ("--steps", "3"), out_dir=tmp_path / "bundle")
    found = run_sanitizer(options, 60, {"TORCHDYNAMO_DEBUG_FUNCTION": "step"}, GpuShare(True, 2))
    said = (found.said, found.kernel, found.operation, found.size, found.code)
    assert said == ("access", "triton_poi_fused_cat_3", "write", 2, "tl.store(out_ptr0 + x0, tmp0)"), found.words
    assert found.words.endswith("(at cabc.py:2 of its source: `tl.store(out_ptr0 + x0, tmp0)`)")
    assert not (tmp_path / "bundle" / "sanitizer").exists()  # its caches are no part of the bundle


@pytest.mark.parametrize(("said", "triaged"), [
    ("Greatest absolute difference: 41.4 at index (0, 2)\nGreatest relative difference: inf at index (0, 1)", False),
    ("Greatest absolute difference: nan at index (0, 2)\nGreatest relative difference: nan at index (0, 2)", True),
    ("assert torch.isfinite(out).all()", True),
])
def test_a_wrong_result_is_triaged_for_nonfinite_values_not_for_an_infinite_relative_difference(said, triaged):
    """`assert_close` says the relative difference is inf wherever eager's value is zero: the values are finite and
    a run checking every kernel for NaN/Inf would find nothing (pytorch#185509's wrong gradients ran it in vain)."""
    from pt2doctor.diagnose.found import Found
    from pt2doctor.diagnose.runtime_triage import wanted
    from pt2doctor.model import SCHEMA, Category, Session
    from pt2doctor.model.minify import BackendKind, BackendSpec
    from pt2doctor.model.session import ExitInfo, Failure

    failure = Failure(Category.ACCURACY, "AssertionError", "Tensor-likes are not close!\n" + said)
    found = Found(command=("python", "train.py"), category=Category.ACCURACY,
                  backend=BackendSpec(BackendKind.NAMED, "inductor"),
                  session=Session(SCHEMA, "2.13.0", ("train.py",), ExitInfo(1), failures=(failure,)))
    assert wanted(found, on_cuda=False) is triaged
