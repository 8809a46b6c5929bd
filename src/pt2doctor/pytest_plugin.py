"""pytest plugin: `@pytest.mark.compile_budget(graph_breaks=0, recompiles=1, compile_time_s=30)`.

Contract: installed with pt2doctor (entry point `pytest11`), it does nothing but register the marker
until a test carries it; importing it imports neither torch nor the rest of pt2doctor. A marked test
runs under `pt2doctor.watch()` (it listens to torch's structured trace in this process; nothing is
compiled differently) and, when it passes, is failed if its compilation exceeds a budget, with the
graph breaks, recompiles (and their causes) or the slowest compiles that make up the count. A test
that fails on its own is reported as it is. Budgets count what the test itself compiles: compiles
cached by earlier tests in the process are not redone (call `torch._dynamo.reset()` first to count
them).
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest

MARKER = "compile_budget"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", f"{MARKER}(graph_breaks=None, recompiles=None, compile_time_s=None): fail the "
                                       "test when torch.compile inside it exceeds a budget (pt2doctor)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    from pt2doctor.analysis.compare import over_budget
    from pt2doctor.api.watch import watch
    from pt2doctor.model.compare import Budget
    from pt2doctor.report.compare import render_check

    try:
        budget = Budget(**marker.kwargs)
    except TypeError as exc:
        raise pytest.UsageError(f"{item.nodeid}: {MARKER}(...) takes graph_breaks, recompiles, compile_time_s: "
                                f"{exc}") from exc
    with watch() as watched:
        result = yield
    overruns = over_budget(watched.session, budget) if watched.session is not None else ()
    if overruns:
        pytest.fail(render_check(overruns, "the compile budget"), pytrace=False)
    return result
