"""Workarounds for the model's owner: changes tried on a copy of the whole program, narrowest first, with cost.

Contract: `find_workarounds(runner, found)` is called once the failing stage is known (a graph stage, or
Dynamo: a crash of its own, or a result it changes). It builds candidates from what the diagnosis found, narrowest
first, and tries each on a copy of the user's script (`diagnose.runs.run_a_copy`; never the user's file) with the oracle
of every diagnose run: the copy runs to the end and its own checks pass. It stops at the first that passes:
0. a compiler setting the script makes itself (`inductor_config.triton.use_tensor_descriptor = True`: an
   experimental path, a tuning mode) left out, so that key keeps torch's default (how many graphs stay compiled
   is counted, as for every candidate); each, in the script's order, up to three
   (`analysis.workaround_edits.own_settings`); then the compiler settings the settings search found to remove the
   failure on the minimal graph or the reduced program (`HandOverSoFar.settings`, `diagnose.setting_search`), each
   set at the top of a copy, in the table's order, up to two: every graph stays compiled, without what that setting
   turns off;
1. a culprit call (one the minimal graph's nodes came from; where no graph verified, one the reduced program names,
   where the script makes it as written) made through `torch.compiler.disable(...)` at its
   line (an operator's use, `a // b` made `torch.compiler.disable(operator.floordiv)(a, b)`; where its name is not
   on the line, the call of the module it ran under, else the line's only call: `gn(t)`, `d.sample()`): Dynamo
   breaks the graph around that call alone (none where every compile passes
   `fullgraph=True`, which refuses the break); each of the script's calls in the minimal graph, in its order but
   calls making a tensor from nothing (`torch.ones`) last, up to three (keeping one of several ops out may leave
   the fault in the graph: the next is tried); the first of these (or of 2.) starts ahead once the minifier's first
   cut names the culprit (`start_call`);
2. `@torch.compiler.disable` on the script's function that holds it (else the innermost failing line of the
   script): Dynamo runs that function as written, everything else stays compiled (`analysis.workaround_edits`);
3. the stage's passing backend written into every `torch.compile` call (a stage run of the program that ran it
   so is the verification; where the stage was found on the recorded graph, one run with it forced, started ahead
   beside the settings search where nothing but a setting comes before it: `start_fallback`);
4. where no backend passes (Dynamo itself is at fault), one `torch.compile` site at a time compiling nothing (its
   first three sites): the code it compiled runs as written, every other site stays compiled.
`try_export(runner, found, finding, tried)` is called once the export path has concluded: a failure in
`run_decompositions` is tried without that call (the exported program as traced, kind `call`).
`try_config(runner, found, tried)` is called once `CompilerBisector` has named what it blames
(`HandOverSoFar.bisection`): where a setting turns that off alone (`model.compiler_settings.for_subsystem`: a
pattern pass, `fallback_random`, `emulate_precision_casts`, ...) and no setting verified already, it is set at the
top of a copy too: the narrowest kind of all, every graph stays compiled (`model.diagnosis.handed_over` picks the
narrowest verified one).
Each `Workaround` carries the change, a unified diff of the user's file, how its run ended, how many graphs
the script's own backend still compiled, and its cost: that run's time (the whole run, the compiled regions' steady
state), against the script's run with compilation off where there is one (the procedure's own at the Dynamo stage;
with `cost`, `--cost`, one run beside the first candidate: one more run of the program, which the verdict and the
hand-over do not need). `HandOverSoFar` holds every candidate tried, the verified one last (the hand-over's result,
`HandOverSoFar.frozen`, a `diagnose.reported.HandOver`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from pathlib import Path

from pt2doctor.analysis.workaround_edits import (
    calls_named,
    disable_call,
    disable_function,
    disable_line_call,
    disable_operator,
    fullgraph_everywhere,
    leave_out,
    own_settings,
    pin_backend_in_place,
    set_config,
    skip_decompositions,
    uncompile,
    unified_patch,
)
from pt2doctor.diagnose.found import Found
from pt2doctor.diagnose.options import DiagnoseOptions
from pt2doctor.diagnose.reported import HandOver
from pt2doctor.diagnose.runs import VariantRunner, run_a_copy, steady_state_s
from pt2doctor.diagnose.stages import GRAPH_STAGES
from pt2doctor.diagnose.variants import Variant
from pt2doctor.model.category_policy import policy
from pt2doctor.model.compiler_settings import TRIED_ON_THE_SCRIPT, Setting, SettingSearch, for_subsystem
from pt2doctor.model.diagnosis import Attempt, Bisection, FailingStage, Workaround, WorkaroundCost, WorkaroundKind
from pt2doctor.model.export import ExportFinding, ExportStep
from pt2doctor.model.minify import NodeOrigin, source_calls


def tries_workarounds(options: DiagnoseOptions) -> bool:
    """Whether this diagnosis tries workarounds on copies of the script: asked for, and not a job (a job's copy would
    need torchrun's launch too)."""
    return options.workarounds and options.torchrun is None


@dataclass
class HandOverSoFar:
    """What the owner's hand-over tried and found as it goes: every workaround tried on a copy, the verified one
    last; the compiler settings the search found (candidates of their own); what the bisection blamed."""

    workarounds: list[Workaround] = field(default_factory=list)
    settings: SettingSearch | None = None
    bisection: Bisection | None = None

    def frozen(self) -> HandOver:
        return HandOver(tuple(self.workarounds), self.settings, self.bisection)


def find_workarounds(runner: VariantRunner, found: Found, tried: HandOverSoFar, cost: bool = False) -> None:
    if not _applies(found):
        return
    script = runner.call.script.resolve()
    source = script.read_text()
    baseline = _Baseline(runner, found, cost)
    for kind, change, text in _candidates(found, script, source, tried.settings):
        if _try(runner, found, tried, kind, change, source, text, baseline) is not False:
            return
    if runner.closed or _stage_backend(runner, found, tried, source, script.name, baseline):
        return
    for text, site, line in uncompile(source)[:_MAX_SITES]:
        change = (f"`{site}` at {script.name}:{line} compiling nothing: Dynamo leaves that code alone, "
                  "other compiles stay")
        if _try(runner, found, tried, "site", change, source, text, baseline) is not False:
            return


class _Baseline:
    """The run with compilation off that a workaround's cost is measured against: the procedure's own when it made
    one (the Dynamo stage), else, with `--cost`, one started beside the first candidate (one more run of the
    program, made once); else none, and the cost is the workaround's own run."""

    def __init__(self, runner: VariantRunner, found: Found, cost: bool) -> None:
        self.runner, self.found, self.cost = runner, found, cost
        self.done: Attempt | None = _compilation_off(found)
        self.pending: Future[Attempt] | None = None

    def start(self) -> None:
        if self.cost and self.done is None and self.pending is None:
            self.pending = self.runner.submit(Variant.compilation_off())

    def result(self) -> Attempt | None:
        if self.done is None:
            self.done = _finished(self.pending, self.found)
        return self.done


_MAX_SITES = 3  # one run each: a script with more compile sites is tried on its first three


def try_export(runner: VariantRunner, found: Found, finding: ExportFinding, tried: HandOverSoFar,
               cost: bool = False) -> None:
    """The failing export step (`finding`) left out of a copy, where it can be (see the module docstring)."""
    if finding.step is not ExportStep.RUN_DECOMPOSITIONS or found.flaky:
        return
    source = runner.call.script.resolve().read_text()
    text = skip_decompositions(source)
    if text is not None:
        change = ("every `.run_decompositions(...)` call left out: the exported program runs as traced, its ops not "
                  "decomposed")
        _try(runner, found, tried, "call", change, source, text, _Baseline(runner, found, cost))


def try_config(runner: VariantRunner, found: Found, tried: HandOverSoFar, cost: bool = False) -> None:
    """The setting that turns off what the bisection blamed, tried on a copy (see the module docstring)."""
    b = tried.bisection
    setting = for_subsystem(b.subsystem) if b is not None and b.subsystem else None
    if setting is None or not _applies(found):
        return
    if any(w.verified and w.kind == "config" for w in tried.workarounds):
        return  # a setting verified already: the search's, as narrow
    source = runner.call.script.resolve().read_text()
    text = set_config(source, setting.module, setting.line)
    if text is not None:
        _try(runner, found, tried, "config", _setting_change(setting, "what the bisection blamed"), source, text,
             _Baseline(runner, found, cost))


def _setting_change(setting: Setting, why: str) -> str:
    return f"`{setting.line}` at the top of the script: every graph stays compiled, {setting.effect} ({why})"


def _try(runner: VariantRunner, found: Found, tried: HandOverSoFar, kind: WorkaroundKind, change: str, source: str,
         text: str, baseline: _Baseline) -> bool | None:
    """Whether the candidate verified; None when the diagnosis is being stopped (its run, ended by the stop, says
    nothing about the candidate, and no other is tried)."""
    if runner.closed:
        return None
    runner.reporter.status(f"trying a workaround on a copy of the script: {change}")
    baseline.start()
    attempt, copy_runner = run_a_copy(runner, *_copy_place(runner, kind, tried), text)
    found.attempts.append(attempt)
    if runner.closed:
        return None
    session = copy_runner.sessions.get(attempt.label)
    kept = sum(1 for c in session.compiles if c.status == "ok") if session else None
    workaround = _workaround(kind, change, unified_patch(source, text, runner.call.script.name), attempt,
                             baseline.result(), kept)
    tried.workarounds.append(workaround)
    return workaround.verified


def _copy_place(runner: VariantRunner, kind: WorkaroundKind, tried: HandOverSoFar | None = None) -> tuple[Path, str]:
    """The folder and label of the run of a candidate of `kind`: the kind's earlier candidates keep theirs (none
    before the hand-over)."""
    earlier = sum(1 for w in tried.workarounds if w.kind == kind) if tried is not None else 0
    name = f"{kind}-{earlier + 1}" if earlier else kind
    return runner.call.out_dir / "workaround" / name, f"workaround-{name}"


def _candidates(found: Found, script: Path, source: str, settings: SettingSearch | None = None,
                origins: Sequence[NodeOrigin] | None = None) -> list[tuple[WorkaroundKind, str, str]]:
    """(kind, change in words, the script changed), narrowest first: the script's own compiler settings left out,
    those the search found (`settings`), the culprit call kept out of the graph, then the function holding it;
    `origins`: the culprit's, where they are known before `found` holds them (`start_call`)."""
    out: list[tuple[WorkaroundKind, str, str]] = [
        ("config", f"`{text}` ({script.name}:{line}) left out, so that setting keeps torch's default",
         leave_out(source, line))
        for line, text in own_settings(source)[:_MAX_SETTINGS]]
    if settings is not None:
        found_on = f"found on {settings.on}"
        for setting in settings.passed_settings[:TRIED_ON_THE_SCRIPT]:
            edited = set_config(source, setting.module, setting.line)
            if edited is not None:
                out.append(("config", _setting_change(setting, found_on), edited))
    origins = sorted(_culprit_origins(found, script, source) if origins is None else
                     _in_script(source_calls(origins), script),
                     key=lambda o: bool(_FACTORY.search(o.call)))
    kept_out: set[str] = set()
    breaks = not fullgraph_everywhere(source)  # a call kept out is a graph break: a run in vain under fullgraph=True
    for origin in origins if breaks else ():
        if len(kept_out) == _MAX_CALLS:
            break
        text, call = disable_call(source, origin.line, origin.call) if origin.call else None, origin.call
        if text is None and origin.call:  # an operator (`a // b`: `operator.floordiv`)
            text = disable_operator(source, origin.line, origin.call)
        if text is None:  # a module's call (`gn(t)`), a library's method (`d.sample()`) ran the culprit
            text, call = disable_line_call(source, origin.line, origin.module) or (None, "")
        if text is not None and text not in kept_out:
            kept_out.add(text)
            out.append(("call", f"`{call}` at {script.name}:{origin.line} called through "
                                "`torch.compiler.disable(...)`: Dynamo runs that call eagerly, "
                                "the rest stays compiled",
                        text))
    line = origins[0].line if origins else _failing_line(found, script)
    disabled = disable_function(source, line) if line is not None else None
    if disabled is not None:
        text, function = disabled
        out.append(("function", f"`@torch.compiler.disable` on `{function}` ({script.name}:{line}): Dynamo runs that "
                                "function as written, the rest stays compiled", text))
    return out


def _compilation_off(found: Found) -> Attempt | None:
    """The run with compilation off, where the procedure made one already."""
    label = Variant.compilation_off().label
    return next((a for a in found.attempts if a.label == label), None)


def _applies(found: Found) -> bool:
    """A compiler stage is at fault (not the script) and the failure repeats. (Not the machine either: a control
    that fails the same way concludes the diagnosis before the hand-over, `diagnose.narrowing.control`.)"""
    if found.flaky or not policy(found.category).workarounds:
        return False
    return found.stage in GRAPH_STAGES or found.stage is FailingStage.DYNAMO


_MAX_CALLS = 3  # one run each: a minimal graph of more of the script's calls is tried on its first three
# a call that makes a tensor from nothing: kept out, its value enters the graph as an input and the graph computes
# the same (group_norm_constant_input_decomp: `torch.ones` tried first, the GroupNorm not at all); tried last
_FACTORY = re.compile(r"(?:^|\.)(?:ones|zeros|full|empty|arange|eye|linspace|tensor|rand|randn|randint)(?:_like)?$")
_MAX_SETTINGS = 3  # one run each: a script making more compiler settings is tried on its first three


def _culprit_origins(found: Found, script: Path, source: str) -> list[NodeOrigin]:
    """Where in the script itself the minimal graph's nodes came from (their calls and lines), in its order; where no
    graph verified, the reduced program's culprit calls where the script makes them (the program keeps the script's
    text: `param1.mul_`, `rng.randint`)."""
    if found.minify and found.minify.verified:
        origins: tuple[NodeOrigin, ...] = source_calls(found.minify.origins)
    elif (p := found.program) is not None and p.verified and p.reason != "export":
        origins = tuple(NodeOrigin(op="", call=call, file=str(script), line=line)
                        for call, line in calls_named(source, p.culprit_ops))
    else:
        origins = ()
    return _in_script(origins, script)


def _in_script(origins: Sequence[NodeOrigin], script: Path) -> list[NodeOrigin]:
    return [o for o in origins if o.file and o.line and Path(o.file).resolve() == script]


def _failing_line(found: Found, script: Path) -> int | None:
    """The innermost failing line of the script itself."""
    return next((f.line for f in found.user_frames if Path(f.file).resolve() == script), None)


def start_fallback(runner: VariantRunner, found: Found, tried: HandOverSoFar, cost: bool = False) -> None:
    """The run that verifies the stage's passing backend for every compile (`_stage_backend`), started ahead at low
    priority (`VariantRunner.ahead`) where it is the next candidate but for the compiler settings a search is still
    looking for: the script makes no setting of its own, and no culprit call or function of the script's can be kept
    out (the culprit is a library's). Beside the search, on the cores its rounds leave idle, it is done or nearly when
    the search has found nothing (GPT-2's wrong kernel: its run started after the search, 13 s of a 74 s diagnosis
    with one core idle); `_stage_backend` takes it, and where a setting verifies it is stopped unused (the caller's
    `drop_ahead`). Not where a GPU is visible: the runs share its memory, and one run ahead would hold a slot."""
    backend = _passing_backend(found)
    if (backend is None or not _applies(found) or runner.gpu.limit is not None
            or any(a.backend == backend for a in found.attempts)):
        return
    script = runner.call.script.resolve()
    if not _candidates(found, script, script.read_text(), tried.settings):
        runner.ahead(Variant.with_backend(backend))


def start_call(runner: VariantRunner, found: Found, origins: Sequence[NodeOrigin]) -> None:
    """The run of the first candidate `find_workarounds` will try, started ahead at low priority
    (`VariantRunner.copy_ahead`) as soon as the minifier's first passes have cut the graph down to `origins` (the ops
    the failure names, alone: ResNet's softmax): a culprit call kept out, or the function holding it, where the
    script makes no compiler setting of its own (those come first). The minimal graph it ends at is nearly always
    those nodes or fewer; where its first candidate is another, `run_a_copy` stops this one unused, and so does
    `drop_ahead` where a setting the search found verifies first. A run of the whole program beside the minifier
    and the maintainers' hand-over, on the cores they leave idle, instead of after them (ResNet: its copy compiles
    the eval graph without softmax cold, 14-18 s at the diagnosis's end). Not where a GPU is visible (as
    `start_fallback`)."""
    if not _applies(found) or runner.gpu.limit is not None or runner.closed:
        return
    script = runner.call.script.resolve()
    source = script.read_text()
    candidates = _candidates(found, script, source, origins=origins)
    if candidates and candidates[0][0] in ("call", "function"):
        kind, _, text = candidates[0]
        runner.reporter.status("the minifier's first cut names the culprit: its workaround's run starts ahead")
        runner.copy_ahead(*_copy_place(runner, kind), text)


def _passing_backend(found: Found) -> str | None:
    """The highest rung of the ladder that passed: the least taken away."""
    passed = [backend for backend, outcome in found.stages.items() if outcome == "pass"]
    return passed[-1] if passed else None


def _stage_backend(runner: VariantRunner, found: Found, tried: HandOverSoFar, source: str, name: str,
                   baseline: _Baseline) -> bool:
    """The stage's passing backend for every compile: a stage run of the program already made is the verification;
    where the stage was found on the recorded graph, the program runs once with that backend forced (as the patch
    writes it into every `torch.compile` call), or the run started ahead for it (`start_fallback`) is taken."""
    backend = _passing_backend(found)
    if backend is None:
        return False
    runner.reporter.status(f"trying a workaround: backend={backend!r} for every compile")
    baseline.start()
    run = next((a for a in found.attempts if a.backend == backend), None)
    if run is None:
        run = runner.submit(Variant.with_backend(backend)).result()
        if runner.closed:
            return True  # the diagnosis is being stopped: nothing more is tried
        found.attempts.append(run)
    pinned = pin_backend_in_place(source, backend)  # as written, `backend=` added alone
    patch = unified_patch(source, pinned, name) if pinned else ""
    change = (f"`torch.compile(..., backend={backend!r})` for every compile: without "
              + ("your backend" if found.stage is FailingStage.BACKEND else "the failing stage") + " everywhere")
    workaround = _workaround("backend", change, patch, run, baseline.result(), 0)
    tried.workarounds.append(workaround)
    return workaround.verified


def _workaround(kind: WorkaroundKind, change: str, patch: str, attempt: Attempt, off: Attempt | None,
                kept: int | None) -> Workaround:
    passed = attempt.outcome == "pass"
    eager = off if off is not None and off.outcome == "pass" else None
    steady = steady_state_s(attempt.run_dir)
    note = "" if steady is not None else "no compiled function ran more than once: nothing past compilation to time"
    cost = WorkaroundCost(attempt.wall_s, eager.wall_s if eager else None, steady_s=steady,
                          all_eager_steady_s=steady_state_s(eager.run_dir) if eager else None, steady_note=note)
    if attempt.ahead:  # its seconds are a background run's: the cores others left idle
        cost = replace(cost, what=f"{cost.what}; run at low priority beside the diagnosis's other work, so slower "
                                  "than alone")
    return Workaround(change, patch, passed, "the script ran to the end" if passed else f"still fails: {attempt.error}",
                      cost if passed else None, kept if passed else None, kind)


def _finished(pending: Future[Attempt] | None, found: Found) -> Attempt | None:
    """The compilation-off run started beside a broad candidate, once it ended (None: it could not run)."""
    if pending is None:
        return None
    try:
        attempt = pending.result()
    except Exception:  # noqa: BLE001 - a reference run that broke leaves the cost without it
        return None
    if attempt not in found.attempts:
        found.attempts.append(attempt)
    return attempt
