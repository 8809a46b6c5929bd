"""Recompilations -> findings: per function, the chain of recompiles, each with its cause in plain words.

Contract: `recompile_chains(session)` groups recompiles by function (in compile order) and picks, for
each recompile, the guard failure that caused it (`primary_failure`); `find_recompiles(session)` turns
each chain into one finding with the concrete fix (`fix_for`). Pure.

Which failure is the cause: torch lists one failed guard per cache entry, newest entry first, and only
the first guard of an entry that failed. A failure is "explained away" when another entry was compiled
for what this call has: another entry expected the value this call has (e.g. the newest entry is float64
but an older float32 entry failed on something else), or, for torch's global state (grad mode, autocast),
another entry failed on a later guard: torch checks the global state first, so that entry had this
call's state. The cause is the first failure not explained away; the newest entry's failure otherwise.
A Python value's new value is not in torch's guard text; it is inferred from a later recompile whose
failed entry is this compile (that guard then states the value this compile specialized on).

The fix depends on what changed, not only on the guard's kind (`cause_of` -> `Cause` -> `FIXES`): an
int can become dynamic, a float is specialized unless `specialize_float` is off, a string, bool or None
is a mode flag (one graph per value is expected), `training` flips with `model.train()/eval()`, a value
Dynamo carried across a graph break (`___stackN`) is fixed at the break, not by name.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import replace
from enum import Enum

from pt2doctor.analysis.guard_words import guard_words
from pt2doctor.model import (
    Finding,
    GraphBreak,
    GuardFailure,
    GuardKind,
    Recompile,
    RecompileChain,
    RecompileStep,
    Session,
    Severity,
    SourceLoc,
)
from pt2doctor.model.torch_text import ResumeName


class Cause(str, Enum):
    """What changed, finer than `GuardKind`: the key of `FIXES`."""

    SIZE = "size"
    RESUMED_SIZE = "resumed_size"
    CARRIED_TENSOR = "carried_tensor"
    SYMBOLIC = "symbolic"
    ZERO_ONE = "zero_one_specialization"
    DTYPE = "dtype"
    PARAM_DTYPE = "parameter_dtype"
    STRIDE = "stride"
    RANK = "rank"
    REQUIRES_GRAD = "requires_grad"
    PARAM_REQUIRES_GRAD = "parameter_requires_grad"
    DEVICE = "device"
    INT = "int"
    MODULE_INT = "module_int"
    FLOAT = "float"
    FLAG = "flag"
    FLAG_ONCE = "flag_once"
    TRAINING = "training"
    KWARGS = "kwargs"
    LENGTH = "length"
    CARRIED_VALUE = "carried_value"
    GLOBAL = "global"
    TYPE = "type"
    NONE_OR_TENSOR = "none_or_tensor"
    CALLABLE_KIND = "callable_kind"
    IDENTITY = "identity"
    SHARED_CODE = "shared_code"
    DISPATCH_KEYS = "dispatch_keys"
    GRAD_MODE = "grad_mode"
    AUTOCAST = "autocast"
    GLOBAL_STATE = "global_state"
    OTHER = "other"


_MARK_DYNAMIC = "`torch.compiler.config.dynamic_sources = \"{source}\"`"
FIXES: dict[Cause, str] = {
    Cause.SIZE: "mark the dimension dynamic at the call site, before the first call: "
                "`torch._dynamo.mark_dynamic({subject}, {dim})`, or compile with `dynamic=True`; if it only "
                "takes a few values, `torch._dynamo.mark_static({subject}, {dim})` keeps one graph per value",
    Cause.RESUMED_SIZE: "`{subject}` is a local of `{fn}` that the code after the graph break {brk} receives, so it "
                        "cannot be marked where it is made: mark the input of `{fn}` it is computed from dynamic "
                        "before calling `{fn}` (`torch._dynamo.mark_dynamic(<that input>, <its dim>)`), or compile "
                        "with `dynamic=True`; removing that graph break makes `{fn}` one graph",
    Cause.CARRIED_TENSOR: "the tensor is made before the graph break {brk} and used after it: the code after the "
                          "break recompiles once and then treats this size as dynamic (expected); removing that "
                          "graph break (see the graph-break list) avoids it",
    Cause.SYMBOLIC: "the dynamic range guessed for `{subject}` was too narrow: `torch._dynamo.mark_dynamic({subject}, "
                    "{dim})` on the first call, or `dynamic=True`",
    Cause.ZERO_ONE: "size 0 or 1 gets its own graph (0/1 specialization), once: expected. To share one graph, torch's "
                    "hint: `torch._dynamo.decorators.mark_unbacked({subject}, {dim})` before the call (an unbacked "
                    "size is never specialized; ops that branch on it may then need `torch._check`)",
    Cause.DTYPE: "call with the dtype it was compiled with (cast before the call: `{subject}.to(torch.{expected})`), "
                 "or accept one compile per dtype",
    Cause.PARAM_DTYPE: "the module's parameters changed dtype after it was compiled (e.g. `model.to(torch.{actual})`): "
                       "one graph per dtype is expected; convert the model before compiling it",
    Cause.STRIDE: "pass a consistent layout: call `{subject}.contiguous()` before the call",
    Cause.RANK: "call with a consistent number of dims (reshape before the call)",
    Cause.REQUIRES_GRAD: "keep requires_grad consistent (run inference under `torch.no_grad()`, or `.detach()` "
                         "`{subject}`)",
    Cause.PARAM_REQUIRES_GRAD: "parameters were frozen or unfrozen (`requires_grad_`) after compiling: one graph per "
                               "setting is expected; set requires_grad before the first compiled call",
    Cause.DEVICE: "keep `{subject}` on one device",
    Cause.INT: "pass `{subject}` as a tensor (`torch.tensor({subject})`) so its value is data, not a constant, "
               "or let it be a dynamic int: " + _MARK_DYNAMIC + " (or `dynamic=True`)",
    Cause.MODULE_INT: "`{subject}` is an int attribute of an nn.Module, which torch keeps static: "
                      "`torch._dynamo.config.allow_unspec_int_on_nn_module = True` (torch's hint), or "
                      + _MARK_DYNAMIC + ", or keep the count in a tensor (a buffer)",
    Cause.FLOAT: "torch specializes Python floats: `torch._dynamo.config.specialize_float = False` makes `{subject}` "
                 "a graph input, or pass it as a tensor (`torch.tensor({subject})`)",
    Cause.FLAG: "`{subject}` is a mode or config flag ({type}): one graph per value is expected; keep its values few "
                "(each costs a compile and counts against the recompile limit)",
    Cause.FLAG_ONCE: "`{subject}` changed once, after the first call (set on first use, e.g. a config field filled "
                     "lazily): set it before the first compiled call so one graph serves",
    Cause.TRAINING: "`model.train()` / `model.eval()` compile one graph per mode: normal (once per mode); nothing to "
                    "fix unless the mode flips often",
    Cause.KWARGS: "the call passed a different set of keyword arguments: one graph per call signature is expected; "
                  "pass the same keywords on every call to share one",
    Cause.LENGTH: "the length of `{container}` is part of the graph: one graph per length is expected; pass a "
                  "fixed-length container (or a tensor) to share one",
    Cause.CARRIED_VALUE: "the value is computed before the graph break {brk} and used after it, so the code after the "
                         "break is compiled for each value: remove that graph break (see the graph-break list), or "
                         "keep the value a tensor (no `.item()`, `int()`, `float()` before the break){float_tip}",
    Cause.GLOBAL: "do not change `{subject}` between calls; pass it as an argument instead of reading a global",
    Cause.TYPE: "call with one type for `{subject}`",
    Cause.NONE_OR_TENSOR: "`{subject}` is None on some calls and a tensor on others (e.g. a cache that is empty on the "
                          "first step): one graph for each is expected, one extra compile",
    Cause.CALLABLE_KIND: "pass one kind of callable for `{subject}` (e.g. always a plain `def` function): each kind "
                         "compiles its own graph",
    Cause.IDENTITY: "reuse the same `{subject}` object (e.g. build the module once, compile it once)",
    Cause.SHARED_CODE: "different functions or modules (e.g. two models' `forward`) run through this one wrapped "
                       "frame (a decorator's wrapper calling `{owner}`), so they share its cache and one recompile "
                       "limit: each new one recompiles the frame, which is expected; raise "
                       "`torch._dynamo.config.recompile_limit` if the limit is hit",
    Cause.DISPATCH_KEYS: "call with consistent tensor modes/subclasses for `{subject}`",
    Cause.GRAD_MODE: "one graph per grad mode is expected (training vs `torch.no_grad()` / `torch.inference_mode()`): "
                     "nothing to fix; compile and warm up under the mode you run in",
    Cause.AUTOCAST: "one graph per autocast state is expected: keep `torch.autocast` consistently on (or off) around "
                    "the compiled call",
    Cause.GLOBAL_STATE: "each setting of `{subject}` compiles its own graph: set it once, before the first compiled "
                        "call",
    Cause.OTHER: "see the guard text; `TORCH_LOGS=guards` prints all guards",
}


def cause_of(failure: GuardFailure) -> Cause:
    """What changed, by kind and then by the value's type and source (see the module docstring)."""
    for test, cause in _REFINE.get(failure.kind, ()):
        if test(failure):
            return cause
    return _BY_KIND.get(failure.kind, Cause.OTHER)


def _carried(f: GuardFailure) -> bool:
    return f.origin == "carried"


def _on_parameter(f: GuardFailure) -> bool:
    return f.origin == "parameter"


_TYPE_WORDS = {"bool": "a bool", "str": "a string", "value": "a value"}


def _literal(f: GuardFailure) -> str:
    """The expected value's type as the advice says it: `int`, `float`, `a bool`, `None`, `a string`, `a value`."""
    return _TYPE_WORDS.get(f.value_type or "value", f.value_type or "a value")


def _global_state(f: GuardFailure) -> bool:
    return f.origin == "state"


_REFINE: dict[GuardKind, tuple[tuple[Callable[[GuardFailure], bool], Cause], ...]] = {
    GuardKind.SIZE: ((_carried, Cause.CARRIED_TENSOR),),
    GuardKind.SYMBOLIC: ((lambda f: f.expected == ">= 2", Cause.ZERO_ONE),),
    GuardKind.DTYPE: ((_on_parameter, Cause.PARAM_DTYPE),),
    GuardKind.REQUIRES_GRAD: ((_on_parameter, Cause.PARAM_REQUIRES_GRAD),),
    GuardKind.VALUE: (
        (_carried, Cause.CARRIED_VALUE),
        (lambda f: f.subject.endswith(".training") or f.subject == "training", Cause.TRAINING),
        (lambda f: f.subject == "len(kwargs)", Cause.KWARGS),
        (lambda f: f.subject.startswith("len("), Cause.LENGTH),
        (lambda f: "allow_unspec_int_on_nn_module" in (f.hint or ""), Cause.MODULE_INT),
        (lambda f: _literal(f) == "int", Cause.INT),
        (lambda f: _literal(f) == "float", Cause.FLOAT),
    ),
    GuardKind.TYPE: ((lambda f: f.expected == "tensor", Cause.NONE_OR_TENSOR),
                     (lambda f: f.expected == "function", Cause.CALLABLE_KIND)),
    GuardKind.IDENTITY: ((lambda f: f.subject.endswith(".__code__"), Cause.SHARED_CODE),),
    GuardKind.ATTRIBUTE: ((lambda f: f.origin == "global", Cause.GLOBAL),),
    GuardKind.GLOBAL_STATE: ((lambda f: "grad_mode" in f.subject, Cause.GRAD_MODE),
                             (lambda f: "autocast" in f.subject, Cause.AUTOCAST)),
}
_BY_KIND = {GuardKind.SIZE: Cause.SIZE, GuardKind.SYMBOLIC: Cause.SYMBOLIC, GuardKind.DTYPE: Cause.DTYPE,
            GuardKind.STRIDE: Cause.STRIDE, GuardKind.RANK: Cause.RANK, GuardKind.REQUIRES_GRAD: Cause.REQUIRES_GRAD,
            GuardKind.DEVICE: Cause.DEVICE, GuardKind.VALUE: Cause.FLAG, GuardKind.GLOBAL: Cause.GLOBAL,
            GuardKind.TYPE: Cause.TYPE, GuardKind.IDENTITY: Cause.IDENTITY, GuardKind.ATTRIBUTE: Cause.FLAG,
            GuardKind.DISPATCH_KEYS: Cause.DISPATCH_KEYS, GuardKind.GLOBAL_STATE: Cause.GLOBAL_STATE}


def fix_for(failure: GuardFailure, chain: RecompileChain | None = None) -> str:
    """The concrete change for `failure`; `chain` (its function's recompiles) sharpens it where known."""
    cause = cause_of(failure)
    if cause is Cause.FLAG and chain is not None and _set_once(failure, chain):
        cause = Cause.FLAG_ONCE
    if cause is Cause.SIZE and chain is not None and ResumeName.parse(chain.function) is not None:
        cause = Cause.RESUMED_SIZE
    return FIXES[cause].format_map(_fix_fields(failure, chain))


def _fix_fields(f: GuardFailure, chain: RecompileChain | None) -> dict[str, object]:
    brk = break_site(chain.function, chain.file) if chain else None
    if brk is None and f.source is not None and f.source.function:
        brk = break_site(f.source.function, f.source.file)
    return {"subject": f.subject, "dim": f.dim if f.dim is not None else 0, "expected": f.expected,
            "actual": f.actual, "source": f.torch_source or f.subject, "type": _literal(f),
            "container": f.subject[4:-1] if f.subject.startswith("len(") else f.subject,
            "brk": f"at {brk[0].rsplit('/', 1)[-1]}:{brk[1]}" if brk else "",
            "owner": f.subject.removesuffix(".__code__"),
            "fn": resume.function if chain and (resume := ResumeName.parse(chain.function)) else "",
            "float_tip": "; a float can also become a graph input: `torch._dynamo.config.specialize_float = False`"
                         if _literal(f) == "float" else ""}


def _set_once(failure: GuardFailure, chain: RecompileChain) -> bool:
    """A flag that was None when first compiled and changed once: set lazily on first use."""
    same = [s for s in chain.steps if s.cause is not None and s.cause.subject == failure.subject]
    return failure.expected == "None" and len(same) == 1


def primary_failure(recompile: Recompile, others: tuple[Recompile, ...] = ()) -> GuardFailure | None:
    """The failure that caused `recompile` (see the module docstring); `others` are the frame's recompiles."""
    failures = recompile.guard_failures
    if not failures:
        return None
    if all(_global_state(f) for f in failures):  # the flags that differ from every entry: the fewest named
        return min(failures, key=lambda f: len(f.subject.split(", ")))
    accepted = _accepted_values(others or (recompile,))
    for failure in failures:
        if _global_state(failure):  # another entry got past the global-state check: it had this call's state
            continue
        if failure.actual is None or failure.actual not in accepted.get((failure.kind, failure.subject), set()):
            return failure
    return next(f for f in failures if not _global_state(f))


def _accepted_values(recompiles: tuple[Recompile, ...]) -> dict[tuple[GuardKind, str], set[str]]:
    """Values some cache entry was compiled for, per (kind, subject): every `expected` torch printed."""
    out: dict[tuple[GuardKind, str], set[str]] = defaultdict(set)
    for r in recompiles:
        for g in r.guard_failures:
            if g.expected is not None and g.kind is not GuardKind.SIZE:  # a size entry may have gone dynamic
                out[(g.kind, g.subject)].add(g.expected)
    return out


def entry_failures(recompile: Recompile, besides: GuardFailure | None = None) -> tuple[str, ...]:
    """Each cache entry's failure in words, labelled by entry and deduplicated (`entries 0/0, 0/1: ...`);
    `besides` (the cause, as torch wrote it) left out."""
    by_text: dict[str, list[str]] = defaultdict(list)
    for g in recompile.guard_failures:
        if besides is not None and g.raw == besides.raw:
            continue
        by_text[guard_words(g)].append(str(g.failed_entry) if g.failed_entry is not None else "?")
    return tuple(f"{'entries' if len(ids) > 1 else 'entry'} {', '.join(ids)}: {text}" for text, ids in by_text.items())


def recompile_chains(session: Session) -> list[RecompileChain]:
    """Per function (limit hits first, then the most recompiled): each recompile's cause, torch's hint on
    it, the other entries' failures and the fix; the chain's distinct fixes, most frequent cause first."""
    groups: dict[tuple[str, str, int], list[Recompile]] = defaultdict(list)
    for r in sorted(session.recompiles, key=lambda r: r.compile_id):
        groups[(r.function, r.file, r.line)].append(r)
    limits = {(h.function, h.file, h.line): h for h in session.limit_hits}

    def order(key: tuple[str, str, int]) -> tuple[bool, int, str, tuple[int, int]]:
        first = groups[key][0].compile_id.frame_key if groups.get(key) else limits[key].compile_id.frame_key
        return (key not in limits, -len(groups.get(key, ())), "", first)

    chains = []
    for key in sorted(set(groups) | set(limits), key=order):
        recompiles = tuple(groups.get(key, ()))
        steps = tuple(_step(r, recompiles, session.graph_breaks) for r in recompiles)
        chains.append(_explained(RecompileChain(*key, title="", steps=steps, limit_hit=limits.get(key))))
    return chains


def _step(r: Recompile, recompiles: tuple[Recompile, ...], breaks: tuple[GraphBreak, ...]) -> RecompileStep:
    """The recompile's cause, with its new value where a later recompile states it, in words; a value carried
    across a graph break is named by that break (its line and statement), not by Dynamo's temporary."""
    cause = _with_actual(primary_failure(r, recompiles), r, recompiles)
    if cause is None:
        return RecompileStep(r, None)
    site = _break_crossed(cause, r, breaks)
    if site is None:
        return RecompileStep(r, cause, cause_words=guard_words(cause))
    where = (f"the graph break at {site.file.rsplit('/', 1)[-1]}:{site.line}"
             + (f" (`{site.code}`)" if site.code else ""))
    return RecompileStep(r, replace(cause, source=site), cause_words=guard_words(cause, across=where))


def _explained(chain: RecompileChain) -> RecompileChain:
    """The chain with each step's hint, other failures and fix, its fixes, title and limit note filled in."""
    steps = tuple(replace(s, torch_hint=s.cause.hint if s.cause else None,
                          also_failed=entry_failures(s.recompile, besides=s.cause),
                          fix=fix_for(s.cause, chain) if s.cause else None) for s in chain.steps)
    causes = [s.cause for s in steps if s.cause is not None]
    if chain.limit_hit is not None and not causes:
        causes = list(chain.limit_hit.guard_failures[:1])
    by_change = Counter((c.kind, c.subject) for c in causes)
    fixes = tuple(dict.fromkeys(
        fix_for(next(c for c in causes if (c.kind, c.subject) == key), chain) for key, _n in by_change.most_common()))
    note = ""
    if chain.limit_hit is not None:
        note = ("the program was stopped (fail_on_recompile_limit_hit)" if chain.limit_hit.fatal
                else "later calls with new values fell back to eager (ran uncompiled)")
    title = f"{pretty_function(chain.function)} recompiled {len(steps)}x" + (
        " and hit the recompile limit" if chain.limit_hit is not None else "")
    limit_cause = guard_words(chain.limit_hit.guard_failures[0]) if chain.limit_hit and \
        chain.limit_hit.guard_failures else None
    return replace(chain, steps=steps, fixes=fixes, limit_note=note, title=title, limit_cause=limit_cause)


def _with_actual(cause: GuardFailure | None, r: Recompile, recompiles: tuple[Recompile, ...]) -> GuardFailure | None:
    if cause is None or cause.actual is not None or cause.expected is None or \
            cause.kind not in (GuardKind.VALUE, GuardKind.GLOBAL):
        return cause
    for later in recompiles:
        for g in later.guard_failures:
            if g.failed_entry == r.compile_id and g.subject == cause.subject and g.expected is not None:
                return replace(cause, actual=g.expected)
    return cause


def break_site(function: str, file: str) -> tuple[str, int] | None:
    """The graph break a resumed frame (`torch_dynamo_resume_in_f_at_17`) continues after: (file, 17)."""
    resume = ResumeName.parse(function)
    return (file, resume.line) if resume else None


def _break_crossed(cause: GuardFailure, r: Recompile, breaks: tuple[GraphBreak, ...]) -> SourceLoc | None:
    """The graph break a value on Dynamo's stack (`___stackN`) crossed, when `r` resumes after it."""
    site = break_site(r.function, r.file)
    if not _carried(cause) or site is None:
        return None
    code = next((b.code for b in breaks if (b.file, b.line) == site and b.code), "")
    code = re.sub(r"\s{2,}#.*$", "", code).strip()  # the user's trailing comment is not the statement
    return SourceLoc(site[0], site[1], r.function, code)


def pretty_function(name: str) -> str:
    """`torch_dynamo_resume_in_forward_at_7` -> `forward (after the graph break at line 7)`."""
    resume = ResumeName.parse(name)
    return f"{resume.function} (after the graph break at line {resume.line})" if resume else name


def find_recompiles(session: Session) -> list[Finding]:
    return [_finding(chain) for chain in recompile_chains(session)]


def _finding(chain: RecompileChain) -> Finding:
    causes = [s.cause for s in chain.steps if s.cause is not None]
    evidence = tuple(f"[{s.recompile.compile_id}] {s.cause_words or s.recompile.reason}"
                     + (f"   <- {s.cause.source}" if s.cause and s.cause.source else "") for s in chain.steps)
    if chain.limit_hit is not None:
        evidence += (f"hit {chain.limit_hit.limit} at [{chain.limit_hit.compile_id}]: {chain.limit_note}",)
    where = next((c.source for c in causes if c.source is not None), SourceLoc(chain.file, chain.line, chain.function))
    n, limit_hit = len(chain.steps), chain.limit_hit is not None
    benign = n == 1 and not limit_hit and bool(causes) and causes[0].kind is GuardKind.SIZE
    severity = Severity.ERROR if limit_hit else (Severity.INFO if benign else Severity.WARNING)
    title = chain.title + (" (once, to become dynamic: expected)" if benign else "")
    last = (chain.steps[-1].recompile.compile_id if chain.steps
            else chain.limit_hit.compile_id if chain.limit_hit else None)
    return Finding(kind="recompile", severity=severity, title=title, evidence=evidence, fix=chain.fixes, where=where,
                   compile_id=last, weight=n * 5 + (100 if limit_hit else 0))
