"""Guard failures as torch writes them into `recompile_reasons`, taken apart into model values.

Contract: `parse_guard_failure(raw) -> GuardFailure`, pure; torch's text is parsed here once, into facts
(kind, subject, dim, expected/actual, the guard's condition, torch's source name, its hint, where the value
lives) and never worded: the sentences are `analysis.guard_words`'. Every pattern was checked against torch
2.13.0 output (and the 2.11 wording, the same for these messages); text that matches no pattern still
yields a value (`GuardKind.OTHER`, its condition the guard's first line), so nothing is lost.
`reparsed(session)` brings a session.json of schema 1 (which kept fewer facts) up to date from `raw`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from typing import Any

from pt2doctor.capture.trace.parse_text import user_stack
from pt2doctor.model import SCHEMA, GuardFailure, GuardKind, Session, SourceLoc
from pt2doctor.model.ids import CompileId
from pt2doctor.model.session import GuardOrigin
from pt2doctor.model.torch_text import is_dynamo_temporary

_ENTRY = re.compile(r"^(?P<cid>\d+/\d+(?:_\d+)?): (?P<body>.*)$", re.S)
_TENSOR = re.compile(
    r"tensor '(?P<name>.+?)' (?P<what>size|stride|rank|dtype|device|requires_grad|dispatch key set)"
    r" mismatch(?: at index (?P<dim>\d+))?\.(?: expected (?P<exp>[^,]+?))?(?:, actual (?P<act>.+?))?\s*$"
)
# torch appends advice to a tensor guard on a parameter: `... actual BFloat16. Guard failed on a parameter, ...`
_PARAM_NOTE = re.compile(r"\.?\s+(?P<note>Guard failed on a parameter\b.*)$")
# `EXPR  # code  # file:line in fn (NOTE)`: the code may itself hold `#`; NOTE is torch's `(HINT: ...)` or its
# 0/1-specialization remark (torch/_dynamo/guards.py, 2.13)
_CODE_SUFFIX = re.compile(
    r"\s+#\s*(?P<code>.*?)\s+#\s*(?P<file>\S+):(?P<line>\d+) in (?P<fn>\S+)(?:\s+\((?P<note>.*)\))?\s*$")
_BARE_NOTE = re.compile(r"\s+\((?P<note>HINT:.*)\)\s*$")
_NOT_USER_CODE = "not due user code"
_TORCH_PLACE = re.compile(r"\S+\.py:\d+ in \w+")
_TORCH_DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
    "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
    "ComplexFloat": "complex64", "ComplexDouble": "complex128",
}
_KINDS = {"size": GuardKind.SIZE, "stride": GuardKind.STRIDE, "rank": GuardKind.RANK, "dtype": GuardKind.DTYPE,
          "device": GuardKind.DEVICE, "requires_grad": GuardKind.REQUIRES_GRAD,
          "dispatch key set": GuardKind.DISPATCH_KEYS}


@dataclass(frozen=True, slots=True)
class GuardLine:
    """A guard failure's first line taken apart: the guard, the user line torch blamed, and torch's note."""

    expr: str
    source: SourceLoc | None
    note: str | None


def split_guard_line(body: str) -> GuardLine:
    """`EXPR  # code  # file:line in fn (HINT: ...)` (then an optional user stack) -> its parts."""
    first, _, rest = body.partition("\n")
    stack = user_stack(rest.splitlines()) if rest else ()
    suffix = _CODE_SUFFIX.search(first)
    bare = None if suffix else _BARE_NOTE.search(first) or _PARAM_NOTE.search(first)
    cut = suffix or bare
    expr = first[: cut.start()].strip() if cut else first.strip()
    note = (cut["note"] or None) if cut else None
    source = stack[-1] if stack else (
        SourceLoc(suffix["file"], int(suffix["line"]), suffix["fn"], suffix["code"].strip()) if suffix else None)
    if note and _NOT_USER_CODE in note:  # torch: "user code shown is first use of this value", not the cause
        source = None
    if note and _TORCH_PLACE.fullmatch(note):  # where in torch the guard was made: no advice for the user
        note = None
    return GuardLine(expr, source, note.removeprefix("HINT:").strip() if note else None)


@dataclass(frozen=True, slots=True)
class _Ctx:
    raw: str
    failed_entry: CompileId | None
    source: SourceLoc | None

    def failure(self, kind: GuardKind, subject: str, dim: int | None = None, expected: str | None = None,
                actual: str | None = None, condition: str | None = None) -> GuardFailure:
        return GuardFailure(kind, subject, self.raw, dim, expected, actual, self.failed_entry, self.source,
                            condition=condition)


def parse_guard_failure(raw: str, generation: int = 0) -> GuardFailure:
    """One entry of `recompile_reasons` (e.g. ``0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5``)
    of a recompile in reset generation `generation`, where the failed entry is too (`CompileId.generation`)."""
    entry = _ENTRY.match(raw.strip())
    line = split_guard_line(entry["body"] if entry else raw.strip())
    ctx = _Ctx(raw, CompileId.parse(entry["cid"]).in_generation(generation) if entry else None, line.source)
    failure = _parse_expr(line.expr, ctx)
    return replace(failure, torch_source=_torch_source(line.expr), hint=line.note, origin=_origin(failure, line.expr),
                   value_type=value_type(failure.expected) if failure.expected is not None else None)


def reparsed(session: Session) -> Session:
    """`session` with each guard failure parsed again from its `raw`: a session.json of schema 1 kept torch's
    text but fewer facts (and capture's own sentences, which analysis now writes)."""
    if session.schema == SCHEMA:
        return session

    def again(owner: Any) -> Any:
        generation = owner.compile_id.generation
        return replace(owner,
                       guard_failures=tuple(parse_guard_failure(g.raw, generation) for g in owner.guard_failures))

    return replace(session, schema=SCHEMA, recompiles=tuple(again(r) for r in session.recompiles),
                   limit_hits=tuple(again(h) for h in session.limit_hits))


def _parse_expr(expr: str, ctx: _Ctx) -> GuardFailure:
    tensor = _TENSOR.search(expr)
    if tensor:
        return _tensor_failure(tensor, ctx)
    for parse in _EXPR_PARSERS:
        failure = parse(expr, ctx)
        if failure is not None:
            return failure
    return ctx.failure(GuardKind.OTHER, expr, condition=_pretty_expr(expr))


def _torch_source(expr: str) -> str | None:
    """The guarded value as torch names it (`L['x']`), as `torch.compiler.config.dynamic_sources` wants it."""
    body = expr.split("#", 1)[0].strip()
    tensor, size, eq = _TENSOR.search(body), _SIZE_SRC.search(body), _EQ.match(body)
    name = tensor["name"] if tensor else size["src"] if size else (eq["lhs"].strip() if eq else "")
    if name.startswith(("L[", "G[")):
        return name
    local = re.match(r"(?P<root>[A-Za-z_]\w*)(?P<rest>(?:\[.*|\..*)?)$", name)
    # 2.13 prints locals without `L[...]` (`x`, `kwargs['input_ids']`); dynamic_sources wants them with it
    return f"L['{local['root']}']{local['rest']}" if local else None


def _origin(failure: GuardFailure, expr: str) -> GuardOrigin:
    if failure.kind is GuardKind.GLOBAL_STATE:
        return "state"
    if is_dynamo_temporary(failure.subject):
        return "carried"
    if "._parameters[" in failure.raw or "Guard failed on a parameter" in failure.raw:
        return "parameter"
    if "._buffers[" in failure.raw:
        return "buffer"
    return "global" if failure.kind is GuardKind.GLOBAL or _on_global_object(failure.raw, expr) else "input"


def _tensor_failure(m: re.Match[str], ctx: _Ctx) -> GuardFailure:
    kind = _KINDS[m["what"]]
    name, dim = pretty_source(m["name"]), int(m["dim"]) if m["dim"] else None
    exp, act = (m["exp"] or "").strip() or None, (m["act"] or "").strip() or None
    if kind is GuardKind.DTYPE:
        exp, act = _TORCH_DTYPES.get(exp or "", exp), _TORCH_DTYPES.get(act or "", act)
    if kind is GuardKind.REQUIRES_GRAD and exp and exp.startswith("requires_grad="):
        exp = "True" if exp.endswith("1") else "False"
        act = act or ("False" if exp == "True" else "True")
    return ctx.failure(kind, name, dim, exp, act)


_GLOBAL_STATE = re.compile(r"^GLOBAL_STATE changed:\s*(?P<flags>.*)$")


def _global_state(expr: str, ctx: _Ctx) -> GuardFailure | None:
    m = _GLOBAL_STATE.match(expr)
    if m is None:
        return None
    flags = m["flags"].split() or ["global state"]
    return ctx.failure(GuardKind.GLOBAL_STATE, ", ".join(flags))


_NOT_TENSOR = re.compile(r"^expected type of '(?P<name>.+)' to be a tensor type, "
                         r"'? but found <class '(?P<type>[^']+)'>")
_NOT_FUNCTION = re.compile(r"^CodeGuardAccessor: Not a function on (?P<name>.+?)\.__code__$")


def _not_tensor(expr: str, ctx: _Ctx) -> GuardFailure | None:
    m = _NOT_TENSOR.match(expr)
    if m is None:
        return None
    return ctx.failure(GuardKind.TYPE, pretty_source(m["name"]), expected="tensor", actual=m["type"])


def _not_function(expr: str, ctx: _Ctx) -> GuardFailure | None:
    m = _NOT_FUNCTION.match(expr)
    if m is None:
        return None
    return ctx.failure(GuardKind.TYPE, pretty_source(m["name"]), expected="function")


def _type_id(expr: str, ctx: _Ctx) -> GuardFailure | None:
    if "___check_type_id" not in expr:
        return None
    return ctx.failure(GuardKind.TYPE, pretty_source(_first_arg(expr)))


def _obj_id(expr: str, ctx: _Ctx) -> GuardFailure | None:
    if "___check_obj_id" not in expr:
        return None
    return ctx.failure(GuardKind.IDENTITY, pretty_source(_first_arg(expr)))


_DICT_CONTAINS = re.compile(r"___dict_contains\('(?P<key>[^']+)',\s*(?P<obj>.+?)\.__dict__\)")


def _dict_contains(expr: str, ctx: _Ctx) -> GuardFailure | None:
    m = _DICT_CONTAINS.search(expr)
    if m is None:
        return None
    return ctx.failure(GuardKind.ATTRIBUTE, f"{pretty_source(m['obj'])}.{m['key']}")


def _on_global_object(raw: str, expr: str) -> bool:
    """An attribute guard on an object reached from a global (`G['cfg']`; torch 2.13 prints a local bare: `self`)."""
    m = _DICT_CONTAINS.search(expr)
    return m is not None and "G[" in m["obj"]


# a guarded source: `L['x']`, `kwargs['input_ids']`, `self._modules['fc'].weight` (no operators, no spaces)
_SIZE_SRC = re.compile(r"(?P<src>[A-Za-z_][\w.]*(?:\[[^\]]*\][\w.]*)*?)\.(?:size|stride)\(\)\[(?P<dim>\d+)\]")
_LOWER_BOUND = re.compile(r"^(?P<n>\d+)\s*<=\s*\S+$")


def _symbolic(expr: str, ctx: _Ctx) -> GuardFailure | None:
    size = _SIZE_SRC.search(expr)
    if not (size or re.search(r"\b[su]\d+\b", expr) or any(op in expr for op in ("<=", ">=", " < ", " > "))):
        return None
    subject = pretty_source(size["src"]) if size else _pretty_expr(expr)
    dim = int(size["dim"]) if size else None
    bound = _LOWER_BOUND.match(expr) if size else None
    # torch specializes sizes 0 and 1, so a dynamic graph's least size is 2 (0/1 specialization)
    least = ("2" if bound and (int(bound["n"]) == 2 or "0/1 specialization" in ctx.raw)
             else bound["n"] if bound else None)
    return ctx.failure(GuardKind.SYMBOLIC, subject, dim, f">= {least}" if least else None,
                       condition=None if bound else _pretty_expr(expr))


_EQ = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>==|!=|\bis not\b|\bis\b)\s*(?P<rhs>.+)$")


def _equality(expr: str, ctx: _Ctx) -> GuardFailure | None:
    eq = _EQ.match(expr)
    if eq is None:
        return None
    subject, rhs = pretty_source(eq["lhs"]), eq["rhs"].strip()
    if is_dynamo_temporary(subject):  # Dynamo's name for it means nothing to the user: no condition
        return ctx.failure(GuardKind.VALUE, subject, expected=rhs)
    kind = GuardKind.GLOBAL if eq["lhs"].startswith(("G[", "G.")) else GuardKind.VALUE
    # a bool that failed `== True` is False now: the one guard whose new value the text implies
    actual = {"True": "False", "False": "True"}.get(rhs) if eq["op"] == "==" else None
    return ctx.failure(kind, subject, expected=rhs, actual=actual, condition=f"{subject} {eq['op']} {rhs}")


_EXPR_PARSERS = (_global_state, _not_tensor, _not_function, _type_id, _obj_id, _dict_contains, _symbolic, _equality)


def value_type(literal: str) -> str:
    """The Python type of a constant as a guard prints it: `int`, `float`, `bool`, `None`, `str`, or `value`."""
    text = literal.strip()
    if re.fullmatch(r"-?\d+", text):
        return "int"
    if re.fullmatch(r"-?\d+\.\d*(e[-+]?\d+)?|-?\d+e[-+]?\d+|-?inf|nan", text):
        return "float"
    if text in ("True", "False"):
        return "bool"
    if text == "None":
        return "None"
    if re.fullmatch(r"""(['"]).*\1""", text, re.S):
        return "str"
    return "value"


def _first_arg(expr: str) -> str:
    inner = expr[expr.find("(") + 1 :]
    depth, out = 0, []
    for ch in inner:
        if ch in "([":
            depth += 1
        elif ch in ")]":
            if depth == 0:
                break
            depth -= 1
        elif ch == "," and depth == 0:
            break
        out.append(ch)
    return "".join(out).strip()


_SOURCE_PART = re.compile(r"""(?:L|G)\[['"]([^'"]+)['"]\]""")


def pretty_source(source: str) -> str:
    """`L['x']` -> `x`, `G['C'].flag` -> `C.flag`,
    `L['self']._modules['fc']._parameters['weight']` -> `self.fc.weight`."""
    text = _SOURCE_PART.sub(r"\1", source.strip())
    text = re.sub(r"\._(?:modules|parameters|buffers)\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    text = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    # a keyword argument collected by `**kwargs` (HF models: `kwargs['input_ids']`) is named at the call site
    return re.sub(r"^kwargs\.", "", text)


def _pretty_expr(expr: str) -> str:
    return pretty_source(expr)
