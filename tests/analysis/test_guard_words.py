"""Guard failures in plain words, as a table: a guard line exactly as torch 2.13 wrote it in a real run
(`recompile_reasons` of small CPU scripts, backend="eager", and of the runs in tests/advisor), parsed by
capture into facts, worded by analysis. One row per kind of guard, plus its variants."""

from __future__ import annotations

import json

import pytest

from pt2doctor.analysis.guard_words import guard_words
from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.cli.output import load_session
from pt2doctor.model import GuardKind

PARAM = ("0/0: tensor 'self._modules['model']._modules['norm']._parameters['weight']' dtype mismatch. expected Float, "
         "actual BFloat16. Guard failed on a parameter, consider using "
         "torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on parameters.")
ZERO_ONE = ("11/0: 2 <= x.size()[0]  # def dyn_fn(x): return x.sum()  # mp/gw/kinds.py:28 in dyn_fn (user code shown "
            "is first use of this value--the guard itself is not due user code but due to 0/1 specialization in the "
            "framework; to avoid specialization try torch._dynamo.decorators.mark_unbacked(tensor, dim))")

TABLE = [
    ("size", "0/0: tensor 'x' size mismatch at index 0. expected 4, actual 5",
     "input `x`: size at dim 0 changed 4 -> 5"),
    ("dtype", "1/0: tensor 'x' dtype mismatch. expected Float, actual Double",
     "input `x`: dtype changed float32 -> float64"),
    ("dtype of a parameter", PARAM, "parameter `self.model.norm.weight`: dtype changed float32 -> bfloat16"),
    ("stride", "2/0: tensor 'x' stride mismatch at index 0. expected 4, actual 1",
     "input `x`: became non-contiguous or changed layout (stride at dim 0 changed 4 -> 1)"),
    ("requires_grad", "3/0: tensor 'x' requires_grad mismatch. expected requires_grad=0",
     "input `x`: requires_grad changed False -> True"),
    ("rank", "4/0: tensor 'x' rank mismatch. expected 1, actual 2", "input `x`: number of dims changed 1 -> 2"),
    ("a tensor carried across a break", "2/0: tensor '___stack0' size mismatch at index 0. expected 13, actual 19",
     "a tensor carried across a graph break: size at dim 0 changed 13 -> 19"),
    ("int", "5/0: n == 3                                                   # def value_fn(x, n): return x * n  # "
            "mp/gw/kinds.py:19 in value_fn", "Python int `n` changed: the graph was specialized to n == 3"),
    ("bool", "12/0: b == True                                                # return x + 1 if b else x  # "
             "mp/gw/kinds.py:30 in bool_fn", "Python bool `b` changed True -> False"),
    ("None", "0/0: self.config.problem_type is None    # if self.config.problem_type is None:  # t/bert.py:1110 in "
             "forward", "Python value `self.config.problem_type` changed: the graph was specialized to "
                        "self.config.problem_type is None"),
    ("global", "6/0: G['Config'].flag == True                                      # return x + 1 if Config.flag "
               "else x - 1  # mp/gw/kinds.py:21 in global_fn", "global `Config.flag` changed True -> False"),
    ("a value carried across a break", "2/0: ___stack1 == 16     # n = int(mask.sum().item())  # mp/t/b.py:18 in "
                                       "torch_dynamo_resume_in_forward_at_18",
     "a Python value carried across a graph break changed: the code resumed after the break was specialized to 16"),
    ("None where a tensor was", "7/0: expected type of 'y' to be a tensor type, ' but found <class 'NoneType'>",
     "`y` was a tensor when compiled and is now None"),
    ("another kind of callable", "8/0: CodeGuardAccessor: Not a function on f.__code__",
     "`f` was a Python function when compiled and is now another kind of callable (a builtin, a functools.partial "
     "or a callable object)"),
    ("type", "2/0: ___check_type_id(t, 140669402575680), type=<class 'list'>  # return x + t[0]  # "
             "mp/gw/kinds2.py:13 in type_fn (HINT: type list)", "`t` changed type"),
    ("a wrapper frame's function", "0/0: ___check_obj_id(func.__code__, 93916077290016), type=<class 'code'>  # "
                                   "output = func(self, *args, **kwargs)  # t/generic.py:943 in wrapper",
     "`func` is a different function than when compiled: another function or module runs through this same frame"),
    ("attribute", "0/0: not ___dict_contains('scale', self.__dict__)             # return x * self.scale  # "
                  "mp/gw/kinds3.py:6 in forward",
     "attribute `self.scale` was set or deleted (an object's __dict__ changed)"),
    ("0/1 specialization", ZERO_ONE, "input `x`: size at dim 0 became 0 or 1, but the dynamic graph was compiled for "
                                     "sizes >= 2 (torch specializes sizes 0 and 1: 0/1 specialization)"),
    ("a size bound", "1/0: 6 <= x.size()[0]  # return x[:3].sum() if x.size(0) > 5 else x.sum()  # mp/gw/kinds3.py:12 "
                     "in dyn (_dynamo/variables/tensor.py:2606 in evaluate_expr)",
     "input `x`: size at dim 0 fell below 6, the least the dynamic graph allows"),
    ("grad mode", "10/0: GLOBAL_STATE changed: grad_mode ",
     "torch's global state differs from when compiled: grad mode (torch.no_grad / torch.inference_mode / "
     "torch.enable_grad)"),
    ("autocast and more", "0/1: GLOBAL_STATE changed: autocast(cpu)_enabled deterministic_algorithms ",
     "torch's global state differs from when compiled: autocast on cpu (on/off), torch.use_deterministic_algorithms"),
    ("a guard pt2doctor does not know", "0/0: ___some_new_guard(L['x'])", "guard failed: ___some_new_guard(x)"),
]


@pytest.mark.parametrize(("name", "raw", "words"), TABLE, ids=[row[0] for row in TABLE])
def test_guard_words(name: str, raw: str, words: str) -> None:
    assert guard_words(parse_guard_failure(raw)) == words


def test_every_kind_has_a_row() -> None:
    assert {parse_guard_failure(raw).kind for _, raw, _ in TABLE} >= set(GuardKind) - {
        GuardKind.DEVICE, GuardKind.DISPATCH_KEYS}  # CPU-only runs: no device; no subclass or mode here


def test_the_break_a_value_crossed_is_named_when_known() -> None:
    g = parse_guard_failure("2/0: tensor '___stack0' size mismatch at index 0. expected 13, actual 19")
    assert guard_words(g, across="the graph break at b.py:18") == \
        "a tensor carried across the graph break at b.py:18: size at dim 0 changed 13 -> 19"


def test_a_schema_1_session_json_gets_its_guard_facts_from_torchs_text(tmp_path) -> None:
    raw = "0/0: not ___dict_contains('k', G['cfg'].__dict__)"
    old = {"schema": "pt2doctor.session/1", "torch_version": "2.13.0", "command": ["t.py"], "exit": {"code": 0},
           "recompiles": [{"function": "f", "file": "t.py", "line": 1, "compile_id": "0/1", "reason": raw,
                           "guard_failures": [{"kind": "global", "subject": "cfg.k", "raw": raw,
                                               "text": "attribute `cfg.k` was set or deleted"}]}]}
    (tmp_path / "session.json").write_text(json.dumps(old))
    (g,) = load_session(tmp_path / "session.json").recompiles[0].guard_failures
    assert (g.kind, g.origin) == (GuardKind.ATTRIBUTE, "global")
