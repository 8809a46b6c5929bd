"""Classify each failure into one category (docs/reference/categories-and-stages.md).

Contract: `classify(failure) -> Category` is a pure function of the failure's facts (origin,
exception type, the exception chain, where it was raised). Rules are a table tried in order; the
first that matches wins. `user_error` here means "raised by the script, not by the compiler stack";
`diagnose` confirms it by re-running with compilation disabled.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from pt2doctor.model import Category, Failure, FailureExplanation, Session
from pt2doctor.model.source_refs import SourceRef
from pt2doctor.model.torch_text import GRAPH_BREAK_EXCEPTIONS, without_backend_line

_KERNEL = re.compile(r"CppCompileError|C\+\+ compile error|triton\.compiler\.errors|triton.*CompilationError|"
                     r"ptxas|nvrtc|torchinductor_\S+\.(cpp|py)")
_CUDA = re.compile(r"CUDA error|illegal memory access|device-side assert|cudaError|CUBLAS_STATUS|out of memory", re.I)
# A kernel's error that CUDA reports at some later call: the place it surfaces is not where it happened.
_ASYNC_CUDA = re.compile(r"CUDA kernel errors might be asynchronously reported|device-side assert|"
                         r"illegal memory access|misaligned address|unspecified launch failure|illegal instruction",
                         re.I)
_ACCURACY = re.compile(r"accuracy|Tensor-likes are not (close|equal)|Mismatched elements|allclose|not close", re.I)
# Dynamo ran an op on fake tensors and the op's own argument check raised (wrong shapes, an index out of range):
# the same call raises without compile. A missing fake/meta kernel or a data-dependent value is not this.
_FAKE_OP_ERROR = re.compile(r"failed to run FX node with fake tensors:"
                            r".*got (RuntimeError|ValueError|IndexError|TypeError)\(", re.S)
_COMPILER_FRAMES = ("torch/_dynamo/", "torch/_inductor/", "torch/_functorch/", "torch/fx/")


def _text(f: Failure) -> str:
    return "\n".join((f.exception, f.message, *f.chain))


def _short(f: Failure) -> str:
    return f.exception.rsplit(".", 1)[-1]


def _timeout(f: Failure) -> bool:
    return f.origin == "timeout"


def _signal(f: Failure) -> bool:
    return f.origin == "signal" or bool(_CUDA.search(_text(f)))


def asynchronous_cuda_error(f: Failure) -> bool:
    """A CUDA kernel error, which CUDA reports at a later call unless `CUDA_LAUNCH_BLOCKING=1`: the
    failing kernel may belong to a compiled graph that had already returned."""
    return bool(_ASYNC_CUDA.search(_text(f)))


ASYNC_CUDA_NOTE = ("CUDA reports a kernel's error at a later call, so the line above may not be where it happened. "
                   "`pt2doctor diagnose` re-runs the script with CUDA_LAUNCH_BLOCKING=1 to find the compiled graph "
                   "that raised it.")


FAKE_OP_NOTE = ("Dynamo ran this op on fake tensors (shapes only) and the op rejected its arguments: the same call "
                "most likely fails without torch.compile too. Check with torch.compiler.set_stance('force_eager') "
                "(`pt2doctor diagnose` does).")


KILLED_NOTE = ("SIGKILL is usually the kernel's out-of-memory killer (check `dmesg` or the job's memory limit); "
               "a compile can need much more memory than the run: try a smaller model or batch, or fewer compile "
               "workers (`torch._inductor.config.compile_threads = 1`)")


def explain_failure(f: Failure) -> FailureExplanation:
    """The failure's root line (the innermost exception of its chain, else its first message line) and notes."""
    root = f.chain[-1] if f.chain else first_message_line(f.message)
    notes: tuple[str, ...] = (ASYNC_CUDA_NOTE,) if asynchronous_cuda_error(f) else ()
    if f.origin == "signal" and f.exception == "SIGKILL":
        notes += (KILLED_NOTE,)
    if _fake_op_error(f):
        notes += (FAKE_OP_NOTE,)
    return FailureExplanation(f, (root.splitlines() or ["(no message)"])[0], notes)


def _recompilation(f: Failure) -> bool:
    return _short(f) in ("FailOnRecompileLimitHit", "RecompileError", "RecompileLimitExceeded") or (
        "recompile limit" in f.message.lower())


def _graph_break(f: Failure) -> bool:
    return _short(f) in GRAPH_BREAK_EXCEPTIONS and "torch._dynamo" in (
        f.exception + f.traceback) or (f.origin == "compile" and _short(f) == "Unsupported")


def _kernel(f: Failure) -> bool:
    in_backend = _short(f) in ("BackendCompilerFailed", "InductorError", "CppCompileError", "LoweringException")
    return bool(_KERNEL.search(_text(f))) and (in_backend or "torchinductor_" in f.traceback) or (
        _raised_in_generated_code(f))


def raised_in_torch(traceback: str) -> bool:
    """The innermost frame of `traceback`'s last stack is torch's own code (an error torch raised, whatever its
    type). The stack ends at the exception's line: notes after it (torch's "Original traceback:") are not frames."""
    stack = traceback.rsplit("Traceback (most recent call last):", 1)[-1].splitlines()[1:]
    lines = next((stack[:i] for i, line in enumerate(stack) if line and not line.startswith(" ")), stack)
    frames = [m.group(1) for m in (re.match(r'\s+File "([^"]+)"', line) for line in lines) if m]
    return bool(frames) and "/torch/" in frames[-1].replace("\\", "/")


def _raised_in_generated_code(f: Failure) -> bool:
    """The innermost frame is Inductor's generated code: a compiled kernel failed at run time."""
    frames = re.findall(r'File "([^"]+)"', f.traceback)
    return bool(frames) and "torchinductor_" in frames[-1]


def _backend(f: Failure) -> bool:
    """The backend failed to compile, or the graph it returned raised as it ran (origin `graph`), or its compiler
    raised compiling a backward graph at `backward()` (AOTAutograd calls the backend's backward compiler then)."""
    return _short(f) in ("BackendCompilerFailed", "InductorError", "LoweringException", "InvalidBackend") or (
        f.origin in ("graph", "backward_compile"))


def _fake_op_error(f: Failure) -> bool:
    return _short(f) == "TorchRuntimeError" and bool(_FAKE_OP_ERROR.search(f.message))


def _dynamo_internal(f: Failure) -> bool:
    return _short(f) in ("InternalTorchDynamoError", "TorchRuntimeError", "InternalError") or (
        f.exception.startswith("torch._dynamo.exc."))


def _accuracy(f: Failure) -> bool:
    return _short(f) in ("AccuracyError",) or (
        _short(f) == "AssertionError" and bool(_ACCURACY.search(_text(f)))) or bool(
        re.search(r"Tensor-likes are not close|Mismatched elements", _text(f)))


def _inside_compiler(f: Failure) -> bool:
    return raised_inside_compiler(f.traceback)


def raised_inside_compiler(traceback: str) -> bool:
    """Whether a traceback passes through the compiler stack's own code (Dynamo, Inductor, AOTAutograd, FX)."""
    return any(part in traceback for part in _COMPILER_FRAMES)


def _user(f: Failure) -> bool:
    return f.origin == "exception" and not _inside_compiler(f)


_RULES: tuple[tuple[Category, Callable[[Failure], bool]], ...] = (
    (Category.TIMEOUT, _timeout),
    (Category.RUNTIME_CRASH, _signal),
    (Category.RECOMPILATION, _recompilation),
    (Category.GRAPH_BREAK, _graph_break),
    (Category.KERNEL_FAILURE, _kernel),
    (Category.BACKEND_FAILURE, _backend),
    (Category.ACCURACY, _accuracy),
    (Category.USER_ERROR, _fake_op_error),
    (Category.DYNAMO_INTERNAL, _dynamo_internal),
    (Category.USER_ERROR, _user),
)


def classify(failure: Failure) -> Category:
    if failure.origin == "interrupt":
        return Category.UNCLASSIFIED
    for category, rule in _RULES:
        if rule(failure):
            return category
    return Category.DYNAMO_INTERNAL if _inside_compiler(failure) else Category.UNCLASSIFIED


def classify_failures(session: Session) -> Session:
    failures = tuple(replace(f, category=classify(f)) for f in session.failures)
    return replace(session, failures=failures)


_SCRIPTS_OWN = (Category.USER_ERROR, Category.ACCURACY, Category.UNCLASSIFIED)


def caught_compile_failure(failures: Sequence[Failure]) -> Failure | None:
    """The compile the compiler failed, where the run ended on the script's own exception instead (its check, its
    test harness's assertion): the script caught the compile's exception and reported another. What the compiler
    did decides the category, not the script's wording (issue #39, point 4). None where the run ended on the
    compiler's own failure, or no compile failed in the compiler."""
    if not failures or failures[0].origin != "exception" or failures[0].category not in _SCRIPTS_OWN:
        return None
    return next((f for f in failures[1:] if f.origin in ("compile", "backward_compile")
                 and f.category in (Category.BACKEND_FAILURE, Category.KERNEL_FAILURE)), None)


def described(failure: Failure) -> str:
    """`Type: first line`, as a verdict or an attempt says a failure."""
    return f"{failure.exception.rsplit('.', 1)[-1]}: {first_message_line(failure.message)}"


def signature(session: Session) -> str | None:
    """The run's failure as normalised text ("Type: first line", a signal name, "timeout"), None if it
    passed. Two runs fail "the same way" exactly when their signatures are equal; the line naming the
    backend (`backend='inductor' raised:`) is skipped, so the same error under two backends matches.
    """
    from pt2doctor.model.signature import from_signal

    e = session.exit
    if e.timed_out:
        return "timeout"
    if e.interrupted:
        return "interrupted"
    if e.signal:
        return from_signal(e.signal).text
    if e.ok:
        return None
    if not session.failures:
        return f"exit status {e.code}"
    f = session.failures[0]
    return failure_text(f.exception, f.message)


def failure_text(exception: str, message: str) -> str:
    """A failure's identity: the exception's short type name and the message's first line that says what
    went wrong (`first_message_line`), normalised (`model.signature.normalize`)."""
    from pt2doctor.model.signature import normalize

    return normalize(f"{exception.rsplit('.', 1)[-1]}: {first_message_line(message)}")


def first_message_line(message: str) -> str:
    """The line that says what went wrong, past the `backend='...' raised:` line Dynamo wraps errors in:
    a C++ compile error's first `error:` line (its output starts with header warnings); an error whose
    own text is empty (`LoweringException: AssertionError:`) with the op it was lowering (`target: ...`,
    the next line Inductor writes)."""
    lines = without_backend_line(message)
    if not lines:
        return ""
    first = lines[0]
    if "C++ compile error" in first or "CppCompileError" in first:
        error = next((line for line in lines if _CXX_ERROR.search(line)), None)
        return f"{first.rstrip(': ')}: {error}" if error else first
    if first.rstrip().endswith(":"):
        target = next((line for line in lines[1:4] if line.startswith("target:")), None)
        return f"{first.rstrip()} ({target})" if target else first
    return first


_CXX_ERROR = re.compile(r"(?:^|:\d+:\d+: |\s)(?:fatal )?error: ")


# a traceback's frame, and a fatal signal's as faulthandler prints it (`File "x.py", line 3 in f`)
_TRACEBACK_FRAME = re.compile(r'File "([^"]+)", line (\d+),? in (\S+)')
# the helpers raises go through (Dynamo's `unimplemented`, ...): the frame that called them says why
_RAISERS = ("torch/_dynamo/exc.py", "torch/_ops.py", "torch/utils/_contextlib.py")


def dynamo_raise_site(traceback: str) -> SourceRef | None:
    """Where inside Dynamo a failure was raised: the innermost frame of `traceback` in torch/_dynamo, past
    its raising helpers, with the file relative to the torch package's directory (`torch/_dynamo/variables/
    builtin.py`); None when no frame of the traceback is Dynamo's (it trims its own frames from what it
    raises unless TORCHDYNAMO_VERBOSE=1: its `dynamo_error` trace artifact keeps them)."""
    return _raise_site(traceback, "torch/_dynamo/", "where Dynamo raised it")


def torch_raise_site(traceback: str) -> SourceRef | None:
    """Where inside torch a failure was raised (or, for a fatal signal, what torch was running): the innermost
    frame of `traceback` in the torch package, past its raising helpers (`torch/export/dynamic_shapes.py`)."""
    return _raise_site(traceback, "torch/", "where torch raised it")


def _raise_site(traceback: str, package: str, what: str) -> SourceRef | None:
    traceback = traceback.rpartition("Current thread ")[2]  # faulthandler's: the thread that took the signal
    frames = _TRACEBACK_FRAME.findall(traceback.replace("\\", "/"))
    # a traceback lists the innermost frame last; faulthandler's dump of a fatal signal lists it first
    for file, line, function in frames if "most recent call first" in traceback else reversed(frames):
        inside = re.search(f"(?:^|/)({re.escape(package)}.*)$", file)  # the leftmost: `torch/_functorch/` holds
        if inside and not file.endswith(_RAISERS):                          # a `torch/` of its own
            return SourceRef(what, inside[1], int(line), function)
    return None


# a run that failed for want of a resource, not for what it computes: (pattern of its signature, the words)
_RESOURCE_SHORTAGES = (
    (re.compile(r"OutOfMemoryError|out of memory|not enough memory|can't allocate memory|CUBLAS_STATUS_ALLOC_FAILED|"
                r"MemoryError", re.I),
     "out of memory"),
    (re.compile(r"^SIGKILL\b"), "killed by SIGKILL (the out-of-memory killer, most likely)"),
)


def resource_shortage(signature: str) -> str | None:
    """What a failure's signature (`signature`) says the run ran out of, or None when it did not fail for want of
    memory: a program that runs out of memory without the compiler may still run compiled (fusion keeps
    intermediates out of memory), so such a failure is not the compiled program's."""
    return next((words for pattern, words in _RESOURCE_SHORTAGES if pattern.search(signature)), None)
