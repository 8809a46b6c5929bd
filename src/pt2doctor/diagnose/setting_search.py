"""Compiler settings searched on the minimal failing graph, not guessed (issue #39, point 1).

Contract: `search_settings(pool, found, text, dynamo) -> SettingSearch | None` tries the settings table
(`model.compiler_settings.SETTINGS`), narrowest first, set at the top of a copy of the minifier's verified repro
(`text`: its harness form, which compiles the graph as the failing stage did) and run in the warm workers (a setting
that acts before Inductor's lowering on the recorded Dynamo graph compiled whole, where the minimal graph is one
AOTAutograd made), a round of runs (the workers' count, shared among the subjects) at a time, until as many rows
alone remove the failure as the workarounds try on the script (`TRIED_ON_THE_SCRIPT`: one that removes it from the
graph may not from the program, as rand_like_where_eval's `emulate_precision_casts` does not) and no narrower row is
left unsettled (in any subject), or `BUDGET_S` has passed; each run is judged as every minifier query is, against the
repro's own failure (`reduce.oracle.judge`). A run sets several rows at once where that settles them: the narrowest
rows alone beside all the others at once, and where those others change the failure, ever shorter runs of them
(`_Lane`), never two rows of one family (`Setting.family`: each switches off one way through the same code
generation, and one can send the graph down the path another avoids) in one run; most searches find nothing, and one
run then settles what took one run a row (on a 2-layer GPT-2 18 rows took 33 s, on the corpus's none-found graphs 20
rows 7-21 s). None where no setting can reach the failure: no verified minimal graph, or a stage no setting of
torch's reaches on a graph (Dynamo, the script's own backend). Rows that cannot matter are skipped without a run: a
key the installed torch lacks or already holds at that value, another device's, one whose ops the graph does not
hold; the functorch rows alone where the stage is AOTAutograd's (with, at `aot_eager_decomp_partition`'s, Inductor's
rows its decomposition table reads: `fallback_random`), Dynamo's alone where it is Dynamo's (and never past it).
`search_on_program(pool, found, script)` is the same search where no graph gave a verified repro but the program
reduced did (`found.program`: a failure past Dynamo, a wrong result the script's own check sees, or a Dynamo-stage
failure, with Dynamo's rows: a guard it leaves out, a construct it traces): each row set at the
top of a copy of repro.py, run in the warm workers as the program reducer's checks run (`reduce.program_harness`,
the backend forced as its verification forced it), and judged against the reduced program's failure; every row
applies whatever its phase (the program compiles whole), filtered by the ops of the graphs it compiled, and past
Dynamo its rows of how the program's inputs are specialized (`Setting.specializes`) after the stage's own: they decide
the graphs every later stage is given.
Never raises for what a candidate does. The whole program is not run here: `diagnose.workarounds` confirms what
passed on a copy of the script, and the narrowest verified change is handed over.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pt2doctor.analysis.workaround_edits import set_config
from pt2doctor.capture import torch_compat
from pt2doctor.diagnose.found import Found
from pt2doctor.model.category_policy import policy
from pt2doctor.model.compiler_settings import (
    DYNAMO,
    FUNCTORCH,
    LOWERING,
    SETTINGS,
    TRIED_ON_THE_SCRIPT,
    Setting,
    SettingSearch,
    SettingTrial,
)
from pt2doctor.model.diagnosis import FailingStage
from pt2doctor.model.minify import FailureSignature, Stage
from pt2doctor.reduce.core import Outcome

if TYPE_CHECKING:
    from pt2doctor.processes.pool import RunResult, WorkerPool

_MODULES = {FailingStage.INDUCTOR: None,  # every row past Dynamo's (what Dynamo traced is not the failure)
            FailingStage.DECOMP_PARTITION: FUNCTORCH, FailingStage.AOT_AUTOGRAD: FUNCTORCH, FailingStage.DYNAMO: DYNAMO}
_WORDS = {Outcome.PASSES: "pass", Outcome.FAILS_SAME: "fail"}
# an input made on a GPU (`make_tensor(..., 'cuda:0')`, `x.cuda()`)
_CUDA_INPUT = re.compile(r"""["']cuda(?::\d+)?["']|\.cuda\(""")
_RANK = {row.line: rank for rank, row in enumerate(SETTINGS)}  # narrowest first
BUDGET_S = 30.0  # no round starts past it: the workarounds wait on this search


Graph = tuple[str, FailureSignature]  # a program compiling one graph, and the failure it shows


def search_settings(pool: WorkerPool, found: Found, text: str,
                    dynamo: Callable[[], Graph | None]) -> SettingSearch | None:
    """`text`: the minimal graph's repro; `dynamo`: the recorded Dynamo graph compiled whole
    (`graph_stages.dynamo_graph_script`), where a setting acting before Inductor's lowering is tried: loaded (its
    values saved) only where such a row applies and the minimal graph is not itself a Dynamo graph."""
    m, stage = found.minify, found.stage
    if m is None or stage is None or not applies(found):
        return None
    minimal: Graph = (text, m.signature)
    wanted = applicable(stage, m.ops, _device(text))
    earlier = dynamo() if m.stage is not Stage.DYNAMO and any(row.phase != LOWERING for row in wanted) else None
    rows = [(row, graph) for row in wanted
            if (graph := minimal if row.phase == LOWERING or m.stage is Stage.DYNAMO else earlier) is not None]
    return _search(pool, rows, m.repro_path, "the minimal graph", configured)


def search_on_program(pool: WorkerPool, found: Found, script: Path) -> SettingSearch | None:
    """The table on the reduced program (see the contract); None where it does not apply."""
    from pt2doctor.reduce.program import compiled_repro
    from pt2doctor.reduce.program_harness import harness_text

    p, stage = found.program, found.stage
    if p is None or stage is None or not program_applies(found):
        return None
    try:
        source = Path(p.repro_path).read_text()
    except OSError:
        return None
    run, target = compiled_repro(p, script, policy(found.category).wrong_result)
    ops = (*(found.minify.ops if found.minify else ()), *p.culprit_ops)
    rows = [(row, (source, target)) for row in applicable(stage, ops, _device(source), program=True)]

    def edit(text: str, rows: Sequence[Setting]) -> str | None:
        edited = configured(text, rows)
        return harness_text(edited, run) if edited is not None else None

    return _search(pool, rows, p.repro_path, "the reduced program", edit)


def _search(pool: WorkerPool, rows: list[tuple[Setting, Graph]], repro: str, on: str,
            edit: Callable[[str, Sequence[Setting]], str | None]) -> SettingSearch:
    """The rows, by the subject each runs on (`_Lane`), set several at once where that settles them in fewer runs,
    a round of runs at a time, until `TRIED_ON_THE_SCRIPT` rows alone remove the failure or the budget has passed
    (see `_Lane`)."""
    from pt2doctor.reduce.oracle import judge

    if not rows:
        return SettingSearch(repro, skipped=len(SETTINGS), why_not="no setting of the table applies here", on=on)
    started, runs, lanes = time.monotonic(), 0, _lanes(rows, edit)
    while True:
        # once as many rows remove the failure as the workarounds try on the script, only rows narrower than the
        # widest of them are worth a run (in any lane): one found on the graph may not remove it from the program
        passed = sorted(_RANK[t.setting] for lane in lanes for t in lane.trials if t.outcome == "pass")
        for lane in lanes if len(passed) >= TRIED_ON_THE_SCRIPT else ():
            lane.narrower_than(passed[TRIED_ON_THE_SCRIPT - 1])
        active = [lane for lane in lanes if lane.pending]
        if not active or time.monotonic() - started > BUDGET_S:
            break
        asks = [(lane, together, edited) for lane, share in zip(active, _shares(pool.jobs, len(active)))
                for together in lane.asks(share) if (edited := edit(lane.subject[0], together)) is not None]
        if not asks:
            break
        results: list[RunResult] = pool.run([edited for _, _, edited in asks])
        runs += len(asks)
        for lane in lanes:
            lane.learn([(together, judge(result, lane.subject[1]), result)
                        for (asked, together, _), result in zip(asks, results) if asked is lane])
    concluded = {t.setting: t for lane in lanes for t in lane.trials}
    trials = tuple(concluded[s.line] for s in SETTINGS if s.line in concluded)
    return SettingSearch(repro, trials, len(SETTINGS) - len(rows), round(time.monotonic() - started, 3),
                         untried=sum(len(lane.pending) for lane in lanes), on=on, runs=runs)


def _shares(jobs: int, lanes: int) -> list[int]:
    """The runs of a round shared among the lanes, one each at least, the first lanes (the narrowest rows) taking
    what is left of the last wave of the workers: a round takes one run's time a wave."""
    total = -(-lanes // jobs) * jobs
    return [total // lanes + (i < total % lanes) for i in range(lanes)]


class _Lane:
    """The rows tried on one subject (the minimal graph, the Dynamo graph it came from, the reduced program), in the
    table's order, settled in as few runs as it takes: a run sets several rows at once, and where the failure stays
    the same with all of them set, each is taken not to remove it alone (`SettingTrial.together`); where it goes,
    the shortest first run of rows that removes it is narrowed down (its narrowest row alone and the lane's other
    shares of the workers cutting the run, a round) until a run of at most twice its share is left, each then tried
    alone. A search that finds nothing (most rows, most graphs) takes one round instead of one run a row; one row
    removing it takes a few.

    The first round tries the narrowest rows alone beside all the others at once (the rows that most often remove a
    failure come first in the table). `pending`: the rows not settled; `changed`: the length of the shortest run
    of them known to change the failure when set together (None: not known)."""

    def __init__(self, subject: Graph, pending: list[Setting]) -> None:
        self.subject, self.pending = subject, pending
        self.changed: int | None = None
        self.trials: list[SettingTrial] = []

    @property
    def passed(self) -> bool:
        return any(t.outcome == "pass" for t in self.trials)

    def asks(self, jobs: int) -> list[tuple[Setting, ...]]:
        p, k = self.pending, self.changed
        if k is None:
            if len(p) <= jobs:
                return [(row,) for row in p]
            alone = max(jobs - 1, 0)
            return [(row,) for row in p[:alone]] + [tuple(p[alone:])]
        if k <= 2 * jobs:  # few enough to try alone: the rest, if none of these removes it, alone next round
            return [(row,) for row in p[:min(k, jobs)]]
        if jobs == 1:
            return [tuple(p[:k // 2])]
        # the narrowest alone (a row early in the table removes a failure most often), the others cutting the run
        return [(p[0],)] + [tuple(p[:cut]) for cut in sorted({max(2, k * i // jobs) for i in range(1, jobs)})]

    def learn(self, judged: list[tuple[tuple[Setting, ...], Outcome, RunResult]]) -> None:
        """Settle what the round's runs settle: a row run alone, by its outcome; the rows of the longest run that
        failed the same way (shorter than any that did not), `fail`; then the shortest run of the rows left known to
        change the failure is what the next round cuts (None where its rows, each alone, did not: together they
        did, or a row's order mattered)."""
        known = set(self.pending[:self.changed]) if self.changed is not None else set()
        for together, outcome, result in judged:
            if len(together) == 1:
                self._settle(together, _WORDS.get(outcome, _said(outcome, result)))
        groups = [(sum(row in self.pending for row in together), len(together), outcome)
                  for together, outcome, _ in judged if len(together) > 1]
        changed = [left for left, _, outcome in groups if outcome is not Outcome.FAILS_SAME]
        same = [(left, size) for left, size, outcome in groups
                if outcome is Outcome.FAILS_SAME and (not changed or left < min(changed))]
        settled, size = max(same, default=(0, 0))
        self._settle(self.pending[:settled], "fail", together=size)
        still = sum(row in known for row in self.pending)
        self.changed = min([n for n in (*(left - settled for left in changed), still) if n > 0], default=None)

    def narrower_than(self, rank: int) -> None:
        """Leave unsettled only the rows narrower than the table's row `rank` (a row that removes the failure)."""
        self.pending = [row for row in self.pending if _RANK[row.line] < rank]
        if self.changed is not None and self.changed > len(self.pending):
            self.changed = None  # what changed the failure may have been a row left out: ask the rest anew

    def _settle(self, rows: Sequence[Setting], outcome: str, together: int = 1) -> None:
        for row in rows:
            self.trials.append(SettingTrial(row.line, row.touches, outcome, together))
            self.pending.remove(row)


def _lanes(rows: list[tuple[Setting, Graph]], edit: Callable[[str, Sequence[Setting]], str | None]) -> list[_Lane]:
    """One lane per subject and tier, in the order of its first row: a subject's rows of one family
    (`Setting.family`) go one to a tier, so no run sets two of them; a row whose edit of the subject fails is left
    out."""
    lanes: dict[tuple[str, int], _Lane] = {}
    seen: Counter[tuple[str, str]] = Counter()
    for row, subject in rows:
        if edit(subject[0], (row,)) is None:
            continue
        tier = seen[subject[0], row.family] if row.family else 0
        seen[subject[0], row.family] += 1
        lanes.setdefault((subject[0], tier), _Lane(subject, [])).pending.append(row)
    return list(lanes.values())


def configured(source: str, rows: Sequence[Setting]) -> str | None:
    """`source` with every row's line set at its top, in one edit (`analysis.workaround_edits.set_config`)."""
    first, *more = rows
    return set_config(source, first.module, first.line, *((row.module, row.line) for row in more))


def applies(found: Found) -> bool:
    """A verified minimal graph, at a stage some setting of torch's reaches (not Dynamo, not the script's backend)."""
    return (found.minify is not None and found.minify.verified and found.stage in _MODULES
            and found.stage is not FailingStage.DYNAMO)


def program_applies(found: Found) -> bool:
    """No verified minimal graph, a verified reduced program of a torch.compile failure at such a stage (a Dynamo
    failure's program too: Dynamo's rows)."""
    p = found.program
    return (not applies(found) and p is not None and p.verified and p.reason in ("fallback", "dynamo")
            and found.stage in _MODULES)


def _device(text: str) -> str:
    return "cuda" if _CUDA_INPUT.search(text) else "cpu"


def applicable(stage: FailingStage, ops: tuple[str, ...], device: str, program: bool = False) -> list[Setting]:
    """The table's rows that can change this graph (or, with `program`, this reduced program), in its order, a
    program's rows of how Dynamo specializes inputs last (see the contract)."""
    module = _MODULES.get(stage)
    names = " ".join(ops)
    rows = [row for row in SETTINGS
            if (row.module == module if module else row.module != DYNAMO) or _decomposes_at(row, stage)]
    if program and stage is not FailingStage.DYNAMO:
        rows += [row for row in SETTINGS if row.specializes and row not in rows]
    return [row for row in rows if device in row.devices
            and (not row.needs_ops or re.search(row.needs_ops, names))
            and (not row.draws or any(torch_compat.names_a_random_op(op) for op in ops))
            and _installed_differs(row)]


def _decomposes_at(row: Setting, stage: FailingStage) -> bool:
    """An Inductor row read by the decomposition table that `aot_eager_decomp_partition` uses too."""
    return row.decompositions and stage is FailingStage.DECOMP_PARTITION


def _installed_differs(row: Setting) -> bool:
    value = torch_compat.config_value(row.module, row.key)
    return value is not torch_compat.CONFIG_MISSING and value != row.value


def _said(outcome: Outcome, result: RunResult) -> str:
    return f"{outcome.value}: {result.text.strip().splitlines()[-1][:160]}" if result.text.strip() else outcome.value
