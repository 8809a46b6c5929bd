"""Real programs, one per recompile cause and per cookbook graph-break cause."""

from __future__ import annotations

import pytest

from pt2doctor.analysis.cookbook import action_items, advice_for
from pt2doctor.analysis.recompiles import find_recompiles, fix_for, recompile_chains
from pt2doctor.model import GuardKind, Session

CAUSES = {
    "by_size": (GuardKind.SIZE, "input `x`: size at dim 0 changed 16 -> 17", "mark_dynamic(x, 0)"),
    "by_dtype": (GuardKind.DTYPE, "input `x`: dtype changed float32 -> float16", "x.to(torch.float32)"),
    "by_stride": (GuardKind.STRIDE, "input `x`: became non-contiguous", ".contiguous()"),
    "by_grad": (GuardKind.REQUIRES_GRAD, "input `x`: requires_grad changed False -> True", "no_grad"),
    "by_scalar": (GuardKind.VALUE, "Python int `n` changed", "torch.tensor(n)"),
    "by_global": (GuardKind.GLOBAL, "global `CONFIG.flag` changed", "pass it as an argument"),
}


def _chain(session: Session, function: str):
    return next(c for c in recompile_chains(session) if c.function == function)


@pytest.mark.parametrize("function", sorted(CAUSES))
def test_each_recompile_cause_in_plain_words(recompile_session: Session, function: str) -> None:
    kind, text, fix = CAUSES[function]
    chain = _chain(recompile_session, function)
    cause = chain.steps[0].cause
    assert cause is not None and cause.kind is kind and chain.steps[0].cause_words.startswith(text)
    assert fix in fix_for(cause)


def test_scalar_and_global_causes_name_the_user_line(recompile_session: Session) -> None:
    for function in ("by_scalar", "by_global"):
        source = _chain(recompile_session, function).steps[0].cause.source
        assert source is not None and source.file.endswith("recompile_causes.py") and source.code


def test_limit_hit_says_it_fell_back_to_eager(recompile_session: Session) -> None:
    chain = _chain(recompile_session, "by_limit")
    assert chain.limit_hit is not None
    finding = next(f for f in find_recompiles(recompile_session) if f.title.startswith("by_limit"))
    assert "hit the recompile limit" in finding.title and any("fell back to eager" in e for e in finding.evidence)


RECIPES = {"uses_print": "print", "uses_item": "item", "uses_branch": "data_dependent_branch",
           "uses_nonzero": "dynamic_shape_op", "uses_tolist": "tolist", "uses_disabled": "compiler_disable"}


@pytest.mark.parametrize("function", sorted(RECIPES))
def test_each_cookbook_break_cause_gets_its_recipe(break_session: Session, function: str) -> None:
    gb = next(b for b in break_session.graph_breaks if b.function == function)
    recipe = advice_for(gb)
    assert recipe is not None and recipe.name == RECIPES[function]


def test_action_list_has_one_item_per_line_with_code_and_rewrite(break_session: Session) -> None:
    items = action_items(break_session)
    assert len(items) == len({(i.where.file, i.where.line) for i in items}) == len(RECIPES)
    assert all(i.where.code and i.rewrite for i in items)
