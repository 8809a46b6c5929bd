"""Recompilations -> findings: per function, which guard failed in plain words, and what to change.

Contract: `find_recompiles(session)` groups recompiles by function and names the dominant cause
(the guard kind that failed most); the fix is looked up in `FIXES` by guard kind.
"""

from __future__ import annotations

from collections import Counter, defaultdict

from pt2doctor.model import Finding, GuardFailure, GuardKind, Recompile, Session, Severity, SourceLoc

FIXES: dict[GuardKind, str] = {
    GuardKind.SIZE: "mark the dimension dynamic before the first call: `torch._dynamo.mark_dynamic({subject}, {dim})`, "
                    "or compile with `dynamic=True`",
    GuardKind.SYMBOLIC: "the dynamic range guessed for `{subject}` was too narrow: `torch._dynamo.mark_dynamic({subject}, "
                        "{dim})` on the first call, or `dynamic=True`",
    GuardKind.DTYPE: "call with one dtype (cast once before the call), or accept one compile per dtype",
    GuardKind.STRIDE: "pass a consistent layout: call `.contiguous()` on `{subject}` before the call",
    GuardKind.RANK: "call with a consistent number of dims (reshape before the call)",
    GuardKind.REQUIRES_GRAD: "keep requires_grad consistent (run inference under `torch.no_grad()`, or detach)",
    GuardKind.DEVICE: "keep `{subject}` on one device",
    GuardKind.VALUE: "pass `{subject}` as a tensor (`torch.tensor({subject})`) so its value is data, not a constant, "
                     "or set `torch._dynamo.config.automatic_dynamic_shapes = True` (ints) / `specialize_float=False`",
    GuardKind.GLOBAL: "do not change `{subject}` between calls; pass it as an argument instead of reading a global",
    GuardKind.TYPE: "call with one type for `{subject}`",
    GuardKind.IDENTITY: "reuse the same `{subject}` object (e.g. build the module once, compile it once)",
    GuardKind.DISPATCH_KEYS: "call with consistent tensor modes/subclasses for `{subject}`",
    GuardKind.OTHER: "see the guard text; `TORCH_LOGS=guards` prints all guards",
}


def fix_for(failure: GuardFailure) -> str:
    return FIXES[failure.kind].format(subject=failure.subject, dim=failure.dim if failure.dim is not None else 0)


def find_recompiles(session: Session) -> list[Finding]:
    by_function: dict[tuple[str, str, int], list[Recompile]] = defaultdict(list)
    for r in session.recompiles:
        by_function[(r.function, r.file, r.line)].append(r)
    limits = {(h.function, h.file, h.line): h for h in session.limit_hits}
    findings = []
    for key in sorted(set(by_function) | set(limits), key=lambda k: -len(by_function.get(k, ()))):
        findings.append(_finding(key, by_function.get(key, []), limits.get(key) is not None))
    return findings


def primary_failure(recompile: Recompile) -> GuardFailure | None:
    """The failure of the most recent cache entry: the one whose guard the call came closest to."""
    return recompile.guard_failures[0] if recompile.guard_failures else None


def _finding(key: tuple[str, str, int], recompiles: list[Recompile], limit_hit: bool) -> Finding:
    function, file, line = key
    primaries = [p for p in (primary_failure(r) for r in recompiles) if p is not None]
    kinds = Counter((p.kind, p.subject) for p in primaries)
    evidence = tuple(f"[{r.compile_id}] {p.text}" for r, p in zip(recompiles, primaries))
    if limit_hit:
        evidence += ("hit the recompile limit: later calls with new values run eagerly (uncompiled)",)
    fixes = []
    for (kind, subject), _count in kinds.most_common():
        sample = next(p for p in primaries if (p.kind, p.subject) == (kind, subject))
        fixes.append(fix_for(sample))
    where = next((p.source for p in primaries if p.source is not None), SourceLoc(file, line, function))
    n = len(recompiles)
    benign = n == 1 and not limit_hit and primaries and primaries[0].kind is GuardKind.SIZE
    severity = Severity.ERROR if limit_hit else (Severity.INFO if benign else Severity.WARNING)
    title = f"{function} recompiled {n}x" + (" and hit the recompile limit" if limit_hit else "")
    if benign:
        title += " (once, to become dynamic: expected)"
    return Finding(kind="recompile", severity=severity, title=title, evidence=evidence, fix=tuple(fixes),
                   where=where, compile_id=recompiles[-1].compile_id if recompiles else None,
                   weight=n * 5 + (100 if limit_hit else 0))
