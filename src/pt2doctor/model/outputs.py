"""The return values of a script's compiled callables, summarized in its process for the parent to compare.

Contract: torch-free values. The child (`capture.child.overrides`, `Overrides.record_outputs`) appends one
`OutputRecord` per call it records: the `call`-th return value of the `fn`-th compiled callable, as a
`ValueSummary` (a tensor as its dtype, shape and first values; sequences and dicts item by item; a
Python float as a number, another scalar as it is; anything else by its type's name). The parent reads them with
`model.serialize.read_lines` (`workflows.whatif`) and compares two runs' (`analysis.whatif.outputs_equal`).
JSON has no NaN or infinity: a value that is not finite is written as its name (`"nan"`, `"inf"`,
`"-inf"`, `number`), so a NaN stays a NaN and an infinity is not mistaken for one.
"""

from __future__ import annotations

import math

import msgspec

Number = float | str  # a float; one that is not finite as "nan", "inf" or "-inf"


def number(value: float) -> Number:
    return value if math.isfinite(value) else repr(value)


def as_float(value: Number) -> float:
    return float(value)


class TensorSummary(msgspec.Struct, frozen=True, tag="tensor", tag_field="kind"):
    dtype: str  # torch's spelling, `torch.float32`
    shape: tuple[int, ...]
    values: tuple[Number, ...]  # the first values, flattened, as float64 (a complex value: its magnitude)


class SeqSummary(msgspec.Struct, frozen=True, tag="seq", tag_field="kind"):
    items: tuple[ValueSummary, ...]


class DictSummary(msgspec.Struct, frozen=True, tag="dict", tag_field="kind"):
    items: dict[str, ValueSummary]


class FloatSummary(msgspec.Struct, frozen=True, tag="float", tag_field="kind"):
    value: Number


class PySummary(msgspec.Struct, frozen=True, tag="py", tag_field="kind"):
    value: bool | int | str | None


class OtherSummary(msgspec.Struct, frozen=True, tag="other", tag_field="kind"):
    type: str


ValueSummary = TensorSummary | SeqSummary | DictSummary | FloatSummary | PySummary | OtherSummary


class OutputRecord(msgspec.Struct, frozen=True):
    fn: int  # the compiled callable, in the order `torch.compile` made them
    call: int  # its call, from 0
    value: ValueSummary
