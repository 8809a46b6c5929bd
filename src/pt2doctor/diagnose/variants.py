"""What a run of the user's unchanged script changes (`diagnose.runs` runs them, several at once).

Contract: a `Variant` is a label plus what the child changes before the script runs (its
`Overrides`, handed over in the child spec, `capture/child/overrides.py`): `backend` forces `torch.compile(backend=...)`
on every call, `stance` sets `torch.compiler.set_stance`, `env` is added to the child's environment; a recording variant
also records the compiled graphs (the minifier's input) and the frame Dynamo fails on (`frames/`, the replay's input),
and its recorder can judge each graph's first call against eager (`accuracy_tolerance`) or run chosen graphs as
captured, without their backend (`run_eagerly`: compile ids); a timed one writes each compiled call's times to
`CALL_TIMES` in its run directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pt2doctor.model.child import Overrides
from pt2doctor.model.runtime import KernelCheckSpec

CALL_TIMES = "call_times.json"  # a timed run's `CallTimes`, in its run directory


@dataclass(frozen=True, slots=True)
class Variant:
    label: str
    backend: str | None = None  # None: whatever the script asks for
    overrides: Overrides | None = None
    record: bool = False
    env: dict[str, str] = field(default_factory=dict)  # set for the child, e.g. CUDA_LAUNCH_BLOCKING
    accuracy_tolerance: float | None = None  # recording: the recorder judges each graph's first call
    run_eagerly: tuple[str, ...] = ()  # recording: compile ids whose graphs run as captured, without their backend
    # recording: AOTAutograd's cache stays on, and the graphs it serves are recorded at the torch level only
    keeps_aot_cache: bool = False
    timed: bool = False  # each call of every torch.compile'd callable timed, to `CALL_TIMES` in its run directory
    kernel_check: KernelCheckSpec | None = None  # recording: every Inductor kernel checked as it runs
    timeout_s: float | None = None  # this run's own limit (a budget), else the script call's
    # reads and writes the user's autotuning results, as the user's own run does: the first run only (`CACHES`)
    user_autotuning: bool = False
    fork_control: bool = False  # forked before forks are trusted: the run that decides whether they are (`Forking`)

    @classmethod
    def original(cls, n: int, record: bool = False, accuracy_tolerance: float | None = None,
                 aot_cache: bool = True) -> Variant:
        """The script as it is; recorded, each graph's first call may be judged against eager too. The first run
        (n=1) autotunes as the user's own run would, and keeps AOTAutograd's cache on as the user's run does where it
        is recorded and `aot_cache` (`diagnose.aot_cache`); a later one autotunes anew."""
        return cls(f"original-{n}", record=record, accuracy_tolerance=accuracy_tolerance, user_autotuning=n == 1,
                   keeps_aot_cache=record and n == 1 and aot_cache)

    @classmethod
    def every_aot_graph(cls, tolerance: float) -> Variant:
        """The original, recorded with AOTAutograd's cache off: every after-AOT graph traced, recorded and judged,
        where the first run's cache served the graph its failure may be in."""
        return cls("aot-cache-off", record=True, accuracy_tolerance=tolerance)

    @classmethod
    def repeat(cls) -> Variant:
        """The first run's plain repeat, which checks that the failure repeats; forked where the runs may be, as
        the control that decides whether they may (`Forking`)."""
        return cls("original-2", fork_control=True)

    @classmethod
    def launch_blocking(cls) -> Variant:
        """The original, recorded, with CUDA's kernel launches synchronous: a kernel's error is raised
        by the call that launched it, inside the compiled graph that did."""
        return cls("cuda-launch-blocking", record=True, env={"CUDA_LAUNCH_BLOCKING": "1"})

    @classmethod
    def kernels_checked(cls, out_dir: Path, cuda: bool, budget_s: float) -> Variant:
        """The original, recorded, made deterministic (no caching allocator, launches blocking, a sync after
        every kernel on CUDA) with every Inductor kernel checked as it runs (`capture.child.kernel_check`),
        stopped after `budget_s`: runtime triage's run (`diagnose.runtime_triage`)."""
        env = {"PYTORCH_NO_CUDA_MEMORY_CACHING": "1", "CUDA_LAUNCH_BLOCKING": "1"} if cuda else {}
        label = "kernels-checked"
        return cls(label, record=True, env=env, kernel_check=KernelCheckSpec(str(out_dir / "runs" / label), sync=cuda),
                   timeout_s=budget_s)

    @classmethod
    def accuracy_check(cls, tolerance: float) -> Variant:
        """The original, recorded, each graph's first call checked against eager on the values the program
        passes; the inputs of a graph it rejects are kept (`diagnose.wrong_graph`)."""
        return cls("accuracy-check", record=True, accuracy_tolerance=tolerance)

    @classmethod
    def graph_run_eagerly(cls, compile_id: str) -> Variant:
        """The original, recorded, with the graph of `compile_id` run as captured, without its backend."""
        return cls("eager-" + compile_id.replace("/", "-"), record=True, run_eagerly=(compile_id,))

    @classmethod
    def with_backend(cls, backend: str) -> Variant:
        return cls(backend, backend, Overrides(compile_kwargs={"backend": backend}), timed=True)

    @classmethod
    def compilation_off(cls) -> Variant:
        # AOTInductor off too: a package runs the exported program eagerly (`export.capture.observer`);
        # its calls timed: what the compiled regions cost with no compiler at all (`diagnose.workarounds`)
        return cls("force_eager", None, Overrides(stance="force_eager", export_eager=True), timed=True)
