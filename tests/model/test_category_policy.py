"""One policy per failure category (issue #39, point 6): every category has its row, and the rules the steps
read from it hold. No torch."""

from __future__ import annotations

from pt2doctor.model import Category
from pt2doctor.model.category_policy import POLICIES, UNKNOWN, policy, refined
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.exit_codes import ExitCode


def test_every_category_has_a_row_and_no_workaround_is_tried_before_one_is_known():
    assert set(POLICIES) == set(Category)
    assert policy(None) is UNKNOWN and not UNKNOWN.workarounds


def test_what_is_tried_for_each_kind_of_failure():
    graph = {c for c, p in POLICIES.items() if p.graph}
    assert graph == {Category.KERNEL_FAILURE, Category.BACKEND_FAILURE, Category.RUNTIME_CRASH, Category.ACCURACY}
    assert {c for c, p in POLICIES.items() if p.environment} == graph - {Category.ACCURACY}
    assert {c for c, p in POLICIES.items() if p.compiler_raised} == {Category.KERNEL_FAILURE,
                                                                    Category.BACKEND_FAILURE}
    assert {c for c, p in POLICIES.items() if not p.reduced} == {Category.TIMEOUT, Category.RECOMPILATION,
                                                                 Category.USER_ERROR}
    assert {c for c, p in POLICIES.items() if not p.workarounds} == {Category.RECOMPILATION, Category.USER_ERROR}
    assert [c for c, p in POLICIES.items() if p.not_minified] == [Category.TIMEOUT]
    assert [c for c, p in POLICIES.items() if p.wrong_result] == [Category.ACCURACY]


def test_the_script_s_own_error_files_no_issue_and_has_its_own_exit_code():
    assert not policy(Category.USER_ERROR).issue and policy(Category.USER_ERROR).exit_code is ExitCode.USER_ERROR
    assert all(p.issue and p.exit_code is ExitCode.FOUND for c, p in POLICIES.items() if c is not Category.USER_ERROR)


def test_the_stage_refines_the_category():
    assert refined(Category.BACKEND_FAILURE, FailingStage.DYNAMO) is Category.DYNAMO_INTERNAL
    assert refined(Category.BACKEND_FAILURE, FailingStage.INDUCTOR) is Category.BACKEND_FAILURE
    assert refined(Category.USER_ERROR, FailingStage.DYNAMO) is Category.ACCURACY
    assert refined(Category.USER_ERROR, FailingStage.INDUCTOR) is Category.ACCURACY
    assert refined(Category.USER_ERROR, None) is Category.USER_ERROR and refined(None, FailingStage.DYNAMO) is None
