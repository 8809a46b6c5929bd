"""`python -m pt2doctor.bisect.child REPRO TARGET OUT BACKEND [JOBS]`: bisect a compiler backend on a repro.

(`--serve CUDA` starts it before the repro exists and takes the job from stdin; `--query ...` is one
query in a fresh interpreter.)

What it decides is what PyTorch's `CompilerBisector` decides, through the same hooks: the
subsystem table (`BACKENDS[backend]`, in its order) and the `disable_subsystem` / config-change call
sites inside Dynamo, AOTAutograd and Inductor. The driver is ours, for speed: the bisector's
`do_bisect` asks one question at a time, while the questions "does disabling subsystem S make the
bug go away?" are independent, so they run `JOBS` at a time, each in a forked process (a crash or
hang costs only that query; a fork that torch marks unable to use CUDA execs a fresh interpreter
for its query instead). Then, for a counted subsystem, a search over how many of its
applications stay enabled finds the one application that brings the bug back; its debug info (for
a lowering, the FX node) comes from one recording query in which nothing is disabled.

A query "fails" when `Repro` compiled with BACKEND fails the way TARGET (a failure signature) says;
any other failure counts as a pass, so the search cannot drift to another bug. Caches are off so
every query really lowers and generates code. The process is separate from everything else because
the bisector's state is global (pytorch#143453). Writes OUT as a `Bisection` (`model.diagnosis`)
with the codec; `--serve` takes its job as one `BisectJob` line on stdin.
"""

from __future__ import annotations

import os
import pickle
import re
import runpy
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pt2doctor.capture import torch_compat
from pt2doctor.model.diagnosis import Bisection, BisectJob
from pt2doctor.model.serialize import convert, dumps, loads, write_record
from pt2doctor.processes import group as process_group

_QUERY_TIMEOUT_S = 120.0


@dataclass(frozen=True, slots=True)
class Plan:
    """One query: with `subsystem` set, its applications after number `keep` are disabled (-1: all);
    `change` is a config change in place of counting; `record` logs every application."""

    subsystem: str | None = None
    keep: int = -1
    change: tuple[tuple[str, Any], ...] | None = None
    record: bool = False


def _check(ns: dict[str, Any], backend: str, target: str) -> int:
    """0 when the repro passes (or fails some other way) under `backend`, 1 when it fails like `target`."""
    import torch

    from pt2doctor.model.signature import from_description

    grads = bool(ns.get("GRADS"))  # a repro judged with its backward: each run with it (`with_grads`)
    run = ns["with_grads"] if grads else (lambda fn: fn)
    # as the repro's own check waits for the GPU after each side: CUDA reports a kernel's error (a misaligned
    # address, a device-side assert) at a later call, which must be in here for the query to see it
    synchronize = ns.get("synchronize") or (lambda: None)
    try:
        torch_compat.reset_dynamo()
        mod = ns["Repro"]()
        args = ns["make_inputs"]()
        expected = run(mod)(*args)
        synchronize()
        actual = run(torch.compile(mod, backend=backend))(*args)
        synchronize()
        if ns.get("ACCURACY") and not ns["same_as_fp64_reference"](mod, args, expected, actual, ns["TOLERANCE"],
                                                                    grads):
            return 1 if target.startswith("AccuracyMismatch") else 0
    except Exception as exc:  # the repro's own definition of "how it failed"
        return 1 if from_description(ns["describe_failure"](exc)).text == target else 0
    return 0


def _warm_up(backend: str) -> None:
    """Compile something small once before forking, so each query does not pay the first compile's
    imports and set-up (seconds) again. On CPU: CUDA initialised here would be unusable in the forks."""
    import torch

    with suppress(Exception):  # the bug may be in this very path; the queries will show it
        torch.compile(lambda x: x * 2 + 1, backend=backend)(torch.randn(4))
    torch_compat.reset_dynamo()


def _query_body(ns: dict[str, Any], backend: str, target: str, plan: Plan, log: Path) -> int:
    counts: dict[str, int] = defaultdict(int)
    applications: dict[str, list[str]] = defaultdict(list)

    def disable(hook_backend: str, subsystem: str, debug_info: Callable[[], str] | None) -> bool:
        if hook_backend != backend:
            return False
        number = counts[subsystem]
        counts[subsystem] += 1
        if plan.record:
            applications[subsystem].append(_safe(debug_info))
        return subsystem == plan.subsystem and plan.change is None and number > plan.keep

    def config_change(config_name: str) -> dict[str, Any] | None:
        return dict(plan.change) if plan.change is not None and config_name == backend else None

    torch_compat.install_bisect_policy(disable, config_change)
    code = _check(ns, backend, target)
    if plan.record:
        log.write_bytes(pickle.dumps(dict(applications)))
    return code


def _safe(debug_info: Callable[[], str] | None) -> str:
    try:
        return debug_info() if debug_info is not None else ""
    except Exception:
        return ""


class Queries:
    """Run plans `jobs` at a time, one forked process each; `results` maps a plan to "fail" | "pass"."""

    def __init__(self, ns: dict[str, Any], backend: str, target: str, jobs: int, scratch: Path, repro: str) -> None:
        self.ns, self.backend, self.target, self.jobs, self.scratch = ns, backend, target, jobs, scratch
        self.repro = repro
        self.count = 0

    def run(self, plans: list[Plan], done: Callable[[dict[Plan, bool]], bool] = lambda _: False) -> dict[Plan, bool]:
        """True = the bug is present. Stops early (killing what runs) once `done(results)` says so."""
        results: dict[Plan, bool] = {}
        pending = list(plans)
        running: dict[int, tuple[Plan, float]] = {}  # pid -> (plan, deadline)
        while (pending or running) and not done(results):
            while pending and len(running) < self.jobs:
                plan = pending.pop(0)
                running[self._fork(plan)] = (plan, time.monotonic() + _QUERY_TIMEOUT_S)
            ended = process_group.wait_any()
            if ended is None:
                self._reap_timeouts(running, results)
                time.sleep(0.01)
                continue
            pid, code = ended
            plan, _ = running.pop(pid)
            results[plan] = self._failed(code)
        for pid in running:
            process_group.reap(pid)
        return results

    def recorded(self, plan: Plan) -> dict[str, list[str]]:
        path = self._log(plan)
        return pickle.loads(path.read_bytes()) if path.exists() else {}

    def _log(self, plan: Plan) -> Path:
        return self.scratch / f"applications-{abs(hash(plan))}.pickle"

    def _fork(self, plan: Plan) -> int:
        self.count += 1
        sys.stdout.flush()
        sys.stderr.flush()

        def body() -> int:
            if torch_compat.cuda_fork_poisoned():  # this fork cannot use CUDA: ask a fresh interpreter
                os.execv(sys.executable, [sys.executable, "-m", __spec__.name, "--query", self.repro, self.target,
                                          self.backend, dumps(plan).decode(), str(self._log(plan))])
            return _query_body(self.ns, self.backend, self.target, plan, self._log(plan))

        return process_group.fork_in_group(body)

    def _failed(self, code: int) -> bool:
        name = process_group.signal_name(code)
        return name == self.target if name is not None else code == 1

    def _reap_timeouts(self, running: dict[int, tuple[Plan, float]], results: dict[Plan, bool]) -> None:
        for pid in process_group.overdue((pid, deadline) for pid, (_, deadline) in running.items()):
            plan, _ = running.pop(pid)
            process_group.reap(pid)
            results[plan] = self.target == "timeout"


_DOTTED = re.compile(r"\w+(?:\.\w+)+")  # the calls a repro's code names: `torch.ops.aten.rand.default`, `x.bernoulli_`


def _inert(name: str, change: dict[str, Any] | None, repro: str, on_cuda: bool) -> bool:
    """Subsystems that cannot change this repro, by what they act on: CUDA graphs and padding need a
    GPU, `fallback_random` random ops, `emulate_precision_casts` fp16/bf16, `layout_optimization`
    convolutions. Asking about them would only cost queries."""
    field = next(iter(change), "") if change else ""
    if name == "cudagraphs" or field == "comprehensive_padding":
        return not on_cuda
    if field == "fallback_random":
        return not any(torch_compat.names_a_random_op(name) for name in _DOTTED.findall(repro))
    if field == "emulate_precision_casts":
        return not re.search(r"float16|bfloat16|\bhalf\b", repro)
    if field == "layout_optimization":
        return "convolution" not in repro and "conv" not in repro
    return False


def _graph_text(repro: str) -> str:
    """The repro's graph and inputs (`class Repro` .. `make_inputs`), without the helpers after them."""
    start = repro.find("class Repro(")
    end = repro.find("class InvalidRepro", start)
    return repro[start:end] if start >= 0 and end > start else repro


def _query_main(argv: list[str]) -> int:
    """`--query REPRO TARGET BACKEND PLAN LOG`: one query in a fresh interpreter (for a CUDA-poisoned fork)."""
    repro, target, backend, plan_text, log = argv
    plan = loads(plan_text, Plan)
    torch_compat.compile_every_time()
    return _query_body(runpy.run_path(repro, run_name="pt2doctor_bisect"), backend, target, plan, Path(log))


def bisect(queries: Queries, subsystems: list[tuple[str, dict[str, Any] | None]]) -> dict[str, Any]:
    baseline = Plan(record=True)
    if not queries.run([baseline])[baseline]:
        return {"note": f"the repro does not fail under backend={queries.backend!r} in the bisection process"}
    plans = [Plan(name, -1, tuple(change.items()) if change else None) for name, change in subsystems]

    def first_fix_known(results: dict[Plan, bool]) -> bool:
        for plan in plans:  # in the bisector's order: the first subsystem whose disabling fixes it wins
            if plan not in results:
                return False
            if not results[plan]:
                return True
        return True

    results = queries.run(plans, first_fix_known)
    fixing = next((p for p in plans if p in results and not results[p]), None)
    if fixing is None:
        return {"backend": queries.backend, "note": "no subsystem's disabling removes the bug (code generation)"}
    if fixing.change is not None:
        return {"backend": queries.backend, "subsystem": fixing.subsystem, "bisect_number": 0,
                "debug_info": ", ".join(f"{k}={v}" for k, v in fixing.change)}
    applications = queries.recorded(baseline).get(fixing.subsystem or "", [])
    number = _search(queries, fixing.subsystem or "", len(applications))
    info = applications[number] if 0 <= number < len(applications) else None
    return {"backend": queries.backend, "subsystem": fixing.subsystem, "bisect_number": number, "debug_info": info}


def _search(queries: Queries, subsystem: str, count: int) -> int:
    """The smallest `keep` at which the bug is back: keeping applications 0..keep enabled fails."""
    low, high = 0, max(count - 1, 0)  # keep = count - 1 enables everything: the baseline, which fails
    while low < high:
        points = sorted({low + (high - low) * (i + 1) // (queries.jobs + 1) for i in range(queries.jobs)})
        results = queries.run([Plan(subsystem, point) for point in points])
        failing = [p.keep for p, bad in results.items() if bad]
        passing = [p.keep for p, bad in results.items() if not bad]
        high = min(failing, default=high)
        low = max((k + 1 for k in passing if k < high), default=low)
    return low


def main(argv: list[str]) -> int:
    if argv and argv[0] == "--query":
        return _query_main(argv[1:])
    if argv and argv[0] == "--serve":
        return _serve(argv[1:])
    repro, target, out, backend = argv[:4]
    jobs = int(argv[4]) if len(argv) > 4 else 2
    cuda = "'cuda" in Path(repro).read_text()
    if not cuda:
        _warm_up(backend)
    return _bisect_file(repro, target, out, backend, jobs)


def _serve(argv: list[str]) -> int:
    """`--serve CUDA`: get ready (torch imported, Inductor warmed up unless CUDA is "1") while the minifier
    works, then read one `BisectJob` line from stdin and bisect; end of input without a line means no
    bisection is needed."""
    if argv[0] != "1":  # on a GPU build any compile touches CUDA: then each fork compiles from cold
        _warm_up("inductor")
    line = sys.stdin.readline()
    if not line.strip():
        return 0
    job = loads(line, BisectJob)
    code = _bisect_file(job.repro, job.target, job.out, job.backend, job.jobs)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # its result is written: torch's interpreter teardown (a second) is not waited for


def _bisect_file(repro: str, target: str, out: str, backend: str, jobs: int) -> int:
    started = time.monotonic()
    result: dict[str, Any] = {"backend": None, "subsystem": None, "bisect_number": None, "debug_info": None,
                              "queries": 0, "time_s": 0.0, "note": ""}
    queries = None
    try:
        if torch_compat.compiler_bisector() is None:
            result["note"] = "this torch has no CompilerBisector"
            return 0
        torch_compat.compile_every_time()
        ns = runpy.run_path(repro, run_name="pt2doctor_bisect")
        # from the text, not by making the inputs: CUDA initialised here would be unusable in the forks
        text = Path(repro).read_text()
        on_cuda = "'cuda" in text
        graph = _graph_text(text)
        subsystems: list[tuple[str, dict[str, Any] | None]] = []
        inert: list[tuple[str, dict[str, Any] | None]] = []
        for name, change in torch_compat.bisector_subsystems(backend):
            (inert if _inert(name, change, graph, on_cuda) else subsystems).append((name, change))
        if inert:
            result["note"] = "not queried, inert for this repro: " + ", ".join(n for n, _ in inert)
        with tempfile.TemporaryDirectory(prefix="pt2doctor-bisect-") as scratch:
            queries = Queries(ns, backend, target, max(1, jobs), Path(scratch), repro)
            result.update({k: v for k, v in bisect(queries, subsystems).items() if v or k != "note"})
    except Exception as exc:  # report, never die: the diagnosis goes on without a bisection
        result["note"] = f"bisection failed: {type(exc).__name__}: {exc}"
    finally:
        result["queries"] = queries.count if queries else 0
        result["time_s"] = round(time.monotonic() - started, 3)
        write_record(Path(out), convert(result, Bisection))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
