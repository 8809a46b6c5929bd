"""Grammars for the free text torch writes into traces: graph-break reasons and guard failures.

Contract: pure functions from torch's text to model values. Every pattern here was checked against
torch 2.13.0 output (and the 2.11 wording, which is the same for these messages); text that matches
no pattern still yields a value (`GuardKind.OTHER`, the raw first line as the reason) so nothing is lost.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from pt2doctor.model import GuardFailure, GuardKind, SourceLoc
from pt2doctor.model.ids import CompileId

_AT = re.compile(r"Graph break in user code at (?P<file>.+):(?P<line>\d+)")
_FRAME = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<fn>.+)$')
_GB_ID = re.compile(r"/gb/(gb\d+)\.html")
_NOISE_HINTS = ("Please report an issue to PyTorch",)


@dataclass(frozen=True, slots=True)
class BreakText:
    """The parts of one graph-break (or `Unsupported`) message."""

    break_type: str
    explanation: str
    hints: tuple[str, ...]
    gb_id: str | None
    where: SourceLoc | None
    user_stack: tuple[SourceLoc, ...]

    @property
    def reason(self) -> str:
        if self.explanation:
            return f"{self.break_type}: {self.explanation}" if self.break_type else self.explanation
        return self.break_type


def parse_break_text(text: str) -> BreakText:
    lines = text.splitlines()
    explanation_at = next((i for i, l in enumerate(lines) if l.strip().startswith("Explanation:")), None)
    if explanation_at is not None:
        above = [l.strip() for l in lines[:explanation_at] if l.strip()]
        break_type = above[-1] if above else ""
        explanation = lines[explanation_at].split("Explanation:", 1)[1].strip()
    else:
        first = next((l for l in lines if l.strip().startswith("Graph Break Reason:")), None)
        body = first.split(":", 1)[1].strip() if first else next((l.strip() for l in lines if l.strip()), "")
        break_type, explanation = body, ""
    if break_type.startswith("Graph Break Reason:"):
        break_type = break_type.split(":", 1)[1].strip()
    hints = tuple(dict.fromkeys(  # torch repeats a hint when two registry entries carry it
        l.split("Hint:", 1)[1].strip()
        for l in lines
        if l.strip().startswith("Hint:") and not any(n in l for n in _NOISE_HINTS)
    ))
    gb = _GB_ID.search(text)
    stack = _user_stack(lines)
    at = _AT.search(text)
    where = SourceLoc(at["file"], int(at["line"])) if at else (stack[-1] if stack else None)
    if where is not None and stack and (stack[-1].file, stack[-1].line) == (where.file, where.line):
        where = stack[-1]
    return BreakText(break_type, explanation, hints, gb.group(1).upper() if gb else None, where, stack)


def _user_stack(lines: list[str]) -> tuple[SourceLoc, ...]:
    try:
        start = next(i for i, l in enumerate(lines) if l.startswith(("User code traceback:", "User stack trace:")))
    except StopIteration:
        return ()
    frames: list[SourceLoc] = []
    for i in range(start + 1, len(lines)):
        match = _FRAME.match(lines[i])
        if match:
            code = lines[i + 1].strip() if i + 1 < len(lines) and not _FRAME.match(lines[i + 1]) else ""
            frames.append(SourceLoc(match["file"], int(match["line"]), match["fn"].strip(), code))
        elif not lines[i].strip() and frames:
            break
    return tuple(frames)


# --- guard failures ---------------------------------------------------------------------------

_ENTRY = re.compile(r"^(?P<cid>\d+/\d+(?:_\d+)?): (?P<body>.*)$", re.S)
_TENSOR = re.compile(
    r"tensor '(?P<name>.+?)' (?P<what>size|stride|rank|dtype|device|requires_grad|dispatch key set)"
    r" mismatch(?: at index (?P<dim>\d+))?\.(?: expected (?P<exp>[^,]+?))?(?:, actual (?P<act>.+?))?\s*$"
)
_CODE_SUFFIX = re.compile(r"\s+#\s*(?P<code>.*?)\s+#\s*(?P<file>\S+):(?P<line>\d+) in (?P<fn>\S+)\s*$")
_TORCH_DTYPES = {
    "Float": "float32", "Double": "float64", "Half": "float16", "BFloat16": "bfloat16", "Long": "int64",
    "Int": "int32", "Short": "int16", "Char": "int8", "Byte": "uint8", "Bool": "bool",
    "ComplexFloat": "complex64", "ComplexDouble": "complex128",
}
_KINDS = {"size": GuardKind.SIZE, "stride": GuardKind.STRIDE, "rank": GuardKind.RANK, "dtype": GuardKind.DTYPE,
          "device": GuardKind.DEVICE, "requires_grad": GuardKind.REQUIRES_GRAD,
          "dispatch key set": GuardKind.DISPATCH_KEYS}


def parse_guard_failure(raw: str) -> GuardFailure:
    """One entry of `recompile_reasons` (e.g. ``0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5``)."""
    entry = _ENTRY.match(raw.strip())
    failed_entry = CompileId.parse(entry["cid"]) if entry else None
    body = entry["body"] if entry else raw.strip()
    first, _, rest = body.partition("\n")
    stack = _user_stack(rest.splitlines()) if rest else ()
    suffix = _CODE_SUFFIX.search(first)
    expr = first[: suffix.start()].strip() if suffix else first.strip()
    source = stack[-1] if stack else (
        SourceLoc(suffix["file"], int(suffix["line"]), suffix["fn"], suffix["code"]) if suffix else None)
    tensor = _TENSOR.search(expr)
    if tensor:
        return _tensor_failure(tensor, raw, failed_entry, source)
    return _expr_failure(expr, raw, failed_entry, source)


def _tensor_failure(m: re.Match[str], raw: str, failed_entry, source) -> GuardFailure:
    kind = _KINDS[m["what"]]
    name, dim = _pretty_source(m["name"]), int(m["dim"]) if m["dim"] else None
    exp, act = (m["exp"] or "").strip() or None, (m["act"] or "").strip() or None
    if kind is GuardKind.DTYPE:
        exp, act = _TORCH_DTYPES.get(exp or "", exp), _TORCH_DTYPES.get(act or "", act)
    if kind is GuardKind.REQUIRES_GRAD and exp and exp.startswith("requires_grad="):
        exp = "True" if exp.endswith("1") else "False"
        act = act or ("False" if exp == "True" else "True")
    text = _tensor_text(kind, name, dim, exp, act)
    return GuardFailure(kind, name, text, raw, dim, exp, act, failed_entry, source)


def _tensor_text(kind: GuardKind, name: str, dim: int | None, exp: str | None, act: str | None) -> str:
    change = f"{exp} -> {act}" if exp is not None and act is not None else f"expected {exp}" if exp else "changed"
    if kind is GuardKind.SIZE:
        return f"input `{name}`: size at dim {dim} changed {change}"
    if kind is GuardKind.STRIDE:
        return f"input `{name}`: became non-contiguous or changed layout (stride at dim {dim} changed {change})"
    if kind is GuardKind.RANK:
        return f"input `{name}`: number of dims changed {change}"
    if kind is GuardKind.REQUIRES_GRAD:
        return f"input `{name}`: requires_grad changed {change}"
    return f"input `{name}`: {kind.value} changed {change}"


_DICT_CONTAINS = re.compile(r"___dict_contains\('(?P<key>[^']+)',\s*(?P<obj>.+?)\.__dict__\)")
_EQ = re.compile(r"^(?P<lhs>.+?)\s*(?P<op>==|!=|\bis not\b|\bis\b)\s*(?P<rhs>.+)$")
_SIZE_SRC = re.compile(r"(?P<src>.+?)\.(?:size|stride)\(\)\[(?P<dim>\d+)\]")


def _expr_failure(expr: str, raw: str, failed_entry, source) -> GuardFailure:
    if "___check_type_id" in expr:
        subject = _pretty_source(_first_arg(expr))
        return GuardFailure(GuardKind.TYPE, subject, f"`{subject}` changed type", raw, None, None, None, failed_entry, source)
    if "___check_obj_id" in expr:
        subject = _pretty_source(_first_arg(expr))
        return GuardFailure(GuardKind.IDENTITY, subject, f"`{subject}` is a different object than when compiled",
                            raw, None, None, None, failed_entry, source)
    contains = _DICT_CONTAINS.search(expr)
    if contains:
        subject = f"{_pretty_source(contains['obj'])}.{contains['key']}"
        kind = GuardKind.GLOBAL if "G[" in contains["obj"] or not contains["obj"].startswith("L[") else GuardKind.VALUE
        return GuardFailure(kind, subject, f"attribute `{subject}` was set or deleted (an object's __dict__ changed)",
                            raw, None, None, None, failed_entry, source)
    size = _SIZE_SRC.search(expr)
    if size or re.search(r"\b[su]\d+\b", expr) or any(op in expr for op in ("<=", ">=", " < ", " > ")):
        subject = _pretty_source(size["src"]) if size else expr
        dim = int(size["dim"]) if size else None
        text = f"input `{subject}`: a dynamic-shape guard failed ({_pretty_expr(expr)})"
        return GuardFailure(GuardKind.SYMBOLIC, subject, text, raw, dim, None, None, failed_entry, source)
    eq = _EQ.match(expr)
    if eq:
        subject = _pretty_source(eq["lhs"])
        is_global = eq["lhs"].startswith("G[") or eq["lhs"].startswith("G.")
        kind = GuardKind.GLOBAL if is_global else GuardKind.VALUE
        noun = "global" if is_global else f"Python {_value_type(eq['rhs'])}"
        text = f"{noun} `{subject}` changed: the graph was specialized to {subject} {eq['op']} {eq['rhs'].strip()}"
        return GuardFailure(kind, subject, text, raw, None, eq["rhs"].strip(), None, failed_entry, source)
    return GuardFailure(GuardKind.OTHER, expr, f"guard failed: {_pretty_expr(expr)}", raw, None, None, None,
                        failed_entry, source)


def _value_type(literal: str) -> str:
    text = literal.strip()
    if re.fullmatch(r"-?\d+", text):
        return "int"
    if re.fullmatch(r"-?\d+\.\d*(e-?\d+)?|-?inf|nan", text):
        return "float"
    if text in ("True", "False"):
        return "bool"
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


def _pretty_source(source: str) -> str:
    """`L['x']` -> `x`, `G['C'].flag` -> `C.flag`, `L['self']._modules['fc']` stays readable."""
    text = _SOURCE_PART.sub(r"\1", source.strip())
    text = re.sub(r"\._modules\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    text = re.sub(r"\[['\"]([^'\"]+)['\"]\]", r".\1", text)
    # a keyword argument collected by `**kwargs` (HF models: `kwargs['input_ids']`) is named at the call site
    return re.sub(r"^kwargs\.", "", text)


def _pretty_expr(expr: str) -> str:
    return _pretty_source(expr)
