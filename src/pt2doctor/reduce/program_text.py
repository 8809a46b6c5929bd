"""Coarse program reduction on the text as written: whole statements deleted, the largest first.

Contract: `delete_statements(source, check) -> str` deletes the lines of whole statements (a compound
one with its body: a function with its decorators, a class, a loop) from `source` while `check(candidate)`
says the candidate still fails the same way, and returns the smallest text it kept. The lines that stay
are left exactly as written (comments, formatting, string literals); a block left empty gets `pass` at
its indentation; a candidate that does not parse is never checked.

It is the reducer's first, coarse pass, before the AST-level one (pysource_minimize: expressions,
names, values), so most of a long script goes in a few checks; and it is the whole reduction when the
script no longer fails once unparsed: `ast.unparse` drops comments and rewrites strings and positions,
which a failure can depend on (pysource_minimize then gives up with CouldNotMinimize).

Invariants: progress is deterministic (candidates in a fixed order: the longest statement first, then
the earliest); after a deletion the statements are found again in the new text, so no span is stale,
and the sweep goes on from the statement after the one deleted (a sweep that started again from the first
re-checked every statement kept before it: 224 checks for 20 deletions in a 44-line program, where each
sweep on from the last deletion makes about one check a statement); a sweep that deletes nothing ends it,
so what is left is the same kind of result: no one statement can go. The checker owns caching and the
budget (`ProgramReduction`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class _Span:
    first: int  # 1-based, decorators included
    last: int
    indent: str
    alone: bool  # the only statement of its block: deleting it leaves `pass`


def delete_statements(source: str, check: Callable[[str], bool]) -> str:
    best = source
    deleted = True
    while deleted:  # sweeps until one deletes nothing
        deleted, at = False, 0
        while at < len(candidates := _candidates(best)):
            if check(candidates[at]):
                best, deleted = candidates[at], True  # `at` now names the statement that came after it
            else:
                at += 1
    tidy = _tidy(best)  # the blank lines the deleted statements left: one more candidate, as line numbers move
    return tidy if tidy != best and check(tidy) else best


def _tidy(source: str) -> str:
    """`source` without leading blank lines and with at most two blank lines in a row."""
    out: list[str] = []
    for line in source.splitlines(keepends=True):
        blank = not line.strip()
        if blank and (not out or (len(out) >= 2 and not out[-1].strip() and not out[-2].strip())):
            continue
        out.append(line)
    return "".join(out)


def _candidates(source: str) -> list[str]:
    lines = source.splitlines(keepends=True)
    out = []
    for span in sorted(_spans(source), key=lambda s: (s.first - s.last, s.first)):
        kept = lines[:span.first - 1] + ([f"{span.indent}pass\n"] if span.alone else []) + lines[span.last:]
        text = "".join(kept)
        if text != source and _parses(text):
            out.append(text)
    return out


def _spans(source: str) -> list[_Span]:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return []
    lines = source.splitlines()
    spans = []
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody", "handlers"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or not block or not isinstance(block[0], (ast.stmt, ast.excepthandler)):
                continue
            for statement in block:
                if isinstance(statement, ast.excepthandler):
                    continue  # a try needs its handlers; their bodies are blocks of their own
                first = min([statement.lineno, *(d.lineno for d in getattr(statement, "decorator_list", ()))])
                line = lines[first - 1]
                indent = line[:len(line) - len(line.lstrip())]
                alone = len(block) == 1 and not isinstance(node, ast.Module)
                spans.append(_Span(first, statement.end_lineno or statement.lineno, indent, alone))
    return spans


def _parses(text: str) -> bool:
    try:
        compile(text, "<candidate>", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True
