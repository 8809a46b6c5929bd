"""The records between `capture.runner` and the child that runs the user's script (`capture.child`).

Contract: the parent writes one `ChildSpec` (everything the child does besides running the script)
into the run directory with the codec (`model.serialize.write_record`) and starts
`python -m pt2doctor.capture.child --spec PATH SCRIPT ARGS...`; the script's own argv and
environment stay its own. The child answers with one `ChildReport` (the sidecar, `child.json`),
written when the script ends; a child that dies of a signal leaves none. `Hooks` is the part a
caller chooses (what-if overrides, the accuracy probe, recordings); the runner adds the paths.
"""

from __future__ import annotations

from typing import Any

import msgspec

from pt2doctor.model.ids import SourceLoc
from pt2doctor.model.minify import DEFAULT_TOLERANCE
from pt2doctor.model.runtime import KernelCheckSpec

# the first line of a crash log: the script's thread id, as faulthandler prints thread ids (`0x00007f...`)
MAIN_THREAD_MARK = "pt2doctor main thread: "


class Overrides(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """A what-if configuration the child applies before the script runs (`capture.child.overrides` says
    what each field does). An unknown key is an error: a typo must not pass as "the fix did not help"."""

    dynamo_config: dict[str, Any] = {}
    inductor_config: dict[str, Any] = {}
    compiler_config: dict[str, Any] = {}
    mark_dynamic: tuple[str, ...] = ()
    mark_unbacked: tuple[str, ...] = ()
    reorderable_print: bool = False
    compile_kwargs: dict[str, Any] = {}
    stance: str | None = None
    stance_pinned: bool = False  # the stance holds for the whole run: later set_stance calls change nothing
    seed: int | None = None
    record_outputs: str | None = None  # a JSON-lines file of the compiled callables' first results
    max_calls: int | None = None
    export_eager: bool = False  # AOTInductor off: a loaded package runs the exported program eagerly
    export_strict: bool | None = None  # every torch.export.export call traces strictly (True) or not (False)
    export_runs_module: bool = False  # each torch.export.export call first runs its module eagerly, on copies
    decompositions_off: bool = False  # ExportedProgram.run_decompositions returns the program it was given
    export_off: bool = False  # torch.export.export returns a stand-in whose module() is the module given, run eagerly
    time_calls: str | None = None  # a `CallTimes` record of every torch.compile'd callable's calls, written at exit

    @property
    def changes_export(self) -> bool:
        """Whether the export observer must be installed to apply these (`export.capture.observer`)."""
        return (self.export_eager or self.export_strict is not None or self.export_runs_module
                or self.decompositions_off or self.export_off)


class CallTimes(msgspec.Struct, frozen=True):
    """How long each call of each `torch.compile`'d callable took (`Overrides.time_calls`), in seconds, one tuple
    per callable in the order the script compiled them; on a GPU each call is timed to its kernels' end."""

    calls: tuple[tuple[float, ...], ...] = ()

    def steady_state_s(self) -> float | None:
        """The compiled regions' time past their first calls (which compile): per callable, the median of its
        later calls times their number, summed; None when no callable ran twice (nothing steady to time)."""
        later = [sorted(c[1:]) for c in self.calls if len(c) > 1]
        return sum(c[len(c) // 2] * len(c) for c in later) if later else None


class AccuracyProbeSpec(msgspec.Struct, frozen=True):
    """`pt2doctor accuracy`'s probe: one `GraphAccuracy` line per compiled graph to `out`."""

    out: str
    tol: float = DEFAULT_TOLERANCE


class Hooks(msgspec.Struct, frozen=True, omit_defaults=True):
    """What the child installs besides the trace: the caller's choice."""

    overrides: Overrides | None = None
    accuracy_probe: AccuracyProbeSpec | None = None
    frame_record_dir: str | None = None  # the frame Dynamo fails on (`capture.child.frame_recorder`)
    record_every_aot_graph: bool = False  # the recorder turns AOTAutograd's cache off (`capture.child.graph_recorder`)
    record_keeps_aot_cache: bool = False  # ... but for the graphs it serves, recorded at the torch level only
    record_accuracy_tolerance: float | None = None  # the recorder judges each graph's first call
    record_run_eagerly: tuple[str, ...] = ()  # compile ids whose graphs the recorder runs as captured, no backend
    draft_export: bool = False  # each torch.export.export call is also draft-exported, on copies (`explain`)
    export_checks: bool = False  # exported programs the script makes or runs are judged (`export.capture.checks`)
    # every Inductor kernel checked as it runs (`capture.child.kernel_check`)
    kernel_check: KernelCheckSpec | None = None
    # no autotuning result read from a cache or written to one (`torch_compat.autotune_anew`): every run but the first
    autotune_anew: bool = False


class ChildSpec(msgspec.Struct, frozen=True):
    """`meta`: where the child writes its `ChildReport`; `crash_log`: faulthandler's file (dumped a
    second before `timeout_s` too, so a hang names its line); `record_dir`: the graph recorder's
    run directory (it writes `graphs/` there); `count_calls`: count each compiled graph's calls;
    `per_rank`: the child is one rank of a job and keeps its sidecar and crash log apart from the others';
    `export_log`: where the torch.export / AOTInductor steps are recorded (`model.export`)."""

    meta: str | None = None
    crash_log: str | None = None
    timeout_s: float | None = None
    record_dir: str | None = None
    count_calls: bool = False
    export_log: str | None = None  # the export observer's `ExportEvent` lines (`export.capture.observer`)
    draft_log: str | None = None  # its `DraftReport` lines, when the hooks ask for draft_export
    checks_log: str | None = None  # its `ExportCheck` lines, when the hooks ask for export checks
    hooks: Hooks = Hooks()
    launched_at: float | None = None  # time.time() when the parent started it: `timeout_s` counts from then
    per_rank: bool = False  # one process per rank (torchrun): each writes `meta`/`crash_log` under `rank-N/`
    # stdout is a pipe the parent copies to a terminal: line-buffered, as Python makes a terminal's stdout
    line_buffered_stdout: bool = False


class ExceptionRecord(msgspec.Struct, frozen=True):
    """The exception the script ended with: its chain (`Type: message` per link, outermost first),
    its frames (innermost last) and, when a compiled graph raised it, that graph's compile id."""

    type: str
    message: str = ""
    chain: tuple[str, ...] = ()
    frames: tuple[SourceLoc, ...] = ()
    traceback: str = ""
    raised_by_graph: str | None = None


class ChildEnvironment(msgspec.Struct, frozen=True):
    python: str | None = None
    platform: str | None = None
    torch: str | None = None
    cuda: str | None = None
    gpu: str | None = None
    compiler: str | None = None
    config_diff: dict[str, str] = {}
    error: str | None = None  # why the torch facts are missing
    gpu_peak_bytes: int | None = None  # the most GPU memory the process held (None: it used no GPU)
    gpu_total_bytes: int | None = None  # that GPU's memory


class FrameSummary(msgspec.Struct, frozen=True):
    """Beside a frame recording (`capture.child.frame_recorder`): what the parent needs to write the replay
    without unpickling the recording (which would import the script's modules)."""

    name: str
    file: str
    line: int
    fullgraph: bool
    error: str
    dynamic: bool | None = None  # the `dynamic=` the frame was compiled with


class ChildReport(msgspec.Struct, frozen=True):
    """The sidecar: how the script ended, as the child saw it."""

    exit_code: int
    wall_s: float = 0.0
    ended_at: float | None = None  # time.time() when the script ended (which rank of a job ended first)
    exception: ExceptionRecord | None = None
    calls: dict[str, int] | None = None  # compile id -> calls, with `ChildSpec.count_calls`
    call_order: tuple[str, ...] = ()  # the compile ids of the first graph calls, in order (`call_counter.MAX_ORDER`)
    environment: ChildEnvironment = ChildEnvironment()
    torch_imported: bool = False
