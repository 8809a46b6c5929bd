"""Regression tests in PyTorch's test idiom (test_repro.py beside repro.py): the reduced program's, and the
one judge of every test_repro.py, the short form's too.

PyTorch's idiom (`torch.testing._internal.common_utils`) imports expecttest and numpy, which a plain torch
install lacks: `missing_dependencies()` names those this interpreter lacks, and then no test is verified (a
test that cannot import fails too, and that failure says nothing of the bug).
`verified_test(test, compiled_run, off_run, timeout_s, at_once, dies_of)`: side by side (`at_once` at most) in
fresh interpreters, through the program harness (`reduce.program_harness`) with each run's overrides: as
repro.py fails, unittest ran the test and it failed (exit status 1 and unittest's `FAILED (` summary: not an
import error), or the test's process died of `dies_of`, the repro's own signal (a crash leaves unittest no
summary to print; an import error dies of none); with the failing part turned off (compilation off, pinned:
`TestCase` resets the stance before each test), it passes (exit 0). Only then does it fail now and pass once
fixed. Both run as on a maintainer's machine (`as_a_maintainer_runs_it()`: without `CI`, which sends
`run_tests()` to PyTorch's CI reporting).

`write_program_test(repro, runs, timeout_s, at_once, dies_of)` writes `test_repro.py` next to the verified `repro` (a
reduced program, `reduce.program`) and returns its path when it is verified both ways in fresh interpreters, else
None (and removes it): run as repro.py was verified (`runs`: the backend forced where it is not in the source)
`python test_repro.py` fails (unittest's exit status 1), and with the failing part turned off
(`program.passes_with`: compilation off) it passes, so it fails while the bug is present and passes once it is
fixed. Two forms are tried, in order:
- inlined: the program's imports at the top, `from torch.testing._internal.common_utils import TestCase,
  run_tests`, and every other statement as the body of `TestRepro.test_repro` (its own check, the script's
  `assert` or `assert_close`, decides); the form PyTorch's Dynamo tests take;
- whole: where a statement's meaning depends on being at module level (a `global`, a class whose methods read
  module names, a module attribute the compiled code reads), the program is kept as written in a string and
  the test runs it as a fresh `__main__` module.

`write_harness_test(repro, timeout_s, at_once, dies_of)` does the same for the minifier's harness form (a graph
repro with no short form that reproduces, `reduce.repro`): its definitions as written, and a test that calls its
`check()`, which raises while the bug is present (the compiled graph crashes or differs from eager). The harness
hands the graph to the backend itself (`compile_repro`), where `set_stance` does not reach: its failing part is
turned off by a `compile_repro` that hands the graph back as it is, in the verification's copy only.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import textwrap
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

import msgspec

from pt2doctor.model.minify import FailureKind, FailureSignature
from pt2doctor.model.signature import from_description
from pt2doctor.processes.fresh import verify
from pt2doctor.reduce.program_harness import ProgramRun, harness_text
from pt2doctor.reduce.repro import HOW_TO_RUN

if TYPE_CHECKING:
    from pt2doctor.processes.fresh_forks import FreshForks

TEST_FILE = "test_repro.py"
_UNITTEST_FAILED = from_description("exit status 1")  # what `run_tests()` exits with, as the harness says it
_UNITTEST_SUMMARY = "FAILED ("  # unittest's last line when a test failed or raised: the test ran
_IDIOM_NEEDS = ("expecttest", "numpy")  # what torch.testing._internal.common_utils imports beyond torch
_IMPORT = "from torch.testing._internal.common_utils import TestCase, run_tests"
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_MAIN = 'if __name__ == "__main__":\n    run_tests()\n'
# set (to anything), `CI` makes `run_tests()` write XML reports for PyTorch's CI, through a module
# (xmlrunner) a maintainer's machine lacks: the test is verified as it runs on their machine
_CI_ONLY = ("CI",)


def inlined(source: str, docstring: str) -> str | None:
    """The program's statements as the test's body; None when it has nothing but imports."""
    tree = ast.parse(source)
    body = [s for s in tree.body if not _is_docstring(s)]
    imports = [s for s in body if isinstance(s, (ast.Import, ast.ImportFrom)) and not _is_future(s)]
    rest = [s for s in body if s not in imports and not _is_future(s)]
    if not rest:
        return None
    lines = source.splitlines()
    text = ""
    for before, statement in zip([None, *rest], rest):  # a definition stands apart, as at module level
        apart = isinstance(statement, _DEFINITIONS) or isinstance(before, _DEFINITIONS)
        text += (("\n\n" if apart and before is not None else "\n" if before is not None else "")
                 + _segment(lines, statement))
    return _document(docstring, [ast.unparse(s) for s in imports], "\n".join([
        "class TestRepro(TestCase):", "    def test_repro(self):", textwrap.indent(text, " " * 8)]))


def whole(source: str, docstring: str) -> str:
    """The program kept as written, run by the test as a fresh `__main__` module."""
    run = "\n".join([
        "class TestRepro(TestCase):", "    def test_repro(self):",
        '        exec(compile(PROGRAM, "repro.py", "exec"), {"__name__": "__main__"})'])
    return _document(docstring, ["import torch"], f"PROGRAM = {source!r}\n\n\n{run}")


def _document(docstring: str, imports: list[str], test: str) -> str:
    head = f'"""{docstring}"""\n' if docstring else ""
    return f"{head}{chr(10).join(dict.fromkeys([*imports, _IMPORT]))}\n\n\n{test}\n\n\n{_MAIN}"


def _segment(lines: list[str], node: ast.stmt) -> str:
    """The statement as written (decorators, comments inside it kept)."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    return "\n".join(lines[first - 1:node.end_lineno])


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__"


def write_program_test(repro: Path, runs: Callable[[Path], tuple[ProgramRun, ProgramRun | None]],
                       timeout_s: float, at_once: int | None = None,
                       dies_of: FailureSignature | None = None, forks: FreshForks | None = None) -> Path | None:
    """test_repro.py beside `repro`, verified (see the module's contract); `runs(file)` says how a file is run
    compiled and with the failing part off, as repro.py was."""
    source = repro.read_text()
    docstring = (f"{repro.name} as a regression test: `python {TEST_FILE}` fails while the bug is present\nand "
                 "passes once it is fixed (verified in fresh interpreters, the failing part turned off for the "
                 "latter).\n")
    test = repro.with_name(TEST_FILE)
    for text in filter(None, (inlined(source, docstring), whole(source, docstring))):
        test.write_text(text)
        if verified_test(test, *runs(test), timeout_s, at_once, dies_of, forks=forks):
            return test
    test.unlink(missing_ok=True)
    return None


def write_harness_test(repro: Path, timeout_s: float, at_once: int | None = None,
                       dies_of: FailureSignature | None = None, forks: FreshForks | None = None) -> Path | None:
    """test_repro.py beside the harness form `repro`, verified (see the module's contract), else None."""
    text = harness_test(repro.read_text())
    if text is None:
        return None
    test = repro.with_name(TEST_FILE)
    test.write_text(text)
    run = ProgramRun(str(test), str(test.parent), (test.name,))
    off = text.replace(_HARNESS_TEST, _UNCOMPILED + _HARNESS_TEST)
    if verified_test(test, run, run, timeout_s, at_once, dies_of, off_source=off, forks=forks):
        return test
    test.unlink()
    return None


def harness_test(source: str) -> str | None:
    """The harness's definitions, its `if __name__ == "__main__":` block replaced by a test that calls `check()`;
    None for a file that is not the harness form."""
    tree = ast.parse(source)
    main, torch_import = tree.body[-1], next((s for s in tree.body if isinstance(s, ast.Import)
                                              and any(a.name == "torch" for a in s.names)), None)
    defines_check = any(isinstance(s, ast.FunctionDef) and s.name == "check" for s in tree.body)
    if not (defines_check and isinstance(main, ast.If) and "__main__" in ast.unparse(main.test) and torch_import):
        return None
    lines = source.replace(HOW_TO_RUN, _HOW_TO_RUN_TEST).splitlines()
    head = "\n".join([*lines[:torch_import.end_lineno], _IMPORT, *lines[torch_import.end_lineno:main.lineno - 1]])
    return f"{head.rstrip()}\n\n\n{_HARNESS_TEST}\n\n\n{_MAIN}"


_HARNESS_TEST = "\n".join([
    "class TestRepro(TestCase):", "    def test_repro(self):",
    "        check()  # raises while the bug is present: the compiled graph fails as repro.py does"])
_HOW_TO_RUN_TEST = "Run `python test_repro.py`: it fails while the bug is present and passes once it is fixed."
_UNCOMPILED = "def compile_repro(mod, args):  # compilation off: the graph as it is\n    return mod\n\n\n"


def verified_test(test: Path, compiled_run: ProgramRun, off_run: ProgramRun | None, timeout_s: float,
                  at_once: int | None = None, dies_of: FailureSignature | None = None,
                  off_source: str | None = None, forks: FreshForks | None = None) -> bool:
    """`off_source`: what runs with the failing part off, where it is not the test as written; `forks`: where fresh
    runs are forked from (`processes.fresh_forks`), else each is a new interpreter."""
    source = test.read_text()
    scratch = test.parent / "program"
    scratch.mkdir(parents=True, exist_ok=True)
    files = []
    compiled_run = replace(compiled_run, exit_status=True)  # the test runner's exit 1 is the verdict looked for
    off_run = replace(_off_in_a_test(off_run), exit_status=True) if off_run is not None else None
    for name, run, text in ((f"verify_{test.stem}_compiled.py", compiled_run, source),
                            (f"verify_{test.stem}_off.py", off_run, off_source or source)):
        if run is not None:
            files.append(scratch / name)
            files[-1].write_text(harness_text(text, run))
    with ThreadPoolExecutor(min(len(files), at_once or len(files))) as threads:
        done = list(threads.map(lambda f: verify(f, _UNITTEST_FAILED, timeout_s=timeout_s, runs=1,
                                                 env=as_a_maintainer_runs_it(), forks=forks), files))
    failed_in_a_test = ((done[0].verified and _UNITTEST_SUMMARY in done[0].output_tail)
                        or (dies_of is not None and dies_of.kind is FailureKind.SIGNAL and done[0].seen == dies_of))
    return failed_in_a_test and all(off.seen is None and off.returncode == 0 for off in done[1:])


def as_a_maintainer_runs_it() -> dict[str, str]:
    """This environment without what would make `run_tests()` behave as in PyTorch's CI."""
    return {name: value for name, value in os.environ.items() if name not in _CI_ONLY}


def _off_in_a_test(run: ProgramRun) -> ProgramRun:
    """PyTorch's `TestCase.run` sets the stance back to "default" before each test: there, compilation off must
    be pinned (`Overrides.stance_pinned`)."""
    off = run.overrides
    if off is None or off.stance != "force_eager":
        return run
    return replace(run, overrides=msgspec.structs.replace(off, stance_pinned=True))


def missing_dependencies() -> tuple[str, ...]:
    return tuple(name for name in _IDIOM_NEEDS if importlib.util.find_spec(name) is None)


def no_test_note() -> str:
    """Why a verified repro comes without test_repro.py, for the diagnosis's notes."""
    missing = missing_dependencies()
    why = (f"PyTorch's test utilities (torch.testing._internal.common_utils) need {' and '.join(missing)}, which this "
           f"Python lacks (pip install {' '.join(missing)})" if missing else
           "as a test it did not fail compiled and pass with compilation off")
    return f"no regression test (test_repro.py): {why}"
