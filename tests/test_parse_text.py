from __future__ import annotations

from pt2doctor.capture.parse_text import parse_break_text, parse_guard_failure
from pt2doctor.model import CompileId, GuardKind


def test_size_failure_in_plain_words():
    g = parse_guard_failure("0/0: tensor 'x' size mismatch at index 1. expected 16, actual 17")
    assert g.kind is GuardKind.SIZE and g.text == "input `x`: size at dim 1 changed 16 -> 17"
    assert g.failed_entry == CompileId(0, 0)


def test_dtype_names_are_torch_dtypes():
    g = parse_guard_failure("1/2: tensor 'x' dtype mismatch. expected Float, actual Half")
    assert g.text == "input `x`: dtype changed float32 -> float16"


def test_scalar_and_global_guards_carry_the_user_line():
    raw = ("1/0: n == 3                          # return x * n  # t.py:5 in g\nUser stack trace:\n"
           '  File "/src/t.py", line 5, in g\n    return x * n')
    g = parse_guard_failure(raw)
    assert g.kind is GuardKind.VALUE and g.subject == "n" and "n == 3" in g.text
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
