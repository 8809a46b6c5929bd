"""The `CompileProfiler` report (`api.profiler`) as text: graph breaks with the cookbook's fix, then
every recompiled frame with the guard failures that caused each recompile, as the PyTorch docs'
profiler printed them. Pure: `render_profile(session, frame_count, op_count) -> str`.
"""

from __future__ import annotations

from pt2doctor.analysis.cookbook import advice_for
from pt2doctor.analysis.recompiles import pretty_function, recompile_chains
from pt2doctor.model import Session


def render_profile(session: Session | None, frame_count: int, op_count: int) -> str:
    lines = ["pt2doctor Compile Profiler Report", "=================================", "",
             f"Frames compiled: {frame_count}   ops: {op_count}"]
    if session is None:
        return "\n".join(lines + ["", "(report() is complete once the `with CompileProfiler()` block "
                                      "has ended)"]) + "\n"
    lines += ["", "Graph Breaks", "------------"]
    if not session.graph_breaks:
        lines.append("No graph breaks detected.")
    for gb in session.graph_breaks:
        recipe = advice_for(gb)
        lines.append(f"{gb.file}:{gb.line} in {gb.function} (x{gb.count}): {gb.reason.splitlines()[0][:200]}")
        if recipe is not None:
            lines.append(f"    fix: {recipe.rewrite}")
    lines += ["", "Recompilation", "-------------",
              "Each frame below recompiled; with recompile_limit=1 (the worst case) it would run eagerly"
              " after its first compile."]
    if not session.recompiles:
        lines.append("No recompilation detected.")
    for chain in recompile_chains(session):
        lines.append(f"{pretty_function(chain.function)} ({chain.file}:{chain.line}): {len(chain.steps)} recompile(s)")
        for step in chain.steps:
            lines.append(f"  [{step.recompile.compile_id}] {step.cause_words or step.recompile.reason}")
            lines += [f"      also failed: {other}" for other in step.also_failed]
        lines += [f"  fix: {fix}" for fix in chain.fixes]
    return "\n".join(lines) + "\n"
