"""Recompilations -> findings: per function, the chain of recompiles, each with its cause in plain words.

Contract: `recompile_chains(session)` groups recompiles by function (in compile order) and picks, for
each recompile, the guard failure that caused it (`primary_failure`); `find_recompiles(session)` turns
each chain into one finding with the concrete fix from `FIXES` (looked up by guard kind). Pure.

Which failure is the cause: torch lists one failed guard per cache entry, newest entry first. A
failure is "explained away" when another entry of the same frame was compiled for the value this call
has (e.g. the newest entry is float64 but an older float32 entry failed on something else), so the
cause is the first failure that is not explained away; the newest entry's failure otherwise.
A Python value's new value is not in torch's guard text; it is inferred from a later recompile whose
failed entry is this compile (that guard then states the value this compile specialized on).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, replace

from pt2doctor.model import Finding, GuardFailure, GuardKind, LimitHit, Recompile, Session, Severity, SourceLoc

FIXES: dict[GuardKind, str] = {
    GuardKind.SIZE: "mark the dimension dynamic at the call site, before the first call: "
                    "`torch._dynamo.mark_dynamic({subject}, {dim})`, or compile with `dynamic=True`; if it only "
                    "takes a few values, `torch._dynamo.mark_static({subject}, {dim})` keeps one graph per value",
    GuardKind.SYMBOLIC: "the dynamic range guessed for `{subject}` was too narrow: `torch._dynamo.mark_dynamic({subject}, "
                        "{dim})` on the first call, or `dynamic=True`",
    GuardKind.DTYPE: "call with one dtype (cast once before the call, e.g. `{subject}.float()`), or accept one "
                     "compile per dtype",
    GuardKind.STRIDE: "pass a consistent layout: call `{subject}.contiguous()` before the call",
    GuardKind.RANK: "call with a consistent number of dims (reshape before the call)",
    GuardKind.REQUIRES_GRAD: "keep requires_grad consistent (run inference under `torch.no_grad()`, or `.detach()` "
                             "`{subject}`)",
    GuardKind.DEVICE: "keep `{subject}` on one device",
    GuardKind.VALUE: "pass `{subject}` as a tensor (`torch.tensor({subject})`) so its value is data, not a constant, "
                     "or let it be a dynamic int: `dynamic=True`, or "
                     "`torch.compiler.config.dynamic_sources = \"L['{subject}']\"`",
    GuardKind.GLOBAL: "do not change `{subject}` between calls; pass it as an argument instead of reading a global",
    GuardKind.TYPE: "call with one type for `{subject}`",
    GuardKind.IDENTITY: "reuse the same `{subject}` object (e.g. build the module once, compile it once)",
    GuardKind.DISPATCH_KEYS: "call with consistent tensor modes/subclasses for `{subject}`",
    GuardKind.OTHER: "see the guard text; `TORCH_LOGS=guards` prints all guards",
}


@dataclass(frozen=True, slots=True)
class Step:
    """One recompile of a chain: its id, the failure that caused it, and the other entries' failures."""

    recompile: Recompile
    cause: GuardFailure | None


@dataclass(frozen=True, slots=True)
class Chain:
    function: str
    file: str
    line: int
    steps: tuple[Step, ...]
    limit_hit: LimitHit | None = None


def fix_for(failure: GuardFailure) -> str:
    return FIXES[failure.kind].format(subject=failure.subject, dim=failure.dim if failure.dim is not None else 0)


def primary_failure(recompile: Recompile, others: tuple[Recompile, ...] = ()) -> GuardFailure | None:
    """The failure that caused `recompile` (see the module docstring); `others` are the frame's recompiles."""
    failures = recompile.guard_failures
    if not failures:
        return None
    accepted = _accepted_values(others or (recompile,))
    for failure in failures:
        if failure.actual is None or failure.actual not in accepted.get((failure.kind, failure.subject), set()):
            return failure
    return failures[0]


def _accepted_values(recompiles: tuple[Recompile, ...]) -> dict[tuple[GuardKind, str], set[str]]:
    """Values some cache entry was compiled for, per (kind, subject): every `expected` torch printed."""
    out: dict[tuple[GuardKind, str], set[str]] = defaultdict(set)
    for r in recompiles:
        for g in r.guard_failures:
            if g.expected is not None and g.kind is not GuardKind.SIZE:  # a size entry may have gone dynamic
                out[(g.kind, g.subject)].add(g.expected)
    return out


def recompile_chains(session: Session) -> list[Chain]:
    groups: dict[tuple[str, str, int], list[Recompile]] = defaultdict(list)
    for r in sorted(session.recompiles, key=lambda r: r.compile_id):
        groups[(r.function, r.file, r.line)].append(r)
    limits = {(h.function, h.file, h.line): h for h in session.limit_hits}
    chains = []
    def order(key: tuple[str, str, int]) -> tuple[bool, int, str, int]:
        first = groups[key][0].compile_id.frame if groups.get(key) else limits[key].compile_id.frame
        return (key not in limits, -len(groups.get(key, ())), "", first)

    for key in sorted(set(groups) | set(limits), key=order):
        recompiles = tuple(groups.get(key, ()))
        steps = tuple(Step(r, _with_actual(primary_failure(r, recompiles), r, recompiles)) for r in recompiles)
        chains.append(Chain(*key, steps=steps, limit_hit=limits.get(key)))
    return chains


def _with_actual(cause: GuardFailure | None, r: Recompile, recompiles: tuple[Recompile, ...]) -> GuardFailure | None:
    if cause is None or cause.actual is not None or cause.kind not in (GuardKind.VALUE, GuardKind.GLOBAL):
        return cause
    for later in recompiles:
        for g in later.guard_failures:
            if g.failed_entry == r.compile_id and g.subject == cause.subject and g.expected is not None:
                noun = cause.text.split("`", 1)[0].strip()
                text = f"{noun} `{cause.subject}` changed {cause.expected} -> {g.expected}"
                return replace(cause, actual=g.expected, text=text)
    return cause


_ENTRY_BODY = re.compile(r"^\d+/\d+(?:_\d+)?: (?P<body>.*)$", re.S)
_RAW_TENSOR = re.compile(r"tensor '(?P<name>.+?)' (?:size|stride|rank|dtype|device|requires_grad|dispatch)")
_RAW_LHS = re.compile(r"^(?P<lhs>.+?)\s*(?:==|!=|\bis\b)")


def torch_source(failure: GuardFailure) -> str | None:
    """The torch source name a guard was on (`L['x']`), for `dynamic_sources`; None if not recoverable."""
    entry = _ENTRY_BODY.match(failure.raw.strip())
    body = (entry["body"] if entry else failure.raw).split("\n", 1)[0].split("#", 1)[0].strip()
    tensor, lhs = _RAW_TENSOR.search(body), _RAW_LHS.match(body)
    name = tensor["name"] if tensor else (lhs["lhs"].strip() if lhs else "")
    if name.startswith(("L[", "G[")):
        return name
    local = re.match(r"(?P<root>[A-Za-z_]\w*)(?P<rest>(?:\[.*|\..*)?)$", name)
    # 2.13 prints locals without `L[...]` (`x`, `kwargs['input_ids']`); dynamic_sources wants them with it
    return f"L['{local['root']}']{local['rest']}" if local else None


def pretty_function(name: str) -> str:
    """`torch_dynamo_resume_in_forward_at_7` -> `forward (after the graph break at line 7)`."""
    prefix = "torch_dynamo_resume_in_"
    if not name.startswith(prefix) or "_at_" not in name:
        return name
    fn, _, line = name[len(prefix):].rpartition("_at_")
    return f"{fn} (after the graph break at line {line})"


def find_recompiles(session: Session) -> list[Finding]:
    return [_finding(chain) for chain in recompile_chains(session)]


def _finding(chain: Chain) -> Finding:
    causes = [s.cause for s in chain.steps if s.cause is not None]
    evidence = tuple(f"[{s.recompile.compile_id}] {s.cause.text if s.cause else s.recompile.reason}"
                     + (f"   <- {s.cause.source}" if s.cause and s.cause.source else "") for s in chain.steps)
    if chain.limit_hit is not None:
        evidence += (f"hit {chain.limit_hit.limit} at [{chain.limit_hit.compile_id}]: later calls with new values "
                     "fell back to eager (run uncompiled)",)
    kinds = Counter((c.kind, c.subject) for c in causes)
    fixes = tuple(dict.fromkeys(
        fix_for(next(c for c in causes if (c.kind, c.subject) == key)) for key, _n in kinds.most_common()))
    where = next((c.source for c in causes if c.source is not None), SourceLoc(chain.file, chain.line, chain.function))
    n, limit_hit = len(chain.steps), chain.limit_hit is not None
    benign = n == 1 and not limit_hit and bool(causes) and causes[0].kind is GuardKind.SIZE
    severity = Severity.ERROR if limit_hit else (Severity.INFO if benign else Severity.WARNING)
    title = f"{pretty_function(chain.function)} recompiled {n}x" + (" and hit the recompile limit" if limit_hit else "")
    if benign:
        title += " (once, to become dynamic: expected)"
    last = chain.steps[-1].recompile.compile_id if chain.steps else chain.limit_hit.compile_id if chain.limit_hit else None
    return Finding(kind="recompile", severity=severity, title=title, evidence=evidence, fix=fixes, where=where,
                   compile_id=last, weight=n * 5 + (100 if limit_hit else 0))
