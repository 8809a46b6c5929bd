"""What every candidate of a program reduction keeps as written, and must still do.

Contract: `kept_statements(source, check_line)` names (by AST dump) the statements a candidate keeps exactly:
the script's own check of a wrong result and every statement that seeds an RNG; `keeps(source, kept,
compiles)` says whether a candidate keeps them and (`compiles`) still calls a compiler
(`calls_a_compiler`). `Keep.of(script, check_line)` holds all a reduction asks of every candidate, computed once
from the script: `Keep.allows(candidate)` is `keeps` and that the candidate breaks nothing it can be seen to break
without running it (`breaks_names`): a name no statement binds (`something`, a call's `unique_name_0`), a number
called (`0(x)`) or asked for an attribute it lacks (`0 .randn(4)`). Such a candidate raises NameError, TypeError or
AttributeError once that line runs, which it must do with compilation off (dead code aside, where deleting the line
is the smaller candidate): a program reducer's library proposes many (70 of the 194 candidates reducing a 32-line
`torch.func.jvp` script), and each would cost a run. One definition, for the AST-level reducer and the text pass
alike (`reduce.program`, `reduce.program_text`).
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

from pt2doctor.reduce.program_culprits import dotted

_SEEDS = {"torch.manual_seed", "torch.cuda.manual_seed", "torch.cuda.manual_seed_all", "random.seed",
          "np.random.seed", "numpy.random.seed", "torch.random.manual_seed"}
# generators made with a seed (`random.Random(0)`), and a seed set on one (`g.manual_seed(0)`)
_SEEDED = {"random.Random", "np.random.default_rng", "numpy.random.default_rng", "np.random.RandomState",
           "numpy.random.RandomState"}
_SEED_METHODS = {"manual_seed", "seed"}


def seeds_rng(node: ast.stmt) -> bool:
    """The statement seeds an RNG: a seeding call, or a generator made or seeded with an argument."""
    for call in (n for n in ast.walk(node) if isinstance(n, ast.Call)):
        name = dotted(call.func)
        if name in _SEEDS and isinstance(node, ast.Expr) and node.value is call:
            return True
        if (call.args or call.keywords) and (name in _SEEDED or (isinstance(call.func, ast.Attribute)
                                                                  and call.func.attr in _SEED_METHODS)):
            return True
    return False


def kept_statements(source: str, check_line: int | None) -> frozenset[str]:
    """The statements every candidate keeps exactly as written: the script's own check of a wrong result
    (the innermost simple statement at `check_line`: its tolerance and operands define "wrong", and the
    type of what it raises does not), and every statement that seeds an RNG (a seeding call, a generator
    made or seeded with a seed: `random.Random(0)`): the values the failure shows on."""
    kept = set()
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.stmt) or isinstance(node, _COMPOUND):
            continue
        at_check = check_line is not None and node.lineno <= check_line <= (node.end_lineno or node.lineno)
        if at_check or seeds_rng(node):
            kept.add(ast.dump(node))
    return frozenset(kept)


_COMPOUND = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.If, ast.For, ast.AsyncFor, ast.While,
             ast.With, ast.AsyncWith, ast.Try, ast.Match)


def keeps(source: str, kept: frozenset[str], compiles: bool = False) -> bool:
    """`source` keeps the `kept` statements, and (`compiles`) still calls a compiler: a program that no
    longer compiles anything is not the failure, even when a nondeterministic check happens to fail it
    compiled and pass it with compilation off."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    return _keeps(tree, kept, compiles)


def _keeps(tree: ast.AST, kept: frozenset[str], compiles: bool) -> bool:
    present = {ast.dump(node) for node in ast.walk(tree) if isinstance(node, ast.stmt)}
    return kept <= present and (not compiles or calls_a_compiler(tree))


_COMPILER_NAMES = {"compile", "optimize", "export", "draft_export", "aoti_compile_and_package", "aot_compile"}


def calls_a_compiler(tree: ast.AST) -> bool:
    """Whether the program names a compiler entry point (`torch.compile`, `model.compile`,
    `torch._dynamo.optimize`, `torch.export.export`, `aoti_compile_and_package`)."""
    return any((isinstance(n, ast.Attribute) and n.attr in _COMPILER_NAMES)
               or (isinstance(n, ast.Name) and n.id in _COMPILER_NAMES) for n in ast.walk(tree))


@dataclass(frozen=True, slots=True)
class Keep:
    """What a reduction asks of every candidate (see the module docstring), computed once from the script."""

    statements: frozenset[str]  # `kept_statements`
    compiles: bool  # the script calls a compiler: so must every candidate
    unbound: frozenset[str]  # names the script itself loads and never binds (a star import's, `__file__`)

    @classmethod
    def of(cls, source: str, check_line: int | None = None) -> Keep:
        tree = ast.parse(source)
        return cls(kept_statements(source, check_line), calls_a_compiler(tree), _unbound(tree) or frozenset())

    def allows(self, source: str) -> bool:
        try:
            tree = ast.parse(source)  # once, for both questions: asked of every candidate
        except SyntaxError:
            return False
        return _keeps(tree, self.statements, self.compiles) and not breaks_names(tree, self.unbound)


_BOUND_ANYWAY = frozenset(dir(builtins)) | {"__file__", "__name__", "__builtins__", "__spec__", "__loader__",
                                             "__package__", "__doc__", "__annotations__"}


def _unbound(tree: ast.AST) -> frozenset[str] | None:
    """The names `tree` loads that no statement of it binds, anywhere (a module-wide and so lenient view: a name
    bound in one function counts as bound in every other); None where a star import may bind anything."""
    bound, loaded = set(_BOUND_ANYWAY), set[str]()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.alias):
            if node.name == "*":
                return None
            bound.add(node.asname or node.name.split(".")[0])
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound.update(node.names)
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.add(node.rest)
    return frozenset(loaded - bound)


def breaks_names(tree: ast.AST, unbound: frozenset[str] = frozenset()) -> bool:
    """`tree` loads a name nothing binds (beyond the script's own `unbound`), calls a constant (`0(x)`) or reads an
    attribute a constant lacks (`0 .randn`): each raises once its line runs."""
    lacking = _unbound(tree)
    if lacking is not None and lacking - unbound:
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Constant):
            return True
        if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Constant)
                and not hasattr(node.value.value, node.attr)):
            return True
    return False
