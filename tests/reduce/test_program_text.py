"""The program reducer's coarse pass (`reduce.program_text`): whole statements deleted from the text as
written, the largest first, comments and formatting of what stays untouched."""

from __future__ import annotations

import textwrap

from pt2doctor.reduce.program_text import delete_statements

SOURCE = textwrap.dedent('''\
    import os  # kept only if needed
    import sys


    @staticmethod
    def unused(a, b):
        total = 0
        for x in range(a):
            total += x * b
        return total


    def culprit(value):
        # the comment the failure depends on: BOOM
        if value > 1:
            print("big")
        return value


    print(culprit(3))
    print('done',   sys.argv)
''')


class Checks:
    """A check that fails while `culprit`'s comment and its call remain; it counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []

    def __call__(self, text: str) -> bool:
        self.asked.append(text)
        return "# the comment the failure depends on: BOOM" in text and "print(culprit(3))" in text


def test_whole_statements_go_and_the_text_that_stays_is_as_written():
    check = Checks()
    best = delete_statements(SOURCE, check)
    assert best == textwrap.dedent('''\
        def culprit(value):
            # the comment the failure depends on: BOOM
            pass


        print(culprit(3))
    ''')


def test_the_largest_statement_is_tried_first():
    check = Checks()
    delete_statements(SOURCE, check)
    assert "def unused" not in check.asked[0] and "def culprit" in check.asked[0]  # 6 lines, decorator included


def test_a_second_reduction_changes_nothing():
    once = delete_statements(SOURCE, Checks())
    assert delete_statements(once, Checks()) == once


def test_a_candidate_that_does_not_parse_is_never_checked():
    check = Checks()
    delete_statements("try:\n    x = 1\nexcept ValueError:\n    pass\nprint(culprit(3))\n", check)
    for text in check.asked:
        compile(text, "<t>", "exec")


def test_a_sweep_goes_on_after_a_deletion_so_each_statement_costs_about_one_check_a_sweep():
    needed = [f"keep_{i} = {i}\n" for i in range(10)]
    source = "".join(needed) + "".join(f"drop_{i} = {i}\n" for i in range(10))
    asked: list[str] = []

    def check(text: str) -> bool:
        asked.append(text)
        return all(line in text for line in needed)

    assert delete_statements(source, check) == "".join(needed)
    # one sweep of 20 statements that deletes the ten, one of the ten kept that deletes nothing; starting each sweep
    # again from the first statement would re-check the ten kept before every deletion (over a hundred checks)
    assert len(asked) <= 2 * 20
