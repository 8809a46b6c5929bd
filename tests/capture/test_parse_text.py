from __future__ import annotations

from pathlib import Path

import pytest

import pt2doctor
from pt2doctor.capture.trace.guard_text import parse_guard_failure
from pt2doctor.capture.trace.parse_text import parse_break_text
from pt2doctor.model import CompileId, GuardKind
from pt2doctor.model.torch_text import is_dynamo_temporary


# Guard text is parsed into facts here; the sentences are analysis's (tests/analysis/test_guard_words.py).
def test_size_failure_facts():
    g = parse_guard_failure("0/0: tensor 'x' size mismatch at index 1. expected 16, actual 17")
    assert (g.kind, g.subject, g.dim, g.expected, g.actual, g.origin) == (GuardKind.SIZE, "x", 1, "16", "17", "input")
    assert g.failed_entry == CompileId(0, 0)


def test_dtype_names_are_torch_dtypes():
    g = parse_guard_failure("1/2: tensor 'x' dtype mismatch. expected Float, actual Half")
    assert (g.expected, g.actual) == ("float32", "float16")


def test_scalar_and_global_guards_carry_the_user_line():
    raw = ("1/0: n == 3                          # return x * n  # t.py:5 in g\nUser stack trace:\n"
           '  File "/src/t.py", line 5, in g\n    return x * n')
    g = parse_guard_failure(raw)
    assert (g.kind, g.subject, g.condition) == (GuardKind.VALUE, "n", "n == 3")
    assert (g.source.file, g.source.line) == ("/src/t.py", 5)
    glob = parse_guard_failure("2/0: G['CONFIG'].flag == True  # if CONFIG.flag:  # t.py:7 in h")
    assert glob.kind is GuardKind.GLOBAL and glob.subject == "CONFIG.flag"


def test_unknown_guard_text_is_kept():
    g = parse_guard_failure("0/0: ___some_new_guard(L['x'])")
    assert g.kind is GuardKind.OTHER and "___some_new_guard" in g.raw


def test_break_text_parts():
    text = ("Graph break in user code at /a/b.py:5\nGraph Break Reason: Encountered graph break\n\n"
            "Failed to trace builtin operator\n  Explanation: no print\n  Hint: avoid print\n  Hint: avoid print\n"
            "  Hint: Please report an issue to PyTorch.\n\n For more, visit: https://x/gb/gb0059.html\n\n"
            'User code traceback:\n  File "/a/b.py", line 9, in <module>\n    f()\n  File "/a/b.py", line 5, in f\n'
            '    print("x")\n')
    parsed = parse_break_text(text)
    assert parsed.reason == "Failed to trace builtin operator: no print"
    assert parsed.hints == ("avoid print",)
    assert parsed.gb_id == "GB0059"
    assert (parsed.where.file, parsed.where.line, parsed.where.function) == ("/a/b.py", 5, "f")
    assert parsed.where.code == 'print("x")'


# raw guard text as torch 2.13 writes it (from the exploratory runs: limit.py, breaks.py, llama_dyn.py, ...)
HINTED = ("0/0: self.calls == 0                                          # self.calls += 1  # mp/t/limit.py:11 in "
          "forward (HINT: torch.compile considers integer attributes of the nn.Module to be static. If you are "
          "observing recompilation, you might want to make this integer dynamic using "
          "torch._dynamo.config.allow_unspec_int_on_nn_module = True, or convert this integer into a tensor.)\n"
          'User stack trace:\n  File "/t/limit.py", line 11, in forward\n    self.calls += 1')


def test_torch_hint_is_not_part_of_the_value():
    g = parse_guard_failure(HINTED)
    assert (g.kind, g.subject, g.expected) == (GuardKind.VALUE, "self.calls", "0")
    assert g.condition == "self.calls == 0"
    assert parse_guard_failure(HINTED).hint.startswith("torch.compile considers integer attributes")
    assert (g.source.line, g.source.code) == (11, "self.calls += 1")


def test_code_comment_with_its_own_hash_is_split_off():
    g = parse_guard_failure("3/0: self.step == 0      # self.step += 1      # attribute mutation  # mp/t/b.py:24 in "
                            "torch_dynamo_resume_in_forward_at_19 (HINT: integer attributes ...)")
    assert g.expected == "0" and g.source.code == "self.step += 1      # attribute mutation"


def test_zero_one_specialization_names_the_input_and_dim():
    g = parse_guard_failure(
        "0/1: 2 <= kwargs['input_ids'].size()[1]  # recordable_keys = {  # transformers/utils/output_capturing.py:332"
        " in wrapper (user code shown is first use of this value--the guard itself is not due user code but due to "
        "0/1 specialization in the framework; to avoid specialization try "
        "torch._dynamo.decorators.mark_unbacked(tensor, dim))")
    assert (g.kind, g.subject, g.dim, g.expected) == (GuardKind.SYMBOLIC, "input_ids", 1, ">= 2")
    assert g.source is None  # torch: the line shown is not the cause


def test_parameter_guard_note_is_not_the_actual_value():
    g = parse_guard_failure("0/0: tensor 'self._modules['model']._modules['norm']._parameters['weight']' dtype "
                            "mismatch. expected Float, actual BFloat16. Guard failed on a parameter, consider using "
                            "torch._dynamo.config.force_parameter_static_shapes = False to allow dynamism on "
                            "parameters.")
    assert (g.subject, g.expected, g.actual) == ("self.model.norm.weight", "float32", "bfloat16")
    assert g.origin == "parameter" and g.hint.startswith("Guard failed on a parameter")
    frozen = parse_guard_failure("0/0: tensor 'self._modules['e']._parameters['weight']' requires_grad mismatch. "
                                 "expected requires_grad=1. Guard failed on a parameter, consider using x = False.")
    assert (frozen.kind, frozen.expected, frozen.actual) == (GuardKind.REQUIRES_GRAD, "True", "False")


def test_values_carried_across_a_break_are_not_named_by_dynamo_temporaries():
    value = parse_guard_failure("2/0: ___stack1 == 16     # n = int(mask.sum().item())  # mp/t/b.py:18 in "
                                "torch_dynamo_resume_in_forward_at_18")
    tensor = parse_guard_failure("2/0: tensor '___stack0' size mismatch at index 0. expected 13, actual 19")
    for g in (value, tensor):
        assert is_dynamo_temporary(g.subject) and g.origin == "carried" and g.condition is None


@pytest.mark.parametrize("raw, kind, subject, origin", [
    ("0/0: GLOBAL_STATE changed: grad_mode ", GuardKind.GLOBAL_STATE, "grad_mode", "state"),
    ("0/1: GLOBAL_STATE changed: autocast(cpu)_enabled deterministic_algorithms ", GuardKind.GLOBAL_STATE,
     "autocast(cpu)_enabled, deterministic_algorithms", "state"),
    ("0/1: expected type of 'kwargs['past_key_values'].layers[0].keys' to be a tensor type, ' but found "
     "<class 'NoneType'>", GuardKind.TYPE, "past_key_values.layers[0].keys", "input"),
    ("0/0: CodeGuardAccessor: Not a function on act.__code__", GuardKind.TYPE, "act", "input"),
    ("0/0: ___check_obj_id(func.__code__, 9391), type=<class 'code'>  # output = func(self)  # t/generic.py:943 "
     "in wrapper", GuardKind.IDENTITY, "func.__code__", "input"),
    ("0/0: not ___dict_contains('scale', self.__dict__)  # return x * self.scale  # mp/gw/k.py:6 in forward",
     GuardKind.ATTRIBUTE, "self.scale", "input"),  # `self` is a local: torch 2.13 prints it without `L[...]`
    ("0/0: not ___dict_contains('k', G['cfg'].__dict__)", GuardKind.ATTRIBUTE, "cfg.k", "global"),
])
def test_common_guard_failures_kind_subject_and_origin(raw, kind, subject, origin):
    g = parse_guard_failure(raw)
    assert (g.kind, g.subject, g.origin) == (kind, subject, origin)


def test_a_bool_guard_states_its_new_value():
    g = parse_guard_failure("0/0: self._modules['layers']._modules['0'].training == True  # if self.training:  "
                            "# t/m.py:3 in forward")
    assert (g.subject, g.expected, g.actual) == ("self.layers.0.training", "True", "False")


def test_where_torch_made_the_guard_is_not_a_hint():
    g = parse_guard_failure("1/0: 6 <= x.size()[0]  # return x[:3].sum() if x.size(0) > 5 else x.sum()  # "
                            "mp/gw/k.py:12 in dyn (_dynamo/variables/tensor.py:2606 in evaluate_expr)")
    assert (g.kind, g.expected, g.hint, g.source.line) == (GuardKind.SYMBOLIC, ">= 6", None, 12)


def test_user_stack_drops_pt2doctor_and_runpy_frames():
    child = str(Path(pt2doctor.__file__).parent / "capture" / "child.py")
    text = ("Graph Break Reason: x\nUser code traceback:\n"
            f'  File "<frozen runpy>", line 198, in _run_module_as_main\n  File "{child}", line 127, in main\n'
            '    runpy.run_path(script, run_name="__main__")\n  File "/usr/lib/python3.11/runpy.py", line 291, in '
            'run_path\n  File "/a/b.py", line 9, in <module>\n    f()\n')
    assert [(f.file, f.line) for f in parse_break_text(text).user_stack] == [("/a/b.py", 9)]
