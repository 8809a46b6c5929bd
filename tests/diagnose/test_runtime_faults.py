"""Runtime triage's rules on hand-built records: which kernel is the first bad one, what kind of fault it made
(`analysis.runtime_faults`), compute-sanitizer's words, and when the program cannot run without the compiler
(`diagnose.stage_signatures`). No torch: the records are what the kernel checker writes."""

from __future__ import annotations

import msgspec

from pt2doctor.analysis.failures import resource_shortage
from pt2doctor.analysis.runtime_faults import (
    device_assertion,
    first_bad_kernel,
    sanitizer_fault,
    sanitizer_finding,
    with_sanitizer,
)
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.stage_signatures import needs_the_compiler
from pt2doctor.model import Category
from pt2doctor.model.diagnosis import Attempt, FailingStage
from pt2doctor.model.minify import BackendKind, BackendSpec, NodeOrigin
from pt2doctor.model.runtime import (
    BadTensor,
    CompiledKernels,
    FaultKind,
    FusedKernel,
    IndexCheck,
    IndexRange,
    KernelEvent,
    KernelFault,
)

SQRT = NodeOrigin(op="aten.sqrt.default", call="torch.sqrt", file="/home/u/train.py", line=12,
                  code="y = torch.sqrt(-(x * x))")
NEG = NodeOrigin(op="aten.neg.default", call="operator.neg", file="/home/u/train.py", line=12,
                 code="y = torch.sqrt(-(x * x))")
GATHER = NodeOrigin(op="aten.index.Tensor", call="operator.getitem", file="/home/u/train.py", line=7, code="x[i]")
COMPILED = [CompiledKernels("g0001", (
    FusedKernel("cpp_fused_add_0", ("add",), (NodeOrigin(op="aten.add.Tensor"),)),
    FusedKernel("cpp_fused_neg_sqrt_1", ("neg", "sqrt"), (NEG, SQRT)),
    FusedKernel("triton_poi_fused_index_relu_2", ("index", "relu"), (GATHER,)),
))]


def _nan(kernel: str, eager: str = "finite", inputs_finite: bool = True, dtype: str = "float16") -> KernelEvent:
    return KernelEvent("g0001", kernel, "nonfinite", bad=(BadTensor(1, (64,), dtype, nan=64),),
                       inputs_finite=inputs_finite, eager=eager)  # type: ignore[arg-type]


def test_nan_from_finite_inputs_names_the_kernel_its_ops_and_the_users_line():
    fault = first_bad_kernel(COMPILED, [_nan("cpp_fused_neg_sqrt_1")], [], "", "AssertionError: NaN")
    assert fault is not None and fault.kernel == "cpp_fused_neg_sqrt_1" and fault.graph == "g0001"
    assert fault.kind is FaultKind.NAN_FROM_FINITE
    assert fault.nodes == ("neg", "sqrt") and fault.ops == ("aten.neg.default", "aten.sqrt.default")
    assert "from finite inputs" in fault.words and "sqrt of a negative number" in fault.words
    assert [(s.call, s.line) for s in fault.sources] == [("operator.neg", 12), ("torch.sqrt", 12)]


def test_nan_that_eager_makes_too_is_not_the_kernels():
    events = [_nan("cpp_fused_add_0", eager="nonfinite"), _nan("cpp_fused_neg_sqrt_1")]
    fault = first_bad_kernel(COMPILED, events, [], "", "")
    assert fault is not None and fault.kernel == "cpp_fused_neg_sqrt_1"
    assert first_bad_kernel(COMPILED, events[:1], [], "", "") is None


def test_inf_where_eager_is_finite_is_an_overflow_eager_avoids():
    event = KernelEvent("g0001", "cpp_fused_add_0", "nonfinite", bad=(BadTensor(0, (4,), "float16", posinf=4),),
                        inputs_finite=True, eager="finite")
    fault = first_bad_kernel(COMPILED, [event], [], "", "")
    assert fault is not None and fault.kind is FaultKind.OVERFLOW
    assert "overflow eager avoids" in fault.words and "float32" in fault.words


def test_a_kernel_that_raised_with_an_index_out_of_range_is_out_of_bounds():
    raised = KernelEvent("g0001", "triton_poi_fused_index_relu_2", "raised",
                         error="AcceleratorError: CUDA error: device-side assert triggered")
    checks = [IndexCheck("g0001", (IndexRange("index", "aten.index.Tensor", 0, 12, 10),))]
    fault = first_bad_kernel(COMPILED, [raised], checks, "g0001 1 triton_poi_fused_index_relu_2 run", "")
    assert fault is not None and fault.kind is FaultKind.OUT_OF_BOUNDS
    assert "indices from 0 to 12 into a dimension of size 10" in fault.words
    in_range = [IndexCheck("g0001", (IndexRange("index", "aten.index.Tensor", 0, 9, 10),))]
    fault = first_bad_kernel(COMPILED, [raised], in_range, "", "")
    assert fault is not None and fault.kind is FaultKind.DEVICE_ERROR and "device-side assert" in fault.words


def test_a_kernels_own_failed_bounds_check_is_an_index_it_computed_out_of_bounds():
    """The index comes from inside the kernel (a fused searchsorted: pytorch#186536), so the graph's index
    inputs are in range; the assert CUDA printed is Inductor's bounds check."""
    output = ("/tmp/torchinductor_u/ab/cab.py:31: triton_poi_fused_index_searchsorted_0: block: [0,0,0], thread: "
              "[15,0,0] Assertion `index out of bounds: 0 <= tmp4 < (-1) + ks0` failed.\n"
              "RuntimeError: CUDA driver error: device-side assert triggered\n")
    assertion = device_assertion(output)
    assert assertion == "index out of bounds: 0 <= tmp4 < (-1) + ks0"
    raised = KernelEvent("g0001", "triton_poi_fused_index_relu_2", "raised",
                         error="RuntimeError: CUDA driver error: device-side assert triggered")
    in_range = [IndexCheck("g0001", (IndexRange("index", "aten.index.Tensor", 0, 9, 10),))]
    fault = first_bad_kernel(COMPILED, [raised], in_range, "", "", assertion)
    assert fault is not None and fault.kind is FaultKind.OUT_OF_BOUNDS
    assert "its own bounds check `index out of bounds: 0 <= tmp4 < (-1) + ks0` failed" in fault.words
    assert "index inputs of its graph are in range (aten.index.Tensor (index) from 0 to 9 for size 10)" in fault.words
    cpu = KernelEvent("g0001", "cpp_fused_index_relu_2", "raised",
                      error="RuntimeError: index out of bounds: 0 <= tmp3 < 10")  # a C++ kernel's TORCH_CHECK
    fault = first_bad_kernel(COMPILED, [cpu], in_range, "", "")
    assert fault is not None and fault.kind is FaultKind.OUT_OF_BOUNDS and "`index out of bounds: 0 <= tmp3 < 10`" in (
        fault.words)
    other = first_bad_kernel(COMPILED, [raised], [], "", "", "x > 0")  # another assert: a device error, named
    assert other is not None and other.kind is FaultKind.DEVICE_ERROR and "`x > 0` failed" in other.words
    assert device_assertion("RuntimeError: CUDA error: an illegal memory access was encountered") is None


def test_a_process_that_died_inside_a_kernel_names_it():
    fault = first_bad_kernel(COMPILED, [], [], "g0001 3 cpp_fused_neg_sqrt_1 run", "SIGSEGV")
    assert fault is not None and fault.kernel == "cpp_fused_neg_sqrt_1" and fault.kind is FaultKind.BAD_ACCESS
    assert "SIGSEGV inside kernel cpp_fused_neg_sqrt_1" in fault.words


def test_an_abort_after_a_kernel_returned_is_memory_corruption_by_that_kernel():
    fault = first_bad_kernel(COMPILED, [], [], "g0001 1 cpp_fused_add_0 done", "SIGABRT")
    assert fault is not None and fault.kernel == "cpp_fused_add_0" and fault.kind is FaultKind.MEMORY_CORRUPTION
    assert first_bad_kernel(COMPILED, [], [], "g0001 1 cpp_fused_add_0 done", "RuntimeError: boom") is None


# memcheck's first error on an illegal address in a Triton kernel, as it printed it (H200, torch 2.11, CUDA 13),
# the host backtrace cut
ILLEGAL_READ = """========= COMPUTE-SANITIZER
========= Invalid __global__ read of size 4 bytes
=========     at triton_poi_fused_add_index_mul_relu_0+0x1e0 in cta3ik4ps672omeoijnainqle72dk6mlw5wuiscrpobhpxuc4bju.py:29
=========     by thread (2,0,0) in block (0,0,0)
=========     Access to 0x8368de800000 is out of bounds
=========     and is 4,397,908,098,561 bytes after the nearest allocation at 0x7f68e6c00000 of size 512 bytes
=========     Saved host backtrace up to driver entry point at kernel launch time
=========         Host Frame: <module> in gpu_illegal_address.py:20
RuntimeError: CUDA driver error: unspecified launch failure
========= Target application returned an error
========= ERROR SUMMARY: 9 errors
========= ERROR SUMMARY: 5 errors were not printed. Use --print-limit option to adjust the number of printed errors
"""  # noqa: E501


def test_compute_sanitizers_first_invalid_access_names_the_kernel_the_access_and_where_it_fell():
    found = sanitizer_finding(ILLEGAL_READ)
    assert (found.said, found.kernel, found.operation, found.size, found.errors) == (
        "access", "triton_poi_fused_add_index_mul_relu_0", "read", 4, 9)
    assert found.source == "cta3ik4ps672omeoijnainqle72dk6mlw5wuiscrpobhpxuc4bju.py:29"
    assert found.allocation == "4,397,908,098,561 bytes after an allocation of 512 bytes"
    assert found.words.startswith("compute-sanitizer (memcheck): an invalid global read of 4 bytes in kernel "
                                  "triton_poi_fused_add_index_mul_relu_0 (at cta3ik")
    older = sanitizer_finding("""========= Invalid __global__ write of size 8 bytes
=========     at triton_poi_fused_index_relu_2+0x1b0
=========     and is 8 bytes before the nearest allocation at 0x7f3c0000a000 of size 40 bytes
========= ERROR SUMMARY: 1 error
""")  # no source line: a kernel built without line info
    assert (older.kernel, older.operation, older.size, older.source) == (
        "triton_poi_fused_index_relu_2", "write", 8, "")
    assert older.words.endswith("an invalid global write of 8 bytes in kernel triton_poi_fused_index_relu_2, 8 bytes "
                                "before an allocation of 40 bytes")
    misaligned = sanitizer_finding("""========= COMPUTE-SANITIZER
========= Misaligned shared or local address
=========     at triton_poi_fused_add_slice_0+0x6d0 in cay5263iozhqmohlilkjylqdtbesonxzcevztbwhf6gvztz4cz7u.py:24
=========     by thread (0,0,0) in block (8,0,0)
""")  # a TMA descriptor on a base 4 bytes past 16-byte alignment (pytorch#184563, H200, torch 2.11)
    assert (misaligned.said, misaligned.operation, misaligned.kernel) == ("access", "misaligned",
                                                                          "triton_poi_fused_add_slice_0")
    assert misaligned.words.startswith("compute-sanitizer (memcheck): a misaligned shared or local address in kernel")


def test_each_of_memchecks_layouts_names_its_own_errors_kernel():
    """The first error's lines alone: a misaligned address has no allocation line, and must not take the next
    error's; older memchecks put the line before the kernel; a C++ kernel's name has spaces and templates."""
    two = sanitizer_finding("""========= Misaligned shared or local address
=========     at triton_poi_fused_add_slice_0+0x6d0 in cay.py:24
=========     by thread (0,0,0) in block (8,0,0)
========= Invalid __global__ read of size 4 bytes
=========     at triton_poi_fused_mul_1+0x1e0 in cb2.py:31
=========     and is 8 bytes after the nearest allocation at 0x7f3c0000a000 of size 40 bytes
""")
    assert (two.kernel, two.source, two.allocation, two.operation) == ("triton_poi_fused_add_slice_0", "cay.py:24", "",
                                                                       "misaligned")
    older = sanitizer_finding("""========= Invalid __global__ write of size 4 bytes
=========     at 0x50 in /tmp/torchinductor_u/x2/cx2.py:29:triton_poi_fused_index_put_0
=========     by thread (3,0,0) in block (0,0,0)
""")
    assert (older.kernel, older.source) == ("triton_poi_fused_index_put_0", "/tmp/torchinductor_u/x2/cx2.py:29")
    aten = sanitizer_finding("""========= Invalid __global__ read of size 16 bytes
=========     at void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>>(int, T2, T3)+0x1e0
""")
    assert aten.kernel.startswith("void at::native::vectorized_elementwise_kernel<4, at::native::AbsFunctor<float>>")
    assert aten.kernel.endswith(">(int, T2, T3)")
    assert aten.source == ""


def test_compute_sanitizers_other_answers_in_words():
    assert sanitizer_finding("========= ERROR SUMMARY: 0 errors\n").said == "nothing"
    asserted = sanitizer_finding("""========= COMPUTE-SANITIZER
/tmp/torchinductor_u/4j/c4j.py:30: unknown: block: [0,0,0], thread: [10,0,0] Assertion `index out of bounds: 0 <= tmp6 < (-1) + ks0` failed.
========= Warp assert
=========     at __assertfail+0x19a0
=========     by thread (10,0,0) in block (0,0,0)
========= Target application returned an error
========= ERROR SUMMARY: 13 errors
""")  # noqa: E501 - memcheck's output as it prints it (H100, torch 2.11)
    assert asserted.said == "assert" and asserted.errors == 13 and asserted.words == (
        "compute-sanitizer (memcheck): a failed device-side assert `index out of bounds: 0 <= tmp6 < (-1) + ks0` by "
        "thread (10,0,0) in block (0,0,0), not a bad memory access (13 error(s) in all)")
    ended = sanitizer_finding("========= COMPUTE-SANITIZER\nRuntimeError: CUDA driver error: device-side assert\n")
    assert ended.said == "nothing" and "without its error summary" in ended.words
    assert "device-side assert" in ended.words and "no memory" not in ended.words


def test_the_sanitizers_access_in_the_same_kernel_confirms_the_fault_and_in_another_is_said_beside_it():
    raised = KernelFault("g0001", "triton_poi_fused_add_index_mul_relu_0", ("index",), ("aten.index.Tensor",), (),
                         FaultKind.DEVICE_ERROR, "kernel triton_poi_fused_add_index_mul_relu_0 raised RuntimeError: "
                                                 "CUDA error: an illegal memory access was encountered")
    confirmed = with_sanitizer(raised, sanitizer_finding(ILLEGAL_READ))
    assert confirmed.kind is FaultKind.BAD_ACCESS and confirmed.words.startswith(raised.words)
    assert "compute-sanitizer, in a run of its own, agrees: an invalid global read of 4 bytes" in confirmed.words
    elsewhere = with_sanitizer(msgspec.structs.replace(raised, kernel="triton_poi_fused_mul_1"),
                               sanitizer_finding(ILLEGAL_READ))
    assert elsewhere.kind is FaultKind.DEVICE_ERROR and "in another kernel" in elsewhere.words
    out_of_bounds = msgspec.structs.replace(raised, kind=FaultKind.OUT_OF_BOUNDS)
    assert with_sanitizer(out_of_bounds, sanitizer_finding(ILLEGAL_READ)).kind is FaultKind.OUT_OF_BOUNDS
    assert with_sanitizer(raised, sanitizer_finding("========= ERROR SUMMARY: 0 errors\n")) == raised


def test_a_write_past_a_buffer_only_the_sanitizer_saw_is_memory_corruption_by_its_kernel():
    """pytorch#197493 (H200, torch 2.11): a split scan's workspace overrun, wrong values and no CUDA error."""
    cumsum = NodeOrigin(op="aten.cumsum.default", call="torch.cumsum", file="/u/informer.py", line=31)
    compiled = [CompiledKernels("g0001", (FusedKernel("triton_spl_fused_cumsum_0", ("cumsum",), (cumsum,)),))]
    overrun = sanitizer_finding("""========= COMPUTE-SANITIZER
========= Invalid __global__ atomic of size 8 bytes
=========     at triton_spl_fused_cumsum_0+0x500 in triton_helpers.py:418
=========     by thread (0,0,0) in block (2,5047,0)
=========     Access to 0x7f6e932314a8 is out of bounds
=========     and is 5,289 bytes after the nearest allocation at 0x7f6e93200000 of size 196,608 bytes
========= ERROR SUMMARY: 3 errors
""")
    fault = sanitizer_fault(compiled, overrun)
    assert fault is not None and fault.kind is FaultKind.MEMORY_CORRUPTION and fault.graph == "g0001"
    assert fault.ops == ("aten.cumsum.default",) and fault.sources[0].line == 31
    assert fault.words.startswith("compute-sanitizer found an invalid global atomic of 8 bytes in kernel "
                                  "triton_spl_fused_cumsum_0 (at triton_helpers.py:418 of its source), 5,289 bytes "
                                  "after an allocation of 196,608 bytes: it writes outside its buffers")
    twice = [*compiled, CompiledKernels("g0002", (FusedKernel("triton_spl_fused_cumsum_0", ("cumsum_1",)),))]
    assert "(graphs g0001, g0002 each have a kernel of that name: g0001's is taken)" in (
        sanitizer_fault(twice, overrun) or fault).words
    assert sanitizer_fault(compiled, sanitizer_finding(ILLEGAL_READ)) is None  # not a kernel of these graphs


def _attempt(label: str, backend: str | None, signature: str | None) -> Attempt:
    return Attempt(label, backend, "fail" if signature else "pass", signature, Category.RUNTIME_CRASH, 1, 1.0, "",
                   error=signature or "")


OOM = "RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate <n> bytes"
COMPILED_FAILURE = "AssertionError: NaN in the compiled result"


def _found_after_the_ladder(eager_signature: str | None) -> tuple[Found, Attempt]:
    compiled = _attempt("original-1", None, COMPILED_FAILURE)
    found = Found(command=("x.py",), backend=BackendSpec(BackendKind.NAMED, "inductor"), stage=FailingStage.DYNAMO,
                  stages={"eager": "fail", "aot_eager": "skipped", "aot_eager_decomp_partition": "skipped",
                          "inductor": "skipped"})
    found.attempts = [compiled, _attempt("original-2", None, COMPILED_FAILURE),
                      _attempt("eager", "eager", eager_signature)]
    return found, compiled


def test_runs_that_fail_only_for_want_of_memory_leave_the_compiled_program_diagnosed():
    found, compiled = _found_after_the_ladder(OOM)
    needs = needs_the_compiler(found, compiled)
    assert found.stage is FailingStage.INDUCTOR and found.stages["inductor"] == "fail"
    assert needs is not None and needs.resource == "out of memory"
    assert any("cannot run without the compiler" in note for note in found.notes)


def test_the_same_failure_or_another_bug_below_is_not_a_missing_resource():
    for signature in (COMPILED_FAILURE, "TypeError: unsupported operand"):
        found, compiled = _found_after_the_ladder(signature)
        assert needs_the_compiler(found, compiled) is None
        assert found.stage is FailingStage.DYNAMO


def test_a_compile_failure_is_not_what_the_runs_without_that_backend_show():
    """pytorch#145208 on CUDA: the compiled backward fails lowering (the script catches it and exits 1); eager
    flex_attention leaves the captured scalar's grad None, so every lower rung and compilation off fail with the
    script's AttributeError. The stage is the backend's, not Dynamo's, and not "fix your script first"."""
    lowering = "InductorError: LoweringException: AssertionError:"
    own = "AttributeError: 'NoneType' object has no attribute 'float'"
    found, _ = _found_after_the_ladder(own)
    compiled = Attempt("original-1", None, "fail", lowering, Category.BACKEND_FAILURE, 1, 1.0, "", error=lowering)
    found.attempts[:2] = [compiled, compiled]
    needs = needs_the_compiler(found, compiled)
    assert found.stage is FailingStage.INDUCTOR and found.stages["eager"] == "fail"
    assert needs is not None and needs.compile_failure
    assert "fails in the backend's compile" in needs.describe()
    same, _ = _found_after_the_ladder(lowering)  # the same failure below: the lower rung is the stage
    same.attempts[:2] = [compiled, compiled]
    assert needs_the_compiler(same, compiled) is None and same.stage is FailingStage.DYNAMO


def test_resource_shortage_words():
    assert resource_shortage("OutOfMemoryError: CUDA out of memory. Tried to allocate <n> GiB") == "out of memory"
    assert resource_shortage("SIGKILL").startswith("killed")
    assert resource_shortage("RuntimeError: CUDA error: an illegal memory access was encountered") is None


def test_a_segfault_in_a_kernel_given_a_tensor_without_memory_says_so():
    null = KernelEvent("g0001", "cpp_fused_neg_sqrt_1", "null_data",
                       error="argument 1 (float32[3, 3]) has data pointer 0 (a ZeroTensor, which has no memory)")
    fault = first_bad_kernel(COMPILED, [null], [], "g0001 1 cpp_fused_neg_sqrt_1 run", "SIGSEGV")
    assert fault is not None and fault.kind is FaultKind.BAD_ACCESS
    assert "data pointer 0 (a ZeroTensor" in fault.words and "null pointer" in fault.words
