"""Plain-text renderers for the advisor commands: recompile chains, the graph-break action list,
what-if trial results and the cold-vs-warm compile-time table.

Contract: pure functions `render_*(...) -> str`; no printing, no I/O. Values come from
`analysis.recompiles`, `analysis.cookbook`, `analysis.whatif` and `analysis.whatif_cold`.
"""

from __future__ import annotations

from pt2doctor.analysis.cookbook import ActionItem
from pt2doctor.analysis.whatif import TrialOutcome, TrialResult
from pt2doctor.analysis.whatif_cold import ColdWarm
from pt2doctor.model import RecompileChain, RecompileStep
from pt2doctor.model.session import PHASE_LABELS, PHASE_NAMES


def render_chains(chains: list[RecompileChain]) -> str:
    if not chains:
        return "No recompilations.\n"
    out = [f"Recompilations: {sum(len(c.steps) for c in chains)} in {len(chains)} function(s)", ""]
    for chain in chains:
        out.append(f"{chain.title.removesuffix(' and hit the recompile limit')}  ({chain.file}:{chain.line})")
        for step in chain.steps:
            out += _step_lines(step)
        if chain.limit_hit is not None:
            out.append(f"  !! hit {chain.limit_hit.limit} at [{chain.limit_hit.compile_id}]: {chain.limit_note}")
        out += [f"  fix: {fix}" for fix in chain.fixes]
        out.append("")
    return "\n".join(out)


def _step_lines(step: RecompileStep) -> list[str]:
    """The cause, where its value comes from, torch's own hint, then the other cache entries' failures."""
    cause = step.cause
    out = [f"  [{step.recompile.compile_id}] {step.cause_words or step.recompile.reason}"]
    if cause is None:
        return out
    if cause.source is not None:
        code = f"   {cause.source.code}" if cause.source.code else ""
        out.append(f"        value comes from {cause.source}{code}")
    if step.torch_hint:
        out.append(f"        torch: {step.torch_hint}")
    out += [f"        also failed: {line}" for line in step.also_failed]
    return out


def render_actions(items: list[ActionItem]) -> str:
    if not items:
        return "No graph breaks.\n"
    out = [f"Graph-break action list: {len(items)} line(s) to change, most impact first", ""]
    for i, item in enumerate(items, 1):
        fatal = "  (fatal under fullgraph=True)" if item.fatal else ""
        resumed = f", the code after it recompiled {item.resumed_recompiles}x" if item.resumed_recompiles else ""
        out.append(f"{i}. {item.where}  in {item.where.function}: splits {item.graphs_split} frame(s), "
                   f"hit {item.hits}x{resumed}{fatal}")
        if item.where.code:
            out.append(f"     > {item.where.code}")
        out.append(f"     cause:   {item.cause}")
        out.append(f"     rewrite: {item.rewrite}")
        out += [f"     torch:   {reason[:200]}" for reason in item.reasons]
        out.append("")
    return "\n".join(out)


def render_trials(results: list[TrialResult]) -> str:
    if not results:
        return "What-if: no configuration change applies to this run.\n"
    out = ["What-if (each change tried on the unchanged script):", ""]
    for r in results:
        mark = "VERIFIED" if r.outcome is TrialOutcome.VERIFIED else "REFUTED "
        b, a = r.before, r.after
        equal = {True: "equal", False: "DIFFERENT", None: "not compared"}[r.outputs_equal]
        out.append(f"[{mark}] {r.trial.change}")
        out.append(f"     because  {r.trial.because[:300]}")
        out.append(f"     result   {r.why}")
        out.append(f"     measured graph breaks {b.graph_breaks} -> {a.graph_breaks}, recompiles {b.recompiles} -> "
                   f"{a.recompiles}, limit hits {b.limit_hits} -> {a.limit_hits}, compile time "
                   f"{b.compile_time_s:.2f} s -> {a.compile_time_s:.2f} s, outputs {equal}")
        if r.run_dir:
            out.append(f"     run      {r.run_dir}")
        out.append("")
    return "\n".join(out)


def render_cold(view: ColdWarm) -> str:
    out = [f"Cold compile (caches off) {view.cold_total:.2f} s vs warm {view.warm_total:.2f} s", "",
           f"{'frame':<8} {'function':<40} {'cold s':>8} {'warm s':>8}  phases cold "
           f"({'/'.join(PHASE_LABELS[name] for name in PHASE_NAMES)})"]
    for row in view.rows:
        p = row.cold_phases
        out.append(f"{row.compile_id:<8} {row.function[:40]:<40} {row.cold_s:>8.3f} {row.warm_s:>8.3f}  "
                   + "/".join(f"{getattr(p, name):.3f}" for name in PHASE_NAMES))
    out += ["", "phase totals cold -> warm: " + ", ".join(
        f"{name} {view.cold_phases[name]:.2f} -> {view.warm_phases[name]:.2f} s" for name in view.cold_phases)]
    return "\n".join(out) + "\n"
